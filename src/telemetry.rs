//! OpenTelemetry traces (`[telemetry]`): the server's subscriber exports the library's
//! `tracing` spans over OTLP/HTTP, and a [`keyfire::trace::Tracer`] gives them the ids, links
//! and attributes the library asks for.
//!
//! - Firings: a `run` span per attempt (a root span in the firing's derived trace, linked to
//!   the `traceparent` the job was created with), its `handler` child, and the `http`
//!   handler's delivery span, which takes the span id the `traceparent` header names.
//! - The delay queue: `queue.add`, `queue.pop` (linked to the adds of the tasks it
//!   delivered) and `queue.finish`.
//!
//! Off, the subscriber is the plain log output it always was and no tracer is installed, so
//! the firing path does nothing more than before. On, spans go to the SDK's batch processor:
//! a bounded queue (spans past it are dropped) drained by a thread of its own, whose exports
//! run on the node's runtime; a slow or unreachable collector costs dropped spans, never a
//! late firing.

use std::cell::Cell;
use std::fmt;
use std::time::Duration;

use crate::settings::{LogSettings, TelemetrySettings};
use anyhow::Context as _;
use keyfire::trace::{Start, TraceParent, Value};
use opentelemetry::Context;
use opentelemetry::trace::{
    SpanContext, SpanId, Status, TraceContextExt, TraceFlags, TraceId, TraceState,
    TracerProvider as _,
};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::resource::{EnvResourceDetector, TelemetryResourceDetector};
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, IdGenerator, RandomIdGenerator, Sampler,
    SdkTracerProvider,
};
use tracing::{Event, Subscriber};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::fmt::format::{DefaultFields, Format, Full, Json, JsonFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// Spans waiting for export; past this they are dropped (and counted by the SDK), so a
/// collector that cannot keep up costs spans, not memory or time on the firing path.
const MAX_QUEUE: usize = 8_192;
/// Spans per export request.
const MAX_BATCH: usize = 512;
/// How long one export may take before it is given up.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The exporting half, kept by `serve` until the node stopped: [`Telemetry::shutdown`]
/// exports what is left.
pub struct Telemetry {
    provider: SdkTracerProvider,
}

impl Telemetry {
    /// Export the spans still queued (bounded by the export timeout), then stop exporting.
    pub async fn shutdown(self) {
        let provider = self.provider;
        // The SDK waits on its export thread, whose requests run on this runtime: wait off it.
        let done = tokio::task::spawn_blocking(move || provider.shutdown()).await;
        if let Ok(Err(e)) = done {
            tracing::warn!(error = %e, "traces not all exported at shutdown");
        }
    }
}

/// Set up `tracing` output (`RUST_LOG` wins over `log.level`) and, when `telemetry.enabled`,
/// the export of traces. Call once, on the node's runtime (the exports run on it).
pub fn init(log: &LogSettings, telemetry: &TelemetrySettings) -> anyhow::Result<Option<Telemetry>> {
    let filter =
        || EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&log.level));
    if !telemetry.enabled {
        // Exactly the subscriber a node had before traces: nothing more per firing.
        let builder = tracing_subscriber::fmt().with_env_filter(filter());
        let _ = if log.format == "json" {
            builder.json().try_init()
        } else {
            builder.try_init()
        };
        return Ok(None);
    }
    telemetry.check()?;
    let provider = provider(telemetry)?;
    let tracer = provider.tracer("keyfire");
    // The traces take keyfire's own spans whatever the log level says: `log.level = "warn"`
    // silences run lines, not traces.
    let traced = tracing_subscriber::filter::Targets::new()
        .with_target("keyfire", tracing::Level::INFO)
        .with_target("keyfire_server", tracing::Level::INFO);
    let otel = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_level(false)
        .with_target(false)
        .with_filter(traced);
    let logs = if log.format == "json" {
        tracing_subscriber::fmt::layer()
            .json()
            .event_format(WithTraceIds(tracing_subscriber::fmt::format().json()))
            .with_filter(filter())
            .boxed()
    } else {
        tracing_subscriber::fmt::layer()
            .event_format(Format::<Full>::default())
            .fmt_fields(DefaultFields::new())
            .with_filter(filter())
            .boxed()
    };
    tracing_subscriber::registry()
        .with(otel)
        .with(logs)
        .try_init()
        .context("telemetry: a tracing subscriber is installed already")?;
    if !keyfire::trace::install(Box::new(OtelTracer)) {
        anyhow::bail!("telemetry: a keyfire tracer is installed already");
    }
    tracing::info!(
        endpoint = %telemetry.endpoint,
        sampling_ratio = telemetry.sampling_ratio,
        "exporting traces"
    );
    Ok(Some(Telemetry { provider }))
}

/// The tracer provider: OTLP/HTTP protobuf to `<endpoint>/v1/traces` through the batch
/// processor, parent-based sampling at `sampling_ratio`, the firing-derived ids.
fn provider(telemetry: &TelemetrySettings) -> anyhow::Result<SdkTracerProvider> {
    let tls = keyfire::handler::http::default_client_tls().context("telemetry: TLS roots")?;
    let http = reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .no_proxy()
        .timeout(EXPORT_TIMEOUT)
        .build()
        .context("telemetry: the export client")?;
    let client = ExportClient {
        http,
        runtime: tokio::runtime::Handle::try_current()
            .context("telemetry: needs the node's async runtime")?,
    };
    let endpoint = format!("{}/v1/traces", telemetry.endpoint.trim_end_matches('/'));
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(client)
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(endpoint)
        .with_timeout(EXPORT_TIMEOUT)
        .build()
        .map_err(|e| anyhow::anyhow!("telemetry.endpoint: {e}"))?;
    let batch = BatchConfigBuilder::default()
        .with_max_queue_size(MAX_QUEUE)
        .with_max_export_batch_size(MAX_BATCH)
        .with_scheduled_delay(Duration::from_millis(500))
        .build();
    Ok(SdkTracerProvider::builder()
        .with_span_processor(BatchSpanProcessor::new(exporter, batch))
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
            telemetry.sampling_ratio,
        ))))
        .with_id_generator(ChosenIds::default())
        .with_resource(resource(&telemetry.service_name))
        .build())
}

/// `service.name` from the settings, then `OTEL_RESOURCE_ATTRIBUTES`, then
/// `OTEL_SERVICE_NAME` (each wins over the one before, as the specification orders them).
fn resource(service_name: &str) -> Resource {
    let mut builder = Resource::builder_empty()
        .with_detector(Box::new(TelemetryResourceDetector))
        .with_service_name(service_name.to_string())
        .with_detector(Box::new(EnvResourceDetector::new()));
    if let Ok(name) = std::env::var("OTEL_SERVICE_NAME")
        && !name.trim().is_empty()
    {
        builder = builder.with_service_name(name);
    }
    builder.build()
}

/// The OTLP exporter's HTTP client: keyfire's reqwest client, its requests run on the node's
/// runtime (the SDK's export thread only waits for them), with keyfire's TLS roots.
#[derive(Debug)]
struct ExportClient {
    http: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for ExportClient {
    async fn send_bytes(
        &self,
        request: opentelemetry_http::Request<opentelemetry_http::Bytes>,
    ) -> Result<
        opentelemetry_http::Response<opentelemetry_http::Bytes>,
        opentelemetry_http::HttpError,
    > {
        let http = self.http.clone();
        let sent = self.runtime.spawn(async move {
            let response = http.execute(reqwest::Request::try_from(request)?).await?;
            let status = response.status();
            let headers = response.headers().clone();
            let body = response.bytes().await?;
            let mut out = opentelemetry_http::Response::builder()
                .status(status)
                .body(body)?;
            *out.headers_mut() = headers;
            Ok::<_, opentelemetry_http::HttpError>(out)
        });
        sent.await?
    }
}

thread_local! {
    /// The ids the next span built on this thread takes (see [`ChosenIds`]).
    static NEXT_IDS: Cell<(Option<TraceId>, Option<SpanId>)> = const { Cell::new((None, None)) };
}

/// Random ids, unless [`OtelTracer::start`] chose them for the span it is building on this
/// thread: the SDK takes a span's ids from its generator only, and keyfire's are derived from
/// the firing (trace id from the firing id, the delivery's span id from it and the attempt).
#[derive(Debug, Default)]
struct ChosenIds(RandomIdGenerator);

impl IdGenerator for ChosenIds {
    fn new_trace_id(&self) -> TraceId {
        let (trace, span) = NEXT_IDS.get();
        match trace {
            Some(id) => {
                NEXT_IDS.set((None, span));
                id
            }
            None => self.0.new_trace_id(),
        }
    }

    fn new_span_id(&self) -> SpanId {
        let (trace, span) = NEXT_IDS.get();
        match span {
            Some(id) => {
                NEXT_IDS.set((trace, None));
                id
            }
            None => self.0.new_span_id(),
        }
    }
}

fn span_context(tp: &TraceParent) -> SpanContext {
    let flags = if tp.sampled {
        TraceFlags::SAMPLED
    } else {
        TraceFlags::default()
    };
    SpanContext::new(
        TraceId::from_bytes(tp.trace_id),
        SpanId::from_bytes(tp.span_id),
        flags,
        true,
        TraceState::default(),
    )
}

/// keyfire's spans into OpenTelemetry ones, through `tracing-opentelemetry`.
struct OtelTracer;

impl keyfire::trace::Tracer for OtelTracer {
    fn start(&self, span: &tracing::Span, start: Start<'_>) {
        if let Some(parent) = start.parent {
            let _ = span.set_parent(Context::new().with_remote_span_context(span_context(parent)));
        }
        for link in start.links {
            span.add_link(span_context(link));
        }
        if start.trace_id.is_some() || start.span_id.is_some() {
            // Build the span now, on this thread, so the generator hands it these ids.
            NEXT_IDS.set((
                start.trace_id.map(TraceId::from_bytes),
                start.span_id.map(SpanId::from_bytes),
            ));
            let _ = span.context();
            NEXT_IDS.set((None, None));
        }
    }

    fn set_attributes(&self, span: &tracing::Span, attributes: &[(&'static str, Value<'_>)]) {
        for (key, value) in attributes {
            match *value {
                Value::Str(s) => span.set_attribute(*key, s.to_string()),
                Value::Int(i) => span.set_attribute(*key, i),
            }
        }
    }

    fn set_error(&self, span: &tracing::Span, message: &str) {
        span.set_status(Status::error(message.to_string()));
    }

    fn add_link(&self, span: &tracing::Span, to: &TraceParent) {
        span.add_link(span_context(to));
    }

    fn context(&self, span: &tracing::Span) -> Option<TraceParent> {
        let cx = span.context();
        let sc = cx.span().span_context().clone();
        sc.is_valid().then(|| TraceParent {
            trace_id: sc.trace_id().to_bytes(),
            span_id: sc.span_id().to_bytes(),
            sampled: sc.is_sampled(),
        })
    }
}

/// JSON log lines with the `trace_id` and `span_id` of the span they were logged in, first.
struct WithTraceIds(Format<Json>);

impl<S> FormatEvent<S, JsonFields> for WithTraceIds
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, JsonFields>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let cx = Context::current();
        let sc = cx.span().span_context().clone();
        if !sc.is_valid() {
            return self.0.format_event(ctx, writer, event);
        }
        let mut line = String::new();
        self.0.format_event(ctx, Writer::new(&mut line), event)?;
        match line.strip_prefix('{') {
            Some(rest) => write!(
                writer,
                "{{\"trace_id\":\"{}\",\"span_id\":\"{}\",{rest}",
                sc.trace_id(),
                sc.span_id()
            ),
            None => writer.write_str(&line),
        }
    }
}

/// The request's `traceparent` header, when it is a W3C one (an invalid one is ignored, as
/// the Trace Context specification asks).
pub fn request_traceparent(headers: &axum::http::HeaderMap) -> Option<String> {
    let value = headers.get("traceparent")?.to_str().ok()?;
    TraceParent::parse(value).map(|tp| tp.to_string())
}

/// A job created through the API keeps the trace of the request that created it (unless its
/// body names one): its firings' spans link to it.
pub fn traced_job(mut spec: keyfire::JobSpec, headers: &axum::http::HeaderMap) -> keyfire::JobSpec {
    if spec.traceparent.is_none() {
        spec.traceparent = request_traceparent(headers);
    }
    spec
}

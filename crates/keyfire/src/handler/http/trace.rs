//! Tracing a delivery: the W3C `traceparent` each request carries, and the span of one
//! delivery where traces are exported.

use super::send::url_without_secrets;
use crate::handler::Firing;
use crate::trace::{Start, TraceParent, Tracer, Value as TraceValue};

/// A W3C `traceparent`: the trace id is derived from the firing id (every attempt of a firing
/// is one trace), the parent id from the firing id and the attempt (see
/// [`TraceParent::for_attempt`]).
pub fn traceparent(firing_id: &str, attempt: u32) -> String {
    TraceParent::for_attempt(firing_id, attempt).to_string()
}

/// The span of one delivery (every redirect hop of it), a child of the handler's, only where
/// traces are exported. It takes the attempt's derived span id, so the `traceparent` sent is
/// its own context (with its sampling decision) and the receiver's spans are its children.
pub(super) struct Delivery {
    tracer: &'static dyn Tracer,
    pub(super) span: tracing::Span,
}

impl Delivery {
    pub(super) fn start(f: &Firing, method: &reqwest::Method, url: &reqwest::Url) -> Option<Self> {
        let tracer = crate::trace::tracer()?;
        let span = tracing::info_span!("http", otel.kind = "client", otel.name = %method);
        if span.is_disabled() {
            return None;
        }
        let ids = TraceParent::for_attempt(&f.firing_id, f.attempt);
        tracer.start(
            &span,
            Start {
                span_id: Some(ids.span_id),
                ..Start::default()
            },
        );
        let port = url.port_or_known_default().map_or(0, i64::from);
        tracer.set_attributes(
            &span,
            &[
                ("http.request.method", TraceValue::Str(method.as_str())),
                ("url.full", TraceValue::Str(&url_without_secrets(url))),
                (
                    "server.address",
                    TraceValue::Str(url.host_str().unwrap_or_default()),
                ),
                ("server.port", TraceValue::Int(port)),
            ],
        );
        Some(Self { tracer, span })
    }

    /// The `traceparent` to send: this span's context.
    pub(super) fn traceparent(&self, f: &Firing) -> String {
        self.tracer
            .context(&self.span)
            .unwrap_or_else(|| TraceParent::for_attempt(&f.firing_id, f.attempt))
            .to_string()
    }

    pub(super) fn status(&self, status: reqwest::StatusCode) {
        self.tracer.set_attributes(
            &self.span,
            &[(
                "http.response.status_code",
                TraceValue::Int(i64::from(status.as_u16())),
            )],
        );
    }

    pub(super) fn fail(&self, message: &str) {
        self.tracer.set_error(&self.span, message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_firing_keeps_one_w3c_trace_over_its_attempts() {
        let a1 = traceparent("job:1000", 1);
        let a2 = traceparent("job:1000", 2);
        let other = traceparent("job:2000", 1);
        let parts: Vec<&str> = a1.split('-').collect();
        assert_eq!(parts.len(), 4);
        assert_eq!(
            (parts[0], parts[1].len(), parts[2].len(), parts[3]),
            ("00", 32, 16, "01")
        );
        assert!(
            parts[1]
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        assert_eq!(a1.split('-').nth(1), a2.split('-').nth(1));
        assert_ne!(a1, a2);
        assert_ne!(a1.split('-').nth(1), other.split('-').nth(1));
    }
}

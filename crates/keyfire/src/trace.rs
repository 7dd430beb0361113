//! Trace context of firings and queue tasks.
//!
//! keyfire only emits `tracing` spans and depends on no tracing backend. A process that
//! exports them as OpenTelemetry traces (the `keyfire` server with `[telemetry]` on, or an
//! embedder with its own subscriber) [`install`]s a [`Tracer`]: through it the engine and the
//! queue give their spans W3C ids, links and attributes that `tracing` fields cannot carry.
//! Without one, nothing here runs on the firing path but one atomic load.
//!
//! The ids are tied to the firing, not to the process: every attempt of firing `f` is in the
//! trace whose id is derived from `f` ([`TraceParent::for_attempt`]), and the `http` handler's
//! delivery span of attempt `n` takes the span id derived from `f` and `n`, the parent id of
//! the `traceparent` header sent to the receiver. So a receiver, keyfire's run history and
//! the exported spans name the same trace whether or not traces are exported.

use std::fmt;
use std::sync::OnceLock;

use sha2::{Digest, Sha256};

/// A W3C trace context (`traceparent`, version 00): trace id, parent (span) id, sampled flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceParent {
    /// The trace id (never all zero).
    pub trace_id: [u8; 16],
    /// The span id (never all zero).
    pub span_id: [u8; 8],
    /// The `sampled` flag.
    pub sampled: bool,
}

impl TraceParent {
    /// Parse a `traceparent` header value (W3C Trace Context level 1): `00-<32 hex>-<16 hex>-
    /// <2 hex>`, lower case, ids not all zero. A later version is read by its first four
    /// fields, as the spec asks; version `ff` and anything malformed is `None`.
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        let b = text.as_bytes();
        if b.len() < 55 || b[2] != b'-' || b[35] != b'-' || b[52] != b'-' {
            return None;
        }
        let version = hex_byte(&b[0..2])?;
        if version == 0xff || (version == 0 && b.len() != 55) || (b.len() > 55 && b[55] != b'-') {
            return None;
        }
        let mut trace_id = [0u8; 16];
        for (i, byte) in trace_id.iter_mut().enumerate() {
            *byte = hex_byte(&b[3 + 2 * i..5 + 2 * i])?;
        }
        let mut span_id = [0u8; 8];
        for (i, byte) in span_id.iter_mut().enumerate() {
            *byte = hex_byte(&b[36 + 2 * i..38 + 2 * i])?;
        }
        let flags = hex_byte(&b[53..55])?;
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(Self {
            trace_id,
            span_id,
            sampled: flags & 1 == 1,
        })
    }

    /// The ids of attempt `attempt` of firing `firing_id`: the trace id is derived from the
    /// firing id alone (every attempt of a firing is one trace), the span id from both. The
    /// `http` handler's delivery span takes them, and its `traceparent` header carries them.
    pub fn for_attempt(firing_id: &str, attempt: u32) -> Self {
        let trace = Sha256::digest(format!("keyfire-trace:{firing_id}").as_bytes());
        let span = Sha256::digest(format!("keyfire-span:{firing_id}:{attempt}").as_bytes());
        let mut trace_id = [0u8; 16];
        trace_id.copy_from_slice(&trace[..16]);
        let mut span_id = [0u8; 8];
        span_id.copy_from_slice(&span[..8]);
        // All-zero ids are invalid; a digest this short is zero about never, but be exact.
        if trace_id == [0; 16] {
            trace_id[15] = 1;
        }
        if span_id == [0; 8] {
            span_id[7] = 1;
        }
        Self {
            trace_id,
            span_id,
            sampled: true,
        }
    }
}

/// The header value: `00-<trace id>-<span id>-<flags>`.
impl fmt::Display for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("00-")?;
        for b in self.trace_id {
            write!(f, "{b:02x}")?;
        }
        f.write_str("-")?;
        for b in self.span_id {
            write!(f, "{b:02x}")?;
        }
        write!(f, "-{:02x}", u8::from(self.sampled))
    }
}

fn hex_byte(two: &[u8]) -> Option<u8> {
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    Some(digit(two[0])? << 4 | digit(two[1])?)
}

/// An attribute value handed to [`Tracer::set_attributes`].
#[derive(Debug, Clone, Copy)]
pub enum Value<'a> {
    /// A string.
    Str(&'a str),
    /// An integer.
    Int(i64),
}

/// How a span starts: the ids it must take, the caller it continues, the traces it links to.
#[derive(Debug, Clone, Copy, Default)]
pub struct Start<'a> {
    /// Its trace id, when the span starts a trace (no parent): a firing's derived trace.
    pub trace_id: Option<[u8; 16]>,
    /// Its own span id (the `http` delivery span of an attempt).
    pub span_id: Option<[u8; 8]>,
    /// A remote parent: the caller's `traceparent` (a queue add made under one).
    pub parent: Option<&'a TraceParent>,
    /// Spans it is linked to: the request that created a job, the adds of popped tasks.
    pub links: &'a [TraceParent],
}

/// What ties keyfire's `tracing` spans to a trace backend. keyfire calls it only on spans it
/// creates, right after creating them (before they are entered), and never when no tracer is
/// installed. Implementations must not block: they run on the firing path.
pub trait Tracer: Send + Sync + 'static {
    /// Start `span` as `start` says (ids, parent, links). Called once per span, before it is
    /// entered and before any child is created.
    fn start(&self, span: &tracing::Span, start: Start<'_>);
    /// Set attributes of `span` (names after the OpenTelemetry conventions: `keyfire.job.id`,
    /// `http.response.status_code`).
    fn set_attributes(&self, span: &tracing::Span, attributes: &[(&'static str, Value<'_>)]);
    /// Mark `span` failed with `message` (status ERROR).
    fn set_error(&self, span: &tracing::Span, message: &str);
    /// Link `span` to `to` after it started (the tasks a pop delivered).
    fn add_link(&self, span: &tracing::Span, to: &TraceParent);
    /// The trace context of `span`, when it is traced.
    fn context(&self, span: &tracing::Span) -> Option<TraceParent>;
}

static TRACER: OnceLock<Box<dyn Tracer>> = OnceLock::new();

/// Install the process's tracer; once per process. Returns false (and changes nothing) when
/// one is installed already.
pub fn install(tracer: Box<dyn Tracer>) -> bool {
    TRACER.set(tracer).is_ok()
}

/// The installed tracer, if any.
pub fn tracer() -> Option<&'static dyn Tracer> {
    TRACER.get().map(|t| &**t)
}

/// The installed tracer, unless `span` is disabled (filtered out): the spans' callers skip
/// the attribute work then.
pub(crate) fn for_span(span: &tracing::Span) -> Option<&'static dyn Tracer> {
    tracer().filter(|_| !span.is_disabled())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparents_parse_and_print_as_w3c() {
        let text = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let tp = TraceParent::parse(text).unwrap();
        assert!(tp.sampled);
        assert_eq!(tp.to_string(), text);
        let unsampled =
            TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
        assert!(!unsampled.unwrap().sampled);
        // A later version: its first four fields.
        assert_eq!(
            TraceParent::parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what"),
            Some(tp)
        );
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn attempts_of_a_firing_share_its_trace() {
        let a1 = TraceParent::for_attempt("job:1000", 1);
        let a2 = TraceParent::for_attempt("job:1000", 2);
        let other = TraceParent::for_attempt("job:2000", 1);
        assert_eq!(a1.trace_id, a2.trace_id);
        assert_ne!(a1.span_id, a2.span_id);
        assert_ne!(a1.trace_id, other.trace_id);
        assert_eq!(TraceParent::parse(&a1.to_string()), Some(a1));
    }
}

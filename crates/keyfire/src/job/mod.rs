//! The job model: what a user declares ([`JobSpec`]), how it is checked ([`JobSpec::validate`])
//! and the validated form the engine schedules from ([`Job`]).

mod calendar;
mod dedup;
mod duration;
mod flow_limit;
mod jitter;
mod policy;
mod schedule;
mod spec;
mod validation;

pub use calendar::{Calendar, CalendarSpec, DateRange, MAX_CALENDAR_ENTRIES};
pub use dedup::{
    Dedup, DedupSpec, Deduplicated, MAX_DEDUP_KEY_LEN, MAX_DEDUP_WINDOW_MS, ON_DUPLICATE_MODES,
    OnDuplicate,
};
pub use duration::{DURATION_PATTERN, duration_serde, parse_duration};
pub use flow_limit::{
    FlowLimitSpec, LIMIT_KEY_PATTERN, MAX_LIMIT_KEY_LEN, host_limit_key, validate_limit_key,
};
pub use jitter::{MAX_JITTER_MS, jitter_offset};
pub use policy::{
    BACKOFFS, Backoff, MAX_ATTEMPTS_LIMIT, MISFIRE_POLICIES, MisfirePolicy, OVERLAP_POLICIES,
    OverlapPolicy, RetryPolicy, RetrySpec,
};
pub use schedule::Schedule;
pub(crate) use spec::validate_id;
pub use spec::{ID_PATTERN, Job, JobSpec, MAX_ID_LEN, RunLimits, TRACEPARENT_PATTERN, Validation};
pub use validation::ValidationError;

/// How many ms in a firing's lifetime a job may be late before the misfire policy applies.
pub const DEFAULT_MISFIRE_TOLERANCE_MS: i64 = 10_000;

/// Default longest run.
pub const DEFAULT_TIMEOUT_MS: i64 = 3_600_000;

/// Default most late firings a `catch_up` job runs after an outage.
pub const DEFAULT_CATCH_UP_LIMIT: u32 = 100;

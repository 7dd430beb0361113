//! [`ApiError`]: the one error shape of the API, `{"error": {"code", "message", "field"}}`.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use keyfire::error::Error;

/// Seconds a client is told to wait (`Retry-After`) after a `redis_full` answer: memory is
/// freed by consumers finishing tasks and by records expiring, not at once.
pub(crate) const REDIS_FULL_RETRY_AFTER_SECS: u64 = 30;

/// An error answer. Internals (Redis errors, corrupt data) are logged, not shown.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable machine-readable code (see [`ErrorBody`]).
    pub code: &'static str,
    /// What went wrong, for people.
    pub message: String,
    /// The input field at fault, when one is.
    pub field: Option<String>,
}

/// The body of every error answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// One of `malformed_json` (400), `bad_query` (400), `bad_path` (400), `bad_request` (400:
    /// a header such as `If-Match` is not what it must be), `unauthorized`
    /// (401), `forbidden` (403), `not_found` (404), `method_not_allowed` (405), `conflict`
    /// (409), `nothing_to_cancel` (409: a cancel found nothing in progress), `payload_too_large` (413), `unsupported_media_type` (415), `invalid` (422),
    /// `internal` (500), `unavailable` (503), `redis_full` (507: Redis reached its
    /// `maxmemory` and refuses writes; a `Retry-After` header comes with it).
    #[schema(example = "invalid")]
    pub code: String,
    /// What went wrong, in words a person can act on.
    #[schema(
        example = "invalid cron: expected 5 fields (6 with seconds) or a macro like @hourly, got 3"
    )]
    pub message: String,
    /// The input field at fault (`cron`, `tz`, `tasks[2].at`, the query parameter), or null.
    #[schema(example = "cron")]
    pub field: Option<String>,
}

impl ApiError {
    /// An error with no field.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            field: None,
        }
    }

    /// Name the field at fault.
    pub fn field(mut self, field: impl Into<String>) -> Self {
        let f = field.into();
        self.field = (!f.is_empty()).then_some(f);
        self
    }

    /// 400: the body is not JSON.
    pub fn malformed_json(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "malformed_json", message)
    }

    /// 400: a query parameter is wrong.
    pub fn bad_query(field: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_query", message).field(field)
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 409.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }

    /// 422: valid JSON, wrong content; `field` names what.
    pub fn invalid(field: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid", message).field(field)
    }

    /// 401.
    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing or wrong bearer token (Authorization: Bearer <api.token>)",
        )
    }

    /// 415: a body not sent as `application/json`.
    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            message,
        )
        .field("Content-Type")
    }

    /// 403: a browser request from another site (or to a name the node does not answer to).
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    /// 400: a path segment that is not valid (such as an id that is not UTF-8).
    pub fn bad_path(field: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_path", message).field(field)
    }

    /// 507: Redis reached its `maxmemory` and refuses writes (`maxmemory-policy noeviction`).
    /// Answered with a `Retry-After` of [`REDIS_FULL_RETRY_AFTER_SECS`].
    pub fn redis_full() -> Self {
        Self::new(
            StatusCode::INSUFFICIENT_STORAGE,
            "redis_full",
            "Redis is full: its used_memory reached maxmemory and it refuses writes \
             (maxmemory-policy noeviction); nothing was written. Free memory (delete tasks and \
             jobs no longer needed, purge dead letters, lower node.history_limit or \
             node.task_retention) or raise maxmemory, then retry; reads still work",
        )
    }

    /// 413.
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("request body is larger than the limit of {limit} bytes (api.max_body_bytes)"),
        )
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        match e {
            Error::Invalid(v) => ApiError::invalid(&v.field, v.message),
            Error::NotFound(_)
            | Error::TaskNotFound(_)
            | Error::LimitNotFound(_)
            | Error::CalendarNotFound(_) => ApiError::not_found(e.to_string()),
            Error::ReservationLost(_)
            | Error::PartitionsSet { .. }
            | Error::CalendarInUse { .. } => ApiError::conflict(e.to_string()),
            Error::Conflict(_) | Error::VersionMismatch { .. } => ApiError::conflict(e.to_string()),
            // The one place a full Redis becomes an answer: every write of every route that
            // Redis refused for memory.
            _ if e.is_redis_full() => {
                tracing::warn!(error = %e, "api: Redis is full (maxmemory) and refused a write");
                ApiError::redis_full()
            }
            Error::Redis(ref r) | Error::RedisOp { source: ref r, .. } => {
                tracing::error!(error = %r, "api: redis error");
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "unavailable",
                    "Redis is unavailable; try again",
                )
            }
            other => {
                tracing::error!(error = %other, "api: internal error");
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    "internal error; see the node's log",
                )
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.to_string(),
                message: self.message,
                field: self.field,
            },
        };
        let mut resp = (self.status, axum::Json(body)).into_response();
        if self.code == "redis_full" {
            resp.headers_mut().insert(
                header::RETRY_AFTER,
                header::HeaderValue::from(REDIS_FULL_RETRY_AFTER_SECS),
            );
        }
        if self.status == StatusCode::UNAUTHORIZED {
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
        }
        resp
    }
}

//! The REST API (axum, JSON): [`router`] builds it over an [`ApiState`], [`serve`] runs it.
//!
//! - `/v1/jobs`, `/v1/jobs/{id}` (+ `/pause`, `/resume`, `/trigger`, `/backfill`, `/cancel`, `/runs`, `/why`):
//!   jobs CRUD through the [`Client`]; every job answer carries its next five firings in UTC and
//!   in its zone. `/v1/jobs/{id}/dead` (+ `/replay`): dead letters. `/v1/jobs:pause`,
//!   `/v1/jobs:resume`: many jobs at once, by handler or id prefix.
//! - `/v1/tasks`, `/v1/tasks/batch`, `/v1/tasks/{id}/cancel`: one-shot tasks.
//! - `/v1/topics` (+ `/{topic}/tasks`, `/{topic}/tasks/batch`, `/{topic}/pop`,
//!   `/{topic}/tasks/{id}` (+ `/finish`, `/touch`, `/why`), `/{topic}/dead` (+ `/replay`),
//!   `/{topic}/pause`, `/resume`): the delay queue
//!   ([`keyfire::queue::Queue`]); `/v1/tasks/{id}` (+ `/finish`, `/touch`) are deprecated
//!   aliases of its task routes.
//! - `/v1/nodes`: live nodes, their load and version.
//! - `/v1/overview`: the cluster at a glance (nodes, job counts, counters, dead letters).
//! - `/healthz` (the process is up), `/readyz` (Redis answers, expired events are on).
//! - `/v1/openapi.json`: the OpenAPI document, generated from the handlers' annotations by
//!   `utoipa`; routes are registered through `utoipa-axum`, so a route cannot exist without
//!   its documentation.
//! - `/` (and `/ui/…`): the dashboard, static files that call the API; see [`app`].
//!
//! Errors have one shape, [`ApiError`]: `{"error": {"code", "message", "field"}}`. Bodies must
//! be sent as `application/json` (415 otherwise), are limited to `api.max_body_bytes` and
//! decoded with unknown fields refused; validation happens before any write. With `api.token`
//! or `api.tokens` set, every other route needs `Authorization: Bearer`, and the token needs the
//! scope `scopes::ROUTES` gives the route (403 otherwise). Browser requests from other sites may
//! not change anything, and a node without a token answers only to local host names (see
//! `guard`, and docs/security.md).

mod auth;
mod backfill;
mod batches;
pub mod calendars;
pub mod cancel;
mod contract;
mod dashboard;
mod error;
mod extract;
mod guard;
mod jobs;
mod jobs_bulk;
pub mod limits;
mod metrics;
pub mod model;
pub mod overview;
pub mod scopes;
mod system;
mod tasks;
pub mod topic_batch;
pub mod topic_dead;
pub mod topic_pause;
mod topic_tasks;
pub mod topic_why;
pub mod topics;
pub mod why;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, LazyLock};

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use tokio::net::TcpListener;
use utoipa::openapi::OpenApi as OpenApiDoc;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use auth::{OPEN_PATHS, token_matches};
pub use error::{ApiError, ErrorBody, ErrorDetail};
pub use system::live_nodes;

use crate::settings::{ApiSettings, ServerSettings};
use keyfire::client::Client;
use keyfire::error::{Error, Result};
use keyfire::queue::Queue;

/// What the handlers share.
#[derive(Clone)]
pub struct ApiState {
    inner: Arc<StateInner>,
}

struct StateInner {
    client: Client,
    /// One queue for every request, so pops share its hints of the next ready ids.
    queue: Queue,
    /// `api.token` and `api.tokens`; `None`: no auth.
    credentials: Option<auth::Credentials>,
    max_body_bytes: usize,
    node_ttl_ms: i64,
    /// What `/metrics` and `/readyz` read from Redis, cached for `metrics.min_interval`.
    figures: crate::metrics::ClusterFigures,
}

impl std::fmt::Debug for ApiState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiState")
            .field("auth", &self.inner.credentials.is_some())
            .field("max_body_bytes", &self.inner.max_body_bytes)
            .finish()
    }
}

impl ApiState {
    /// The API over `client`, with the `[api]` and node settings of `settings`.
    pub fn new(client: Client, settings: &ServerSettings) -> Self {
        Self {
            inner: Arc::new(StateInner {
                queue: client.queue(),
                figures: crate::metrics::ClusterFigures::new(
                    client.clone(),
                    client.queue(),
                    &settings.metrics,
                ),
                client,
                credentials: auth::Credentials::from_settings(&settings.api),
                max_body_bytes: settings.api.max_body_bytes,
                node_ttl_ms: settings.node.node_ttl.as_millis() as i64,
            }),
        }
    }

    /// The client the handlers act through.
    pub fn client(&self) -> &Client {
        &self.inner.client
    }

    /// The delay queue the topic handlers act through.
    pub fn queue(&self) -> &Queue {
        &self.inner.queue
    }

    fn credentials(&self) -> Option<&auth::Credentials> {
        self.inner.credentials.as_ref()
    }

    fn max_body_bytes(&self) -> usize {
        self.inner.max_body_bytes
    }

    fn node_ttl_ms(&self) -> i64 {
        self.inner.node_ttl_ms
    }

    fn figures(&self) -> &crate::metrics::ClusterFigures {
        &self.inner.figures
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "keyfire",
        description = "A distributed job scheduler on Redis. Errors share one shape: \
            `{\"error\": {\"code\", \"message\", \"field\"}}`. When the node has `api.token` or \
            `api.tokens` set, every route but /healthz, /readyz and this document needs \
            `Authorization: Bearer <token>`, and a token allowed the scope each operation names \
            in `x-keyfire-scope` (`read`, `consume`, `write`, `admin`; 403 otherwise)."
    ),
    modifiers(&BearerAuth),
    components(schemas(ErrorBody, ErrorDetail, topics::Popped)),
    tags(
        (name = "jobs", description = "Recurring and one-shot jobs"),
        (name = "dead letters", description = "Firings that used up their attempts"),
        (name = "tasks", description = "One-shot tasks"),
        (name = "topics", description = "The delay queue: topics, their tasks, reservations"),
        (name = "nodes", description = "The cluster's live nodes"),
        (name = "calendars", description = "Calendars: dates, date ranges and cron expressions whose instants the jobs that name them skip"),
        (name = "limits", description = "Flow control: per-key limits on firings started per second and running at once"),
        (name = "health", description = "Probes"),
        (name = "meta", description = "This document"),
    )
)]
struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut OpenApiDoc) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// Every route, each registered with its documentation.
fn api_routes() -> OpenApiRouter<ApiState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(jobs::put_job, jobs::get_job, jobs::delete_job))
        .routes(routes!(jobs::post_job, jobs::list_jobs))
        .routes(routes!(jobs::pause_job))
        .routes(routes!(jobs_bulk::pause_jobs))
        .routes(routes!(jobs_bulk::resume_jobs))
        .routes(routes!(jobs::resume_job))
        .routes(routes!(jobs::job_runs))
        .routes(routes!(why::job_why))
        .routes(routes!(jobs::trigger_job))
        .routes(routes!(backfill::backfill_job))
        .routes(routes!(cancel::cancel_job))
        .routes(routes!(cancel::cancel_task))
        .routes(routes!(jobs::list_dead, jobs::purge_dead))
        .routes(routes!(jobs::replay_dead))
        .routes(routes!(tasks::post_task))
        .routes(routes!(tasks::post_tasks_batch))
        .routes(routes!(batches::get_batch))
        .routes(routes!(topics::add_task))
        .routes(routes!(topic_batch::add_topic_batch))
        .routes(routes!(topics::pop))
        .routes(routes!(topics::finish))
        .routes(routes!(topics::finish_many))
        .routes(routes!(topics::touch))
        .routes(routes!(topics::get_task, topics::delete_task))
        .routes(routes!(
            topic_tasks::get_topic_task,
            topic_tasks::delete_topic_task
        ))
        .routes(routes!(topic_tasks::finish_topic_task))
        .routes(routes!(topic_tasks::touch_topic_task))
        .routes(routes!(topic_why::topic_task_why))
        .routes(routes!(topics::list_topics))
        .routes(routes!(topics::put_topic, topics::get_topic))
        .routes(routes!(
            topic_dead::list_topic_dead,
            topic_dead::purge_topic_dead
        ))
        .routes(routes!(topic_dead::replay_topic_dead))
        .routes(routes!(topic_pause::pause_topic))
        .routes(routes!(topic_pause::resume_topic))
        .routes(routes!(
            limits::put_limit,
            limits::get_limit,
            limits::delete_limit
        ))
        .routes(routes!(limits::list_limits))
        .routes(routes!(
            calendars::put_calendar,
            calendars::get_calendar,
            calendars::delete_calendar
        ))
        .routes(routes!(calendars::list_calendars))
        .routes(routes!(system::list_nodes))
        .routes(routes!(overview::overview))
        .routes(routes!(system::healthz))
        .routes(routes!(system::readyz))
        .routes(routes!(system::openapi_json))
        .routes(routes!(metrics::metrics))
}

/// The OpenAPI document of [`router`], as JSON: generated from the handlers' annotations and
/// the types they take, then finished by `contract` (the rules the annotations cannot state).
pub fn openapi() -> &'static serde_json::Value {
    static DOC: LazyLock<serde_json::Value> = LazyLock::new(|| {
        let mut doc = api_routes().into_openapi();
        deprecate_aliases(&mut doc);
        let mut doc = contract::finish(&doc);
        scopes::document(&mut doc);
        doc
    });
    &DOC
}

/// Mark the older paths of queue tasks deprecated, each naming the path that replaces it.
fn deprecate_aliases(doc: &mut OpenApiDoc) {
    for (old, new) in topic_tasks::DEPRECATED_ALIASES {
        let Some(item) = doc.paths.paths.get_mut(*old) else {
            continue;
        };
        for op in [
            &mut item.get,
            &mut item.post,
            &mut item.put,
            &mut item.delete,
            &mut item.patch,
        ]
        .into_iter()
        .flatten()
        {
            op.deprecated = Some(utoipa::openapi::Deprecated::True);
            let note = format!(
                "Deprecated alias of `{new}`, kept working for existing clients. \
                 (`POST /v1/tasks` is another resource: it enqueues a one-shot job.)"
            );
            op.description = Some(match op.description.take() {
                Some(d) if !d.is_empty() => format!("{d}\n\n{note}"),
                _ => note,
            });
        }
    }
}

async fn route_not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this route does not take that method",
    )
}

/// The API's router.
pub fn router(state: ApiState) -> Router {
    let (routes, _) = api_routes().split_for_parts();
    routes
        // Matched routes only: each needs the route's template (its scope; the bad parameter).
        .route_layer(axum::middleware::from_fn(scopes::require_scope))
        .route_layer(axum::middleware::from_fn(guard::utf8_path))
        .fallback(route_not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(state.max_body_bytes()))
        // A request without the token is refused before its body is read.
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::require_token,
        ))
        // Outermost: cross-site writes and foreign host names are refused before anything.
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            guard::same_site_only,
        ))
        .with_state(state)
}

/// What a node serves: the API's [`router`] plus the dashboard at `/`. The dashboard's static
/// files are not API operations (they are neither documented nor behind the token), so they
/// are merged here rather than registered in [`router`].
pub fn app(state: ApiState) -> Router {
    let auth = state.credentials().is_some();
    router(state).merge(dashboard::routes(auth))
}

/// Why [`bind`] failed.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// `api.listen` is not usable as written: it resolves to no address, or to a non-loopback
    /// one while no `api.token` is set.
    #[error(transparent)]
    Config(#[from] Error),
    /// The address is fine, but listening on it failed: it is taken, not this host's, or this
    /// process may not listen there.
    #[error("{}", listen_failure(.listen, .source))]
    Listen {
        /// `api.listen` as written.
        listen: String,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
}

/// One line naming what is wrong with `api.listen` and how to fix it.
fn listen_failure(listen: &str, e: &std::io::Error) -> String {
    use std::io::ErrorKind;
    let what = match e.kind() {
        ErrorKind::AddrInUse => "is taken",
        ErrorKind::PermissionDenied => {
            "may not be listened on by this user (ports below 1024 need root or CAP_NET_BIND_SERVICE)"
        }
        ErrorKind::AddrNotAvailable => "is not an address of this host",
        _ => "cannot be listened on",
    };
    format!(
        "api.listen {listen} {what} ({e}): set api.listen or KEYFIRE__API__LISTEN to a free address"
    )
}

/// Bind `api.listen`, refusing a non-loopback address when no token is set.
pub async fn bind(api: &ApiSettings) -> Result<TcpListener, BindError> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host(&api.listen)
        .await
        .map_err(|e| Error::Config(format!("api.listen '{}': {e}", api.listen)))?
        .collect();
    if addrs.is_empty() {
        return Err(Error::Config(format!(
            "api.listen '{}' resolves to no address",
            api.listen
        ))
        .into());
    }
    if !api.auth_enabled()
        && let Some(open) = addrs.iter().find(|a| !a.ip().is_loopback())
    {
        return Err(Error::Config(format!(
            "api.listen '{}' ({open}) is not a loopback address: set api.token or api.tokens (bearer auth) or listen on 127.0.0.1",
            api.listen
        ))
        .into());
    }
    TcpListener::bind(&addrs[..])
        .await
        .map_err(|source| BindError::Listen {
            listen: api.listen.clone(),
            source,
        })
}

/// Serve the API and the dashboard ([`app`]) on `listener` until `shutdown` resolves
/// (requests in flight finish).
pub async fn serve(
    listener: TcpListener,
    state: ApiState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, app(state))
        .with_graceful_shutdown(shutdown)
        .await
}

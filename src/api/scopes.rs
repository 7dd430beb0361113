//! Scopes: what each route needs of a token, in one table ([`ROUTES`]), checked by one
//! route layer ([`require_scope`]) and written into the OpenAPI document ([`document`]) as
//! each operation's `x-keyfire-scope`.
//!
//! A route missing from the table needs `admin` (the check fails closed), and the API's tests
//! walk the OpenAPI document to check that every operation has its row, so a route cannot be
//! added without deciding its scope. What each scope allows, and what it implies, is
//! documented on [`Scope`] (and in docs/security.md).

use std::sync::Arc;

use axum::extract::{MatchedPath, RawPathParams, Request};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::error::ApiError;
use crate::settings::{ApiToken, Scope, topic_matches};

/// What a route needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// No token at all (probes and the OpenAPI document: [`super::auth::OPEN_PATHS`]).
    Open,
    /// A token allowed this scope.
    Scope(Scope),
}

use Need::{Open, Scope as S};
use Scope::{Admin, Consume, Read, Write};

/// Every route, by method and path template, and the scope it needs. `HEAD` is `GET`.
pub const ROUTES: &[(&str, &str, Need)] = &[
    ("GET", "/healthz", Open),
    ("GET", "/readyz", Open),
    ("GET", "/v1/openapi.json", Open),
    ("GET", "/metrics", S(Read)),
    ("GET", "/v1/overview", S(Read)),
    ("GET", "/v1/nodes", S(Read)),
    // Jobs.
    ("GET", "/v1/jobs", S(Read)),
    ("POST", "/v1/jobs", S(Write)),
    ("GET", "/v1/jobs/{id}", S(Read)),
    ("PUT", "/v1/jobs/{id}", S(Write)),
    ("DELETE", "/v1/jobs/{id}", S(Write)),
    ("POST", "/v1/jobs/{id}/pause", S(Write)),
    ("POST", "/v1/jobs/{id}/resume", S(Write)),
    ("POST", "/v1/jobs/{id}/trigger", S(Write)),
    ("POST", "/v1/jobs/{id}/backfill", S(Write)),
    ("POST", "/v1/jobs/{id}/cancel", S(Write)),
    ("GET", "/v1/jobs/{id}/runs", S(Read)),
    ("GET", "/v1/jobs/{id}/why", S(Read)),
    ("GET", "/v1/jobs/{id}/dead", S(Read)),
    ("DELETE", "/v1/jobs/{id}/dead", S(Write)),
    ("POST", "/v1/jobs/{id}/dead/replay", S(Write)),
    ("POST", "/v1/jobs:pause", S(Write)),
    ("POST", "/v1/jobs:resume", S(Write)),
    // One-shot tasks.
    ("POST", "/v1/tasks", S(Write)),
    ("POST", "/v1/tasks/batch", S(Write)),
    ("POST", "/v1/tasks/{id}/cancel", S(Write)),
    ("GET", "/v1/batches/{id}", S(Read)),
    // The delay queue.
    ("GET", "/v1/topics", S(Read)),
    ("GET", "/v1/topics/{topic}", S(Read)),
    ("PUT", "/v1/topics/{topic}", S(Admin)),
    ("POST", "/v1/topics/{topic}/tasks", S(Write)),
    ("POST", "/v1/topics/{topic}/tasks/batch", S(Write)),
    ("POST", "/v1/topics/{topic}/pop", S(Consume)),
    ("POST", "/v1/topics/{topic}/finish", S(Consume)),
    ("GET", "/v1/topics/{topic}/tasks/{id}", S(Read)),
    ("GET", "/v1/topics/{topic}/dead", S(Read)),
    ("DELETE", "/v1/topics/{topic}/dead", S(Write)),
    ("POST", "/v1/topics/{topic}/dead/replay", S(Write)),
    ("POST", "/v1/topics/{topic}/pause", S(Write)),
    ("POST", "/v1/topics/{topic}/resume", S(Write)),
    ("DELETE", "/v1/topics/{topic}/tasks/{id}", S(Write)),
    ("POST", "/v1/topics/{topic}/tasks/{id}/finish", S(Consume)),
    ("POST", "/v1/topics/{topic}/tasks/{id}/touch", S(Consume)),
    ("GET", "/v1/topics/{topic}/tasks/{id}/why", S(Read)),
    ("GET", "/v1/tasks/{id}", S(Read)),
    ("DELETE", "/v1/tasks/{id}", S(Write)),
    ("POST", "/v1/tasks/{id}/finish", S(Consume)),
    ("POST", "/v1/tasks/{id}/touch", S(Consume)),
    // Calendars: the cluster's configuration.
    ("GET", "/v1/calendars", S(Read)),
    ("GET", "/v1/calendars/{name}", S(Read)),
    ("PUT", "/v1/calendars/{name}", S(Admin)),
    ("DELETE", "/v1/calendars/{name}", S(Admin)),
    // Flow limits: the cluster's configuration.
    ("GET", "/v1/limits", S(Read)),
    ("GET", "/v1/limits/{key}", S(Read)),
    ("PUT", "/v1/limits/{key}", S(Admin)),
    ("DELETE", "/v1/limits/{key}", S(Admin)),
];

/// What the route `method path` (a template, as routed) needs; `None` when it has no row.
pub fn route_need(method: &str, path: &str) -> Option<Need> {
    let method = if method.eq_ignore_ascii_case("HEAD") {
        "GET"
    } else {
        method
    };
    ROUTES
        .iter()
        .find(|(m, p, _)| m.eq_ignore_ascii_case(method) && *p == path)
        .map(|(_, _, need)| *need)
}

/// What the token a request carried is allowed.
#[derive(Debug, Clone)]
pub struct Grant {
    /// The token's name (`api.token` for the unnamed one), for answers and logs.
    name: String,
    scopes: Vec<Scope>,
    /// The topics `consume` is limited to; `None`: every topic.
    topics: Option<Vec<String>>,
}

impl Grant {
    /// Everything: `api.token`, or a node without tokens.
    pub fn admin(name: &str) -> Self {
        Self {
            name: name.into(),
            scopes: vec![Admin],
            topics: None,
        }
    }

    /// What `token` allows.
    pub fn of(token: &ApiToken) -> Self {
        Self {
            name: token.name.clone(),
            scopes: token.parsed_scopes(),
            topics: token.topics.clone(),
        }
    }

    fn has(&self, need: Scope) -> bool {
        self.scopes.iter().any(|s| s.implies(need))
    }

    /// Whether the token may do what needs `need` (on `topic`, for `consume`); the refusal's
    /// message otherwise.
    fn check(&self, need: Scope, topic: Option<&str>, route: &str) -> Result<(), String> {
        let scopes: Vec<&str> = self.scopes.iter().map(|s| s.name()).collect();
        if !self.has(need) {
            return Err(format!(
                "the token '{}' ({}) may not do this: {route} needs the {} scope",
                self.name,
                scopes.join(", "),
                need.name()
            ));
        }
        // `consume` limited to topics, and not given by a wider scope.
        let limited = self.topics.as_ref().filter(|_| {
            need == Consume
                && !self
                    .scopes
                    .iter()
                    .any(|s| *s != Consume && s.implies(Consume))
        });
        let Some(topics) = limited else {
            return Ok(());
        };
        match topic {
            Some(t) if topic_matches(topics, t) => Ok(()),
            Some(t) => Err(format!(
                "the token '{}' may consume only the topics {}, not '{t}'",
                self.name,
                topics.join(", ")
            )),
            None => Err(format!(
                "the token '{}' may consume only the topics {}, and {route} names none; use the \
                 route under /v1/topics/{{topic}}/tasks/{{id}}",
                self.name,
                topics.join(", ")
            )),
        }
    }
}

/// The route layer: refuse with 403 a request whose token (set by `auth`) lacks the scope its
/// route needs. Runs after routing (it reads the matched route), before the body is read.
pub(super) async fn require_scope(req: Request, next: Next) -> Response {
    // Every routed request has its template; one without falls to `admin`, as an unknown
    // route does.
    let path = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_default();
    let method = req.method().clone();
    let need = route_need(method.as_str(), &path).unwrap_or(S(Admin));
    let S(need) = need else {
        return next.run(req).await;
    };
    let Some(grant) = req.extensions().get::<Arc<Grant>>().cloned() else {
        // `auth` sets a grant on every request it lets through; none is a bug, so refuse.
        return ApiError::forbidden("no token was checked for this request")
            .field("Authorization")
            .into_response();
    };
    let (mut parts, body) = req.into_parts();
    let topic = if need == Consume {
        use axum::extract::FromRequestParts;
        RawPathParams::from_request_parts(&mut parts, &())
            .await
            .ok()
            .and_then(|p| {
                p.iter()
                    .find(|(k, _)| *k == "topic")
                    .map(|(_, v)| v.to_string())
            })
    } else {
        None
    };
    let route = format!(
        "{} {path}",
        if method == Method::HEAD {
            "GET"
        } else {
            method.as_str()
        }
    );
    match grant.check(need, topic.as_deref(), &route) {
        Ok(()) => next.run(Request::from_parts(parts, body)).await,
        Err(message) => {
            tracing::debug!(token = %grant.name, %route, "refused: {message}");
            ApiError::forbidden(message)
                .field("Authorization")
                .into_response()
        }
    }
}

/// Write each operation's scope into the document: `x-keyfire-scope` (absent on the open
/// routes), and the scope refusal in its 403 answer.
pub(super) fn document(doc: &mut Value) {
    let Some(paths) = doc["paths"].as_object_mut() else {
        return;
    };
    for (path, item) in paths.iter_mut() {
        let Some(item) = item.as_object_mut() else {
            continue;
        };
        for (method, op) in item.iter_mut() {
            let Some(S(scope)) = route_need(method, path) else {
                continue;
            };
            op["x-keyfire-scope"] = json!(scope.name());
            let why = if scope == Consume {
                "or the token lacks the `consume` scope, or may consume only other topics \
                 (`forbidden`)"
                    .to_string()
            } else {
                format!(
                    "or the token lacks the `{}` scope (`forbidden`)",
                    scope.name()
                )
            };
            let entry = &mut op["responses"]["403"];
            let text = entry["description"].as_str().unwrap_or_default();
            entry["description"] = json!(if text.is_empty() {
                why
            } else {
                format!(
                    "{}, {why}",
                    text.trim_end_matches('.')
                        .trim_end_matches(" (`forbidden`)")
                )
            });
            if entry.get("content").is_none() {
                entry["content"] = json!({"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}});
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consume_is_limited_to_the_tokens_topics() {
        let worker = Grant::of(&ApiToken {
            name: "worker".into(),
            secret: "s".into(),
            scopes: vec!["consume".into()],
            topics: Some(vec!["emails".into(), "billing-*".into()]),
            ..Default::default()
        });
        assert!(worker.check(Consume, Some("emails"), "r").is_ok());
        assert!(worker.check(Consume, Some("billing-eu"), "r").is_ok());
        let err = worker.check(Consume, Some("other"), "r").unwrap_err();
        assert!(
            err.contains("'other'") && err.contains("emails, billing-*"),
            "{err}"
        );
        assert!(worker.check(Consume, None, "r").is_err());
        assert!(worker.check(Read, Some("emails"), "r").is_err());
        let admin = Grant::admin("api.token");
        assert!(admin.check(Consume, None, "r").is_ok());
        assert!(admin.check(Admin, None, "r").is_ok());
    }

    #[test]
    fn every_row_is_unique() {
        for (i, (m, p, _)) in ROUTES.iter().enumerate() {
            assert!(
                !ROUTES[..i].iter().any(|(m2, p2, _)| m2 == m && p2 == p),
                "{m} {p} twice"
            );
        }
    }
}

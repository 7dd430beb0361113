//! Scoped tokens (`api.tokens`): every operation of the OpenAPI document has a scope in the
//! route table, and each kind of token, on each operation, through the real router, gets
//! exactly what docs/security.md says: not 401/403 where allowed (the request may still be
//! refused for its input), `403 forbidden` where not.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use keyfire_server::api::scopes::{Need, ROUTES, route_need};
use keyfire_server::api::{OPEN_PATHS, openapi};
use keyfire_server::settings::{ApiToken, Scope, ServerSettings};
use serde_json::{Value, json};

use crate::common::{Answer, Api};

const METHODS: [&str; 5] = ["get", "put", "post", "delete", "patch"];

/// Every operation of the document: (METHOD, path template, operation).
fn operations() -> Vec<(String, String, Value)> {
    let mut out = Vec::new();
    for (path, item) in openapi()["paths"].as_object().unwrap() {
        for (m, op) in item.as_object().unwrap() {
            if METHODS.contains(&m.as_str()) {
                out.push((m.to_uppercase(), path.clone(), op.clone()));
            }
        }
    }
    out
}

fn token(name: &str, scopes: &[&str], topics: Option<&[&str]>) -> ApiToken {
    ApiToken {
        name: name.into(),
        secret: format!("{name}-secret-0123456789"),
        scopes: scopes.iter().map(|s| s.to_string()).collect(),
        topics: topics.map(|t| t.iter().map(|s| s.to_string()).collect()),
        ..Default::default()
    }
}

/// The tokens of the matrix, and what each may do, written from the docs (not from the
/// server's code): `(token, may(need, topic of the path))`.
type Rule = fn(Scope, Option<&str>) -> bool;
const LEGACY: &str = "the-legacy-admin-token-0123456789";

fn matrix() -> Vec<(ApiToken, Rule)> {
    vec![
        (token("reader", &["read"], None), |s, _| s == Scope::Read),
        (token("worker", &["consume"], None), |s, _| {
            s == Scope::Consume
        }),
        (
            token("mailer", &["consume"], Some(&["emails", "billing-*"])),
            |s, t| {
                s == Scope::Consume && t.is_some_and(|t| t == "emails" || t.starts_with("billing-"))
            },
        ),
        (
            token("dashboard", &["read", "consume"], Some(&["emails"])),
            |s, t| s == Scope::Read || (s == Scope::Consume && t == Some("emails")),
        ),
        (token("writer", &["write"], None), |s, _| s != Scope::Admin),
        (token("ops", &["admin"], None), |_, _| true),
    ]
}

fn settings(s: &mut ServerSettings) {
    s.api.token = LEGACY.into();
    s.api.tokens = matrix().into_iter().map(|(t, _)| t).collect();
}

/// A request for the operation with its path parameters filled in (`topic` given), and a JSON
/// body `{}` where it takes one: enough to pass auth; what it does after is not the point.
async fn hit(api: &Api, secret: &str, method: &str, path: &str, op: &Value, topic: &str) -> Answer {
    let uri = path
        .replace("{topic}", topic)
        .replace("{id}", "no-such-id")
        .replace("{key}", "no-such-key");
    let b = Request::builder()
        .method(Method::from_bytes(method.as_bytes()).unwrap())
        .uri(uri)
        .header("authorization", format!("Bearer {secret}"));
    let req = if op.get("requestBody").is_some() {
        b.header("content-type", "application/json")
            .body(Body::from("{}"))
    } else {
        b.body(Body::empty())
    }
    .unwrap();
    api.send(req).await
}

/// The document and the route table describe the same routes, each with its scope: a route
/// cannot be added without one.
#[test]
fn every_operation_has_a_scope_and_every_scope_an_operation() {
    let ops = operations();
    for (method, path, op) in &ops {
        let need = route_need(method, path)
            .unwrap_or_else(|| panic!("{method} {path} has no row in api::scopes::ROUTES"));
        match need {
            Need::Open => {
                assert!(
                    OPEN_PATHS.contains(&path.as_str()),
                    "{path} open but needs a token"
                );
                assert_eq!(op["security"], json!([]), "{path}");
                assert!(op.get("x-keyfire-scope").is_none(), "{path}");
            }
            Need::Scope(s) => {
                assert!(!OPEN_PATHS.contains(&path.as_str()), "{path}");
                assert_eq!(op["x-keyfire-scope"], s.name(), "{method} {path}");
                let why = op["responses"]["403"]["description"].as_str().unwrap_or("");
                assert!(
                    why.contains(&format!("lacks the `{}` scope", s.name())),
                    "{method} {path}'s 403: {why}"
                );
            }
        }
    }
    for (method, path, _) in ROUTES {
        assert!(
            ops.iter().any(|(m, p, _)| m == method && p == path),
            "{method} {path} is in the route table but not in the document"
        );
    }
}

/// Each token on each operation: allowed → neither 401 nor 403; refused → 403 `forbidden`
/// naming `Authorization`. The legacy `api.token` is `admin`.
#[tokio::test]
async fn each_scope_gets_exactly_its_routes() {
    let api = Api::with(settings).await;
    let mut checked = 0;
    for (method, path, op) in operations() {
        let Some(Need::Scope(need)) = route_need(&method, &path) else {
            continue;
        };
        let topics: &[&str] = if path.contains("{topic}") {
            &["emails", "billing-eu", "other"]
        } else {
            &["-"]
        };
        for topic in topics {
            let in_path = path.contains("{topic}").then_some(*topic);
            let mut cases: Vec<(String, String, bool)> = matrix()
                .into_iter()
                .map(|(t, may)| (t.name.clone(), t.secret.clone(), may(need, in_path)))
                .collect();
            cases.push(("api.token".into(), LEGACY.into(), true));
            for (name, secret, allowed) in cases {
                let a = hit(&api, &secret, &method, &path, &op, topic).await;
                let what = format!(
                    "{name} on {method} {path} (topic {topic}): {} {:#}",
                    a.status, a.body
                );
                if allowed {
                    assert!(
                        a.status != StatusCode::UNAUTHORIZED && a.status != StatusCode::FORBIDDEN,
                        "allowed, but {what}"
                    );
                } else {
                    a.assert_error(403, "forbidden");
                    assert_eq!(a.field(), "Authorization", "{what}");
                    let message = a.body["error"]["message"].as_str().unwrap();
                    assert!(message.contains(&name), "{what}");
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 200, "only {checked} requests");
}

/// A wrong token is still 401 (and an unknown route behind a good one 404); a token limited to
/// topics cannot use the task routes that name no topic; the 403 says what was missing.
#[tokio::test]
async fn refusals_say_why() {
    let api = Api::with(settings).await;
    let get = |secret: &str, uri: &str| {
        Request::get(uri)
            .header("authorization", format!("Bearer {secret}"))
            .body(Body::empty())
            .unwrap()
    };
    api.send(get("reader-secret-012345678", "/v1/jobs"))
        .await
        .assert_error(401, "unauthorized");
    api.send(get("reader-secret-0123456789", "/v2/nothing"))
        .await
        .assert_error(404, "not_found");

    let reader = "reader-secret-0123456789";
    let req = Request::post("/v1/jobs/x/pause")
        .header("authorization", format!("Bearer {reader}"))
        .body(Body::empty())
        .unwrap();
    let a = api.send(req).await;
    a.assert_error(403, "forbidden");
    let m = a.body["error"]["message"].as_str().unwrap();
    assert!(
        m.contains("'reader'") && m.contains("POST /v1/jobs/{id}/pause") && m.contains("write"),
        "{m}"
    );
    // The secret itself is never in an answer.
    assert!(!a.body.to_string().contains(reader));

    let mailer = "mailer-secret-0123456789";
    let body = json!({"token": "0123456789abcdef0123456789abcdef.emails"}).to_string();
    let req = Request::post("/v1/tasks/t1/finish")
        .header("authorization", format!("Bearer {mailer}"))
        .header("content-type", "application/json")
        .body(Body::from(body))
        .unwrap();
    let a = api.send(req).await;
    a.assert_error(403, "forbidden");
    let m = a.body["error"]["message"].as_str().unwrap();
    assert!(
        m.contains("emails, billing-*") && m.contains("/v1/topics/{topic}"),
        "{m}"
    );

    // A worker pops what it may, and a writer's task reaches it.
    let writer = "writer-secret-0123456789";
    let send = |secret: &str, method: Method, uri: &str, body: Value| {
        Request::builder()
            .method(method)
            .uri(uri)
            .header("authorization", format!("Bearer {secret}"))
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .unwrap()
    };
    let a = api
        .send(send(
            writer,
            Method::POST,
            "/v1/topics/emails/tasks",
            json!({"payload": {"n": 1}}),
        ))
        .await;
    assert_eq!(a.status, StatusCode::CREATED, "{:#}", a.body);
    let a = api
        .send(send(
            mailer,
            Method::POST,
            "/v1/topics/emails/pop",
            json!({}),
        ))
        .await;
    assert_eq!(a.status, StatusCode::OK, "{:#}", a.body);
    // Without `max`, a pop answers the one task itself.
    let popped = &a.body;
    let finish = format!(
        "/v1/topics/emails/tasks/{}/finish",
        popped["id"].as_str().unwrap()
    );
    let a = api
        .send(send(
            mailer,
            Method::POST,
            &finish,
            json!({"token": popped["token"]}),
        ))
        .await;
    assert_eq!(a.status, StatusCode::NO_CONTENT, "{:#}", a.body);
}

/// Tokens load from a file, their secrets from the environment; bad ones are refused naming
/// the field; no secret is ever in debug output.
#[test]
fn tokens_load_from_a_file_and_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.toml");
    let file = r#"
[api]
listen = "0.0.0.0:8080"
token = "legacy-secret-abcdef"

[[api.tokens]]
name = "grafana"
secret = "grafana-secret-abcdef"
scopes = ["read"]

[[api.tokens]]
name = "mailer"
secret_env = "MAILER_TOKEN"
scopes = ["consume"]
topics = ["emails", "billing-*"]
"#;
    std::fs::write(&path, file).unwrap();
    let env = vec![(
        "MAILER_TOKEN".to_string(),
        "mailer-secret-abcdef".to_string(),
    )];
    let s = ServerSettings::load_from(Some(&path), env).unwrap();
    assert_eq!(s.api.tokens.len(), 2);
    assert_eq!(s.api.tokens[1].secret, "mailer-secret-abcdef");
    assert!(s.api.auth_enabled());
    let shown = format!("{s:?}");
    for secret in ["legacy-secret", "grafana-secret", "mailer-secret"] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
    assert!(shown.contains("grafana") && shown.contains("MAILER_TOKEN"));

    // The variable unset: refused by field.
    let err = ServerSettings::load_from(Some(&path), Vec::new())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("api.tokens[1].secret_env") && err.contains("MAILER_TOKEN"),
        "{err}"
    );
    for (from, to, field) in [
        (
            "scopes = [\"read\"]",
            "scopes = [\"reed\"]",
            "api.tokens[0].scopes[0]",
        ),
        (
            "name = \"mailer\"",
            "name = \"grafana\"",
            "api.tokens[1].name",
        ),
        (
            "secret = \"grafana-secret-abcdef\"",
            "secret = \"\"",
            "api.tokens[0].secret",
        ),
        (
            "grafana-secret-abcdef",
            "legacy-secret-abcdef",
            "api.tokens[0].secret",
        ),
        (
            "scopes = [\"consume\"]",
            "scopes = [\"read\"]",
            "api.tokens[1].topics",
        ),
    ] {
        std::fs::write(&path, file.replace(from, to)).unwrap();
        let env = vec![(
            "MAILER_TOKEN".to_string(),
            "mailer-secret-abcdef".to_string(),
        )];
        let err = ServerSettings::load_from(Some(&path), env)
            .unwrap_err()
            .to_string();
        assert!(err.contains(field), "{to}: {err}");
        assert!(!err.contains("secret-abcdef"), "a secret in {err}");
    }
    // Tokens alone (no api.token) are auth enough for a non-loopback address.
    std::fs::write(&path, file.replace("token = \"legacy-secret-abcdef\"", "")).unwrap();
    let env = vec![("MAILER_TOKEN".to_string(), "m-secret".to_string())];
    ServerSettings::load_from(Some(&path), env).unwrap();
}

/// The dashboard asks for a token when only `api.tokens` is set, and a `read` token sees every
/// view it draws; its buttons that change something get the 403, which it shows as it is.
#[tokio::test]
async fn the_dashboard_works_with_a_read_token() {
    use http_body_util::BodyExt;
    use keyfire_server::api::{ApiState, app};
    use tower::ServiceExt;

    let api = Api::with(|s| {
        s.api.tokens = vec![token("viewer", &["read"], None)];
    })
    .await;
    let app = app(ApiState::new(api.world.client().await, &api.world.settings));
    let resp = app
        .clone()
        .oneshot(Request::get("/ui/config.json").body(Body::empty()).unwrap())
        .await
        .unwrap();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    let config: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(config["auth"], true, "{config}");

    let viewer = "viewer-secret-0123456789";
    for uri in [
        "/v1/overview",
        "/v1/nodes",
        "/v1/jobs",
        "/v1/topics",
        "/v1/limits",
    ] {
        let req = Request::get(uri)
            .header("authorization", format!("Bearer {viewer}"))
            .body(Body::empty())
            .unwrap();
        let a = api.send(req).await;
        assert_eq!(a.status, StatusCode::OK, "{uri}: {:#}", a.body);
    }
    let req = Request::post("/v1/jobs/x/trigger")
        .header("authorization", format!("Bearer {viewer}"))
        .body(Body::empty())
        .unwrap();
    api.send(req).await.assert_error(403, "forbidden");
}

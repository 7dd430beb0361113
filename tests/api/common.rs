//! An API over a real Redis, driven through the router (`oneshot`), and helpers to look at
//! what Redis holds.

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::BodyExt;
use keyfire_server::api::{ApiState, router};
use keyfire_server::settings::ServerSettings;
use serde_json::Value;
use tower::ServiceExt;

use crate::support::World;

/// An answer: status, headers, JSON body (Null when empty or not JSON).
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Answer {
    /// The field of an error answer.
    pub(crate) fn field(&self) -> &str {
        self.body["error"]["field"].as_str().unwrap_or("")
    }

    /// Assert the one error shape: `{"error": {"code", "message", "field"}}`.
    pub(crate) fn assert_error(&self, status: u16, code: &str) -> &Self {
        assert_eq!(self.status.as_u16(), status, "{:#}", self.body);
        let e = &self.body["error"];
        assert_eq!(e["code"], code, "{:#}", self.body);
        assert!(
            e["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{:#}",
            self.body
        );
        assert!(
            e.get("field").is_some(),
            "field must be present: {:#}",
            self.body
        );
        assert_eq!(e.as_object().unwrap().len(), 3, "{:#}", self.body);
        self
    }
}

/// A world (Redis + settings) and the API's router over it.
pub(crate) struct Api {
    pub world: World,
    pub router: Router,
    pub token: Option<String>,
}

impl Api {
    pub(crate) async fn new() -> Self {
        Self::with(|_| {}).await
    }

    pub(crate) async fn with(change: impl FnOnce(&mut ServerSettings)) -> Self {
        let mut world = World::new().await;
        change(&mut world.settings);
        let client = world.client().await;
        let router = router(ApiState::new(client, &world.settings));
        let token = Some(world.settings.api.token.clone()).filter(|t| !t.is_empty());
        Self {
            world,
            router,
            token,
        }
    }

    pub(crate) async fn send(&self, req: Request<Body>) -> Answer {
        let resp = self.router.clone().oneshot(req).await.unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Answer {
            status,
            headers,
            body,
        }
    }

    pub(crate) fn request(&self, method: Method, uri: &str) -> axum::http::request::Builder {
        let mut b = Request::builder().method(method).uri(uri);
        if let Some(t) = &self.token {
            b = b.header("authorization", format!("Bearer {t}"));
        }
        b
    }

    /// A request with a JSON body (or none), carrying the token when there is one.
    pub(crate) async fn call(&self, method: Method, uri: &str, body: Option<Value>) -> Answer {
        let b = self.request(method, uri);
        let req = match body {
            Some(v) => b
                .header("content-type", "application/json")
                .body(Body::from(v.to_string())),
            None => b.body(Body::empty()),
        }
        .unwrap();
        self.send(req).await
    }

    /// A request with a raw body.
    pub(crate) async fn raw(&self, method: Method, uri: &str, body: impl Into<Body>) -> Answer {
        let req = self
            .request(method, uri)
            .header("content-type", "application/json")
            .body(body.into())
            .unwrap();
        self.send(req).await
    }

    pub(crate) async fn get(&self, uri: &str) -> Answer {
        self.call(Method::GET, uri, None).await
    }

    pub(crate) async fn put(&self, uri: &str, body: Value) -> Answer {
        self.call(Method::PUT, uri, Some(body)).await
    }

    pub(crate) async fn post(&self, uri: &str, body: Option<Value>) -> Answer {
        self.call(Method::POST, uri, body).await
    }

    pub(crate) async fn delete(&self, uri: &str) -> Answer {
        self.call(Method::DELETE, uri, None).await
    }

    /// Add a task to `topic` (`body` as the REST API takes it): 201 naming the topic. Its id.
    pub(crate) async fn add_task(&self, topic: &str, body: Value) -> String {
        let a = self
            .post(&format!("/v1/topics/{topic}/tasks"), Some(body))
            .await;
        assert_eq!(a.status, StatusCode::CREATED, "{:#}", a.body);
        assert_eq!(a.body["topic"], topic, "{:#}", a.body);
        a.body["id"].as_str().unwrap().to_string()
    }

    /// Every key under this world's prefix with its serialized value: equal snapshots mean
    /// nothing was written.
    pub(crate) async fn snapshot(&self) -> Vec<(String, Vec<u8>)> {
        snapshot(&self.world).await
    }
}

pub(crate) async fn snapshot(w: &World) -> Vec<(String, Vec<u8>)> {
    let mut c = w.conn().await;
    let mut keys = w.keys().await;
    // Node heartbeats change on their own; they are not what a request writes.
    keys.retain(|k| !k.contains(":node") && !k.ends_with(":layout") && !k.ends_with(":handlers"));
    let mut out = Vec::new();
    for k in keys {
        let dump: Option<Vec<u8>> = redis::cmd("DUMP")
            .arg(&k)
            .query_async(&mut c)
            .await
            .unwrap();
        out.push((k, dump.unwrap_or_default()));
    }
    out
}

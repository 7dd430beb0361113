//! The OpenAPI document and the router agree: every documented operation is routed, every
//! route is documented, and the job schema names exactly the fields `JobSpec` accepts.

use std::collections::BTreeSet;

use axum::http::{Method, StatusCode};
use serde_json::Value;

use crate::common::Api;

/// The routes the REST API documents.
const EXPECTED: &[(&str, &str)] = &[
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/v1/openapi.json"),
    ("GET", "/metrics"),
    ("GET", "/v1/jobs"),
    ("POST", "/v1/jobs"),
    ("GET", "/v1/jobs/{id}"),
    ("PUT", "/v1/jobs/{id}"),
    ("DELETE", "/v1/jobs/{id}"),
    ("POST", "/v1/jobs/{id}/pause"),
    ("POST", "/v1/jobs/{id}/resume"),
    ("GET", "/v1/jobs/{id}/runs"),
    ("POST", "/v1/jobs/{id}/trigger"),
    ("GET", "/v1/jobs/{id}/dead"),
    ("DELETE", "/v1/jobs/{id}/dead"),
    ("POST", "/v1/jobs/{id}/dead/replay"),
    ("POST", "/v1/tasks"),
    ("POST", "/v1/tasks/batch"),
    ("GET", "/v1/tasks/{id}"),
    ("DELETE", "/v1/tasks/{id}"),
    ("POST", "/v1/tasks/{id}/finish"),
    ("POST", "/v1/tasks/{id}/touch"),
    ("GET", "/v1/topics/{topic}/tasks/{id}"),
    ("DELETE", "/v1/topics/{topic}/tasks/{id}"),
    ("POST", "/v1/topics/{topic}/tasks/{id}/finish"),
    ("POST", "/v1/topics/{topic}/tasks/{id}/touch"),
    ("GET", "/v1/topics"),
    ("POST", "/v1/topics/{topic}/tasks"),
    ("POST", "/v1/topics/{topic}/pop"),
    ("POST", "/v1/topics/{topic}/finish"),
    ("GET", "/v1/nodes"),
    ("GET", "/v1/overview"),
    ("GET", "/v1/limits"),
    ("PUT", "/v1/limits/{key}"),
    ("GET", "/v1/limits/{key}"),
    ("DELETE", "/v1/limits/{key}"),
];

const METHODS: &[&str] = &["GET", "PUT", "POST", "DELETE", "PATCH"];

fn documented(doc: &Value) -> BTreeSet<(String, String)> {
    let mut ops = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for m in METHODS {
            if item.get(m.to_lowercase()).is_some() {
                ops.insert((m.to_string(), path.clone()));
            }
        }
    }
    ops
}

/// Whether the router has a route for this method and path (the fallbacks answer "no such
/// route" and 405; a handler's own 404 names a job).
async fn routed(api: &Api, method: &str, path: &str) -> bool {
    let uri = path
        .replace("{id}", "probe-id")
        .replace("{topic}", "probe-topic");
    let body = matches!(method, "PUT" | "POST").then(|| serde_json::json!({}));
    let a = api
        .call(Method::from_bytes(method.as_bytes()).unwrap(), &uri, body)
        .await;
    let no_route =
        a.status == StatusCode::NOT_FOUND && a.body["error"]["message"] == "no such route";
    !(no_route || a.status == StatusCode::METHOD_NOT_ALLOWED)
}

#[tokio::test]
async fn document_and_router_agree() {
    let api = Api::with(|s| s.api.token = "t".into()).await;
    let doc = api.get("/v1/openapi.json").await;
    assert_eq!(doc.status, StatusCode::OK);
    let doc = doc.body;
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    let ops = documented(&doc);
    let expected: BTreeSet<(String, String)> = EXPECTED
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    assert_eq!(
        ops, expected,
        "documented operations differ from the expected routes"
    );
    // The served document is the one the library builds.
    assert_eq!(
        doc,
        serde_json::to_value(keyfire_server::api::openapi()).unwrap()
    );

    let paths: BTreeSet<&String> = ops.iter().map(|(_, p)| p).collect();
    for path in &paths {
        for m in METHODS {
            let is_doc = ops.contains(&(m.to_string(), path.to_string()));
            assert_eq!(
                routed(&api, m, path).await,
                is_doc,
                "{m} {path}: routed and documented must agree"
            );
        }
    }
    // Paths that are not documented are not routed either.
    for path in [
        "/",
        "/v1",
        "/v1/job",
        "/v1/jobs/a/b",
        "/v1/jobs/a/dead/x",
        "/v1/tasks/x/y",
        "/v1/topics/x",
        "/v1/topics/x/y",
        "/v1/node",
    ] {
        for m in METHODS {
            assert!(
                !routed(&api, m, path).await,
                "{m} {path} is routed but not documented"
            );
        }
    }

    // Operations needing the token say so; the open ones do not.
    for (m, path) in &ops {
        let op = &doc["paths"][path][m.to_lowercase()];
        let open = keyfire_server::api::OPEN_PATHS.contains(&path.as_str());
        assert_eq!(op.get("security").is_none(), open, "{m} {path} security");
    }
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    // Every error answer is documented with the one error shape.
    assert!(doc["components"]["schemas"]["ErrorBody"].is_object());
}

#[test]
fn job_schema_names_every_job_spec_field() {
    let doc = serde_json::to_value(keyfire_server::api::openapi()).unwrap();
    let props: BTreeSet<String> = doc["components"]["schemas"]["JobSpec"]["properties"]
        .as_object()
        .expect("JobSpec schema")
        .keys()
        .cloned()
        .collect();
    let fields: BTreeSet<String> = keyfire_server::api::model::job_spec_fields()
        .into_iter()
        .collect();
    assert!(
        fields.contains("cron") && fields.contains("handler"),
        "{fields:?}"
    );
    assert_eq!(props, fields, "the JobSpec schema is derived from the type");
    let task: BTreeSet<String> = doc["components"]["schemas"]["TaskSpec"]["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert!(
        task.is_subset(&fields),
        "TaskSpec names fields JobSpec lacks: {:?}",
        task.difference(&fields)
    );
}

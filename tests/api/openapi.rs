//! The OpenAPI document and the server agree: every documented operation is routed and every
//! route documented; every status a probe meets is documented on its operation; the job
//! schemas name exactly the fields `JobSpec` accepts; and each pattern, bound and name list
//! the document states (written by `api::contract` from the validators' constants) accepts
//! exactly what its validator accepts, on samples.

use std::collections::BTreeSet;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use regex::Regex;
use serde_json::{Value, json};

use crate::common::{Answer, Api};

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
    ("GET", "/v1/jobs/{id}/why"),
    ("POST", "/v1/jobs/{id}/trigger"),
    ("POST", "/v1/jobs/{id}/backfill"),
    ("POST", "/v1/jobs/{id}/cancel"),
    ("GET", "/v1/jobs/{id}/dead"),
    ("DELETE", "/v1/jobs/{id}/dead"),
    ("POST", "/v1/jobs/{id}/dead/replay"),
    ("POST", "/v1/jobs:pause"),
    ("POST", "/v1/jobs:resume"),
    ("POST", "/v1/tasks"),
    ("POST", "/v1/tasks/batch"),
    ("GET", "/v1/batches/{id}"),
    ("POST", "/v1/tasks/{id}/cancel"),
    ("GET", "/v1/batches/{id}"),
    ("GET", "/v1/tasks/{id}"),
    ("DELETE", "/v1/tasks/{id}"),
    ("POST", "/v1/tasks/{id}/finish"),
    ("POST", "/v1/tasks/{id}/touch"),
    ("GET", "/v1/topics/{topic}/tasks/{id}"),
    ("DELETE", "/v1/topics/{topic}/tasks/{id}"),
    ("POST", "/v1/topics/{topic}/tasks/{id}/finish"),
    ("POST", "/v1/topics/{topic}/tasks/{id}/touch"),
    ("GET", "/v1/topics/{topic}/tasks/{id}/why"),
    ("GET", "/v1/topics"),
    ("GET", "/v1/topics/{topic}"),
    ("PUT", "/v1/topics/{topic}"),
    ("POST", "/v1/topics/{topic}/tasks"),
    ("POST", "/v1/topics/{topic}/tasks/batch"),
    ("POST", "/v1/topics/{topic}/pop"),
    ("POST", "/v1/topics/{topic}/finish"),
    ("GET", "/v1/topics/{topic}/dead"),
    ("DELETE", "/v1/topics/{topic}/dead"),
    ("POST", "/v1/topics/{topic}/dead/replay"),
    ("POST", "/v1/topics/{topic}/pause"),
    ("POST", "/v1/topics/{topic}/resume"),
    ("GET", "/v1/nodes"),
    ("GET", "/v1/overview"),
    ("GET", "/v1/limits"),
    ("PUT", "/v1/limits/{key}"),
    ("GET", "/v1/limits/{key}"),
    ("DELETE", "/v1/limits/{key}"),
    ("GET", "/v1/calendars"),
    ("PUT", "/v1/calendars/{name}"),
    ("GET", "/v1/calendars/{name}"),
    ("DELETE", "/v1/calendars/{name}"),
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

    // Operations needing the token say so; the open ones say they need none.
    assert_eq!(doc["security"], json!([{"bearer": []}]));
    for (m, path) in &ops {
        let op = &doc["paths"][path][m.to_lowercase()];
        let open = keyfire_server::api::OPEN_PATHS.contains(&path.as_str());
        let expected = if open {
            json!([])
        } else {
            json!([{"bearer": []}])
        };
        assert_eq!(op["security"], expected, "{m} {path} security");
    }
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    // Every error answer is documented with the one error shape.
    assert!(doc["components"]["schemas"]["ErrorBody"].is_object());
}

pub(crate) fn doc() -> Value {
    serde_json::to_value(keyfire_server::api::openapi()).unwrap()
}

fn props(doc: &Value, schema: &str) -> BTreeSet<String> {
    doc["components"]["schemas"][schema]["properties"]
        .as_object()
        .unwrap_or_else(|| panic!("schema {schema}"))
        .keys()
        .cloned()
        .collect()
}

fn minus(all: &BTreeSet<String>, gone: &[&str]) -> BTreeSet<String> {
    all.iter()
        .filter(|f| !gone.contains(&f.as_str()))
        .cloned()
        .collect()
}

#[test]
fn job_schemas_are_derived_from_job_spec() {
    let doc = doc();
    let fields: BTreeSet<String> = keyfire_server::api::model::job_spec_fields()
        .into_iter()
        .collect();
    assert!(
        fields.contains("cron") && fields.contains("handler") && fields.contains("dedup"),
        "{fields:?}"
    );
    // Each schema is JobSpec's fields less the ones its route refuses (or never shows).
    for (schema, gone) in [
        ("JobSpec", &["dedup", "after_task", "batch"][..]),
        (
            "JobSpecWithoutId",
            &["dedup", "id", "after_task", "batch"][..],
        ),
        (
            "TaskSpec",
            &[
                "cron", "every", "tz", "max_runs", "jitter", "exclude", "batch",
            ][..],
        ),
        ("StoredJobSpec", &["after"][..]),
    ] {
        assert_eq!(props(&doc, schema), minus(&fields, gone), "{schema}");
        let s = &doc["components"]["schemas"][schema];
        assert_eq!(
            s["additionalProperties"], false,
            "{schema} refuses unknown fields"
        );
        assert!(
            !s["description"].as_str().unwrap_or("").is_empty(),
            "{schema}"
        );
    }
    let required = |s: &str| doc["components"]["schemas"][s]["required"].clone();
    assert_eq!(required("JobSpec"), json!(["id", "handler"]));
    assert_eq!(required("JobSpecWithoutId"), json!(["handler"]));
    assert_eq!(
        required("TaskSpec"),
        json!(["handler"]),
        "a task's id is optional"
    );
    // Where each is used.
    let body = |path: &str, m: &str| {
        doc["paths"][path][m]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
            .clone()
    };
    assert_eq!(body("/v1/jobs", "post"), "#/components/schemas/JobSpec");
    assert_eq!(
        body("/v1/jobs/{id}", "put"),
        "#/components/schemas/JobSpecWithoutId"
    );
    assert_eq!(body("/v1/tasks", "post"), "#/components/schemas/TaskSpec");
    assert_eq!(
        doc["components"]["schemas"]["JobView"]["properties"]["spec"]["$ref"],
        "#/components/schemas/StoredJobSpec"
    );
    assert_eq!(
        doc["components"]["schemas"]["TaskBatch"]["properties"]["tasks"]["items"]["$ref"],
        "#/components/schemas/TaskSpec"
    );
    // Exactly one schedule kind: one branch per kind, each naming all of them.
    let one_of = doc["components"]["schemas"]["JobSpec"]["oneOf"]
        .as_array()
        .unwrap();
    assert_eq!(one_of.len(), 4);
    for branch in one_of {
        let props = branch["properties"].as_object().unwrap();
        for kind in ["cron", "every", "at", "after"] {
            assert!(props.contains_key(kind), "{branch}");
        }
    }
}

/// Payloads are any JSON value (an empty schema), never a typed object.
#[test]
fn payloads_are_any_json_value() {
    let doc = doc();
    for (schema, field) in [
        ("AddTask", "payload"),
        ("ReservedView", "payload"),
        ("TaskView", "payload"),
    ] {
        let s = doc["components"]["schemas"][schema]["properties"][field]
            .as_object()
            .unwrap();
        let keys: BTreeSet<&str> = s.keys().map(String::as_str).collect();
        assert!(
            keys.iter().all(|k| ["description", "example"].contains(k)),
            "{schema}.{field} must accept any value: {s:?}"
        );
    }
}

/// Whether `value` fits a string schema's pattern and length bounds.
pub(crate) fn fits(schema: &Value, value: &str) -> bool {
    let pattern = schema["pattern"].as_str().expect("a pattern");
    let re = Regex::new(pattern).unwrap_or_else(|e| panic!("{pattern}: {e}"));
    let n = value.chars().count() as u64;
    re.is_match(value)
        && schema["minLength"].as_u64().is_none_or(|m| n >= m)
        && schema["maxLength"].as_u64().is_none_or(|m| n <= m)
}

pub(crate) fn path_param(doc: &Value, path: &str, method: &str, name: &str) -> Value {
    doc["paths"][path][method]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("{method} {path} {name}"))["schema"]
        .clone()
}

pub(crate) fn field(doc: &Value, schema: &str, field: &str) -> Value {
    doc["components"]["schemas"][schema]["properties"][field].clone()
}

const NAMES: &[&str] = &[
    "a",
    "A9",
    "nightly-report",
    "a.b_c-d",
    "0",
    "",
    "-a",
    ".a",
    "_a",
    "a b",
    "a:b",
    "a/b",
    "a{b}",
    "é",
    "a\n",
    "host:api.example.com",
    "host::1",
];

fn long_names() -> Vec<String> {
    [125, 126, 127, 128, 129, 159, 160, 161, 199, 200, 201]
        .iter()
        .map(|n| "a".repeat(*n))
        .collect()
}

/// Whether a validator takes a name.
type Validator = Box<dyn Fn(&str) -> bool>;

#[test]
fn name_patterns_agree_with_the_validators() {
    use keyfire::job::{JobSpec, Validation, validate_limit_key};
    let doc = doc();
    let samples: Vec<String> = NAMES
        .iter()
        .map(|s| s.to_string())
        .chain(long_names())
        .collect();
    let job_id = |id: &str| {
        JobSpec::every(id, "1s", "log")
            .validate(&Validation {
                now_ms: 0,
                created_ms: 0,
                known_handler: None,
                max_params_bytes: usize::MAX,
            })
            .is_ok()
    };
    let checks: Vec<(&str, Value, Validator)> = vec![
        ("JobSpec.id", field(&doc, "JobSpec", "id"), Box::new(job_id)),
        (
            "path id of a job",
            path_param(&doc, "/v1/jobs/{id}", "get", "id"),
            Box::new(job_id),
        ),
        (
            "path topic",
            path_param(&doc, "/v1/topics/{topic}/pop", "post", "topic"),
            Box::new(|t| keyfire::queue::check_topic(t).is_ok()),
        ),
        (
            "path id of a queue task",
            path_param(&doc, "/v1/topics/{topic}/tasks/{id}", "get", "id"),
            Box::new(|t| keyfire::queue::check_task_id(t).is_ok()),
        ),
        (
            "FinishItem.id",
            field(&doc, "FinishItem", "id"),
            Box::new(|t| keyfire::queue::check_task_id(t).is_ok()),
        ),
        (
            "path key",
            path_param(&doc, "/v1/limits/{key}", "put", "key"),
            Box::new(|k| validate_limit_key("key", k).is_ok()),
        ),
        (
            "JobSpec.limit_key",
            field(&doc, "JobSpec", "limit_key"),
            Box::new(|k| validate_limit_key("limit_key", k).is_ok()),
        ),
    ];
    for (what, schema, validator) in &checks {
        for s in &samples {
            assert_eq!(
                fits(schema, s),
                validator(s),
                "{what}: the document and the validator disagree on {s:?}"
            );
        }
    }
}

#[tokio::test]
async fn added_task_ids_agree_with_the_server() {
    // A new task's id is shorter than a task id (its job's `q.` prefix must fit a job id).
    let api = Api::new().await;
    let doc = doc();
    let schema = field(&doc, "AddTask", "id");
    for s in NAMES
        .iter()
        .map(|s| s.to_string())
        .chain(long_names().into_iter().filter(|n| n.len() < 140))
    {
        let a = api
            .post("/v1/topics/t/tasks", Some(json!({"id": s, "payload": 1})))
            .await;
        let refused = a.status == StatusCode::UNPROCESSABLE_ENTITY;
        if refused {
            assert_eq!(a.field(), "id", "{:#}", a.body);
        }
        assert_eq!(fits(&schema, &s), !refused, "{s:?}: {:#}", a.body);
    }
}

#[test]
fn token_pattern_agrees_with_the_validator() {
    let doc = doc();
    let hex = "0123456789abcdef0123456789ABCDEF";
    let samples = [
        format!("{hex}.emails"),
        format!("{hex}.a"),
        format!("{hex}.{}", "t".repeat(128)),
        format!("{hex}.{}", "t".repeat(129)),
        format!("{hex}."),
        format!("{hex}.-a"),
        format!("{hex}emails"),
        format!("{}.emails", &hex[1..]),
        format!("g{}.emails", &hex[1..]),
        "emails".to_string(),
        String::new(),
    ];
    for schema in ["FinishBody", "TouchBody", "FinishItem"] {
        let s = field(&doc, schema, "token");
        for t in &samples {
            assert_eq!(
                fits(&s, t),
                keyfire::queue::token_topic("token", t).is_ok(),
                "{schema}.token: {t:?}"
            );
        }
    }
}

#[test]
fn duration_pattern_agrees_with_the_parser() {
    let doc = doc();
    let schema = field(&doc, "AddTask", "ttr");
    let re = Regex::new(schema["pattern"].as_str().unwrap()).unwrap();
    // The pattern takes these, and so does the parser.
    for ok in [
        "0",
        " 0 ",
        "30s",
        "1h 30m",
        "1h30m",
        "1.5h",
        "250ms",
        "10 ms",
        " 5m ",
        "2days",
        "1y",
        "3M",
        "1µs",
        "7weeks",
        "1hour 12min 5s",
    ] {
        assert!(re.is_match(ok), "the pattern refuses {ok:?}");
        assert!(
            keyfire::job::parse_duration(ok).is_ok(),
            "the parser refuses {ok:?}"
        );
    }
    // The pattern refuses these, and so does the parser.
    for bad in [
        "",
        "s",
        "5",
        "1.s",
        "-1s",
        "1h,2m",
        "5 parsecs",
        "soon",
        "0x10s",
        "1e3s",
        "00",
        "1..5s",
    ] {
        assert!(!re.is_match(bad), "the pattern takes {bad:?}");
        assert!(
            keyfire::job::parse_duration(bad).is_err(),
            "the parser takes {bad:?}"
        );
    }
    // Every duration field states the same rule.
    for (s, f) in [
        ("JobSpec", "every"),
        ("JobSpec", "after"),
        ("JobSpec", "timeout"),
        ("JobSpec", "misfire_tolerance"),
        ("JobSpec", "jitter"),
        ("TaskSpec", "after"),
        ("RetrySpec", "interval"),
        ("RetrySpec", "max_interval"),
        ("DedupSpec", "window"),
        ("AddTask", "delay"),
        ("TouchBody", "ttr"),
    ] {
        assert_eq!(
            field(&doc, s, f)["pattern"],
            schema["pattern"],
            "{s}.{f} states the duration pattern"
        );
    }
    let wait = path_param(&doc, "/v1/topics/{topic}/pop", "post", "wait");
    assert_eq!(wait["pattern"], schema["pattern"]);
}

#[test]
fn name_lists_and_bounds_agree_with_the_validators() {
    use keyfire::job::{MisfirePolicy, OverlapPolicy};
    let doc = doc();
    let listed =
        |s: &str, f: &str| -> Vec<Value> { field(&doc, s, f)["enum"].as_array().unwrap().clone() };
    let misfire = listed("JobSpec", "misfire");
    assert!(misfire.contains(&Value::Null), "misfire may be null");
    for m in misfire.iter().filter_map(Value::as_str) {
        MisfirePolicy::parse(m).unwrap();
    }
    assert_eq!(misfire.len(), keyfire::job::MISFIRE_POLICIES.len() + 1);
    for o in listed("JobSpec", "overlap")
        .iter()
        .filter_map(Value::as_str)
    {
        OverlapPolicy::parse(o).unwrap();
    }
    for name in ["fire_once", "skip", "catch_up"] {
        assert!(misfire.contains(&json!(name)));
    }
    MisfirePolicy::parse("later").unwrap_err();

    // u32 fields: int64 with u32's maximum (int32 would stop at 2^31 - 1).
    for (s, f, min, max) in [
        ("LimitSpec", "rate", 1, u32::MAX as u64),
        ("LimitSpec", "in_flight", 1, u32::MAX as u64),
        ("LimitSpec", "burst", 1, u32::MAX as u64),
        ("AddTask", "max_deliveries", 1, 1_000),
        ("RetrySpec", "max_attempts", 1, 1_000),
        ("JobSpec", "catch_up_limit", 1, u32::MAX as u64),
        ("TaskView", "deliveries", 0, u32::MAX as u64),
        ("LimitStatus", "in_flight", 0, u32::MAX as u64),
    ] {
        let v = field(&doc, s, f);
        assert_eq!(v["format"], "int64", "{s}.{f}: {v}");
        assert_eq!(v["minimum"], min, "{s}.{f}");
        assert_eq!(v["maximum"], max, "{s}.{f}");
    }
    assert_eq!(
        field(&doc, "AddTask", "max_deliveries")["maximum"],
        keyfire::queue::MAX_DELIVERIES_LIMIT
    );
    assert_eq!(
        field(&doc, "RetrySpec", "max_attempts")["maximum"],
        keyfire::job::MAX_ATTEMPTS_LIMIT
    );
    // The limit key is the path's only: the body schema does not list it.
    assert!(!props(&doc, "LimitSpec").contains("key"));
    assert!(!props(&doc, "LimitSpec").is_empty());
}

/// Query bounds, checked against the server at and past each end.
#[tokio::test]
async fn query_bounds_agree_with_the_server() {
    let api = Api::new().await;
    let doc = doc();
    for (path, method, name, uri) in [
        ("/v1/jobs", "get", "limit", "/v1/jobs?limit={}"),
        (
            "/v1/jobs/{id}/runs",
            "get",
            "limit",
            "/v1/jobs/j/runs?limit={}",
        ),
        (
            "/v1/jobs/{id}/dead",
            "get",
            "limit",
            "/v1/jobs/j/dead?limit={}",
        ),
        (
            "/v1/topics/{topic}/pop",
            "post",
            "max",
            "/v1/topics/t/pop?max={}",
        ),
    ] {
        let s = path_param(&doc, path, method, name);
        let (min, max) = (
            s["minimum"].as_i64().unwrap(),
            s["maximum"].as_i64().unwrap(),
        );
        assert_eq!((min, max), (1, 1000), "{path} {name}");
        for (n, ok) in [(min - 1, false), (min, true), (max, true), (max + 1, false)] {
            let m = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let a = api.call(m, &uri.replace("{}", &n.to_string()), None).await;
            let refused = a.status == StatusCode::BAD_REQUEST;
            assert_eq!(!refused, ok, "{uri} with {n}: {:#}", a.body);
            if refused {
                a.assert_error(400, "bad_query");
                assert_eq!(a.field(), name);
            }
        }
    }
    // Replay and purge take no `limit`: the document lists none, and the server refuses it.
    for (m, uri, path, method) in [
        (
            Method::POST,
            "/v1/jobs/j/dead/replay?limit=5",
            "/v1/jobs/{id}/dead/replay",
            "post",
        ),
        (
            Method::DELETE,
            "/v1/jobs/j/dead?limit=5",
            "/v1/jobs/{id}/dead",
            "delete",
        ),
    ] {
        let listed = doc["paths"][path][method]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "limit");
        assert!(!listed, "{method} {path} lists limit");
        let a = api.call(m, uri, None).await;
        a.assert_error(400, "bad_query");
        assert_eq!(a.field(), "limit");
    }
}

#[tokio::test]
async fn if_match_pattern_agrees_with_the_server() {
    let api = Api::new().await;
    let doc = doc();
    let schema = path_param(&doc, "/v1/jobs/{id}", "put", "If-Match");
    assert_eq!(
        schema,
        path_param(&doc, "/v1/jobs", "post", "If-Match"),
        "both job writes take the same If-Match"
    );
    let re = Regex::new(schema["pattern"].as_str().unwrap()).unwrap();
    for (value, takes) in [
        ("*", true),
        ("0", true),
        ("\"0\"", true),
        ("7", true),
        ("\"7\"", true),
        ("W/\"7\"", true),
        ("9999999999999999999", true),
        ("10000000000000000000", false),
        ("W/7", false),
        ("\"\"7\"", false),
        ("\"7", false),
        ("+7", false),
        ("-1", false),
        ("7 8", false),
        ("\"\"", false),
        ("null", false),
        ("j*", false),
    ] {
        assert_eq!(re.is_match(value), takes, "the pattern on {value:?}");
        let req = api
            .request(Method::PUT, "/v1/jobs/if-match-probe")
            .header("content-type", "application/json")
            .header("if-match", value)
            .body(Body::from(
                json!({"every": "1h", "handler": "log"}).to_string(),
            ))
            .unwrap();
        let a = api.send(req).await;
        if takes {
            // Taken: created, or refused as another version (409), never as malformed.
            assert_ne!(a.status, StatusCode::BAD_REQUEST, "{value:?}: {:#}", a.body);
        } else {
            a.assert_error(400, "bad_request");
            assert_eq!(a.field(), "If-Match");
        }
    }
}

fn documented_statuses(doc: &Value, method: &str, path: &str) -> BTreeSet<u16> {
    doc["paths"][path][method.to_lowercase()]["responses"]
        .as_object()
        .unwrap_or_else(|| panic!("{method} {path}"))
        .keys()
        .map(|k| k.parse().unwrap())
        .collect()
}

fn concrete(path: &str) -> String {
    path.replace("{id}", "probe-id")
        .replace("{topic}", "probe-topic")
        .replace("{key}", "probe-key")
        .replace("{name}", "probe-name")
}

fn assert_documented(doc: &Value, method: &str, path: &str, probe: &str, a: &Answer) {
    let statuses = documented_statuses(doc, method, path);
    assert!(
        statuses.contains(&a.status.as_u16()),
        "{method} {path} ({probe}) answered {} but documents {statuses:?}: {:#}",
        a.status,
        a.body
    );
    // `/readyz` answers 503 with its checks; every other error is the one error shape.
    if (a.status.is_client_error() || a.status.is_server_error()) && path != "/readyz" {
        let e = &a.body["error"];
        assert!(
            e["code"].is_string() && e["message"].is_string() && e.get("field").is_some(),
            "{method} {path} ({probe}): not the error shape: {:#}",
            a.body
        );
        let documented = &doc["paths"][path][method.to_lowercase()]["responses"]
            [a.status.as_u16().to_string()]["content"]["application/json"]["schema"]["$ref"];
        assert_eq!(
            documented, "#/components/schemas/ErrorBody",
            "{method} {path}: error {} documented with the error body",
            a.status
        );
    }
}

/// Every answer of every layer, probed on every operation, is documented on it: the token
/// (401), the browser guard (403), the body reader (400, 413, 415, 422), the path and query
/// checks (400), and the handler itself.
#[tokio::test]
async fn every_answer_a_probe_meets_is_documented() {
    let api = Api::with(|s| {
        s.api.token = "t".into();
        s.api.max_body_bytes = 256;
    })
    .await;
    let doc = doc();
    for (method, path) in documented(&doc) {
        let op = &doc["paths"][&path][method.to_lowercase()];
        let takes_body = op.get("requestBody").is_some();
        let uri = concrete(&path);
        let m = || Method::from_bytes(method.as_bytes()).unwrap();
        let with_body = |ct: &str, body: String| {
            api.request(m(), &uri)
                .header("content-type", ct)
                .body(Body::from(body))
                .unwrap()
        };

        // No token.
        let req = Request::builder().method(m()).uri(&uri).body(Body::empty());
        let a = api.send(req.unwrap()).await;
        if op["security"].as_array().is_some_and(|s| !s.is_empty()) {
            assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{method} {path}");
            assert_eq!(a.headers["www-authenticate"], "Bearer");
        } else {
            assert_eq!(a.status, StatusCode::OK, "{method} {path} is open");
        }
        assert_documented(&doc, &method, &path, "no token", &a);

        // As the server takes it: an empty object for a body, nothing else.
        let a = api.call(m(), &uri, takes_body.then(|| json!({}))).await;
        assert_documented(&doc, &method, &path, "plain", &a);

        // From another site.
        if method != "GET" {
            let req = api
                .request(m(), &uri)
                .header("origin", "https://elsewhere.example")
                .body(Body::empty())
                .unwrap();
            let a = api.send(req).await;
            assert_eq!(a.status, StatusCode::FORBIDDEN, "{method} {path}");
            assert_documented(&doc, &method, &path, "cross-site", &a);
        }

        // A path parameter that is not UTF-8; an unknown query parameter.
        if path.contains('{') {
            let bad = path
                .replace("{id}", "%FF")
                .replace("{topic}", "%FF")
                .replace("{key}", "%FF")
                .replace("{name}", "%FF");
            let a = api.call(m(), &bad, takes_body.then(|| json!({}))).await;
            assert_eq!(a.status, StatusCode::BAD_REQUEST, "{method} {bad}");
            assert_documented(&doc, &method, &path, "bad path", &a);
        }
        let has_query = op["parameters"]
            .as_array()
            .is_some_and(|ps| ps.iter().any(|p| p["in"] == "query"));
        if has_query {
            let a = api.call(m(), &format!("{uri}?zz=1"), None).await;
            a.assert_error(400, "bad_query");
            assert_documented(&doc, &method, &path, "unknown query", &a);
        }

        if takes_body {
            let a = api.send(with_body("text/plain", "{}".into())).await;
            a.assert_error(415, "unsupported_media_type");
            assert_documented(&doc, &method, &path, "text/plain", &a);
            let a = api.send(with_body("application/json", "{".into())).await;
            a.assert_error(400, "malformed_json");
            assert_documented(&doc, &method, &path, "malformed", &a);
            let a = api
                .send(with_body(
                    "application/json",
                    format!("\"{}\"", "x".repeat(300)),
                ))
                .await;
            a.assert_error(413, "payload_too_large");
            assert_documented(&doc, &method, &path, "too large", &a);
            let a = api.call(m(), &uri, Some(json!({"zz": 1}))).await;
            a.assert_error(422, "invalid");
            assert_documented(&doc, &method, &path, "unknown field", &a);
            let a = api.call(m(), &uri, Some(json!([1, 2]))).await;
            assert_documented(&doc, &method, &path, "an array", &a);
        }
    }
}

/// With Redis gone, every operation that reads it answers 503, documented; the others
/// answer as ever.
#[tokio::test]
async fn redis_unavailable_is_documented() {
    let mut api = Api::new().await;
    let doc = doc();
    api.world.redis.stop(false).unwrap();
    let body = |path: &str| -> Option<Value> {
        Some(match path {
            "/v1/jobs" => json!({"id": "j", "every": "1h", "handler": "log"}),
            "/v1/jobs/{id}" => json!({"every": "1h", "handler": "log"}),
            "/v1/tasks" => json!({"handler": "log"}),
            "/v1/tasks/batch" => json!({"tasks": [{"handler": "log"}]}),
            "/v1/topics/{topic}/tasks" => json!({"payload": 1}),
            "/v1/topics/{topic}/tasks/batch" => json!({"tasks": [{"payload": 1}]}),
            "/v1/topics/{topic}" => json!({"partitions": 2}),
            "/v1/topics/{topic}/finish" => {
                json!({"tasks": [{"id": "x", "token": "0123456789abcdef0123456789abcdef.probe-topic"}]})
            }
            "/v1/limits/{key}" => json!({"rate": 5}),
            "/v1/calendars/{name}" => json!({"dates": ["2026-12-25"]}),
            "/v1/jobs:pause" | "/v1/jobs:resume" => json!({"handler": "log"}),
            "/v1/jobs/{id}/backfill" => {
                json!({"from": "2020-01-01T00:00:00Z", "to": "2020-01-02T00:00:00Z"})
            }
            p if p.ends_with("/finish") || p.ends_with("/touch") => {
                json!({"token": "0123456789abcdef0123456789abcdef.probe-topic"})
            }
            _ => return None,
        })
    };
    // All at once: each waits for the connection to give up.
    let ops: Vec<(String, String)> = documented(&doc).into_iter().collect();
    let answers = futures::future::join_all(ops.iter().map(|(method, path)| {
        let m = Method::from_bytes(method.as_bytes()).unwrap();
        let takes = doc["paths"][path][method.to_lowercase()]
            .get("requestBody")
            .is_some();
        let uri = concrete(path);
        let api = &api;
        async move {
            api.call(m, &uri, if takes { body(path) } else { None })
                .await
        }
    }))
    .await;
    for ((method, path), a) in ops.into_iter().zip(answers) {
        assert_documented(&doc, &method, &path, "Redis stopped", &a);
        let reads_redis =
            !["/healthz", "/v1/openapi.json", "/metrics", "/readyz"].contains(&path.as_str());
        if reads_redis {
            a.assert_error(503, "unavailable");
        }
    }
}

/// Every write documents `redis_full` (507, Redis at its `maxmemory`) with its `Retry-After`,
/// and no read does (reads still work); every 401 documents its `WWW-Authenticate`.
#[test]
fn full_redis_and_auth_headers_are_documented() {
    let doc = doc();
    for (method, path) in documented(&doc) {
        let responses = &doc["paths"][&path][method.to_lowercase()]["responses"];
        let open = keyfire_server::api::OPEN_PATHS.contains(&path.as_str());
        let full = responses.get("507");
        assert_eq!(
            full.is_some(),
            method != "GET" && !open,
            "{method} {path}: 507"
        );
        if let Some(full) = full {
            assert_eq!(
                full["headers"]["Retry-After"]["schema"]["type"], "integer",
                "{method} {path}"
            );
            assert!(full["description"].as_str().unwrap().contains("redis_full"));
        }
        assert_eq!(
            responses.get("401").is_some(),
            !open,
            "{method} {path}: 401"
        );
        if let Some(unauthorized) = responses.get("401") {
            assert!(
                unauthorized["headers"]["WWW-Authenticate"].is_object(),
                "{method} {path}"
            );
        }
    }
}

/// With Redis at its `maxmemory` (every write refused), every operation answers as its
/// document says: writes 507 with `Retry-After` (or what they answer before writing), reads
/// as ever.
#[tokio::test]
async fn a_full_redis_is_documented() {
    let api = Api::new().await;
    let doc = doc();
    // Some state to act on, written while there is room.
    let a = api
        .put(
            "/v1/jobs/probe-id",
            json!({"every": "1h", "handler": "log"}),
        )
        .await;
    assert_eq!(a.status, StatusCode::CREATED, "{:#}", a.body);
    let a = api.put("/v1/limits/probe-key", json!({"rate": 5})).await;
    assert_eq!(a.status, StatusCode::OK, "{:#}", a.body);
    crate::full_redis::set_maxmemory(&api, 1).await;
    let body = |path: &str| -> Option<Value> {
        Some(match path {
            "/v1/jobs" => json!({"id": "another", "every": "1h", "handler": "log"}),
            "/v1/jobs/{id}" => json!({"every": "2h", "handler": "log"}),
            "/v1/tasks" => json!({"handler": "log"}),
            "/v1/tasks/batch" => json!({"tasks": [{"handler": "log"}]}),
            "/v1/topics/{topic}/tasks" => json!({"payload": 1}),
            "/v1/topics/{topic}/tasks/batch" => json!({"tasks": [{"payload": 1}]}),
            "/v1/limits/{key}" => json!({"rate": 6}),
            _ => return None,
        })
    };
    let mut full = 0;
    for (method, path) in documented(&doc) {
        let m = Method::from_bytes(method.as_bytes()).unwrap();
        let a = api.call(m, &concrete(&path), body(&path)).await;
        assert_documented(&doc, &method, &path, "Redis full", &a);
        if a.status == StatusCode::INSUFFICIENT_STORAGE {
            full += 1;
            a.assert_error(507, "redis_full");
            assert!(a.headers.contains_key("retry-after"), "{method} {path}");
        }
    }
    assert!(
        full >= 6,
        "the writes with a body were refused as full: {full}"
    );
}

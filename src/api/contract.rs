//! The last step of the OpenAPI document: what `utoipa`'s attributes cannot say, written in this
//! one place from the constants the validators themselves use, so the document and the server
//! cannot drift apart (tests/api/openapi.rs checks each rule against its validator on samples).
//!
//! `utoipa` takes only literals in `pattern`/`minimum`/`maximum`, and has no keyword for a rule
//! between fields, so this step, on the document as JSON:
//!
//! 1. lists on every operation the error answers its layers give (see [`error_responses`]):
//!    401 behind the token, 403 from the browser guard, 400/413/415/422 wherever a JSON body is
//!    read, 400 for path and query parameters, 500/503 wherever Redis is read, 507 on every
//!    write (Redis at its `maxmemory`); the bearer scheme once at the root, the open paths
//!    opting out;
//! 2. states each field's and parameter's rule (patterns, lengths, bounds, the policy names),
//!    and widens `u32` from `int32` (which stops at 2^31 - 1) to `int64` with its maximum;
//! 3. derives the job schemas from the library's `JobSpec`: `JobSpec` as `POST /v1/jobs`
//!    takes it (exactly one schedule, `tz` only with `cron`, no `dedup`), `JobSpecWithoutId`
//!    for `PUT /v1/jobs/{id}` (the path gives the id), `TaskSpec` for one-shot tasks and
//!    `StoredJobSpec` as a job answer shows it;
//! 4. gives every operation an example, so Schemathesis's example phase and a reader start from
//!    a request the server takes, and links from an answer to the requests that use its ids.

use serde_json::{Map, Value, json};

use super::auth::OPEN_PATHS;
use keyfire::job::{
    BACKOFFS, DURATION_PATTERN, ID_PATTERN, LIMIT_KEY_PATTERN, MAX_ATTEMPTS_LIMIT,
    MAX_DEDUP_KEY_LEN, MAX_ID_LEN, MAX_LIMIT_KEY_LEN, MISFIRE_POLICIES, OVERLAP_POLICIES,
    TRACEPARENT_PATTERN,
};
use keyfire::queue::{
    MAX_DELIVERIES_LIMIT, MAX_NEW_ID_LEN, MAX_POP, MAX_TASK_ID_LEN, MAX_TOPIC_LEN, NAME_PATTERN,
    TOKEN_PATTERN,
};

/// The methods an operation can be under.
const METHODS: [&str; 5] = ["get", "put", "post", "delete", "patch"];

/// A control character ([`char::is_control`]): what a dedup key may not hold.
const NO_CONTROL_PATTERN: &str = "^[^\\u0000-\\u001f\\u007f-\\u009f]+$";
/// No control character and no white space (Rust's `char::is_control` or
/// `char::is_whitespace`), exactly: a handler name.
const HANDLER_NAME_PATTERN: &str =
    "^[^\\u0000-\\u0020\\u007f-\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]+$";

/// Paths that read no Redis (so neither 500 nor 503 can come from them).
const NO_REDIS_PATHS: &[&str] = &["/healthz", "/v1/openapi.json", "/metrics"];

/// Finish the generated document (see the module's documentation).
pub(super) fn finish(doc: &utoipa::openapi::OpenApi) -> Value {
    let mut doc = serde_json::to_value(doc).expect("the OpenAPI document serializes");
    security_and_servers(&mut doc);
    job_schemas(&mut doc);
    field_rules(&mut doc);
    widen_u32(&mut doc);
    parameter_rules(&mut doc);
    error_responses(&mut doc);
    examples(&mut doc);
    links(&mut doc);
    doc
}

/// The bearer token is the rule, stated once at the root; the open paths opt out with an
/// empty requirement (`security: []`), which says "no token" where a missing one says
/// nothing. The server is the node that serves the document (`/`, relative to it).
fn security_and_servers(doc: &mut Value) {
    doc["security"] = json!([{"bearer": []}]);
    doc["servers"] = json!([{"url": "/", "description": "The node that serves this document"}]);
    for (path, _, op) in operations(doc) {
        if OPEN_PATHS.contains(&path.as_str()) {
            op["security"] = json!([]);
        }
    }
}

/// Each operation: `(path, method, operation)`.
fn operations(doc: &mut Value) -> impl Iterator<Item = (String, &'static str, &mut Value)> {
    doc["paths"]
        .as_object_mut()
        .expect("paths")
        .iter_mut()
        .flat_map(|(path, item)| {
            let path = path.clone();
            item.as_object_mut()
                .expect("a path item")
                .iter_mut()
                .filter_map(move |(m, op)| {
                    let method = METHODS.into_iter().find(|x| x == m)?;
                    Some((path.clone(), method, op))
                })
        })
}

fn schema<'a>(doc: &'a mut Value, name: &str) -> &'a mut Map<String, Value> {
    doc["components"]["schemas"][name]
        .as_object_mut()
        .unwrap_or_else(|| panic!("schema {name}"))
}

fn property<'a>(doc: &'a mut Value, name: &str, field: &str) -> &'a mut Map<String, Value> {
    schema(doc, name)["properties"][field]
        .as_object_mut()
        .unwrap_or_else(|| panic!("{name}.{field}"))
}

/// Merge `rule` into a schema object (its description and type stay).
fn apply(target: &mut Map<String, Value>, rule: Value) {
    for (k, v) in rule.as_object().expect("a rule is an object") {
        target.insert(k.clone(), v.clone());
    }
}

fn name_rule(pattern: &str, max: usize) -> Value {
    json!({"pattern": pattern, "minLength": 1, "maxLength": max})
}

fn duration_rule() -> Value {
    json!({"pattern": DURATION_PATTERN})
}

/// A W3C `traceparent`: its shape, and neither id all zeros (each a `not`, which a null value
/// passes: it is no string).
fn traceparent_rule() -> Value {
    json!({
        "pattern": TRACEPARENT_PATTERN,
        "allOf": [
            {"not": {"type": "string", "pattern": "^.{3}0{32}-"}},
            {"not": {"type": "string", "pattern": "^.{36}0{16}-"}},
        ],
    })
}

/// An enum of names; `null` too when the field is optional (serde reads null as absent).
fn names_rule(names: &[&str], nullable: bool) -> Value {
    let mut values: Vec<Value> = names.iter().map(|n| json!(n)).collect();
    if nullable {
        values.push(Value::Null);
    }
    json!({ "enum": values })
}

fn u32_from(min: u32, max: u32) -> Value {
    json!({"format": "int64", "minimum": min, "maximum": max})
}

/// The rules of the request fields, each from its validator's constants.
fn field_rules(doc: &mut Value) {
    // A bulk pause or resume takes exactly one selector (`keyfire::bulk::JobSelector::check`).
    let selection = schema(doc, "JobSelection");
    selection.insert("minProperties".into(), json!(1));
    selection.insert("maxProperties".into(), json!(1));
    apply(
        property(doc, "JobSelection", "id_prefix"),
        name_rule(ID_PATTERN, MAX_ID_LEN),
    );
    apply(
        property(doc, "JobSelection", "handler"),
        json!({"pattern": HANDLER_NAME_PATTERN, "minLength": 1, "maxLength": keyfire::bulk::MAX_HANDLER_LEN}),
    );
    let job_like = ["JobSpec", "JobSpecWithoutId", "TaskSpec", "StoredJobSpec"];
    for name in job_like {
        let props = schema(doc, name)["properties"].as_object().unwrap().clone();
        let has = |f: &str| props.contains_key(f);
        if has("id") && name != "TaskSpec" {
            apply(property(doc, name, "id"), name_rule(ID_PATTERN, MAX_ID_LEN));
        }
        apply(
            property(doc, name, "limit_key"),
            name_rule(LIMIT_KEY_PATTERN, MAX_LIMIT_KEY_LEN),
        );
        for f in ["every", "after", "misfire_tolerance", "timeout", "jitter"] {
            if has(f) {
                apply(property(doc, name, f), duration_rule());
            }
        }
        apply(
            property(doc, name, "misfire"),
            names_rule(MISFIRE_POLICIES, true),
        );
        apply(
            property(doc, name, "overlap"),
            names_rule(OVERLAP_POLICIES, true),
        );
        apply(property(doc, name, "catch_up_limit"), u32_from(1, u32::MAX));
        if has("max_runs") {
            apply(property(doc, name, "max_runs"), json!({"minimum": 1}));
        }
        apply(
            property(doc, name, "pause_after_failures"),
            u32_from(1, u32::MAX),
        );
        apply(property(doc, name, "handler"), json!({"minLength": 1}));
        apply(property(doc, name, "traceparent"), traceparent_rule());
    }
    apply(
        property(doc, "TaskSpec", "after_task"),
        name_rule(ID_PATTERN, MAX_ID_LEN),
    );
    // A task's id may be left out, null or empty: keyfire picks a UUID then.
    apply(
        property(doc, "TaskSpec", "id"),
        json!({"pattern": "^([A-Za-z0-9][A-Za-z0-9_.-]*)?$", "maxLength": MAX_ID_LEN}),
    );

    let retry = "RetrySpec";
    apply(
        property(doc, retry, "max_attempts"),
        u32_from(1, MAX_ATTEMPTS_LIMIT),
    );
    apply(property(doc, retry, "backoff"), names_rule(BACKOFFS, true));
    for f in ["interval", "max_interval"] {
        apply(property(doc, retry, f), duration_rule());
    }

    apply(
        property(doc, "DedupSpec", "key"),
        json!({"pattern": NO_CONTROL_PATTERN, "minLength": 1, "maxLength": MAX_DEDUP_KEY_LEN}),
    );
    apply(
        property(doc, "DedupSpec", "window"),
        json!({"type": "string", "pattern": DURATION_PATTERN}),
    );
    apply(
        property(doc, "DedupSpec", "on_duplicate"),
        names_rule(keyfire::job::ON_DUPLICATE_MODES, true),
    );
    // A window always, and a key or `content: true`, not both (as `allOf`/`anyOf`/`not` with
    // `enum`, the forms the Python generator reads; it fails on `const` in a `oneOf`).
    let content_true =
        json!({"required": ["content"], "properties": {"content": {"enum": [true]}}});
    let dedup = schema(doc, "DedupSpec");
    dedup.insert("required".into(), json!(["window"]));
    dedup.insert(
        "allOf".into(),
        json!([
            {"anyOf": [non_null("key", "string"), content_true]},
            {"not": {
                "required": ["key", "content"],
                "properties": {"key": {"type": "string"}, "content": {"enum": [true]}},
            }},
        ]),
    );

    // `PUT /v1/limits/{key}` is the only route that takes a limit, and its path gives the key
    // (a body key equal to the path's is let through).
    let limit = schema(doc, "LimitSpec");
    limit["properties"].as_object_mut().unwrap().remove("key");
    for f in ["rate", "burst", "in_flight"] {
        apply(property(doc, "LimitSpec", f), u32_from(1, u32::MAX));
    }
    // At least one bound; a burst only over a rate (that it is at most the rate, the schema
    // cannot say).
    schema(doc, "LimitSpec").insert(
        "allOf".into(),
        json!([
            {"anyOf": [non_null("rate", "integer"), non_null("in_flight", "integer")]},
            {"anyOf": [{"properties": {"burst": {"type": "null"}}}, non_null("rate", "integer")]},
        ]),
    );

    apply(
        property(doc, "AddTask", "id"),
        name_rule(NAME_PATTERN, MAX_NEW_ID_LEN),
    );
    for f in ["delay", "ttr"] {
        apply(property(doc, "AddTask", f), duration_rule());
    }
    apply(
        property(doc, "AddTask", "max_deliveries"),
        u32_from(1, MAX_DELIVERIES_LIMIT),
    );
    let levels = u32_from(0, u32::from(keyfire::queue::MAX_PRIORITY));
    for name in ["AddTask", "ReservedView", "TaskView"] {
        apply(property(doc, name, "priority"), levels.clone());
    }
    schema(doc, "AddTask").insert("not".into(), both_given("delay", "at"));

    let token = name_rule(TOKEN_PATTERN, 33 + MAX_TOPIC_LEN);
    for name in ["FinishBody", "TouchBody", "FinishItem"] {
        apply(property(doc, name, "token"), token.clone());
    }
    apply(property(doc, "TouchBody", "ttr"), duration_rule());
    apply(
        property(doc, "FinishItem", "id"),
        name_rule(NAME_PATTERN, MAX_TASK_ID_LEN),
    );
    apply(
        property(doc, "FinishMany", "tasks"),
        json!({"minItems": 1, "maxItems": MAX_POP}),
    );
    apply(
        property(doc, "TaskBatch", "tasks"),
        json!({"maxItems": super::tasks::MAX_BATCH}),
    );
    apply(
        property(doc, "TopicBatch", "tasks"),
        json!({"minItems": 1, "maxItems": keyfire::client::MAX_BATCH_TASKS}),
    );
}

/// `field` is given and not null.
fn non_null(field: &str, kind: &str) -> Value {
    json!({"required": [field], "properties": {field: {"type": kind}}})
}

/// Both `a` and `b` given, neither null: what a `not` refuses.
fn both_given(a: &str, b: &str) -> Value {
    json!({"required": [a, b], "properties": {a: {"not": {"type": "null"}}, b: {"not": {"type": "null"}}}})
}

/// `u32` is `int32` with `minimum: 0` to `utoipa`, but `int32` ends at 2^31 - 1 and the server
/// takes (and shows) up to 2^32 - 1: `int64` with that maximum says it.
fn widen_u32(doc: &mut Value) {
    fn walk(v: &mut Value) {
        match v {
            Value::Object(m) => {
                if m.get("format") == Some(&json!("int32")) && m.get("minimum") == Some(&json!(0)) {
                    m.insert("format".into(), json!("int64"));
                    m.insert("maximum".into(), json!(u32::MAX));
                }
                m.values_mut().for_each(walk);
            }
            Value::Array(a) => a.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(doc);
}

/// The rules of path, query and header parameters.
fn parameter_rules(doc: &mut Value) {
    for (path, _, op) in operations(doc) {
        let Some(params) = op.get_mut("parameters").and_then(Value::as_array_mut) else {
            continue;
        };
        for p in params {
            let name = p["name"].as_str().unwrap_or_default().to_string();
            let rule = match (p["in"].as_str().unwrap_or_default(), name.as_str()) {
                // A one-shot task's cancel takes a job id (the task is a job).
                ("path", "id")
                    if path.starts_with("/v1/jobs/") || path == "/v1/tasks/{id}/cancel" =>
                {
                    name_rule(ID_PATTERN, MAX_ID_LEN)
                }
                ("path", "id") => name_rule(NAME_PATTERN, MAX_TASK_ID_LEN),
                ("path", "topic") => name_rule(NAME_PATTERN, MAX_TOPIC_LEN),
                ("path", "key") => name_rule(LIMIT_KEY_PATTERN, MAX_LIMIT_KEY_LEN),
                ("query", "limit") => json!({"minimum": 1, "maximum": super::jobs::MAX_PAGE}),
                ("query", "max") => json!({"type": "integer", "minimum": 1, "maximum": MAX_POP}),
                ("query", "wait") => duration_rule(),
                ("query", "ids") => json!({"pattern": super::topic_dead::IDS_PATTERN}),
                ("query", "status") => names_rule(super::jobs::JOB_STATUSES, false),
                ("header", "If-Match") => {
                    json!({"type": "string", "pattern": super::jobs::IF_MATCH_PATTERN})
                }
                _ => continue,
            };
            let schema = p["schema"].as_object_mut().expect("a parameter schema");
            apply(schema, rule);
            if schema.get("format") == Some(&json!("int32")) {
                schema.insert("format".into(), json!("int64"));
            }
        }
    }
}

/// What each layer of the router answers, listed on every operation it wraps:
///
/// - the browser guard (`guard`): 403 on every route but the open ones;
/// - the token (`auth`): 401 on every route that declares the bearer scheme;
/// - the path check (`guard::utf8_path`): 400 on routes with path parameters;
/// - the query extractor (`ApiQuery`): 400 on routes with query parameters (unknown, repeated
///   or malformed ones);
/// - the body extractors (`ApiJson`, `RawJson`): 415, 413, 400 and 422 on routes with a body;
/// - the store: 500 (corrupt data, logged) and 503 (Redis unreachable) wherever Redis is read,
///   and 507 with `Retry-After` on every write (Redis at its `maxmemory` refuses writes).
///
/// An answer an operation's attributes list already keeps its own description first.
fn error_responses(doc: &mut Value) {
    for (path, method, op) in operations(doc) {
        let open = OPEN_PATHS.contains(&path.as_str());
        let secured = op["security"].as_array().is_some_and(|s| !s.is_empty());
        let body = op.get("requestBody").is_some();
        let params = op["parameters"].as_array().cloned().unwrap_or_default();
        let param_in = |loc: &str| params.iter().any(|p| p["in"] == loc);
        if !open {
            add_error(
                op,
                403,
                "A browser sent it from another site (`Origin`, `Sec-Fetch-Site`), or a node \
                 without `api.token` was called by a host name other than an address or \
                 `localhost` (`forbidden`)",
            );
        }
        if secured {
            add_error(op, 401, "Missing or wrong bearer token (`unauthorized`)");
            add_header(
                op,
                401,
                "WWW-Authenticate",
                "`Bearer`",
                json!({"type": "string"}),
            );
        }
        if param_in("path") {
            add_error(
                op,
                400,
                "A path parameter is not UTF-8 once percent-decoded (`bad_path`)",
            );
        }
        if param_in("query") {
            add_error(
                op,
                400,
                "A query parameter is unknown, repeated or out of its range (`bad_query`)",
            );
        }
        if body {
            add_error(op, 400, "The body is not JSON (`malformed_json`)");
            add_error(
                op,
                413,
                "The body is larger than `api.max_body_bytes` (`payload_too_large`)",
            );
            add_error(
                op,
                415,
                "The body is not sent as `application/json` (`unsupported_media_type`)",
            );
            add_error(
                op,
                422,
                "The body does not fit the schema, or a field breaks a rule the schema cannot \
                 state; `field` names it (`invalid`)",
            );
        }
        if !NO_REDIS_PATHS.contains(&path.as_str()) && !open {
            add_error(op, 500, "Internal error, logged by the node (`internal`)");
            add_error(op, 503, "Redis is unavailable; try again (`unavailable`)");
        }
        // Every route but a read writes to Redis, which refuses writes at its `maxmemory`.
        if method != "get" && !open {
            add_error(
                op,
                507,
                "Redis reached its `maxmemory` and refuses writes; nothing was written. Reads \
                 still work; retry once memory is freed (`redis_full`)",
            );
            add_header(
                op,
                507,
                "Retry-After",
                "Seconds to wait before retrying",
                json!({"type": "integer", "minimum": 0}),
            );
        }
        // Sorted by status, as a reader looks for them.
        if let Some(responses) = op["responses"].as_object_mut() {
            let mut sorted: Vec<(String, Value)> = std::mem::take(responses).into_iter().collect();
            sorted.sort_by(|a, b| a.0.cmp(&b.0));
            responses.extend(sorted);
        }
    }
}

/// Document a header an answer carries.
fn add_header(op: &mut Value, status: u16, name: &str, description: &str, schema: Value) {
    op["responses"][status.to_string()]["headers"][name] =
        json!({"description": description, "required": true, "schema": schema});
}

/// Add `why` to the error answer `status` of `op` (created with the error body if absent).
fn add_error(op: &mut Value, status: u16, why: &str) {
    let responses = op["responses"].as_object_mut().expect("responses");
    let entry = responses.entry(status.to_string()).or_insert_with(|| {
        json!({
            "description": "",
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
        })
    });
    let text = entry["description"].as_str().unwrap_or_default();
    if text.contains(why) {
        return;
    }
    let joined = if text.is_empty() {
        why.to_string()
    } else {
        format!("{}. {why}", text.trim_end_matches('.'))
    };
    entry["description"] = json!(joined);
}

/// The schedule kinds of a job: exactly one given (not null), `tz` only with `cron`, and
/// `jitter` only with `cron` or `every`.
fn one_schedule(kinds: &[&str]) -> Value {
    let branches: Vec<Value> = kinds
        .iter()
        .map(|k| {
            let mut props = Map::new();
            for other in kinds {
                let t = if other == k {
                    json!({"type": "string"})
                } else {
                    json!({"type": "null"})
                };
                props.insert(other.to_string(), t);
            }
            if *k != "cron" {
                props.insert("tz".into(), json!({"type": "null"}));
            }
            if *k == "at" || *k == "after" {
                props.insert("jitter".into(), json!({"type": "null"}));
                props.insert(
                    "exclude".into(),
                    json!({"type": "array", "items": {"type": "string"}, "maxItems": 0}),
                );
            }
            json!({"required": [k], "properties": props})
        })
        .collect();
    json!(branches)
}

/// Derive the job schemas from the library's `JobSpec` (which has every field).
fn job_schemas(doc: &mut Value) {
    let full = Value::Object(schema(doc, "JobSpec").clone());
    let without = |fields: &[&str]| {
        let mut s = full.clone();
        let props = s["properties"].as_object_mut().unwrap();
        for f in fields {
            props.remove(*f);
        }
        if let Some(req) = s["required"].as_array_mut() {
            req.retain(|r| !fields.iter().any(|f| r == f));
        }
        s
    };

    // What the job routes take: every field but `dedup` (an enqueue's, refused there).
    let mut job = without(&["dedup", "after_task", "batch"]);
    job["oneOf"] = one_schedule(&["cron", "every", "at", "after"]);
    job["description"] = json!(
        "A job as a client declares it. Exactly one of `cron`, `every`, `at` and `after` \
         gives the schedule (the others absent or null), `tz` goes only with `cron`, and \
         `jitter` only with `cron` or `every` (less than `every`). \
         `after` is resolved to `at` by Redis's clock on each write. `dedup` is for \
         enqueued tasks (`POST /v1/tasks`) and refused here, except a deduplicated task's own \
         declaration written back unchanged."
    );
    let mut by_path = without(&["dedup", "id", "after_task", "batch"]);
    by_path["oneOf"] = job["oneOf"].clone();
    by_path["description"] = json!(
        "A job spec without its id: `PUT /v1/jobs/{id}` takes the id from its path (an `id` \
         in the body equal to the path's is let through; another is refused with 422)."
    );

    // A one-shot task: no recurring schedule, at most one of `at` and `after` (neither: now),
    // and no id needed.
    let mut task = without(&[
        "cron", "every", "tz", "max_runs", "jitter", "exclude", "batch",
    ]);
    task["required"] = json!(["handler"]);
    // Not both `at` and `after`, nor `at` and `after_task`, nor `dedup` and `after_task`; no
    // id (but an empty one) beside a `dedup`.
    task["allOf"] = json!([
        {"not": both_given("at", "after")},
        {"not": both_given("at", "after_task")},
        {"not": both_given("dedup", "after_task")},
        {"not": {
            "required": ["id", "dedup"],
            "properties": {"id": {"type": "string", "minLength": 1}, "dedup": {"type": "object"}},
        }},
    ]);
    task["description"] = json!(
        "A one-shot task: a job run once, at `at`, `after` a delay, or at once when neither \
         is given. Without an `id` (or with an empty or null one) keyfire picks a UUID; \
         leave it out with `dedup`."
    );

    // As a job answer shows a spec: `after` is stored as `at`; `dedup` kept; `params` as
    // stored (jobs written by earlier versions may hold any JSON value there).
    let mut stored = without(&["after"]);
    stored["oneOf"] = one_schedule(&["cron", "every", "at"]);
    stored["properties"]["params"] = json!({
        "description": "The handler's params as stored; the `http` handler's signing \
                        secrets are shown as their fingerprints."
    });
    stored["description"] = json!(
        "A job's spec as stored and shown: `after` resolved to `at`, signing secrets redacted."
    );

    let schemas = doc["components"]["schemas"].as_object_mut().unwrap();
    schemas.insert("JobSpec".into(), job);
    schemas.insert("JobSpecWithoutId".into(), by_path);
    schemas.insert("TaskSpec".into(), task);
    schemas.insert("StoredJobSpec".into(), stored);
}

/// OpenAPI links: which answer's values the next request takes (a created job's id, a popped
/// task's id and reservation token), so clients and the stateful phase of the contract tests
/// follow a resource through its life.
fn links(doc: &mut Value) {
    let job_id = json!({"id": "$response.body#/id"});
    let job_ops = [
        "get_job",
        "delete_job",
        "pause_job",
        "resume_job",
        "trigger_job",
        "cancel_job",
        "job_runs",
        "list_dead",
    ];
    let job_links: Map<String, Value> = job_ops
        .iter()
        .map(|op| {
            (
                op.to_string(),
                json!({"operationId": op, "parameters": job_id.clone()}),
            )
        })
        .collect();
    let task = json!({"topic": "$response.body#/topic", "id": "$response.body#/id"});
    let added: Map<String, Value> = ["get_topic_task", "delete_topic_task"]
        .iter()
        .map(|op| {
            (
                op.to_string(),
                json!({"operationId": op, "parameters": task.clone()}),
            )
        })
        .collect();
    // Only the one-task answer of a pop (without `max`) has these at its root.
    let mut popped = added.clone();
    for op in ["finish_topic_task", "touch_topic_task"] {
        popped.insert(
            op.into(),
            json!({
                "operationId": op,
                "parameters": task.clone(),
                "requestBody": {"token": "$response.body#/token"},
            }),
        );
    }
    let key = json!({"key": "$request.path.key"});
    let limit_links: Map<String, Value> = ["get_limit", "delete_limit"]
        .iter()
        .map(|op| {
            (
                op.to_string(),
                json!({"operationId": op, "parameters": key.clone()}),
            )
        })
        .collect();
    // An enqueued one-shot task is cancelled by its id (it is a job).
    let mut task_links = Map::new();
    task_links.insert(
        "cancel_task".into(),
        json!({"operationId": "cancel_task", "parameters": job_id.clone()}),
    );
    for (path, method, status, set) in [
        ("/v1/tasks", "post", "200", &task_links),
        ("/v1/tasks", "post", "201", &task_links),
        ("/v1/jobs", "post", "200", &job_links),
        ("/v1/jobs", "post", "201", &job_links),
        ("/v1/jobs/{id}", "put", "200", &job_links),
        ("/v1/jobs/{id}", "put", "201", &job_links),
        ("/v1/topics/{topic}/tasks", "post", "201", &added),
        ("/v1/topics/{topic}/pop", "post", "200", &popped),
        ("/v1/limits/{key}", "put", "200", &limit_links),
    ] {
        doc["paths"][path][method]["responses"][status]["links"] = Value::Object(set.clone());
    }
}

/// An example request on every operation that takes input, valid for a node running the
/// built-in handlers, so the examples phase starts from requests the server takes.
fn examples(doc: &mut Value) {
    let body = |path: &str, method: &str| -> Option<Value> {
        Some(match (method, path) {
            ("post", "/v1/jobs") => json!({
                "id": "nightly-report", "cron": "0 9 * * MON-FRI", "tz": "Europe/Berlin",
                "handler": "log", "params": {"report": "sales"}
            }),
            ("put", "/v1/jobs/{id}") => json!({
                "every": "30m", "handler": "log", "retry": {"max_attempts": 5, "backoff": "fixed", "interval": "10s"}
            }),
            ("post", "/v1/tasks") => json!({
                "after": "10m", "handler": "log", "params": {"order": 1234},
                "dedup": {"key": "order-1234:receipt", "window": "1h"}
            }),
            ("post", "/v1/tasks/batch") => json!({
                "tasks": [{"handler": "log"}, {"id": "invoice-7", "after": "1h", "handler": "noop"}]
            }),
            ("post", "/v1/topics/{topic}/tasks") => json!({
                "payload": {"to": "ana@example.com"}, "delay": "30s", "ttr": "1m", "max_deliveries": 3
            }),
            ("post", "/v1/topics/{topic}/tasks/batch") => json!({
                "tasks": [{"payload": {"image": 1}}, {"payload": {"image": 2}, "ttr": "2m"}],
                "on_complete": {"url": "http://127.0.0.1:9/hooks/thumbs-done"}
            }),
            ("post", "/v1/topics/{topic}/finish") => json!({
                "tasks": [{"id": "welcome-1", "token": "0123456789abcdef0123456789abcdef.emails"}]
            }),
            ("post", "/v1/tasks/{id}/finish")
            | ("post", "/v1/topics/{topic}/tasks/{id}/finish") => {
                json!({"token": "0123456789abcdef0123456789abcdef.emails"})
            }
            ("post", "/v1/tasks/{id}/touch") | ("post", "/v1/topics/{topic}/tasks/{id}/touch") => {
                json!({"token": "0123456789abcdef0123456789abcdef.emails", "ttr": "2m"})
            }
            ("put", "/v1/limits/{key}") => json!({"rate": 100, "burst": 10, "in_flight": 20}),
            ("put", "/v1/topics/{topic}") => json!({"partitions": 3}),
            _ => return None,
        })
    };
    for (path, method, op) in operations(doc) {
        if let Some(example) = body(&path, method) {
            op["requestBody"]["content"]["application/json"]["example"] = example;
        }
        let Some(params) = op.get_mut("parameters").and_then(Value::as_array_mut) else {
            continue;
        };
        for p in params {
            let example = match (p["in"].as_str(), p["name"].as_str()) {
                (Some("path"), Some("id")) if path.starts_with("/v1/jobs/") => {
                    json!("nightly-report")
                }
                (Some("path"), Some("id")) => json!("welcome-1"),
                (Some("path"), Some("topic")) => json!("emails"),
                (Some("path"), Some("key")) => json!("host:api.example.com"),
                (Some("query"), Some("limit")) => json!(50),
                (Some("query"), Some("max")) => json!(10),
                (Some("query"), Some("wait")) => json!("0s"),
                (Some("query"), Some("status")) => json!("active"),
                (Some("header"), Some("If-Match")) => json!("\"3\""),
                _ => continue,
            };
            p["example"] = example;
        }
    }
}

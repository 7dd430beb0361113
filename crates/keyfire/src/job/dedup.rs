//! Deduplication on enqueue: a task names a dedup key (given, or derived from its content) and
//! a window; enqueueing a task whose key was enqueued within the window gives back the task
//! that was created then instead of a new one.
//!
//! The decision is made in Redis, in the script that creates the task (a key with the window
//! as its TTL that names the task), so it holds across nodes and under concurrency. This module
//! only checks the declaration and computes the key's name.
//!
//! **Debounce.** `on_duplicate` says what a duplicate does to the pending task its key names:
//! `keep` (the default) leaves it as it is; `replace` gives it the duplicate's params (a topic
//! task: its payload, priority, ttr and deliveries); `extend` moves its due instant to the
//! duplicate's (now plus its delay), never earlier; `replace_extend` does both. These act only
//! while that task is pending (a one-shot task not yet claimed; a topic task delayed or
//! ready), and renew the key's window from the duplicate; once it was claimed or popped, a
//! duplicate creates a new task, which the key names from then on. One script checks that the
//! key still names the task and that it is pending, and changes it.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::validation::{ValidationError, duration_ms};

/// Longest dedup window: a day.
pub const MAX_DEDUP_WINDOW_MS: i64 = 24 * 3_600_000;

/// Longest dedup key, in characters (as JSON Schema's `maxLength` counts them: the OpenAPI
/// document states it).
pub const MAX_DEDUP_KEY_LEN: usize = 256;

/// How a task is deduplicated: give `key`, or `content: true` to derive the key from the
/// task's handler and params; and a `window`.
///
/// Enqueueing a task whose key was enqueued within the window (counted from the first
/// enqueue; duplicates do not extend it) returns the task created then, flagged as a
/// duplicate, and creates nothing. After the window a new task is created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct DedupSpec {
    /// The dedup key chosen by the caller (1 to 256 characters, no control characters), such as
    /// `order-1234:receipt`. One namespace per keyfire prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(example = "order-1234:receipt"))]
    pub key: Option<String>,
    /// Derive the key from the task's content instead: a SHA-256 of its handler and params
    /// (JSON with sorted object keys). Its instant is not part of it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub content: bool,
    /// How long the key holds after the first enqueue: more than zero, at most `24h`. A
    /// duplicate that replaces or extends the task renews it (from the duplicate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(example = "10m"))]
    pub window: Option<String>,
    /// What a duplicate does to the pending task the key names: `keep` (default: nothing),
    /// `replace` (the task takes the duplicate's params or payload), `extend` (its due instant
    /// moves to the duplicate's, never earlier) or `replace_extend` (both). Once that task was
    /// claimed (popped), a duplicate under `replace`/`extend` creates a new task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(example = "extend"))]
    pub on_duplicate: Option<String>,
}

/// The names [`DedupSpec::on_duplicate`] takes (the REST API's OpenAPI document states them).
pub const ON_DUPLICATE_MODES: &[&str] = &["keep", "replace", "extend", "replace_extend"];

/// What a duplicate does to the pending task its dedup key names (see [`DedupSpec`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum OnDuplicate {
    /// Nothing: the task is left as it is (and returned).
    #[default]
    Keep,
    /// The task takes the duplicate's params (a topic task: payload, priority, ttr, deliveries).
    Replace,
    /// The task's due instant moves to the duplicate's, never earlier.
    Extend,
    /// Both.
    ReplaceExtend,
}

impl OnDuplicate {
    /// Its name, as [`DedupSpec::on_duplicate`] takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Keep => "keep",
            Self::Replace => "replace",
            Self::Extend => "extend",
            Self::ReplaceExtend => "replace_extend",
        }
    }

    /// Parse a name, naming `dedup.on_duplicate` when it is none of them.
    pub fn parse(s: &str) -> Result<Self, ValidationError> {
        Ok(match s {
            "keep" => Self::Keep,
            "replace" => Self::Replace,
            "extend" => Self::Extend,
            "replace_extend" => Self::ReplaceExtend,
            other => {
                return Err(ValidationError::new(
                    "dedup.on_duplicate",
                    format!(
                        "must be keep, replace, extend or replace_extend, not '{}'",
                        other.escape_debug()
                    ),
                ));
            }
        })
    }

    /// Whether a duplicate gives the task its params.
    pub fn replaces(self) -> bool {
        matches!(self, Self::Replace | Self::ReplaceExtend)
    }

    /// Whether a duplicate moves the task's due instant.
    pub fn extends(self) -> bool {
        matches!(self, Self::Extend | Self::ReplaceExtend)
    }
}

/// What a duplicate did to the task its dedup key names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Deduplicated {
    /// Nothing: the task is as it was.
    Kept,
    /// The task took the duplicate's params.
    Replaced,
    /// The task's due instant moved later.
    Extended,
    /// Both.
    ReplacedExtended,
}

impl Deduplicated {
    /// What `replaced` and `extended` say together.
    pub fn of(replaced: bool, extended: bool) -> Self {
        match (replaced, extended) {
            (false, false) => Self::Kept,
            (true, false) => Self::Replaced,
            (false, true) => Self::Extended,
            (true, true) => Self::ReplacedExtended,
        }
    }

    /// Its name in answers: `kept`, `replaced`, `extended`, `replaced_extended`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Kept => "kept",
            Self::Replaced => "replaced",
            Self::Extended => "extended",
            Self::ReplacedExtended => "replaced_extended",
        }
    }
}

impl DedupSpec {
    /// Dedup by a key the caller chooses.
    pub fn key(key: impl Into<String>, window: impl Into<String>) -> Self {
        Self {
            key: Some(key.into()),
            content: false,
            window: Some(window.into()),
            on_duplicate: None,
        }
    }

    /// Dedup by content (handler and params).
    pub fn content(window: impl Into<String>) -> Self {
        Self {
            key: None,
            content: true,
            window: Some(window.into()),
            on_duplicate: None,
        }
    }

    /// What a duplicate does to the pending task (see [`OnDuplicate`]).
    pub fn on_duplicate(&self) -> Result<OnDuplicate, ValidationError> {
        self.on_duplicate
            .as_deref()
            .map_or(Ok(OnDuplicate::Keep), OnDuplicate::parse)
    }

    /// Set what a duplicate does.
    pub fn with_on_duplicate(mut self, on: OnDuplicate) -> Self {
        self.on_duplicate = Some(on.as_str().to_string());
        self
    }

    /// Check the declaration and resolve it for a task run by `handler` with `params`.
    /// Errors name `dedup`, `dedup.key`, `dedup.content` or `dedup.window`.
    pub fn resolve(&self, handler: &str, params: &Value) -> Result<Dedup, ValidationError> {
        let name = match (&self.key, self.content) {
            (Some(_), true) => {
                return Err(ValidationError::new(
                    "dedup.content",
                    "give either `key` or `content: true`, not both",
                ));
            }
            (None, false) => {
                return Err(ValidationError::new(
                    "dedup",
                    "give a `key`, or `content: true` to derive it from the handler and params",
                ));
            }
            (Some(key), false) => {
                if key.is_empty() {
                    return Err(ValidationError::new("dedup.key", "must not be empty"));
                }
                let chars = key.chars().count();
                if chars > MAX_DEDUP_KEY_LEN {
                    return Err(ValidationError::new(
                        "dedup.key",
                        format!("must be at most {MAX_DEDUP_KEY_LEN} characters, got {chars}"),
                    ));
                }
                if key.chars().any(char::is_control) {
                    return Err(ValidationError::new(
                        "dedup.key",
                        "must not hold control characters",
                    ));
                }
                format!("k:{key}")
            }
            (None, true) => format!("c:{}", content_hash(handler, params)),
        };
        let Some(window) = &self.window else {
            return Err(ValidationError::new(
                "dedup.window",
                "is required, such as `10m` (at most 24h)",
            ));
        };
        let window_ms = duration_ms("dedup.window", window)?;
        if window_ms <= 0 {
            return Err(ValidationError::new(
                "dedup.window",
                "must be greater than zero",
            ));
        }
        if window_ms > MAX_DEDUP_WINDOW_MS {
            return Err(ValidationError::new(
                "dedup.window",
                format!("must be at most 24h, got '{window}'"),
            ));
        }
        self.on_duplicate()?;
        Ok(Dedup { name, window_ms })
    }
}

/// A checked dedup declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dedup {
    /// The key's name in keyfire's namespace: `k:<key>` for a given key, `c:<sha-256 hex>`
    /// for one derived from the content. It decides the shard the task lives on.
    pub name: String,
    /// The window in ms.
    pub window_ms: i64,
}

/// SHA-256 (hex) of the handler and its params as canonical JSON (object keys sorted at every
/// level), so the same content gives the same key whatever order its fields came in.
fn content_hash(handler: &str, params: &Value) -> String {
    let mut text = String::new();
    canonical(
        &serde_json::json!({"handler": handler, "params": params}),
        &mut text,
    );
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical(v, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn field(d: DedupSpec) -> String {
        d.resolve("log", &Value::Null).unwrap_err().field
    }

    #[test]
    fn bad_declarations_name_their_field() {
        assert_eq!(field(DedupSpec::key("k", "0s")), "dedup.window");
        assert_eq!(field(DedupSpec::key("k", "0ms")), "dedup.window");
        assert_eq!(field(DedupSpec::key("k", "24h 1ms")), "dedup.window");
        assert_eq!(field(DedupSpec::key("k", "soon")), "dedup.window");
        assert_eq!(field(DedupSpec::key("", "1m")), "dedup.key");
        assert_eq!(field(DedupSpec::key("x".repeat(257), "1m")), "dedup.key");
        assert_eq!(field(DedupSpec::key("a\nb", "1m")), "dedup.key");
        let mut no_window = DedupSpec::key("k", "1m");
        no_window.window = None;
        assert_eq!(field(no_window), "dedup.window");
        let mut both = DedupSpec::key("k", "1m");
        both.content = true;
        assert_eq!(field(both), "dedup.content");
        let mut neither = DedupSpec::content("1m");
        neither.content = false;
        assert_eq!(field(neither), "dedup");
        let mut bad = DedupSpec::key("k", "1m");
        bad.on_duplicate = Some("merge".into());
        assert_eq!(field(bad), "dedup.on_duplicate");
        for on in ["keep", "replace", "extend", "replace_extend"] {
            let d = DedupSpec::key("k", "1m").with_on_duplicate(OnDuplicate::parse(on).unwrap());
            assert_eq!(d.on_duplicate.as_deref(), Some(on));
            assert!(d.resolve("log", &Value::Null).is_ok());
        }
        assert!(
            DedupSpec::key("x".repeat(256), "24h")
                .resolve("log", &Value::Null)
                .is_ok()
        );
    }

    #[test]
    fn content_keys_tell_contents_apart_whatever_the_field_order() {
        let d = DedupSpec::content("1m");
        let a = d.resolve(
            "http",
            &json!({"url": "u", "body": {"x": 1, "y": [1, {"b": 2, "a": 1}]}}),
        );
        let b = d.resolve(
            "http",
            &json!({"body": {"y": [1, {"a": 1, "b": 2}], "x": 1}, "url": "u"}),
        );
        assert_eq!(a.clone().unwrap(), b.unwrap());
        let other = d
            .resolve("http", &json!({"url": "u", "body": {"x": 2}}))
            .unwrap();
        assert_ne!(a.clone().unwrap().name, other.name);
        let handler = d.resolve(
            "log",
            &json!({"url": "u", "body": {"x": 1, "y": [1, {"b": 2, "a": 1}]}}),
        );
        assert_ne!(a.unwrap().name, handler.unwrap().name);
        let key = DedupSpec::key("order-1", "10m")
            .resolve("log", &Value::Null)
            .unwrap();
        assert_eq!(
            key,
            Dedup {
                name: "k:order-1".into(),
                window_ms: 600_000
            }
        );
    }
}

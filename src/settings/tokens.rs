//! `[[api.tokens]]`: named bearer tokens, each allowed some scopes of the API (see
//! docs/security.md). `api.token`, the one unnamed token, stays and is allowed everything.
//!
//! The scopes, and what each one implies:
//!
//! - `read`: every `GET` (jobs, runs, dead letters, tasks, topics, limits, nodes, the
//!   overview, `/metrics`): what the dashboard shows.
//! - `consume`: pop, finish and touch tasks on the token's `topics` (every topic when it names
//!   none). Nothing else, not even reads: a worker needs no more.
//! - `write`: create, change, delete, pause, resume, trigger and replay jobs; add and delete
//!   tasks. Implies `read`, and `consume` on every topic (a token that may delete any task
//!   may as well finish it).
//! - `admin`: everything, including the cluster's configuration (flow limits, topics'
//!   settings), which no other scope changes. Implies the other three.

use std::collections::HashMap;

use keyfire::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// One scope a token may be allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// Every `GET`.
    Read,
    /// Pop, finish and touch tasks, on the token's topics.
    Consume,
    /// Jobs and tasks: create, change, delete, pause, resume, trigger, replay.
    Write,
    /// Everything, the cluster's configuration included.
    Admin,
}

impl Scope {
    /// Every scope, in the order the docs list them.
    pub const ALL: [Scope; 4] = [Scope::Read, Scope::Consume, Scope::Write, Scope::Admin];

    /// The scope's name in the settings and the OpenAPI document.
    pub fn name(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Consume => "consume",
            Scope::Write => "write",
            Scope::Admin => "admin",
        }
    }

    /// The scope named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The scopes this one gives too (itself included): `admin` gives all, `write` gives
    /// `read` and `consume`.
    pub fn implies(self, other: Scope) -> bool {
        match self {
            Scope::Admin => true,
            Scope::Write => matches!(other, Scope::Write | Scope::Read | Scope::Consume),
            s => s == other,
        }
    }
}

/// One named token (`[[api.tokens]]`).
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiToken {
    /// Who holds it; shown in `403` answers and logs (the secret never is).
    pub name: String,
    /// The bearer secret itself. Leave it out and set `secret_env` to keep it out of the file.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub secret: String,
    /// The name of an environment variable holding the secret, read when the settings load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_env: Option<String>,
    /// What it may do: `read`, `consume`, `write`, `admin` (see the module's documentation).
    pub scopes: Vec<String>,
    /// The topics a `consume` token may pop, finish and touch on: names, or prefixes ending in
    /// `*` (`"billing-*"`); every topic when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topics: Option<Vec<String>>,
}

/// The secret never appears in debug output (logs), only whether there is one.
impl std::fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiToken")
            .field("name", &self.name)
            .field("secret", &redacted(&self.secret))
            .field("secret_env", &self.secret_env)
            .field("scopes", &self.scopes)
            .field("topics", &self.topics)
            .finish()
    }
}

/// What debug output shows of a secret.
pub(crate) fn redacted(secret: &str) -> &'static str {
    if secret.is_empty() { "" } else { "<redacted>" }
}

/// Longest token name.
pub const MAX_TOKEN_NAME_LEN: usize = 64;

impl ApiToken {
    /// The scopes, parsed (the settings' check refuses unknown names first).
    pub fn parsed_scopes(&self) -> Vec<Scope> {
        self.scopes.iter().filter_map(|s| Scope::parse(s)).collect()
    }
}

/// Fill each token's `secret` from its `secret_env` variable in `env`.
pub(crate) fn resolve_secrets(
    tokens: &mut [ApiToken],
    env: &HashMap<String, String>,
) -> Result<()> {
    for (i, t) in tokens.iter_mut().enumerate() {
        let Some(var) = &t.secret_env else {
            continue;
        };
        let field = format!("api.tokens[{i}].secret_env");
        if !t.secret.is_empty() {
            return Err(Error::Config(format!(
                "{field}: give secret or secret_env, not both"
            )));
        }
        match env.get(var).map(|v| v.trim()) {
            Some(v) if !v.is_empty() => t.secret = v.to_string(),
            _ => {
                return Err(Error::Config(format!(
                    "{field}: the environment variable {var} is not set, or empty"
                )));
            }
        }
    }
    Ok(())
}

/// Refuse tokens that cannot work, naming the field: an empty or repeated name or secret
/// (a secret also used by `api.token` included), no scope or an unknown one, `topics` on a
/// token that is not limited to consuming, a bad topic pattern.
pub(crate) fn check_tokens(tokens: &[ApiToken], legacy: &str) -> Result<()> {
    let bad = |field: String, why: String| Err(Error::Config(format!("{field}: {why}")));
    let names = Scope::ALL.map(Scope::name).join(", ");
    for (i, t) in tokens.iter().enumerate() {
        let at = format!("api.tokens[{i}]");
        let name_ok = !t.name.is_empty()
            && t.name.len() <= MAX_TOKEN_NAME_LEN
            && t.name.starts_with(|c: char| c.is_ascii_alphanumeric())
            && t.name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
        if !name_ok {
            return bad(
                format!("{at}.name"),
                format!(
                    "'{}' is not a token name: letters, digits, '_', '.', '-', starting with a \
                     letter or digit, at most {MAX_TOKEN_NAME_LEN} characters",
                    t.name
                ),
            );
        }
        if let Some(j) = tokens[..i].iter().position(|o| o.name == t.name) {
            return bad(
                format!("{at}.name"),
                format!("'{}' is also api.tokens[{j}]'s name", t.name),
            );
        }
        if t.secret.trim().is_empty() {
            return bad(
                format!("{at}.secret"),
                "must not be empty: set secret, or secret_env to a variable that holds it".into(),
            );
        }
        if t.secret.trim() != t.secret || t.secret.contains(char::is_whitespace) {
            return bad(
                format!("{at}.secret"),
                "must not hold whitespace (a bearer token is one word)".into(),
            );
        }
        if let Some(j) = tokens[..i].iter().position(|o| o.secret == t.secret) {
            return bad(
                format!("{at}.secret"),
                format!("is the same as api.tokens[{j}]'s; each token needs its own secret"),
            );
        }
        if !legacy.is_empty() && t.secret == legacy {
            return bad(
                format!("{at}.secret"),
                "is the same as api.token's; each token needs its own secret".into(),
            );
        }
        if t.scopes.is_empty() {
            return bad(
                format!("{at}.scopes"),
                format!("must name at least one scope: {names}"),
            );
        }
        for (k, s) in t.scopes.iter().enumerate() {
            if Scope::parse(s).is_none() {
                return bad(
                    format!("{at}.scopes[{k}]"),
                    format!("unknown scope '{s}'; the scopes are {names}"),
                );
            }
        }
        let Some(topics) = &t.topics else {
            continue;
        };
        let scopes = t.parsed_scopes();
        if !scopes.contains(&Scope::Consume) {
            return bad(
                format!("{at}.topics"),
                "limits the consume scope, which this token does not have".into(),
            );
        }
        if scopes
            .iter()
            .any(|s| *s != Scope::Consume && s.implies(Scope::Consume))
        {
            return bad(
                format!("{at}.topics"),
                "limits consume, but write and admin consume every topic; leave topics out, or \
                 give this token read and consume only"
                    .into(),
            );
        }
        if topics.is_empty() {
            return bad(
                format!("{at}.topics"),
                "must name a topic; leave topics out for every topic".into(),
            );
        }
        for (k, p) in topics.iter().enumerate() {
            let stem = p.strip_suffix('*').unwrap_or(p);
            let ok = if p.ends_with('*') {
                // A prefix: any start of a name (or nothing: every topic).
                stem.is_empty() || keyfire::queue::check_topic(stem).is_ok()
            } else {
                keyfire::queue::check_topic(stem).is_ok()
            };
            if !ok || stem.contains('*') {
                return bad(
                    format!("{at}.topics[{k}]"),
                    format!(
                        "'{p}' is not a topic name, nor a prefix of one followed by '*' \
                         (\"emails\", \"billing-*\")"
                    ),
                );
            }
        }
    }
    Ok(())
}

/// Whether `topic` is one of `patterns` (a name, or a prefix ending in `*`).
pub fn topic_matches(patterns: &[String], topic: &str) -> bool {
    patterns.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => topic.starts_with(prefix),
        None => p == topic,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(name: &str, secret: &str, scopes: &[&str]) -> ApiToken {
        ApiToken {
            name: name.into(),
            secret: secret.into(),
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    fn refused(tokens: &[ApiToken], legacy: &str) -> String {
        check_tokens(tokens, legacy).unwrap_err().to_string()
    }

    #[test]
    fn scopes_imply_as_documented() {
        use Scope::*;
        for s in Scope::ALL {
            assert!(Admin.implies(s));
            assert!(s.implies(s));
        }
        assert!(Write.implies(Read) && Write.implies(Consume) && !Write.implies(Admin));
        assert!(!Read.implies(Consume) && !Read.implies(Write));
        assert!(!Consume.implies(Read) && !Consume.implies(Write));
    }

    #[test]
    fn good_tokens_pass() {
        let mut worker = token("worker", "w-secret", &["consume"]);
        worker.topics = Some(vec!["emails".into(), "billing-*".into(), "*".into()]);
        let ok = [
            token("reader", "r-secret", &["read"]),
            worker,
            token("ops", "o-secret", &["write", "admin"]),
        ];
        check_tokens(&ok, "legacy").unwrap();
    }

    #[test]
    fn bad_tokens_are_refused_naming_the_field() {
        let r = token("reader", "r", &["read"]);
        let cases: Vec<(Vec<ApiToken>, &str, &str)> = vec![
            (
                vec![token("", "s", &["read"])],
                "api.tokens[0].name",
                "not a token name",
            ),
            (
                vec![token("a b", "s", &["read"])],
                "api.tokens[0].name",
                "not a token name",
            ),
            (
                vec![r.clone(), token("reader", "x", &["read"])],
                "api.tokens[1].name",
                "also",
            ),
            (
                vec![token("a", "", &["read"])],
                "api.tokens[0].secret",
                "must not be empty",
            ),
            (
                vec![token("a", "  ", &["read"])],
                "api.tokens[0].secret",
                "must not be empty",
            ),
            (
                vec![token("a", "x y", &["read"])],
                "api.tokens[0].secret",
                "whitespace",
            ),
            (
                vec![r.clone(), token("b", "r", &["read"])],
                "api.tokens[1].secret",
                "api.tokens[0]",
            ),
            (
                vec![token("a", "legacy", &["read"])],
                "api.tokens[0].secret",
                "api.token",
            ),
            (
                vec![token("a", "s", &[])],
                "api.tokens[0].scopes",
                "at least one",
            ),
            (
                vec![token("a", "s", &["read", "reed"])],
                "api.tokens[0].scopes[1]",
                "unknown scope 'reed'",
            ),
        ];
        for (tokens, field, why) in cases {
            let err = refused(&tokens, "legacy");
            assert!(
                err.contains(&format!("{field}: ")) && err.contains(why),
                "{field}: {err}"
            );
        }
    }

    #[test]
    fn topics_are_checked() {
        let with = |scopes: &[&str], topics: &[&str]| {
            let mut t = token("w", "s", scopes);
            t.topics = Some(topics.iter().map(|s| s.to_string()).collect());
            check_tokens(&[t], "").map_err(|e| e.to_string())
        };
        assert!(
            with(&["read"], &["a"])
                .unwrap_err()
                .contains("api.tokens[0].topics: limits the consume")
        );
        assert!(
            with(&["consume", "write"], &["a"])
                .unwrap_err()
                .contains("every topic")
        );
        assert!(
            with(&["consume"], &[])
                .unwrap_err()
                .contains("must name a topic")
        );
        for bad in ["a b", "*a", "a**", "-x*", ""] {
            let err = with(&["consume"], &["ok", bad]).unwrap_err();
            assert!(err.contains("api.tokens[0].topics[1]: "), "{bad}: {err}");
        }
        with(&["consume", "read"], &["a", "b-*"]).unwrap();
        let pats = vec!["emails".to_string(), "billing-*".to_string()];
        assert!(topic_matches(&pats, "emails") && topic_matches(&pats, "billing-eu"));
        assert!(!topic_matches(&pats, "emails2") && !topic_matches(&pats, "billing"));
    }

    #[test]
    fn secrets_come_from_the_environment_and_are_never_debug_printed() {
        let mut t = vec![ApiToken {
            name: "ci".into(),
            secret_env: Some("CI_TOKEN".into()),
            scopes: vec!["write".into()],
            ..Default::default()
        }];
        let env = HashMap::from([("CI_TOKEN".to_string(), "hunter2-ci".to_string())]);
        resolve_secrets(&mut t, &env).unwrap();
        assert_eq!(t[0].secret, "hunter2-ci");
        let shown = format!("{t:?}");
        assert!(
            !shown.contains("hunter2") && shown.contains("<redacted>"),
            "{shown}"
        );
        // Both given, or a variable not set: refused, naming the field.
        let err = resolve_secrets(&mut t, &env).unwrap_err().to_string();
        assert!(
            err.contains("api.tokens[0].secret_env: give secret or secret_env"),
            "{err}"
        );
        t[0].secret.clear();
        let err = resolve_secrets(&mut t, &HashMap::new())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("api.tokens[0].secret_env") && err.contains("CI_TOKEN"),
            "{err}"
        );
    }
}

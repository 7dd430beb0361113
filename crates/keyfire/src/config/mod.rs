//! The library's settings: where Redis is, how a node runs firings, the bounds on input and
//! the built-in handlers. A [`Settings`] is plain data with serde support and defaults: a
//! service fills it in code or deserializes it from its own configuration (the sections and
//! names are those of the `keyfire` server's TOML file: `[redis]`, `[node]`, `[limits]`,
//! `[handlers]`), then calls [`Settings::check`]. The server's own sections (`[api]`, `[log]`,
//! `[[jobs]]`, ...) and its file and `KEYFIRE__` environment loading belong to the `keyfire`
//! binary, not to the library.
//!
//! One file a section, each with its defaults and its check:
//!
//! - `redis`: `[redis]`, where Redis is ([`RedisSettings`], [`RedisMode`], [`node_addr`]) and
//!   the refusal of a deployment whose crate feature this build leaves out.
//! - `node`: `[node]`, how this node claims and runs firings ([`NodeSettings`]).
//! - `limits`: `[limits]`, bounds on the size of what callers hand keyfire ([`InputLimits`]).
//! - `handlers`: `[handlers]`, the built-in `http` handler (hosts, blocked networks, signing
//!   secrets, TLS) and `command` handler ([`HandlerSettings`]).
//!
//! This file holds [`Settings`], the four sections together, the list-valued keys, and the
//! error for a setting that needs a crate feature this build leaves out.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

mod handlers;
mod limits;
mod node;
mod redis;

pub use self::handlers::{
    CommandHandlerSettings, DEFAULT_BLOCKED_NETWORKS, HandlerSettings, HttpHandlerSettings,
    HttpTlsSettings,
};
pub use self::limits::InputLimits;
pub use self::node::NodeSettings;
pub use self::redis::{RedisMode, RedisSettings, node_addr};

/// What a node or a client of the library reads from configuration.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    // The server's `ServerSettings` (src/settings.rs) repeats these four fields: serde cannot
    // combine `#[serde(flatten)]` with `deny_unknown_fields`.
    /// Where Redis is and how keyfire uses it.
    pub redis: RedisSettings,
    /// How this node claims and runs firings.
    pub node: NodeSettings,
    /// Bounds on the size of jobs' params and tasks' payloads.
    pub limits: InputLimits,
    /// Settings of the built-in handlers.
    pub handlers: HandlerSettings,
}

impl Settings {
    /// The list-valued settings, by their dotted names: a configuration source without lists
    /// (the `keyfire` server's `KEYFIRE__` environment variables) gives them as
    /// comma-separated values.
    pub const LIST_KEYS: &'static [&'static str] = &[
        "redis.nodes",
        "handlers.http.allowed_hosts",
        "handlers.http.blocked_networks",
        "handlers.command.allowed_programs",
    ];

    /// Refuse settings that cannot work, naming the setting (`redis.shards`,
    /// `handlers.http.timeout`, ...). A node and a client check their settings when they
    /// start; call it first to report a bad one early.
    pub fn check(&self) -> Result<()> {
        self.node.check()?;
        self.redis.check()?;
        self.handlers.check()
    }
}

/// The error for a setting that needs a feature of the `keyfire` crate this build leaves out.
pub(crate) fn missing_feature(setting: &str, feature: &str) -> Error {
    Error::Config(format!(
        "{setting}: needs the `{feature}` feature of the keyfire crate, which this build \
         leaves out (the keyfire server has it; a service turns it on in its Cargo.toml: \
         keyfire = {{ features = [\"{feature}\"] }})"
    ))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The error [`Settings::check`] gives for the defaults as `change` leaves them (the
    /// sections' tests of refused settings).
    pub(crate) fn refusal(change: impl FnOnce(&mut Settings)) -> String {
        let mut s = Settings::default();
        change(&mut s);
        s.check().unwrap_err().to_string()
    }

    #[test]
    fn the_list_keys_are_the_list_valued_settings() {
        // Every list in the defaults' serialization (the maps, empty by default, add none).
        fn lists(prefix: &str, value: &serde_json::Value, out: &mut Vec<String>) {
            match value {
                serde_json::Value::Array(_) => out.push(prefix.to_string()),
                serde_json::Value::Object(map) => {
                    for (key, v) in map {
                        let name = if prefix.is_empty() {
                            key.clone()
                        } else {
                            format!("{prefix}.{key}")
                        };
                        lists(&name, v, out);
                    }
                }
                _ => {}
            }
        }
        let mut found = Vec::new();
        lists(
            "",
            &serde_json::to_value(Settings::default()).unwrap(),
            &mut found,
        );
        found.sort_unstable();
        let mut declared = Settings::LIST_KEYS.to_vec();
        declared.sort_unstable();
        assert_eq!(found, declared);
        Settings::default().check().unwrap();
    }
}

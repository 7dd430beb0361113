//! `[redis]`: how keyfire reaches Redis (one server, Sentinel or a Cluster), its keys' layout
//! and the refusal of a deployment this build's features leave out.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::missing_feature;
use crate::error::{Error, Result};

/// How keyfire reaches Redis: one server, a master found through Sentinel, or a Redis Cluster.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RedisMode {
    /// One server at `redis.url`.
    #[default]
    Standalone,
    /// The master of `redis.sentinel_master`, as the sentinels in `redis.nodes` report it;
    /// followed across failovers.
    Sentinel,
    /// A Redis Cluster reached through the seed nodes in `redis.nodes`.
    Cluster,
}

impl RedisMode {
    /// The mode as written in settings.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Standalone => "standalone",
            Self::Sentinel => "sentinel",
            Self::Cluster => "cluster",
        }
    }
}

/// Redis connection and layout.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RedisSettings {
    /// `standalone` (default), `sentinel` or `cluster`.
    pub mode: RedisMode,
    /// `redis://[user:pass@]host:port/db`: the server in standalone mode (unused otherwise).
    pub url: String,
    /// Sentinel mode: the sentinels' addresses; cluster mode: seed nodes. `redis://host:port`
    /// (or `rediss://`, or a bare `host:port`). Required, non-empty, in those modes. From the
    /// environment, a comma-separated list: `KEYFIRE__REDIS__NODES=redis://a:7000,redis://b:7000`.
    pub nodes: Vec<String>,
    /// Sentinel mode: the name of the monitored master (`sentinel monitor <name> ...`).
    pub sentinel_master: String,
    /// ACL user for every connection to a data server, in every mode (overrides the URL's).
    pub username: Option<String>,
    /// Password for every connection to a data server, in every mode (overrides the URL's).
    pub password: Option<String>,
    /// Use TLS for every connection (data servers and sentinels), as `rediss://` does.
    pub tls: bool,
    /// PEM file of the CA certificate(s) to trust for TLS; unset: the public web PKI roots.
    pub tls_ca: Option<PathBuf>,
    /// Accept any server certificate (no verification at all). For tests and development only.
    pub tls_insecure: bool,
    /// Number of shards keyfire's keys are spread over (each shard is one hash tag, so in
    /// cluster mode shards spread over the masters). 1..=1024.
    pub shards: u32,
    /// After a claim or a recorded outcome, wait until this many replicas acknowledged it
    /// (`WAIT`) before running the handler. With 1, a failover loses no claim the replica
    /// acknowledged, so such a firing does not run twice. A claim whose `WAIT` timed out or
    /// failed (the master failed first) runs anyway, and a failover may then run it again
    /// (docs/architecture.md, "The protocol, model-checked"). 0 (default): do not wait.
    pub wait_replicas: u32,
    /// Longest `WAIT` for [`RedisSettings::wait_replicas`]; past it the firing runs anyway
    /// (availability first) and `keyfire_unreplicated_writes_total` counts it.
    #[serde(with = "crate::job::duration_serde")]
    pub wait_timeout: Duration,
    /// Prefix of every key; keys live under the hash tag `{prefix}`.
    pub prefix: String,
    /// Turn on expired-key events with `CONFIG SET` when they are off. When false and they
    /// are off, the node refuses to start.
    pub enable_notifications: bool,
    /// Only firings due within this horizon hold a sentinel key; later ones live in the due
    /// ZSET alone and get theirs as they come near.
    #[serde(with = "crate::job::duration_serde")]
    pub sentinel_horizon: Duration,
}

impl Default for RedisSettings {
    fn default() -> Self {
        Self {
            mode: RedisMode::Standalone,
            url: "redis://127.0.0.1:6379/0".into(),
            nodes: Vec::new(),
            sentinel_master: "mymaster".into(),
            username: None,
            password: None,
            tls: false,
            tls_ca: None,
            tls_insecure: false,
            shards: 1,
            wait_replicas: 0,
            wait_timeout: Duration::from_millis(100),
            prefix: "keyfire".into(),
            enable_notifications: true,
            sentinel_horizon: Duration::from_secs(60),
        }
    }
}

/// Whether `url` names TLS (`rediss://`).
fn is_tls_url(url: &str) -> bool {
    url.trim().to_ascii_lowercase().starts_with("rediss://")
}

impl RedisSettings {
    /// Refuse a deployment this build cannot reach: a mode or TLS whose feature
    /// (`cluster`, `sentinel`, `tls`) is left out.
    fn check_features(&self) -> Result<()> {
        if self.mode == RedisMode::Cluster && !cfg!(feature = "cluster") {
            return Err(missing_feature("redis.mode = \"cluster\"", "cluster"));
        }
        if self.mode == RedisMode::Sentinel && !cfg!(feature = "sentinel") {
            return Err(missing_feature("redis.mode = \"sentinel\"", "sentinel"));
        }
        if !cfg!(feature = "tls") {
            if self.tls {
                return Err(missing_feature("redis.tls", "tls"));
            }
            if self.mode == RedisMode::Standalone && is_tls_url(&self.url) {
                return Err(missing_feature("redis.url (rediss://)", "tls"));
            }
            if self.mode != RedisMode::Standalone && self.nodes.iter().any(|n| is_tls_url(n)) {
                return Err(missing_feature("redis.nodes (rediss://)", "tls"));
            }
        }
        Ok(())
    }

    /// Refuse connection and layout settings that cannot work, naming the setting.
    pub fn check(&self) -> Result<()> {
        let bad = |name: &str, why: String| Err(Error::Config(format!("{name}: {why}")));
        match self.mode {
            RedisMode::Standalone => {
                if ::redis::parse_redis_url(&self.url).is_none() {
                    return bad("redis.url", format!("'{}' is not a redis:// URL", self.url));
                }
            }
            RedisMode::Sentinel | RedisMode::Cluster => {
                if self.nodes.is_empty() {
                    return bad(
                        "redis.nodes",
                        format!(
                            "name at least one address (redis://host:port) in {} mode",
                            self.mode.as_str()
                        ),
                    );
                }
                for node in &self.nodes {
                    if node_addr(node).is_none() {
                        return bad(
                            "redis.nodes",
                            format!("'{node}' is not an address such as redis://host:port"),
                        );
                    }
                }
            }
        }
        if self.mode == RedisMode::Sentinel && self.sentinel_master.trim().is_empty() {
            return bad(
                "redis.sentinel_master",
                "name the master the sentinels monitor".into(),
            );
        }
        if self.username.is_some() && self.password.is_none() {
            return bad(
                "redis.username",
                "needs redis.password (Redis's AUTH takes a user and a password)".into(),
            );
        }
        if let Some(ca) = &self.tls_ca {
            if !self.tls {
                return bad("redis.tls_ca", "is set but redis.tls is false".into());
            }
            if !ca.is_file() {
                return bad("redis.tls_ca", format!("{} is not a file", ca.display()));
            }
        }
        if self.tls_insecure && !self.tls {
            return bad("redis.tls_insecure", "is set but redis.tls is false".into());
        }
        if !(1..=1024).contains(&self.shards) {
            return bad("redis.shards", "must be between 1 and 1024".into());
        }
        if self.wait_replicas > 0 && self.wait_timeout.is_zero() {
            return bad(
                "redis.wait_timeout",
                "must be more than 0 when redis.wait_replicas is set (WAIT 0 waits forever)".into(),
            );
        }
        self.check_features()?;
        if self.prefix.is_empty() || self.prefix.contains(['{', '}', ' ']) {
            return bad(
                "redis.prefix",
                "must be non-empty without '{', '}' or spaces".into(),
            );
        }
        Ok(())
    }
}

/// `host` and `port` of a node address: `redis://[user:pass@]host:port[/db]`, `rediss://…`,
/// or a bare `host:port`.
pub fn node_addr(node: &str) -> Option<(String, u16)> {
    let url = if node.contains("://") {
        node.to_string()
    } else {
        format!("redis://{node}")
    };
    let parsed = ::redis::parse_redis_url(&url)?;
    if !matches!(parsed.scheme(), "redis" | "rediss") {
        return None;
    }
    let host = parsed
        .host_str()?
        .trim_start_matches('[')
        .trim_end_matches(']');
    if host.is_empty() {
        return None;
    }
    Some((host.to_string(), parsed.port().unwrap_or(6379)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Settings;
    use crate::config::tests::refusal;

    #[test]
    fn bad_redis_deployment_settings_are_refused_by_name() {
        let refused = |f: &dyn Fn(&mut RedisSettings)| refusal(|s| f(&mut s.redis));
        let err = refused(&|r| r.mode = RedisMode::Cluster);
        assert!(err.contains("redis.nodes"), "{err}");
        let err = refused(&|r| r.mode = RedisMode::Sentinel);
        assert!(err.contains("redis.nodes"), "{err}");
        let err = refused(&|r| {
            r.mode = RedisMode::Cluster;
            r.nodes = vec!["http://x:1".into()];
        });
        assert!(
            err.contains("redis.nodes") && err.contains("http://x:1"),
            "{err}"
        );
        let err = refused(&|r| {
            r.mode = RedisMode::Sentinel;
            r.nodes = vec!["s1:26379".into()];
            r.sentinel_master = " ".into();
        });
        assert!(err.contains("redis.sentinel_master"), "{err}");
        let err = refused(&|r| r.shards = 0);
        assert!(err.contains("redis.shards"), "{err}");
        let err = refused(&|r| r.shards = 1025);
        assert!(err.contains("redis.shards"), "{err}");
        let err = refused(&|r| r.tls_ca = Some("/nonexistent/ca.pem".into()));
        assert!(err.contains("redis.tls_ca"), "{err}");
        let err = refused(&|r| {
            r.tls = true;
            r.tls_ca = Some("/nonexistent/ca.pem".into());
        });
        assert!(err.contains("redis.tls_ca"), "{err}");
        let err = refused(&|r| r.tls_insecure = true);
        assert!(err.contains("redis.tls_insecure"), "{err}");
        let err = refused(&|r| r.username = Some("u".into()));
        assert!(err.contains("redis.username"), "{err}");
        let err = refused(&|r| r.url = "http://localhost".into());
        assert!(err.contains("redis.url"), "{err}");

        let mut s = Settings::default();
        s.redis.mode = RedisMode::Cluster;
        s.redis.nodes = vec!["redis://127.0.0.1:7000".into(), "127.0.0.1:7001".into()];
        s.redis.shards = 1024;
        // A build without the `cluster` feature refuses it, naming the feature.
        assert_eq!(s.check().is_ok(), cfg!(feature = "cluster"));
    }

    #[test]
    fn a_deployment_this_build_leaves_out_is_refused_naming_the_feature() {
        let check = |f: &dyn Fn(&mut RedisSettings)| {
            let mut s = Settings::default();
            f(&mut s.redis);
            s.check()
        };
        let cluster = check(&|r| {
            r.mode = RedisMode::Cluster;
            r.nodes = vec!["redis://127.0.0.1:7000".into()];
        });
        let sentinel = check(&|r| {
            r.mode = RedisMode::Sentinel;
            r.nodes = vec!["127.0.0.1:26379".into()];
        });
        let tls = check(&|r| r.tls = true);
        let rediss = check(&|r| r.url = "rediss://127.0.0.1:6380/0".into());
        for (result, on, setting, feature) in [
            (cluster, cfg!(feature = "cluster"), "redis.mode", "cluster"),
            (
                sentinel,
                cfg!(feature = "sentinel"),
                "redis.mode",
                "sentinel",
            ),
            (tls, cfg!(feature = "tls"), "redis.tls", "tls"),
            (rediss, cfg!(feature = "tls"), "redis.url", "tls"),
        ] {
            match result {
                Ok(()) => assert!(on, "{setting} passed without the {feature} feature"),
                Err(e) => {
                    let e = e.to_string();
                    assert!(!on, "{setting}: {e}");
                    assert!(
                        e.contains(setting) && e.contains(&format!("`{feature}` feature")),
                        "{e}"
                    );
                }
            }
        }
    }

    #[test]
    fn node_addresses_parse() {
        assert_eq!(node_addr("redis://h:7000"), Some(("h".to_string(), 7000)));
        assert_eq!(
            node_addr("rediss://u:p@h:7001/0"),
            Some(("h".to_string(), 7001))
        );
        assert_eq!(node_addr("h:26379"), Some(("h".to_string(), 26379)));
        assert_eq!(node_addr("h"), Some(("h".to_string(), 6379)));
        assert_eq!(node_addr("http://h:1"), None);
    }
}

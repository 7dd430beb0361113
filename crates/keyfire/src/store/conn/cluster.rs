//! Redis Cluster: the masters and their slot ranges (`CLUSTER SLOTS`), and the cluster
//! client's settings. Parsing a `CLUSTER SLOTS` reply is always compiled (the test fixtures
//! use it); the rest only with the `cluster` feature.

#[cfg(feature = "cluster")]
use std::time::Duration;

use redis::Value;
#[cfg(feature = "cluster")]
use redis::cluster::ClusterClientBuilder;
#[cfg(feature = "cluster")]
use redis::cluster_async::ClusterConnection;
#[cfg(feature = "cluster")]
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
#[cfg(feature = "cluster")]
use redis::{Client, ConnectionAddr, IntoConnectionInfo, RedisResult};

#[cfg(feature = "cluster")]
use super::access::{Access, redact_url};
#[cfg(feature = "cluster")]
use super::{CONNECTION_TIMEOUT, RESPONSE_TIMEOUT};
#[cfg(feature = "cluster")]
use crate::config::RedisSettings;
use crate::error::{Error, Result};

/// `CLUSTER SLOTS` as (first slot, last slot, master host, master port), asked of any node
/// (tried a few times: a node may be down while the cluster fails over).
#[cfg(feature = "cluster")]
pub(super) async fn cluster_slots(
    conn: &ClusterConnection,
) -> Result<Vec<(u16, u16, String, u16)>> {
    let mut last = None;
    for attempt in 0..5 {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(100 * attempt)).await;
        }
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("SLOTS");
        let routing = RoutingInfo::SingleNode(if attempt % 2 == 0 {
            SingleNodeRoutingInfo::RandomPrimary
        } else {
            SingleNodeRoutingInfo::Random
        });
        match conn.clone().route_command(cmd, routing).await {
            Ok(v) => return parse_cluster_slots(&v),
            Err(e) => last = Some(e),
        }
    }
    Err(Error::redis_op(
        "reading the cluster's masters (CLUSTER SLOTS)",
        // infallible: the loop above made five attempts, and each failed one set `last`.
        last.expect("at least one attempt"),
    ))
}

/// A `CLUSTER SLOTS` reply as (first slot, last slot, master host, master port), one per slot
/// range in the reply's order; an error when the reply has another shape or a master has no
/// address.
pub fn parse_cluster_slots(v: &Value) -> Result<Vec<(u16, u16, String, u16)>> {
    let bad = || Error::Corrupt(format!("unexpected CLUSTER SLOTS reply: {v:?}"));
    let Value::Array(ranges) = v else {
        return Err(bad());
    };
    let int = |v: &Value| match v {
        Value::Int(n) => u16::try_from(*n).ok(),
        _ => None,
    };
    let text = |v: &Value| match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    };
    ranges
        .iter()
        .map(|range| {
            let Value::Array(items) = range else {
                return Err(bad());
            };
            let (Some(start), Some(end), Some(Value::Array(master))) = (
                items.first().and_then(int),
                items.get(1).and_then(int),
                items.get(2),
            ) else {
                return Err(bad());
            };
            let host = master.first().and_then(text).ok_or_else(bad)?;
            let port = master.get(1).and_then(int).ok_or_else(bad)?;
            if host.is_empty() || host == "?" {
                return Err(Error::Setup(format!(
                    "CLUSTER SLOTS names no address for the master of slots {start}-{end}"
                )));
            }
            Ok((start, end, host, port))
        })
        .collect()
}

#[cfg(feature = "cluster")]
impl Access {
    /// A client for one data node.
    pub(super) fn node_client(&self, host: &str, port: u16) -> RedisResult<Client> {
        self.client(ConnectionAddr::Tcp(host.to_string(), port))
    }

    pub(super) fn cluster_builder(&self, s: &RedisSettings) -> Result<ClusterClientBuilder> {
        let seeds = s
            .nodes
            .iter()
            .map(|node| {
                let url = if node.contains("://") {
                    node.clone()
                } else {
                    format!("redis://{node}")
                };
                url.as_str()
                    .into_connection_info()
                    .map(|info| self.apply(info))
                    .map_err(|e| Error::redis_op(format!("redis.nodes: '{}'", redact_url(node)), e))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut b = ClusterClientBuilder::new(seeds)
            .response_timeout(RESPONSE_TIMEOUT)
            .connection_timeout(CONNECTION_TIMEOUT)
            // Follow a failover: while a master is down and until a replica takes over (a few
            // node timeouts), retry every few hundred ms, refreshing the slot map on
            // connection errors, MOVED and READONLY, within the overall response timeout.
            .retries(30)
            .min_retry_wait(50)
            .max_retry_wait(500)
            .retry_wait_formula(50, 2);
        if let Some(user) = &self.username {
            b = b.username(user);
        }
        if let Some(password) = &self.password {
            b = b.password(password);
        }
        #[cfg(feature = "tls")]
        if let Some(mode) = self.tls_mode() {
            b = b.tls(mode);
        }
        #[cfg(feature = "tls")]
        if let Some(certs) = self.certs() {
            b = b.certs(certs);
        }
        Ok(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "cluster")]
    #[test]
    fn key_slots_match_redis_rs() {
        use redis::cluster_routing::Slot;
        // keys::slot_of (the crc16 crate) against redis-rs's own slot computation.
        for key in [
            "a",
            "{kf:3}:due",
            "x{}y",
            "{{a}}",
            "plain",
            "",
            "foo",
            "123456789",
        ] {
            assert_eq!(
                Slot::new(crate::store::keys::slot_of(key)),
                Some(Slot::for_key(key)),
                "{key}"
            );
        }
    }

    #[test]
    fn cluster_slots_reply_parses() {
        let node = |host: &str, port: i64| {
            Value::Array(vec![
                Value::BulkString(host.as_bytes().to_vec()),
                Value::Int(port),
                Value::BulkString(b"id".to_vec()),
                Value::Array(vec![]),
            ])
        };
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(5460),
                node("127.0.0.1", 7000),
                node("127.0.0.1", 7003),
            ]),
            Value::Array(vec![
                Value::Int(5461),
                Value::Int(16383),
                node("10.0.0.2", 7001),
            ]),
        ]);
        let slots = parse_cluster_slots(&reply).unwrap();
        assert_eq!(
            slots,
            [
                (0, 5460, "127.0.0.1".to_string(), 7000),
                (5461, 16383, "10.0.0.2".to_string(), 7001)
            ]
        );
        assert!(parse_cluster_slots(&Value::Int(1)).is_err());
    }
}

//! A Redis Cluster of our own, out of [`RedisServer`] processes.

use std::io;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::{RedisOptions, RedisServer, StartError, info_field, off_runtime, query, wait_until};

/// One slot range of `CLUSTER SLOTS`: first slot, last slot, master `host:port`.
type SlotRange = (u16, u16, String);

/// The slot map as `addr` sees it, in slot order (parsed as the library parses it).
pub(crate) fn cluster_slots(addr: &str) -> io::Result<Vec<SlotRange>> {
    let v: redis::Value = query(addr, redis::cmd("CLUSTER").arg("SLOTS"))?;
    let mut out: Vec<SlotRange> = keyfire::store::parse_cluster_slots(&v)
        .map_err(|e| io::Error::other(format!("{addr}: {e}")))?
        .into_iter()
        .map(|(start, end, host, port)| (start, end, format!("{host}:{port}")))
        .collect();
    out.sort();
    Ok(out)
}

/// A Redis Cluster of our own: `masters` masters with `replicas_per_master` replicas each,
/// every node a [`RedisServer`] with `cluster-enabled yes`, a 2 s node timeout, the AOF on and
/// expired events on. All processes are killed (SIGKILL) when it is dropped.
pub struct RedisCluster {
    pub(crate) nodes: Vec<RedisServer>,
    pub(crate) killed: Vec<bool>,
}

impl std::fmt::Debug for RedisCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisCluster")
            .field("nodes", &self.nodes)
            .field("killed", &self.killed)
            .finish()
    }
}

impl RedisCluster {
    /// How long the cluster may take to form, or to fail over.
    pub const SETTLE_LIMIT: Duration = Duration::from_secs(30);

    /// Start the processes, join them with `redis-cli --cluster create`, and wait until
    /// every node says `cluster_state:ok`, all agree on which master serves which slots, and
    /// every replica is in sync with its master.
    pub fn start(masters: usize, replicas_per_master: usize) -> io::Result<Self> {
        Self::start_with(masters, replicas_per_master, Self::options())
    }

    /// [`RedisCluster::start`] as a managed service offers a cluster: the commands of
    /// [`MANAGED_RENAMES`](crate::MANAGED_RENAMES) renamed away, except `CLUSTER` (a cluster client needs its
    /// `CLUSTER SLOTS`). Reach the renamed ones with [`RedisServer::admin`] of a node.
    pub fn start_managed(masters: usize, replicas_per_master: usize) -> io::Result<Self> {
        let mut options = Self::options().as_managed();
        options
            .extra
            .retain(|(k, v)| !(k == "rename-command" && v.starts_with("CLUSTER ")));
        Self::start_with(masters, replicas_per_master, options)
    }

    fn start_with(
        masters: usize,
        replicas_per_master: usize,
        options: RedisOptions,
    ) -> io::Result<Self> {
        off_runtime(|| {
            if masters < 3 {
                return Err(io::Error::other(
                    "a Redis Cluster needs at least 3 masters (redis-cli --cluster create)",
                ));
            }
            let total = masters * (1 + replicas_per_master);
            let nodes = (0..total)
                .map(|_| RedisServer::start_with_extra_port(options.clone(), "cluster-port"))
                .collect::<io::Result<Vec<_>>>()?;
            let cluster = Self {
                killed: vec![false; nodes.len()],
                nodes,
            };
            // infallible index: `masters >= 3` was checked above, so there are nodes.
            let log = cluster.nodes[0].dir().join("cluster-create.log");
            let out = Command::new("redis-cli")
                .arg("--cluster")
                .arg("create")
                .args(cluster.nodes.iter().map(RedisServer::addr))
                .args(["--cluster-replicas", &replicas_per_master.to_string()])
                .arg("--cluster-yes")
                .stdin(Stdio::null())
                .output()
                .map_err(|source| StartError::Program {
                    program: "redis-cli",
                    source,
                })?;
            let _ = std::fs::write(&log, [&out.stdout[..], &out.stderr[..]].concat());
            if !out.status.success() {
                return Err(io::Error::other(format!(
                    "redis-cli --cluster create failed ({}): {}{}",
                    out.status,
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                )));
            }
            cluster.wait_settled(None, Self::SETTLE_LIMIT)?;
            wait_until("replicas in sync", Self::SETTLE_LIMIT, || {
                for node in cluster.live() {
                    let info: String = query(&node.addr(), redis::cmd("INFO").arg("replication"))?;
                    if info_field(&info, "role").as_deref() == Some("slave")
                        && info_field(&info, "master_link_status").as_deref() != Some("up")
                    {
                        return Ok(None);
                    }
                }
                Ok(Some(()))
            })?;
            Ok(cluster)
        })
    }

    /// The settings of every node of the cluster.
    fn options() -> RedisOptions {
        RedisOptions {
            persistent: true,
            extra: [
                ("cluster-enabled", "yes"),
                ("cluster-config-file", "nodes.conf"),
                ("cluster-node-timeout", "2000"),
                ("appendonly", "yes"),
                ("notify-keyspace-events", "Ex"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        }
    }

    /// Run `redis-cli --cluster <args>`, its output kept in the first node's directory.
    fn redis_cli(&self, args: &[String]) -> io::Result<()> {
        let out = Command::new("redis-cli")
            .arg("--cluster")
            .args(args)
            .stdin(Stdio::null())
            .output()?;
        let log = self.nodes[0].dir().join(format!("cluster-{}.log", args[0]));
        let _ = std::fs::write(&log, [&out.stdout[..], &out.stderr[..]].concat());
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "redis-cli --cluster {} failed ({}): {}{}",
                args[0],
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok(())
    }

    /// Start one more master and join it to the cluster, serving no slots yet (`redis-cli
    /// --cluster add-node`). Returns its address (`127.0.0.1:<port>`).
    pub fn add_master(&mut self) -> io::Result<String> {
        off_runtime(|| {
            let node = RedisServer::start_with_extra_port(Self::options(), "cluster-port")?;
            let addr = node.addr();
            let seed = self
                .live()
                .next()
                .map(RedisServer::addr)
                .ok_or_else(|| io::Error::other("no live cluster node"))?;
            self.nodes.push(node);
            self.killed.push(false);
            self.redis_cli(&["add-node".into(), addr.clone(), seed])?;
            wait_until("the new node known to all", Self::SETTLE_LIMIT, || {
                for node in self.live() {
                    let nodes: String = query(&node.addr(), redis::cmd("CLUSTER").arg("NODES"))?;
                    if !nodes.contains(&addr) {
                        return Ok(None);
                    }
                }
                Ok(Some(()))
            })?;
            // Before moving slots to it: it must know the whole slot map (else `MIGRATE` to it
            // answers CLUSTERDOWN).
            self.wait_settled(None, Self::SETTLE_LIMIT)?;
            Ok(addr)
        })
    }

    /// Move slots (and their keys, with `MIGRATE`) until every master, empty ones included,
    /// serves an equal share (`redis-cli --cluster rebalance --cluster-use-empty-masters`),
    /// then wait until the nodes agree on the slot map.
    pub fn rebalance(&self) -> io::Result<()> {
        off_runtime(|| {
            let seed = self
                .live()
                .next()
                .map(RedisServer::addr)
                .ok_or_else(|| io::Error::other("no live cluster node"))?;
            self.redis_cli(&[
                "rebalance".into(),
                seed,
                "--cluster-use-empty-masters".into(),
            ])?;
            self.wait_settled(None, Self::SETTLE_LIMIT)
        })
    }

    pub(crate) fn live(&self) -> impl Iterator<Item = &RedisServer> {
        self.nodes
            .iter()
            .zip(&self.killed)
            .filter(|(_, killed)| !**killed)
            .map(|(n, _)| n)
    }

    /// Seed URLs (`redis://127.0.0.1:<port>`) of the nodes not killed.
    pub fn nodes(&self) -> Vec<String> {
        self.live()
            .map(|n| format!("redis://{}", n.addr()))
            .collect()
    }

    /// Every node, killed or not, in creation order.
    pub fn servers(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// The masters serving slots (`127.0.0.1:<port>`), in slot order, as a live node sees them.
    pub fn masters(&self) -> io::Result<Vec<String>> {
        off_runtime(|| {
            let mut last = None;
            for node in self.live() {
                match cluster_slots(&node.addr()) {
                    Ok(ranges) => {
                        let mut masters: Vec<String> = Vec::new();
                        for (_, _, m) in ranges {
                            if !masters.contains(&m) {
                                masters.push(m);
                            }
                        }
                        return Ok(masters);
                    }
                    Err(e) => last = Some(e),
                }
            }
            Err(last.unwrap_or_else(|| io::Error::other("no live cluster node")))
        })
    }

    /// The master (`127.0.0.1:<port>`) serving `slot`, as a live node sees it.
    pub fn master_of_slot(&self, slot: u16) -> io::Result<String> {
        off_runtime(|| {
            let node = self
                .live()
                .next()
                .ok_or_else(|| io::Error::other("no live cluster node"))?;
            cluster_slots(&node.addr())?
                .into_iter()
                .find(|(start, end, _)| (*start..=*end).contains(&slot))
                .map(|(_, _, m)| m)
                .ok_or_else(|| io::Error::other(format!("no master serves slot {slot}")))
        })
    }

    /// Kill node `i` with SIGKILL (a crash).
    pub fn kill(&mut self, i: usize) -> io::Result<()> {
        off_runtime(|| {
            self.nodes[i].stop(true)?;
            self.killed[i] = true;
            Ok(())
        })
    }

    /// Kill (SIGKILL) the master serving `slot`; returns its address.
    pub fn kill_master_of_slot(&mut self, slot: u16) -> io::Result<String> {
        off_runtime(|| {
            let master = self.master_of_slot(slot)?;
            let i = self
                .nodes
                .iter()
                .position(|n| n.addr() == master)
                .ok_or_else(|| io::Error::other(format!("master {master} is not one of ours")))?;
            self.kill(i)?;
            Ok(master)
        })
    }

    /// Wait until a replica has taken over from the killed master `old` (`host:port`): every
    /// live node says `cluster_state:ok` and all agree on a slot map in which `old` serves
    /// nothing. Returns the masters then.
    pub fn wait_for_failover(&self, old: &str, limit: Duration) -> io::Result<Vec<String>> {
        off_runtime(|| {
            self.wait_settled(Some(old), limit)?;
            self.masters()
        })
    }

    /// Wait until every live node says `cluster_state:ok` and all agree on the slot map (in
    /// which `gone`, if given, serves nothing).
    pub fn wait_settled(&self, gone: Option<&str>, limit: Duration) -> io::Result<()> {
        off_runtime(|| {
            wait_until("cluster_state:ok on every node", limit, || {
                let mut agreed: Option<Vec<SlotRange>> = None;
                for node in self.live() {
                    let info: String = query(&node.addr(), redis::cmd("CLUSTER").arg("INFO"))?;
                    if info_field(&info, "cluster_state").as_deref() != Some("ok") {
                        return Ok(None);
                    }
                    let slots = cluster_slots(&node.addr())?;
                    let covered: usize = slots.iter().map(|(s, e, _)| usize::from(e - s) + 1).sum();
                    if covered != 16384
                        || gone.is_some_and(|g| slots.iter().any(|(_, _, m)| m == g))
                    {
                        return Ok(None);
                    }
                    match &agreed {
                        None => agreed = Some(slots),
                        Some(a) if *a != slots => return Ok(None),
                        Some(_) => {}
                    }
                }
                Ok(agreed.map(|_| ()))
            })
        })
    }
}

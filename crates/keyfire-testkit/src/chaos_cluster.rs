//! Faults on a [`RedisCluster`] for the chaos suite: each node announcing the port of a proxy
//! in front of it (so clients, which learn addresses from `CLUSTER SLOTS`, go through the
//! proxy), the roles of the nodes as they say them, a master SIGKILLed and failed over, a node
//! restarted (a killed master comes back as a replica), and a slot moved with its keys.
//!
//! Nodes are named by their index in [`RedisCluster::servers`]; the fixture talks to each on
//! its own port, never through a proxy, so a proxy cutting a node off does not cut the
//! fixture off.

use std::io;
use std::time::{Duration, Instant};

use crate::cluster::{RedisCluster, cluster_slots};
use crate::{info_field, off_runtime, query, wait_until};

/// What one live node of a cluster says it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRole {
    /// Its index in [`RedisCluster::servers`].
    pub index: usize,
    /// Its cluster node id.
    pub id: String,
    /// The address it announces to clients (`host:port`).
    pub announced: String,
    /// A master (else a replica).
    pub master: bool,
    /// A replica: the id of its master.
    pub master_id: Option<String>,
    /// The slot ranges it serves (masters), first and last slot.
    pub slots: Vec<(u16, u16)>,
}

/// The `myself` line of `CLUSTER NODES` as a [`NodeRole`].
fn parse_myself(index: usize, nodes: &str) -> Option<NodeRole> {
    let line = nodes.lines().find(|l| {
        l.split_whitespace()
            .nth(2)
            .is_some_and(|f| f.split(',').any(|x| x == "myself"))
    })?;
    let fields: Vec<&str> = line.split_whitespace().collect();
    let flags: Vec<&str> = fields.get(2)?.split(',').collect();
    let announced = fields.get(1)?.split('@').next()?.to_string();
    let slots = fields
        .iter()
        .skip(8)
        // `[slot->-id]` / `[slot-<-id]`: a migration in progress, not a served range.
        .filter(|f| !f.starts_with('['))
        .filter_map(|f| match f.split_once('-') {
            Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
            None => f.parse().ok().map(|s| (s, s)),
        })
        .collect();
    Some(NodeRole {
        index,
        id: fields.first()?.to_string(),
        announced,
        master: flags.contains(&"master"),
        master_id: fields.get(3).filter(|m| **m != "-").map(|m| m.to_string()),
        slots,
    })
}

impl RedisCluster {
    /// Make every node announce the port given for it (`ports[i]` for node `i`, such as a
    /// proxy in front of it) to clients, now (`CONFIG SET cluster-announce-port`) and after
    /// restarts; then wait until every node's `CLUSTER SLOTS` names only announced ports and
    /// all agree.
    pub fn announce_ports(&mut self, ports: &[u16]) -> io::Result<()> {
        off_runtime(|| {
            if ports.len() != self.nodes.len() {
                return Err(io::Error::other(format!(
                    "announce_ports: {} ports for {} nodes",
                    ports.len(),
                    self.nodes.len()
                )));
            }
            for (node, port) in self.nodes.iter_mut().zip(ports) {
                let _: () = query(
                    &node.addr(),
                    node.admin("CONFIG")
                        .arg("SET")
                        .arg("cluster-announce-port")
                        .arg(*port),
                )?;
                node.options
                    .extra
                    .retain(|(k, _)| k != "cluster-announce-port");
                node.options
                    .extra
                    .push(("cluster-announce-port".into(), port.to_string()));
            }
            let announced: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
            wait_until(
                "announced ports in every slot map",
                Self::SETTLE_LIMIT,
                || {
                    for node in self.live() {
                        let slots = cluster_slots(&node.addr())?;
                        if slots.iter().any(|(_, _, m)| !announced.contains(m)) {
                            return Ok(None);
                        }
                    }
                    Ok(Some(()))
                },
            )?;
            self.wait_settled(None, Self::SETTLE_LIMIT)
        })
    }

    /// What each live node says it is (`CLUSTER NODES`, its `myself` line), in index order.
    pub fn roles(&self) -> io::Result<Vec<NodeRole>> {
        off_runtime(|| {
            self.nodes
                .iter()
                .enumerate()
                .filter(|(i, _)| !self.killed[*i])
                .map(|(i, n)| {
                    let nodes: String = query(&n.addr(), redis::cmd("CLUSTER").arg("NODES"))?;
                    parse_myself(i, &nodes).ok_or_else(|| {
                        io::Error::other(format!("{}: no myself line in CLUSTER NODES", n.addr()))
                    })
                })
                .collect()
        })
    }

    /// The live masters serving slots, and for each its live replicas (indexes).
    pub fn shape(&self) -> io::Result<Vec<(NodeRole, Vec<usize>)>> {
        let roles = self.roles()?;
        Ok(roles
            .iter()
            .filter(|r| r.master && !r.slots.is_empty())
            .map(|m| {
                let replicas = roles
                    .iter()
                    .filter(|r| !r.master && r.master_id.as_deref() == Some(&m.id))
                    .map(|r| r.index)
                    .collect();
                (m.clone(), replicas)
            })
            .collect())
    }

    /// SIGKILL the master `i` and wait until one of its replicas serves its slots (every live
    /// node says `cluster_state:ok` and all agree on a slot map without it). Returns the index
    /// of the node that took over.
    pub fn kill_master_and_fail_over(&mut self, i: usize, limit: Duration) -> io::Result<usize> {
        off_runtime(|| {
            let me = self
                .roles()?
                .into_iter()
                .find(|r| r.index == i && r.master && !r.slots.is_empty())
                .ok_or_else(|| io::Error::other(format!("node {i} serves no slots as master")))?;
            self.kill(i)?;
            self.wait_settled(Some(&me.announced), limit)?;
            let first = me.slots.first().map(|(s, _)| *s).unwrap_or(0);
            self.roles()?
                .into_iter()
                .find(|r| r.master && r.slots.iter().any(|(a, b)| (*a..=*b).contains(&first)))
                .map(|r| r.index)
                .ok_or_else(|| io::Error::other(format!("no master serves slot {first}")))
        })
    }

    /// Start node `i` again (after [`RedisCluster::kill`]) on its port, directory and
    /// `nodes.conf`; wait until it is a replica in sync with its master (a master that was
    /// failed over comes back as a replica of the node that took over) and the whole cluster
    /// is [healthy](RedisCluster::wait_healthy). An error names the node and the end of its
    /// log; a node that did not start is left killed, so it can be started again.
    pub fn restart_node(&mut self, i: usize, limit: Duration) -> io::Result<()> {
        off_runtime(|| {
            let addr = self.nodes[i].addr();
            self.nodes[i].restart().map_err(|e| {
                io::Error::other(format!("redis node {i} ({addr}) did not start again: {e}"))
            })?;
            self.killed[i] = false;
            let started = Instant::now();
            loop {
                let last = match self.nodes[i].exit_status() {
                    Some(status) => format!("it exited ({status})"),
                    None => match query::<String>(&addr, redis::cmd("INFO").arg("replication")) {
                        Ok(info)
                            if info_field(&info, "role").as_deref() == Some("slave")
                                && info_field(&info, "master_link_status").as_deref()
                                    == Some("up") =>
                        {
                            break;
                        }
                        Ok(_) => "not in sync yet".into(),
                        Err(e) => e.to_string(),
                    },
                };
                if last.starts_with("it exited") || started.elapsed() > limit {
                    return Err(io::Error::other(format!(
                        "redis node {i} ({addr}) not back as a replica in sync after {:?}: \
                         {last}; its log ends:\n{}",
                        started.elapsed(),
                        self.nodes[i].log_tail(15)
                    )));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            self.wait_healthy(limit)
        })
    }

    /// Nodes not [killed](RedisCluster::kill) whose process has exited anyway: index and
    /// how it ended, with the end of its log.
    pub fn exited_nodes(&mut self) -> Vec<(usize, String)> {
        let mut out = Vec::new();
        for (i, node) in self.nodes.iter_mut().enumerate() {
            if self.killed[i] {
                continue;
            }
            if let Some(status) = node.exit_status() {
                out.push((
                    i,
                    format!(
                        "redis node {i} ({}) exited ({status}); its log ends:\n{}",
                        node.addr(),
                        node.log_tail(15)
                    ),
                ));
            }
        }
        out
    }

    /// One look at the whole cluster: `Ok(Err(..))` says what is not right yet; an error when
    /// a node that should run has exited (waiting cannot help).
    fn health(&mut self) -> io::Result<Result<(), String>> {
        if let Some((_, why)) = self.exited_nodes().into_iter().next() {
            return Err(io::Error::other(why));
        }
        if let Some(i) = self.killed.iter().position(|k| *k) {
            return Ok(Err(format!("redis node {i} is down")));
        }
        let mut agreed: Option<Vec<(u16, u16, String)>> = None;
        for (i, node) in self.nodes.iter().enumerate() {
            let addr = node.addr();
            let info: String = match query(&addr, redis::cmd("CLUSTER").arg("INFO")) {
                Ok(info) => info,
                Err(e) => return Ok(Err(format!("redis node {i}: {e}"))),
            };
            if info_field(&info, "cluster_state").as_deref() != Some("ok") {
                return Ok(Err(format!("redis node {i}: cluster_state not ok")));
            }
            let slots = match cluster_slots(&addr) {
                Ok(s) => s,
                Err(e) => return Ok(Err(format!("redis node {i}: {e}"))),
            };
            match &agreed {
                None => agreed = Some(slots),
                Some(a) if *a != slots => {
                    return Ok(Err(format!("redis node {i}: another slot map")));
                }
                Some(_) => {}
            }
            let repl: String = match query(&addr, redis::cmd("INFO").arg("replication")) {
                Ok(r) => r,
                Err(e) => return Ok(Err(format!("redis node {i}: {e}"))),
            };
            if info_field(&repl, "role").as_deref() == Some("slave")
                && (info_field(&repl, "master_link_status").as_deref() != Some("up")
                    || info_field(&repl, "master_sync_in_progress").as_deref() != Some("0"))
            {
                return Ok(Err(format!("redis node {i}: replica not in sync")));
            }
        }
        let roles = match self.roles() {
            Ok(r) => r,
            Err(e) => return Ok(Err(e.to_string())),
        };
        for m in roles.iter().filter(|r| r.master && !r.slots.is_empty()) {
            if !roles
                .iter()
                .any(|r| !r.master && r.master_id.as_deref() == Some(&m.id))
            {
                return Ok(Err(format!(
                    "redis node {}: a master without replica",
                    m.index
                )));
            }
        }
        Ok(Ok(()))
    }

    /// Wait until the cluster is whole again: every node runs (none killed, none exited),
    /// says `cluster_state:ok` and agrees on the slot map, every replica's link to its
    /// master is up with no sync in progress, and every master serving slots has a replica.
    /// A node found exited ends the wait at once, with the end of its log.
    pub fn wait_healthy(&mut self, limit: Duration) -> io::Result<()> {
        off_runtime(|| {
            let started = Instant::now();
            loop {
                let why = match self.health()? {
                    Ok(()) => return Ok(()),
                    Err(why) => why,
                };
                if started.elapsed() > limit {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("the cluster not whole after {limit:?}: {why}"),
                    ));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    }

    /// Start again every node killed or found exited (each as [`RedisCluster::restart_node`]
    /// would), then wait until the cluster [is whole](RedisCluster::wait_healthy). Returns
    /// the nodes started.
    pub fn revive(&mut self, limit: Duration) -> io::Result<Vec<usize>> {
        off_runtime(|| {
            for (i, _) in self.exited_nodes() {
                self.kill(i)?;
            }
            let down: Vec<usize> = (0..self.nodes.len()).filter(|i| self.killed[*i]).collect();
            for &i in &down {
                let addr = self.nodes[i].addr();
                self.nodes[i].restart().map_err(|e| {
                    io::Error::other(format!("redis node {i} ({addr}) did not start again: {e}"))
                })?;
                self.killed[i] = false;
            }
            self.wait_healthy(limit)?;
            Ok(down)
        })
    }

    /// Keep every node's directory (AOF, `nodes.conf`, `redis.log`) when the cluster is
    /// dropped; returns them, in node order.
    pub fn keep_dirs(&mut self) -> Vec<std::path::PathBuf> {
        self.nodes
            .iter_mut()
            .map(|n| {
                n.keep_dir();
                n.dir().to_path_buf()
            })
            .collect()
    }

    /// A line per node: index, ports, whether it runs, what it says it is, its directory.
    pub fn describe(&mut self) -> String {
        let roles = self.roles().unwrap_or_default();
        let mut out = String::new();
        for (i, node) in self.nodes.iter_mut().enumerate() {
            let state = if self.killed[i] {
                "killed".to_string()
            } else if let Some(status) = node.exit_status() {
                format!("exited ({status})")
            } else {
                "running".to_string()
            };
            let role = roles
                .iter()
                .find(|r| r.index == i)
                .map(|r| {
                    if r.master {
                        format!("master {} slots {:?}", r.id, r.slots)
                    } else {
                        format!(
                            "replica {} of {}",
                            r.id,
                            r.master_id.as_deref().unwrap_or("?")
                        )
                    }
                })
                .unwrap_or_else(|| "-".into());
            out.push_str(&format!(
                "redis node {i}: port {} bus {} {state}; {role}; {}\n",
                node.port(),
                node.extra_port().unwrap_or(0),
                node.dir().display()
            ));
        }
        out
    }

    /// Move `slot` with its keys from the master serving it to the master `to`: `CLUSTER
    /// SETSLOT … IMPORTING` on `to`, `… MIGRATING` on the source, `MIGRATE` of its keys in
    /// batches of 100 (clients meanwhile get `ASK` and `TRYAGAIN`), then `SETSLOT … NODE` on
    /// both and on every other master; waits until every node agrees. Returns the source's
    /// index and how many keys moved.
    pub fn migrate_slot(&self, slot: u16, to: usize) -> io::Result<(usize, usize)> {
        off_runtime(|| {
            let roles = self.roles()?;
            let src = roles
                .iter()
                .find(|r| r.master && r.slots.iter().any(|(a, b)| (*a..=*b).contains(&slot)))
                .ok_or_else(|| io::Error::other(format!("no master serves slot {slot}")))?
                .clone();
            let dst = roles
                .iter()
                .find(|r| r.index == to && r.master)
                .ok_or_else(|| io::Error::other(format!("node {to} is no live master")))?
                .clone();
            if src.index == dst.index {
                return Ok((src.index, 0));
            }
            let (s_addr, d_addr) = (self.nodes[src.index].addr(), self.nodes[dst.index].addr());
            let setslot = |addr: &str, how: &str, id: &str| -> io::Result<()> {
                query(
                    addr,
                    redis::cmd("CLUSTER")
                        .arg("SETSLOT")
                        .arg(slot)
                        .arg(how)
                        .arg(id),
                )
            };
            setslot(&d_addr, "IMPORTING", &src.id)?;
            setslot(&s_addr, "MIGRATING", &dst.id)?;
            let mut moved = 0;
            loop {
                let keys: Vec<String> = query(
                    &s_addr,
                    redis::cmd("CLUSTER")
                        .arg("GETKEYSINSLOT")
                        .arg(slot)
                        .arg(100),
                )?;
                if keys.is_empty() {
                    break;
                }
                let _: () = query(
                    &s_addr,
                    redis::cmd("MIGRATE")
                        .arg("127.0.0.1")
                        .arg(self.nodes[dst.index].port())
                        .arg("")
                        .arg(0)
                        .arg(10_000)
                        .arg("REPLACE")
                        .arg("KEYS")
                        .arg(&keys),
                )?;
                moved += keys.len();
            }
            setslot(&d_addr, "NODE", &dst.id)?;
            setslot(&s_addr, "NODE", &dst.id)?;
            for r in roles.iter().filter(|r| r.master) {
                if r.index != src.index && r.index != dst.index {
                    setslot(&self.nodes[r.index].addr(), "NODE", &dst.id)?;
                }
            }
            self.wait_settled(None, Self::SETTLE_LIMIT)?;
            Ok((src.index, moved))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_myself_line_names_role_master_and_slots() {
        let nodes = "\
a1 127.0.0.1:7001@17001 master - 0 1 1 connected 0-5460\n\
b2 127.0.0.1:7002@17002 myself,master - 0 1 2 connected 5461 5462-10922 [5463->-c3]\n\
c3 127.0.0.1:7003@17003 slave b2 0 1 2 connected\n";
        let r = parse_myself(1, nodes).unwrap();
        assert_eq!(r.id, "b2");
        assert_eq!(r.announced, "127.0.0.1:7002");
        assert!(r.master);
        assert_eq!(r.master_id, None);
        assert_eq!(r.slots, vec![(5461, 5461), (5462, 10922)]);
        let replica = "c3 127.0.0.1:7003@17003 myself,slave b2 0 1 2 connected\n";
        let r = parse_myself(2, replica).unwrap();
        assert!(!r.master);
        assert_eq!(r.master_id.as_deref(), Some("b2"));
        assert!(r.slots.is_empty());
    }
}

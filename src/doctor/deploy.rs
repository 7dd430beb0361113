//! Connecting as a node does, and the deployment-wide checks: replicas, shard spread, sentinels.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use keyfire::config::{RedisMode as Mode, RedisSettings, node_addr};
use keyfire::inspect::{Deployment, Server, ServerConn};

use super::*;

/// How long doctor waits to connect, and for all its reads.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// Connect to `url` and run every check on it and on the data under `prefix` (the stored
/// shard count is not compared with any setting).
pub async fn diagnose(url: &str, prefix: &str) -> Report {
    diagnose_url(url, prefix, None).await
}

/// Check the Redis that settings `s` point at, as `redis.mode` says: in standalone mode the
/// server at `redis.url` (as [`diagnose`], with the settings' credentials and TLS, and the
/// stored shard count compared with `redis.shards`); in sentinel and cluster mode every master
/// (each finding naming its `server`) and the deployment as a whole.
pub async fn diagnose_settings(s: &RedisSettings) -> Report {
    let mut report = match s.mode {
        Mode::Standalone => diagnose_url(&s.url, &s.prefix, Some(s)).await,
        Mode::Sentinel | Mode::Cluster => diagnose_topology(s).await,
    };
    report.shards = Some(s.shards);
    report
}

/// Open a connection to `server` and PING it: the connection, and how long it took (ms); or a
/// failed `connection` finding with `fix`.
pub(crate) async fn connect(
    server: &Server,
    fix: &str,
) -> std::result::Result<(ServerConn, u128), Finding> {
    const NAME: &str = "connection";
    let started = Instant::now();
    let conn = tokio::time::timeout(TIMEOUT, server.connect()).await;
    let mut conn = match conn {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => return Err(Finding::fail(NAME, format!("cannot connect: {e}"), fix)),
        Err(_) => {
            return Err(Finding::fail(
                NAME,
                format!("no connection within {} s", TIMEOUT.as_secs()),
                fix,
            ));
        }
    };
    // PING first: a wrong password or a protected-mode refusal shows here, named.
    match tokio::time::timeout(TIMEOUT, conn.ping()).await {
        Ok(Ok(_)) => Ok((conn, started.elapsed().as_millis())),
        Ok(Err(e)) => Err(Finding::fail(
            NAME,
            format!("connected, but PING failed: {e}"),
            fix,
        )),
        Err(_) => Err(Finding::fail(
            NAME,
            format!(
                "connected, but no answer to PING within {} s",
                TIMEOUT.as_secs()
            ),
            fix,
        )),
    }
}

pub(crate) fn slow_redis() -> Finding {
    Finding::fail(
        "connection",
        format!("Redis did not answer within {} s", TIMEOUT.as_secs()),
        "look at Redis's latency (redis-cli --latency) and slow log",
    )
}

pub(crate) async fn diagnose_url(
    url: &str,
    prefix: &str,
    settings: Option<&RedisSettings>,
) -> Report {
    const NAME: &str = "connection";
    let fix = "check the URL (--redis, redis.url or KEYFIRE__REDIS__URL), that Redis is running \
               and reachable from here, and its password";
    let shown = redact_url(url);
    let server = match settings {
        Some(s) => Server::with_settings(url, s),
        None => Server::open(url),
    };
    let server = match server {
        Ok(c) => c,
        Err(e) => {
            let f = Finding::fail(NAME, format!("bad Redis URL: {e}"), fix);
            return Report::new(shown, prefix, vec![f]);
        }
    };
    let (mut conn, ms) = match connect(&server, fix).await {
        Ok(c) => c,
        Err(f) => return Report::new(shown, prefix, vec![f]),
    };
    let connected = Finding::ok(NAME, format!("connected in {ms} ms"));
    let Ok(mut facts) = tokio::time::timeout(TIMEOUT, gather(&mut conn, prefix)).await else {
        return Report::new(shown, prefix, vec![slow_redis()]);
    };
    probe_notifications(&server, &mut facts, None).await;
    facts.expected_shards = settings.map(|s| s.shards);
    let mut findings = vec![connected];
    findings.extend(evaluate(&facts));
    Report::new(shown, prefix, findings)
}

/// Sentinel and cluster mode: connect as a node does, check every master, then the
/// deployment.
pub(crate) async fn diagnose_topology(s: &RedisSettings) -> Report {
    const NAME: &str = "connection";
    let shown = s
        .nodes
        .iter()
        .map(|n| redact_url(n))
        .collect::<Vec<_>>()
        .join(", ");
    let finish = |findings: Vec<Finding>, servers: Vec<String>| {
        let mut r = Report::new(shown.clone(), &s.prefix, findings);
        r.mode = s.mode;
        r.servers = servers;
        r
    };
    let fix = match s.mode {
        Mode::Sentinel => {
            "check redis.nodes (the sentinels' addresses; KEYFIRE__REDIS__NODES) and \
             redis.sentinel_master, that the sentinels and the master run and are reachable from \
             here, and redis.username and redis.password"
        }
        _ => {
            "check redis.nodes (seed nodes of the cluster; KEYFIRE__REDIS__NODES), that the \
             cluster runs and is reachable from here, and redis.username and redis.password"
        }
    };
    let started = Instant::now();
    let conn = match tokio::time::timeout(TIMEOUT, Deployment::connect(s)).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            let f = Finding::fail(NAME, format!("cannot connect: {e}"), fix);
            return finish(vec![f], Vec::new());
        }
        Err(_) => {
            let f = Finding::fail(
                NAME,
                format!("no connection within {} s", TIMEOUT.as_secs()),
                fix,
            );
            return finish(vec![f], Vec::new());
        }
    };
    let masters = match tokio::time::timeout(TIMEOUT, conn.masters()).await {
        Ok(Ok(m)) => m,
        Ok(Err(e)) => {
            let f = Finding::fail(
                NAME,
                format!("connected, but cannot list the masters: {e}"),
                fix,
            );
            return finish(vec![f], Vec::new());
        }
        Err(_) => return finish(vec![slow_redis()], Vec::new()),
    };
    let addrs: Vec<String> = masters.iter().map(Server::addr).collect();
    let mut findings = vec![Finding::ok(
        NAME,
        format!(
            "connected in {} ms; {} master(s): {}",
            started.elapsed().as_millis(),
            addrs.len(),
            addrs.join(", ")
        ),
    )];

    // Each master's own checks, all at once. A master that refuses CONFIG gets its
    // expired events probed with a key of its own slots.
    let probe_keys = match tokio::time::timeout(TIMEOUT, conn.probe_keys(&s.prefix, &masters)).await
    {
        Ok(Ok(keys)) => keys,
        _ => vec![None; masters.len()],
    };
    let servers: Vec<(Option<Facts>, Vec<Finding>)> = futures::future::join_all(
        masters
            .iter()
            .zip(&addrs)
            .zip(probe_keys)
            .map(|((server, addr), key)| check_server(server, addr, &s.prefix, key)),
    )
    .await;
    let replicas: Vec<(String, Option<usize>)> = addrs
        .iter()
        .zip(&servers)
        .map(|(addr, (facts, _))| (addr.clone(), facts.as_ref().and_then(replica_count)))
        .collect();

    // The deployment's own checks.
    match s.mode {
        Mode::Cluster => {
            findings.push(check_cluster_replicas(&replicas));
            findings.push(shard_spread(&conn, s, &addrs).await);
            findings.push(check_shard_count(s.shards, addrs.len()));
        }
        Mode::Sentinel => {
            let answers = sentinel_answers(s).await;
            findings.push(check_sentinels(&s.sentinel_master, &answers));
            findings.push(check_sentinel_replicas(&replicas));
        }
        Mode::Standalone => {}
    }
    findings.extend(data_findings(&conn, s).await);
    for (_, server_findings) in servers {
        findings.extend(server_findings);
    }
    finish(findings, addrs)
}

/// One master's checks, each finding labelled with `addr`; its facts when it could be read.
pub(crate) async fn check_server(
    server: &Server,
    addr: &str,
    prefix: &str,
    probe_key: Option<String>,
) -> (Option<Facts>, Vec<Finding>) {
    let fix = "check that this master runs and is reachable from here at the address the \
               deployment announces (cluster-announce-ip, replica-announce-ip), and \
               redis.username and redis.password";
    let (mut conn, ms) = match connect(server, fix).await {
        Ok(c) => c,
        Err(f) => return (None, vec![f.on(addr)]),
    };
    let connected = Finding::ok("connection", format!("connected in {ms} ms")).on(addr);
    let Ok(mut facts) = tokio::time::timeout(TIMEOUT, gather_server(&mut conn)).await else {
        return (None, vec![slow_redis().on(addr)]);
    };
    facts.prefix = prefix.to_string();
    if probe_key.is_some() {
        probe_notifications(server, &mut facts, probe_key).await;
    }
    let mut findings = vec![connected];
    findings.extend(
        evaluate_scope(&facts, Scope::Server)
            .into_iter()
            .map(|f| f.on(addr)),
    );
    (Some(facts), findings)
}

/// The replicas connected to a master, from its `INFO`.
pub(crate) fn replica_count(facts: &Facts) -> Option<usize> {
    if facts.info("role")? != "master" {
        return None;
    }
    facts.info("connected_slaves")?.parse().ok()
}

/// The [`Scope::Data`] findings, read through `conn` (so from the meta tag's master).
pub(crate) async fn data_findings(conn: &Deployment, s: &RedisSettings) -> Vec<Finding> {
    let mut facts = Facts {
        prefix: s.prefix.clone(),
        expected_shards: Some(s.shards),
        ..Facts::default()
    };
    if s.mode == Mode::Cluster
        && let Ok(Ok(owner)) = tokio::time::timeout(TIMEOUT, conn.meta_master(&s.prefix)).await
    {
        facts.meta_server = owner;
    }
    if tokio::time::timeout(TIMEOUT, gather_data(&conn.data(&s.prefix), &mut facts))
        .await
        .is_err()
    {
        facts.layout_error = Some(format!("no answer within {} s", TIMEOUT.as_secs()));
    }
    evaluate_scope(&facts, Scope::Data)
}

/// Cluster mode: which master holds each of the `redis.shards` shards.
pub(crate) async fn shard_spread(
    conn: &Deployment,
    s: &RedisSettings,
    masters: &[String],
) -> Finding {
    const NAME: &str = "shard-spread";
    let fix = "check the cluster's slot map: redis-cli --cluster check <host:port>";
    let shard_masters = conn.shard_masters(&s.prefix, s.shards as usize);
    let owners = match tokio::time::timeout(TIMEOUT, shard_masters).await {
        Ok(Ok(owners)) => owners,
        Ok(Err(e)) => {
            return Finding::warn(
                NAME,
                format!("cannot tell which master holds each shard ({e})"),
                fix,
            );
        }
        Err(_) => {
            return Finding::warn(
                NAME,
                format!(
                    "cannot tell which master holds each shard (no answer within {} s)",
                    TIMEOUT.as_secs()
                ),
                fix,
            );
        }
    };
    let mut per_master: Vec<(String, usize)> = masters.iter().map(|m| (m.clone(), 0)).collect();
    for owner in owners {
        match per_master.iter_mut().find(|(m, _)| *m == owner) {
            Some((_, n)) => *n += 1,
            None => per_master.push((owner, 1)),
        }
    }
    check_shard_spread(s.shards, &per_master)
}

/// Cluster mode: the shards should spread evenly over the masters (`per_master`: how many
/// each holds), or some masters carry more of keyfire's load than others.
pub fn check_shard_spread(shards: u32, per_master: &[(String, usize)]) -> Finding {
    const NAME: &str = "shard-spread";
    let masters = per_master.len();
    let min = per_master.iter().map(|(_, n)| *n).min().unwrap_or(0);
    let max = per_master.iter().map(|(_, n)| *n).max().unwrap_or(0);
    let list = per_master
        .iter()
        .map(|(m, n)| format!("{m}: {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    if min > 0 && max - min <= 1 {
        return Finding::ok(
            NAME,
            format!("the {shards} shard(s) spread evenly over the {masters} masters ({list})"),
        );
    }
    let why = if min == 0 {
        "a master holding no shard does none of keyfire's work, the others carry it all"
    } else {
        "the masters holding more shards carry more of keyfire's load"
    };
    Finding::warn(
        NAME,
        format!("the {shards} shard(s) spread unevenly over the {masters} masters ({list}): {why}"),
        format!(
            "under a new redis.prefix, choose redis.shards as a multiple of {masters} (each shard \
             takes an equal slot range, so a multiple spreads evenly over masters with equal \
             ranges; a prefix keeps the shard count its data was written with); if the masters' \
             slot ranges differ, rebalance them: redis-cli --cluster rebalance <host:port>"
        ),
    )
}

/// Cluster mode: `redis.shards` below the number of masters leaves masters idle.
pub fn check_shard_count(shards: u32, masters: usize) -> Finding {
    const NAME: &str = "shard-count";
    if shards as usize >= masters {
        return Finding::ok(
            NAME,
            format!(
                "redis.shards = {shards}: at least one shard for each of the {masters} masters"
            ),
        );
    }
    Finding::warn(
        NAME,
        format!(
            "redis.shards = {shards} but the cluster has {masters} masters: at least {} of them \
             hold no shard, and keyfire's load falls on the others",
            masters - shards as usize
        ),
        format!(
            "set redis.shards to a multiple of {masters} (such as {}) before the first node \
             writes data under the prefix; a prefix keeps its shard count, so for existing data \
             start under a new redis.prefix",
            masters * 4
        ),
    )
}

/// Cluster mode: every master should have a replica to fail over to (`replicas`: master and
/// its connected replicas, `None` when unknown).
pub fn check_cluster_replicas(replicas: &[(String, Option<usize>)]) -> Finding {
    const NAME: &str = "replicas";
    let without: Vec<&str> = replicas
        .iter()
        .filter(|(_, n)| *n == Some(0))
        .map(|(m, _)| m.as_str())
        .collect();
    let unknown: Vec<&str> = replicas
        .iter()
        .filter(|(_, n)| n.is_none())
        .map(|(m, _)| m.as_str())
        .collect();
    if !without.is_empty() {
        return Finding::warn(
            NAME,
            format!(
                "{} of the {} masters have no replica ({}): when one fails, its slots and the \
                 shards on them stay down until it is back (nothing on them fires), and with \
                 cluster-require-full-coverage yes (the default) the whole cluster refuses \
                 commands meanwhile",
                without.len(),
                replicas.len(),
                without.join(", ")
            ),
            "give every master a replica: redis-cli --cluster add-node <new host:port> \
             <any node's host:port> --cluster-slave --cluster-master-id <the master's id>",
        );
    }
    if !unknown.is_empty() {
        return Finding::warn(
            NAME,
            format!(
                "cannot tell whether {} have replicas (their INFO could not be read)",
                unknown.join(", ")
            ),
            "check by hand: redis-cli -h <host> -p <port> INFO replication",
        );
    }
    Finding::ok(
        NAME,
        format!(
            "each of the {} masters has a replica to fail over to",
            replicas.len()
        ),
    )
}

/// Sentinel mode: the master should have a replica for the sentinels to promote.
pub fn check_sentinel_replicas(replicas: &[(String, Option<usize>)]) -> Finding {
    const NAME: &str = "replicas";
    match replicas.first() {
        Some((_, Some(0))) | None => Finding::warn(
            NAME,
            format!(
                "the master{} has no replica: the sentinels have nothing to fail over to, so \
                 while it is down nothing fires",
                replicas
                    .first()
                    .map(|(m, _)| format!(" {m}"))
                    .unwrap_or_default()
            ),
            "start a replica of it (`replicaof <master host> <port>` in the replica's \
             redis.conf); the sentinels find it by themselves",
        ),
        Some((master, None)) => Finding::warn(
            NAME,
            format!(
                "cannot tell whether the master {master} has replicas (its INFO could not be read)"
            ),
            "check by hand: redis-cli -h <host> -p <port> INFO replication",
        ),
        Some((master, Some(n))) => Finding::ok(
            NAME,
            format!("the master {master} has {n} replica(s) the sentinels can promote"),
        ),
    }
}

/// What one sentinel answered to `SENTINEL get-master-addr-by-name`: the master's
/// `host:port`, `None` when it does not monitor that name, or why it could not be asked.
pub type SentinelAnswer = std::result::Result<Option<String>, String>;

/// Ask every sentinel of `redis.nodes` for the master of `redis.sentinel_master`.
pub(crate) async fn sentinel_answers(s: &RedisSettings) -> Vec<(String, SentinelAnswer)> {
    futures::future::join_all(s.nodes.iter().map(|node| async move {
        let shown = node_addr(node)
            .map(|(host, port)| format!("{host}:{port}"))
            .unwrap_or_else(|| redact_url(node));
        (shown, ask_sentinel(node, s).await)
    }))
    .await
}

pub(crate) async fn ask_sentinel(node: &str, s: &RedisSettings) -> SentinelAnswer {
    // A sentinel's credentials come from its URL, not from redis.username and redis.password.
    match tokio::time::timeout(TIMEOUT, keyfire::inspect::sentinel_master(node, s)).await {
        Ok(Ok(addr)) => Ok(addr),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {} s", TIMEOUT.as_secs())),
    }
}

/// Sentinel mode: the sentinels should agree on the master of `service` (`answers`: each
/// sentinel's answer).
pub fn check_sentinels(service: &str, answers: &[(String, SentinelAnswer)]) -> Finding {
    const NAME: &str = "sentinels";
    let mut named: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut unreachable = Vec::new();
    let mut unaware = Vec::new();
    for (sentinel, answer) in answers {
        match answer {
            Ok(Some(master)) => named.entry(master).or_default().push(sentinel),
            Ok(None) => unaware.push(sentinel.as_str()),
            Err(e) => unreachable.push(format!("{sentinel} ({e})")),
        }
    }
    if named.len() > 1 {
        let views = named
            .iter()
            .map(|(master, who)| format!("{} name {master}", who.join(", ")))
            .collect::<Vec<_>>()
            .join("; ");
        return Finding::fail(
            NAME,
            format!(
                "the sentinels disagree on the master of '{service}' ({views}): nodes asking \
                 different sentinels may write to different masters, and a firing could run twice"
            ),
            format!(
                "wait for a failover in progress to end and run keyfire doctor again; if they \
                 still disagree, check the sentinels' network and that each has the same \
                 `sentinel monitor {service} ...` line"
            ),
        );
    }
    let Some((master, agreeing)) = named.into_iter().next() else {
        return Finding::fail(
            NAME,
            format!("no sentinel in redis.nodes names a master for '{service}'"),
            format!(
                "check redis.sentinel_master ('{service}') against the sentinels' `sentinel \
                 monitor` lines, and that redis.nodes lists the sentinels"
            ),
        );
    };
    let mut problems = Vec::new();
    if !unreachable.is_empty() {
        problems.push(format!("no answer from {}", unreachable.join(", ")));
    }
    if !unaware.is_empty() {
        problems.push(format!("{} do not monitor '{service}'", unaware.join(", ")));
    }
    let agree = format!(
        "{} of the {} sentinels in redis.nodes name {master} as the master of '{service}'",
        agreeing.len(),
        answers.len()
    );
    if problems.is_empty() {
        return Finding::ok(NAME, agree);
    }
    Finding::warn(
        NAME,
        format!(
            "{agree}; {}: nodes cannot ask those, and fewer sentinels are left to agree on a \
             failover",
            problems.join("; ")
        ),
        format!(
            "make every sentinel of redis.nodes reachable from here and monitor '{service}' \
             (`sentinel monitor {service} <host> <port> <quorum>`), or drop it from redis.nodes"
        ),
    )
}

//! `keyfire doctor`, the built binary, against a redis-server started with the shipped
//! redis.conf and against ones with bad settings; and in cluster and sentinel mode against
//! real local deployments (`keyfire_testkit::RedisCluster`, `RedisSentinelSet`).

use std::process::Command;

use keyfire::store::{Keys, slot_of};
use keyfire_testkit::{RedisCluster, RedisOptions, RedisSentinelSet, RedisServer};
use serde_json::Value;

/// Run `keyfire doctor <args>`; its exit code and stdout. KEYFIRE__ variables of the
/// environment running the tests are removed, so only the arguments count.
fn doctor(args: &[&str]) -> (i32, String) {
    doctor_env(args, &[])
}

/// [`doctor`] with these KEYFIRE__ variables set.
fn doctor_env(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_keyfire"));
    cmd.arg("doctor").args(args);
    for (k, _) in std::env::vars() {
        if k.starts_with("KEYFIRE__") {
            cmd.env_remove(k);
        }
    }
    cmd.envs(env.iter().copied());
    let out = cmd.output().expect("run keyfire doctor");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.is_empty() || out.status.code() == Some(2),
        "stderr: {stderr}"
    );
    (out.status.code().expect("exit code"), stdout)
}

fn findings(json: &str) -> Value {
    serde_json::from_str(json).unwrap_or_else(|e| panic!("not JSON ({e}): {json}"))
}

fn status_of<'a>(report: &'a Value, check: &str) -> &'a str {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["check"] == check)
        .unwrap_or_else(|| panic!("no {check} finding: {report:#}"))["status"]
        .as_str()
        .unwrap()
}

#[test]
fn the_shipped_redis_conf_passes() {
    // Persistent: the shipped redis.conf's AOF on, as in production.
    let redis = RedisServer::start_with(RedisOptions {
        persistent: true,
        ..Default::default()
    })
    .unwrap();
    let (code, out) = doctor(&["--redis", &redis.url(), "--json"]);
    let report = findings(&out);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["ok"], true);
    for f in report["findings"].as_array().unwrap() {
        assert_eq!(f["status"], "ok", "{f:#}");
    }
    let checks = check_names(report["findings"].as_array().unwrap());
    let deployment_checks = ["layout", "data-loss", "acl"];
    assert_eq!(checks, [PER_SERVER_CHECKS, &deployment_checks].concat());

    // The text form says the same, and exits the same way.
    let (code, text) = doctor(&["--redis", &redis.url()]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("0 failed"), "{text}");
    assert!(!text.contains("FAIL"), "{text}");
}

#[test]
fn notifications_off_and_allkeys_lru_fail_with_fixes() {
    let redis = RedisServer::start_with(RedisOptions {
        extra: vec![
            ("maxmemory-policy".into(), "allkeys-lru".into()),
            ("notify-keyspace-events".into(), "".into()),
            ("hz".into(), "10".into()),
            (
                "client-output-buffer-limit".into(),
                "pubsub 32mb 8mb 60".into(),
            ),
            ("hash-max-listpack-value".into(), "64".into()),
        ],
        ..Default::default()
    })
    .unwrap();
    let (code, text) = doctor(&["--redis", &redis.url()]);
    assert_eq!(code, 1, "{text}");
    for line in [
        "FAIL  notifications",
        "fix: put `notify-keyspace-events Ex` in redis.conf",
        "CONFIG SET notify-keyspace-events Ex",
        "FAIL  eviction",
        "maxmemory-policy is allkeys-lru",
        "CONFIG SET maxmemory-policy noeviction",
        // Started without persistence (RedisOptions::persistent is false).
        "FAIL  persistence",
        "WARN  hz",
        "WARN  pubsub-buffer",
        "WARN  hash-encoding",
        "CONFIG SET hash-max-listpack-value 1024",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }

    let (code, json) = doctor(&["--redis", &redis.url(), "--json"]);
    assert_eq!(code, 1);
    let report = findings(&json);
    assert_eq!(report["ok"], false);
    assert_eq!(status_of(&report, "notifications"), "fail");
    assert_eq!(status_of(&report, "eviction"), "fail");
    assert_eq!(status_of(&report, "hz"), "warn");
    assert_eq!(status_of(&report, "hash-encoding"), "warn");
    assert_eq!(status_of(&report, "version"), "ok");
    assert_eq!(report["summary"]["fail"], 3, "{report:#}");
}

#[test]
fn layout_and_config_file() {
    let redis = RedisServer::start_with(RedisOptions {
        persistent: true,
        ..Default::default()
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("keyfire.toml");
    std::fs::write(
        &config,
        format!("[redis]\nurl = \"{}\"\nprefix = \"doc\"\n", redis.url()),
    )
    .unwrap();
    let config = config.to_str().unwrap();

    let mut c = redis::Client::open(redis.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let layout = keyfire::store::Keys::new("doc").layout();
    let next = keyfire::store::LAYOUT_VERSION + 1;
    redis::cmd("SET")
        .arg(&layout)
        .arg(next)
        .query::<()>(&mut c)
        .unwrap();
    let (code, text) = doctor(&["--config", config]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("prefix 'doc'"), "{text}");
    assert!(
        text.contains("FAIL  layout") && text.contains(&format!("uses key layout {next}")),
        "{text}"
    );
    // The prefix flag wins over the file's: nothing under `other` yet.
    let (code, text) = doctor(&["--config", config, "--prefix", "other"]);
    assert_eq!(code, 0, "{text}");

    // Layout 1: one shard, what a node with the default `redis.shards = 1` writes.
    redis::cmd("SET")
        .arg(&layout)
        .arg(1)
        .query::<()>(&mut c)
        .unwrap();
    let (code, text) = doctor(&["--config", config]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("key layout 1 under the prefix 'doc'"),
        "{text}"
    );

    // A missing settings file is a usage error.
    let (code, _) = doctor(&["--config", "/nonexistent/keyfire.toml"]);
    assert_eq!(code, 2);
}

#[test]
fn an_unreachable_redis_fails() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (code, json) = doctor(&[
        "--redis",
        &format!("redis://:s3cret@127.0.0.1:{port}/0"),
        "--json",
    ]);
    assert_eq!(code, 1);
    let report = findings(&json);
    assert_eq!(status_of(&report, "connection"), "fail");
    assert!(!json.contains("s3cret"), "the password is hidden: {json}");
}

/// The checks doctor runs on each server, in their order (then come the deployment's).
const PER_SERVER_CHECKS: &[&str] = &[
    "connection",
    "version",
    "notifications",
    "eviction",
    "memory",
    "persistence",
    "hz",
    "replication",
    "clock",
    "pubsub-buffer",
    "hash-encoding",
    "config-access",
];

/// The names of `findings`' checks, in their order.
fn check_names<'a>(findings: impl IntoIterator<Item = &'a Value>) -> Vec<&'a str> {
    findings
        .into_iter()
        .map(|f| f["check"].as_str().unwrap())
        .collect()
}

/// The findings about `server` (`None`: about the deployment).
fn findings_on<'a>(report: &'a Value, server: Option<&str>) -> Vec<&'a Value> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["server"].as_str() == server)
        .collect()
}

/// The deployment's finding of `check`.
fn deployment<'a>(report: &'a Value, check: &str) -> &'a Value {
    findings_on(report, None)
        .into_iter()
        .find(|f| f["check"] == check)
        .unwrap_or_else(|| panic!("no {check} finding: {report:#}"))
}

/// Every master gets the per-server checks, labelled with its address.
fn assert_one_section_per_master(report: &Value, text: &str, masters: &[String]) {
    let servers: Vec<&str> = report["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    let mut sorted = servers.clone();
    sorted.sort();
    let mut want: Vec<&str> = masters.iter().map(String::as_str).collect();
    want.sort();
    assert_eq!(sorted, want, "{report:#}");
    for master in masters {
        let checks = check_names(findings_on(report, Some(master)));
        assert_eq!(checks, PER_SERVER_CHECKS, "{master}: {report:#}");
        assert_eq!(
            text.lines()
                .filter(|l| *l == format!("master {master}"))
                .count(),
            1,
            "{text}"
        );
    }
    assert_eq!(
        text.lines().filter(|l| l.starts_with("master ")).count(),
        masters.len(),
        "{text}"
    );
}

/// Write what a node with `shards` shards writes under `prefix` on the master of the meta tag.
fn write_layout(cluster: &RedisCluster, prefix: &str, shards: u32) {
    let keys = Keys::new(prefix);
    let master = cluster.master_of_slot(slot_of(&keys.layout())).unwrap();
    let mut c = redis::Client::open(format!("redis://{master}"))
        .unwrap()
        .get_connection()
        .unwrap();
    redis::pipe()
        .set(keys.layout(), keyfire::store::LAYOUT_VERSION)
        .set(keys.shard_count(), shards)
        .query::<()>(&mut c)
        .unwrap();
}

#[test]
fn a_cluster_with_replicas_passes_with_a_section_per_master() {
    let cluster = RedisCluster::start(3, 1).unwrap();
    let nodes = cluster.nodes().join(",");
    let env = [
        ("KEYFIRE__REDIS__MODE", "cluster"),
        ("KEYFIRE__REDIS__NODES", nodes.as_str()),
        ("KEYFIRE__REDIS__SHARDS", "12"),
    ];
    let (code, json) = doctor_env(&["--json"], &env);
    let report = findings(&json);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["mode"], "cluster");
    assert_eq!(report["shards"], 12);
    // The shipped redis.conf, the AOF on, a replica each: nothing to warn about.
    for f in report["findings"].as_array().unwrap() {
        assert_eq!(f["status"], "ok", "{f:#}");
    }
    let masters = cluster.masters().unwrap();
    assert_eq!(masters.len(), 3);
    let spread = deployment(&report, "shard-spread");
    for m in &masters {
        assert!(
            spread["message"]
                .as_str()
                .unwrap()
                .contains(&format!("{m}: 4")),
            "{spread:#}"
        );
    }
    assert_eq!(deployment(&report, "replicas")["status"], "ok");
    assert_eq!(deployment(&report, "shard-count")["status"], "ok");
    assert_eq!(deployment(&report, "layout")["status"], "ok");

    let (code, text) = doctor_env(&[], &env);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("cluster mode through redis://"), "{text}");
    assert!(text.contains("this deployment suits keyfire"), "{text}");
    assert_one_section_per_master(&report, &text, &masters);
}

#[test]
fn a_cluster_without_replicas_warns_and_a_shard_count_mismatch_fails() {
    let cluster = RedisCluster::start(3, 0).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("keyfire.toml");
    let nodes: Vec<String> = cluster.nodes().iter().map(|n| format!("\"{n}\"")).collect();
    std::fs::write(
        &config,
        format!(
            "[redis]\nmode = \"cluster\"\nnodes = [{}]\nshards = 12\nprefix = \"doc\"\n",
            nodes.join(", ")
        ),
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let masters = cluster.masters().unwrap();

    // Missing replicas only warn: keyfire works, but a failed master takes its shards down.
    let (code, json) = doctor(&["--config", config, "--json"]);
    let report = findings(&json);
    assert_eq!(code, 0, "{report:#}");
    let replicas = deployment(&report, "replicas");
    assert_eq!(replicas["status"], "warn", "{replicas:#}");
    let message = replicas["message"].as_str().unwrap();
    assert!(
        message.contains("3 of the 3 masters have no replica"),
        "{message}"
    );
    for m in &masters {
        assert!(message.contains(m.as_str()), "{message}");
    }
    assert!(
        replicas["fix"]
            .as_str()
            .unwrap()
            .contains("--cluster-slave")
    );
    assert_eq!(deployment(&report, "shard-spread")["status"], "ok");

    // Data written with 6 shards, checked with redis.shards = 12: nodes would refuse to start.
    write_layout(&cluster, "doc", 6);
    let (code, json) = doctor(&["--config", config, "--json"]);
    let report = findings(&json);
    assert_eq!(code, 1, "{report:#}");
    let layout = deployment(&report, "layout");
    assert_eq!(layout["status"], "fail", "{layout:#}");
    assert!(
        layout["message"]
            .as_str()
            .unwrap()
            .contains("spread over 6 shard(s), but redis.shards is 12"),
        "{layout:#}"
    );
    assert!(
        layout["fix"]
            .as_str()
            .unwrap()
            .starts_with("set redis.shards = 6"),
        "{layout:#}"
    );
    assert_eq!(report["summary"]["fail"], 1, "{report:#}");

    let (code, text) = doctor(&["--config", config]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("FAIL  layout"), "{text}");
    assert!(text.contains("fix: set redis.shards = 6"), "{text}");
    assert!(text.contains("WARN  replicas"), "{text}");
    assert_one_section_per_master(&report, &text, &masters);

    // With the data's shard count the layout passes (6 shards spread 2, 2, 2).
    let (code, json) = doctor_env(
        &["--config", config, "--json"],
        &[("KEYFIRE__REDIS__SHARDS", "6")],
    );
    let report = findings(&json);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(deployment(&report, "layout")["status"], "ok");
    assert_eq!(deployment(&report, "shard-spread")["status"], "ok");
}

#[test]
fn a_sentinel_deployment_is_checked_through_its_sentinels() {
    let set = RedisSentinelSet::start().unwrap();
    let nodes = set.sentinels().join(",");
    let (code, json) = doctor_env(
        &["--json"],
        &[
            ("KEYFIRE__REDIS__MODE", "sentinel"),
            ("KEYFIRE__REDIS__NODES", nodes.as_str()),
            (
                "KEYFIRE__REDIS__SENTINEL_MASTER",
                RedisSentinelSet::MASTER_NAME,
            ),
        ],
    );
    let report = findings(&json);
    let master = set.master_addr().unwrap();
    assert_eq!(report["servers"], serde_json::json!([master]), "{report:#}");
    let sentinels = deployment(&report, "sentinels");
    assert_eq!(sentinels["status"], "ok", "{sentinels:#}");
    assert!(
        sentinels["message"].as_str().unwrap().contains(&format!(
            "3 of the 3 sentinels in redis.nodes name {master}"
        )),
        "{sentinels:#}"
    );
    assert_eq!(
        deployment(&report, "replicas")["status"],
        "ok",
        "{report:#}"
    );
    // RedisSentinelSet's servers run without persistence: the only failure.
    let failed = check_names(
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["status"] == "fail"),
    );
    assert_eq!(failed, ["persistence"], "{report:#}");
    assert_eq!(code, 1);
}

/// The rule of the shipped `redis/keyfire.acl`, with a password, as `ACL SETUSER` arguments.
fn shipped_acl_rule(password: &str) -> Vec<String> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/redis/keyfire.acl"))
        .expect("redis/keyfire.acl");
    let line = text
        .lines()
        .find(|l| l.starts_with("user keyfire "))
        .expect("a user line");
    line.split_whitespace()
        .skip(2)
        .map(|t| t.replace(">CHANGE-ME", &format!(">{password}")))
        .collect()
}

/// A user with only the shipped ACL passes the acl check; one without scripting fails it,
/// and the finding names what was refused.
#[test]
fn doctor_checks_the_redis_user_against_what_keyfire_needs() {
    let redis = RedisServer::start().unwrap();
    let client = redis::Client::open(redis.url()).unwrap();
    let mut c = client.get_connection().unwrap();
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("keyfire")
        .arg(shipped_acl_rule("pw1"))
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("weak")
        .arg(&["on", ">pw2", "~*", "&*", "+@all", "-@scripting"][..])
        .query(&mut c)
        .unwrap();
    let port = redis.port();

    let url = format!("redis://keyfire:pw1@127.0.0.1:{port}/0");
    let (_, out) = doctor(&["--redis", &url, "--json"]);
    let report = findings(&out);
    assert_eq!(status_of(&report, "acl"), "ok", "{report:#}");
    // The shipped ACL is enough for the other checks to read what they need, too.
    assert_eq!(status_of(&report, "notifications"), "ok", "{report:#}");

    let url = format!("redis://weak:pw2@127.0.0.1:{port}/0");
    let (code, out) = doctor(&["--redis", &url, "--json"]);
    let report = findings(&out);
    assert_eq!(code, 1, "{report:#}");
    assert_eq!(status_of(&report, "acl"), "fail", "{report:#}");
    let acl = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["check"] == "acl")
        .unwrap();
    let message = acl["message"].as_str().unwrap();
    assert!(
        message.contains("EVALSHA") && message.contains("SCRIPT LOAD"),
        "{message}"
    );
    assert!(
        acl["fix"].as_str().unwrap().contains("redis/keyfire.acl"),
        "{acl:#}"
    );
}

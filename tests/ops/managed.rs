//! keyfire on Redis as managed services offer it (ElastiCache, MemoryDB, Aiven): `CONFIG`,
//! `DEBUG`, `ROLE`, `COMMAND`, `MONITOR`, `ACL` and `CLUSTER` renamed away, keyspace events set
//! by the operator. `keyfire serve`, the CLI and `keyfire doctor`, as a user runs them, against
//! such a Redis: plain, over TLS with a private CA, and as the user of the shipped
//! `redis/keyfire.acl`; and refused, with the setting named, where the events are off.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

use crate::support::{keyfire_cli, printed, printed_json, wait};
use keyfire_testkit::free_port;
use keyfire_testkit::{RedisOptions, RedisServer};

const BIN: &str = env!("CARGO_BIN_EXE_keyfire");
const TOKEN: &str = "managed-token";

/// How the node reaches Redis.
struct Access {
    url: String,
    tls_ca: Option<PathBuf>,
}

fn write_config(dir: &Path, access: &Access, port: u16, enable_notifications: bool) -> PathBuf {
    let tls = match &access.tls_ca {
        Some(ca) => format!("tls = true\ntls_ca = \"{}\"\n", ca.display()),
        None => String::new(),
    };
    let text = format!(
        r#"[redis]
url = "{url}"
prefix = "mr"
enable_notifications = {enable_notifications}
{tls}
[node]
id = "managed-node"
heartbeat_interval = "200ms"
node_ttl = "1s"
sweep_interval = "1s"
claim_grace = "1s"
drain_timeout = "5s"

[api]
listen = "127.0.0.1:{port}"
token = "{TOKEN}"
"#,
        url = access.url,
    );
    let path = dir.join("keyfire.toml");
    std::fs::write(&path, text).unwrap();
    path
}

struct Serve {
    child: Child,
    log: PathBuf,
}

impl Serve {
    fn start(config: &Path, dir: &Path) -> Self {
        let log = dir.join("serve.log");
        let child = Command::new(BIN)
            .args(["serve", "--config"])
            .arg(config)
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdout(Stdio::from(std::fs::File::create(&log).unwrap()))
            .stderr(Stdio::from(
                std::fs::OpenOptions::new().append(true).open(&log).unwrap(),
            ))
            .spawn()
            .expect("run keyfire serve");
        Self { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM, and its exit code.
    fn stop(mut self) -> i32 {
        let _ = kill(Pid::from_raw(self.child.id() as i32), Signal::SIGTERM);
        let status =
            wait::until_blocking("serve to stop on SIGTERM", Duration::from_secs(20), || {
                self.child.try_wait().unwrap()
            });
        status.code().unwrap_or(-1)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn cli(url: &str, args: &[&str]) -> Output {
    keyfire_cli(url, Some(TOKEN), args)
}

/// `GET path` on the node's API: (status, body).
fn get(port: u16, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    (status, body)
}

fn doctor(config: &Path) -> (i32, Value) {
    let mut cmd = Command::new(BIN);
    cmd.args(["doctor", "--json", "--config"]).arg(config);
    for (k, _) in std::env::vars() {
        if k.starts_with("KEYFIRE__") {
            cmd.env_remove(k);
        }
    }
    let out = cmd.output().expect("run keyfire doctor");
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("doctor --json: {e}: {}", printed(&out)));
    (out.status.code().unwrap_or(-1), report)
}

fn finding<'a>(report: &'a Value, check: &str) -> &'a Value {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["check"] == check)
        .unwrap_or_else(|| panic!("no {check} finding: {report:#}"))
}

/// The commands are really gone: keyfire cannot have used them.
async fn assert_renamed_away(redis: &RedisServer) {
    let mut c = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    for (name, arg) in [
        ("CONFIG", "GET"),
        ("DEBUG", "SLEEP"),
        ("ROLE", ""),
        ("COMMAND", "COUNT"),
        ("ACL", "WHOAMI"),
        ("CLUSTER", "INFO"),
    ] {
        let mut cmd = redis::cmd(name);
        if !arg.is_empty() {
            cmd.arg(arg);
        }
        let err = cmd
            .query_async::<redis::Value>(&mut c)
            .await
            .expect_err(name);
        assert!(err.to_string().contains("unknown command"), "{name}: {err}");
    }
}

/// Serve, the CLI and doctor on one managed Redis: the node starts (expired events checked by
/// a probe), is ready, fires a job the CLI created, doctor passes with what it probed and what
/// it could not check named, and SIGTERM stops it cleanly.
async fn serve_cli_and_doctor(redis: &RedisServer, access: Access, enable_notifications: bool) {
    assert_renamed_away(redis).await;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let config = write_config(dir.path(), &access, port, enable_notifications);
    let serve = Serve::start(&config, dir.path());
    let url = format!("http://127.0.0.1:{port}");
    wait::until_blocking(
        "serve to come up on a managed Redis",
        Duration::from_secs(20),
        || {
            let o = cli(&url, &["nodes", "--json"]);
            if o.status.success() {
                Ok(())
            } else {
                Err(format!("{}\n{}", printed(&o), serve.log()))
            }
        },
    );
    assert!(
        serve
            .log()
            .contains("CONFIG is unavailable: expired key events checked by a probe key"),
        "{}",
        serve.log()
    );

    // Ready: Redis answers, and the events were checked by the probe.
    let (status, body) = tokio::task::block_in_place(|| get(port, "/readyz"));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("checked by a probe key"), "{body}");

    // The CLI creates a one-shot job; it fires on its key's expired event.
    let add = cli(
        &url,
        &[
            "job",
            "add",
            "--id",
            "once",
            "--after",
            "1s",
            "--handler",
            "noop",
        ],
    );
    assert!(add.status.success(), "{}", printed(&add));
    wait::until_blocking("the job to run", Duration::from_secs(15), || {
        let runs = printed_json(&cli(&url, &["job", "runs", "once", "--json"]));
        let ran = runs["runs"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r["outcome"] == "ok"));
        if ran {
            Ok(())
        } else {
            Err(format!("{runs}\n{}", serve.log()))
        }
    });

    // Doctor: nothing fails; it says what it probed, read from INFO, and could not check.
    let (code, report) = tokio::task::block_in_place(|| doctor(&config));
    let failed: Vec<&Value> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["status"] == "fail")
        .collect();
    assert!(failed.is_empty(), "{report:#}");
    assert_eq!(code, 0, "{report:#}");
    let notifications = finding(&report, "notifications");
    assert_eq!(notifications["status"], "ok", "{report:#}");
    assert!(
        notifications["message"]
            .as_str()
            .unwrap()
            .contains("checked by a probe key"),
        "{report:#}"
    );
    let access = finding(&report, "config-access")["message"]
        .as_str()
        .unwrap();
    for read in ["maxmemory-policy", "hz", "appendonly"] {
        assert!(access.contains(read), "{access}");
    }
    assert!(
        access.contains("cannot check") && access.contains("hash-max-listpack-value"),
        "{access}"
    );
    for check in ["eviction", "hz", "memory"] {
        assert_eq!(finding(&report, check)["status"], "ok", "{report:#}");
    }
    assert!(
        finding(&report, "eviction")["message"]
            .as_str()
            .unwrap()
            .contains("read from INFO"),
        "{report:#}"
    );

    assert_eq!(serve.stop(), 0, "serve exits 0 on SIGTERM");
}

/// A managed Redis with the AOF on (as the services persist), so doctor's persistence check
/// passes from what INFO says.
fn managed_with_aof() -> RedisOptions {
    RedisOptions {
        persistent: true,
        ..RedisOptions::managed()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_cli_and_doctor_work_on_a_managed_redis() {
    let redis = RedisServer::start_with(managed_with_aof()).unwrap();
    let access = Access {
        url: redis.url(),
        tls_ca: None,
    };
    // Without CONFIG it matters not whether keyfire may set the events: it can only probe.
    serve_cli_and_doctor(&redis, access, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_cli_and_doctor_work_on_a_managed_redis_over_tls() {
    let Some((redis, ca, _certs)) = crate::support::tls_redis(managed_with_aof()) else {
        eprintln!("SKIP: redis-server lacks TLS support");
        return;
    };
    let access = Access {
        url: format!("redis://127.0.0.1:{}/0", redis.extra_port().unwrap()),
        tls_ca: Some(ca),
    };
    serve_cli_and_doctor(&redis, access, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_cli_and_doctor_work_on_a_managed_redis_as_the_shipped_acl_user() {
    let redis = RedisServer::start_with(managed_with_aof()).unwrap();
    let access = Access {
        url: crate::support::confined_user(&redis, "mr").await,
        tls_ca: None,
    };
    serve_cli_and_doctor(&redis, access, true).await;
}

/// Where the operator left the events off, the node refuses to start, naming the service's
/// setting, and doctor fails the probe with the same fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_managed_redis_without_expired_events_is_refused_with_the_setting_named() {
    let mut options = RedisOptions::managed();
    options
        .extra
        .push(("notify-keyspace-events".into(), "".into()));
    let redis = RedisServer::start_with(options).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let access = Access {
        url: redis.url(),
        tls_ca: None,
    };
    let config = write_config(dir.path(), &access, free_port(), true);
    let mut serve = Serve::start(&config, dir.path());
    let code = wait::until(
        "serve to stop",
        Duration::from_secs(20),
        async || match serve.child.try_wait().unwrap() {
            Some(status) => Ok(status.code().unwrap_or(-1)),
            None => Err(format!("still running: {}", serve.log())),
        },
    )
    .await;
    let log = serve.log();
    assert_ne!(code, 0, "{log}");
    let error = log
        .lines()
        .find(|l| l.starts_with("error:"))
        .unwrap_or_else(|| panic!("no error line: {log}"));
    assert!(
        error.contains("no expired event for a probe key")
            && error.contains("notify-keyspace-events")
            && error.contains("parameter group"),
        "{error}"
    );
    // Nothing of the probe is left behind.
    let mut c = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let left: Vec<String> = redis::cmd("SCAN")
        .arg(0)
        .arg("MATCH")
        .arg("*expiry-probe*")
        .arg("COUNT")
        .arg(1000)
        .query_async::<(String, Vec<String>)>(&mut c)
        .await
        .unwrap()
        .1;
    assert!(left.is_empty(), "{left:?}");

    let (code, report) = tokio::task::block_in_place(|| doctor(&config));
    assert_eq!(code, 1, "{report:#}");
    let notifications = finding(&report, "notifications");
    assert_eq!(notifications["status"], "fail", "{report:#}");
    assert!(
        notifications["fix"]
            .as_str()
            .unwrap()
            .contains("parameter group"),
        "{report:#}"
    );
}

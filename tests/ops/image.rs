//! The shipped image's conditions, without Docker: the binary run as the image runs it, as uid
//! 10001 with no home and an empty environment, on a read-only root, with no system CA store
//! (an empty tmpfs over /etc/ssl, as in debian:bookworm-slim without ca-certificates), and its
//! config only from a TOML file on a read-only mount plus env. Built with `unshare` (a private
//! mount namespace) and `setpriv`, so it needs root: CI runs as root (`CI` set makes a missing
//! tool or user a failure, not a skip).
//!
//! In that state `keyfire serve` starts, an `http` job reaches a local receiver, an `https` job
//! reaches a local TLS receiver through `handlers.http.ca_file`, and SIGTERM drains a run in
//! progress before the node exits 0.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use keyfire::Client;
use keyfire_testkit::RedisServer;

use crate::support::{keyfire_cli, printed, wait};
use keyfire_testkit::free_port;

const BIN: &str = env!("CARGO_BIN_EXE_keyfire");
const TOKEN: &str = "image-token";

/// A receiver (tests/ops/image_receiver.py) and the lines it prints.
struct Receiver {
    child: Child,
    port: u16,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Receiver {
    fn start(tls: Option<(&Path, &Path)>) -> Self {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/ops/image_receiver.py");
        let mut cmd = Command::new("python3");
        cmd.arg(script);
        if let Some((cert, key)) = tls {
            cmd.arg(cert).arg(key);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 runs the receiver");
        let stdout: ChildStdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let port = lines
            .recv_timeout(Duration::from_secs(10))
            .expect("the receiver prints its port")
            .trim()
            .parse()
            .expect("a port");
        Self {
            child,
            port,
            lines,
            seen: Vec::new(),
        }
    }

    /// Wait until a line starting with `prefix` came.
    fn wait_for(&mut self, prefix: &str, within: Duration) {
        let (seen, lines) = (&mut self.seen, &self.lines);
        wait::until_blocking(&format!("a '{prefix}' line"), within, || {
            seen.extend(lines.try_iter());
            match seen.iter().any(|l| l.starts_with(prefix)) {
                true => Ok(()),
                false => Err(format!("saw {seen:?}")),
            }
        });
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn cli(port: u16, args: &[&str]) -> Output {
    keyfire_cli(&format!("http://127.0.0.1:{port}"), Some(TOKEN), args)
}

/// Whether this process may build the image's conditions: root, with unshare and setpriv.
fn can_run() -> Result<(), String> {
    let uid = Command::new("id")
        .arg("-u")
        .output()
        .map_err(|e| e.to_string())?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return Err("not root".into());
    }
    for tool in ["unshare", "setpriv", "python3"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            return Err(format!("{tool} is not on PATH"));
        }
    }
    Ok(())
}

/// `keyfire serve` as the image runs it: see the module doc. `config_dir` is mounted read-only
/// at /etc/keyfire; the node's output goes to `log`.
fn serve_as_the_image(config_dir: &Path, log: &Path, env: &[(&str, String)]) -> Child {
    let envs: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let script = format!(
        "set -e
         mount --bind / /
         mount -o remount,bind,ro /
         mount -t tmpfs -o size=1m,mode=755 tmpfs /etc/ssl
         mount -t tmpfs -o size=1m tmpfs /mnt
         mkdir /mnt/etc-keyfire
         mount --bind '{dir}' /mnt/etc-keyfire
         mount -o remount,bind,ro /mnt/etc-keyfire
         mount -o remount,ro /mnt
         cd /
         exec setpriv --reuid 10001 --regid 10001 --clear-groups \
           env -i {envs} '{bin}' serve --config /mnt/etc-keyfire/keyfire.toml",
        dir = config_dir.display(),
        envs = envs.join(" "),
        bin = BIN,
    );
    Command::new("unshare")
        .args([
            "--mount",
            "--propagation",
            "private",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::from(std::fs::File::create(log).unwrap()))
        .stderr(Stdio::from(
            std::fs::OpenOptions::new().append(true).open(log).unwrap(),
        ))
        .spawn()
        .expect("run unshare")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_runs_as_the_image_runs_it() {
    if let Err(why) = can_run() {
        assert!(
            std::env::var_os("CI").is_none(),
            "the image-conditions test cannot run in CI: {why}"
        );
        eprintln!("SKIP serve_runs_as_the_image_runs_it: {why}");
        return;
    }
    let redis = RedisServer::start().unwrap();
    let certs = tempfile::tempdir().unwrap();
    let (ca, cert, key) = crate::support::write_certs(certs.path());
    let mut plain = Receiver::start(None);
    let mut secure = Receiver::start(Some((&cert, &key)));

    // The config directory the image mounts: the TOML and the internal CA, readable by 10001.
    let config_dir = tempfile::tempdir().unwrap();
    std::fs::copy(&ca, config_dir.path().join("ca.pem")).unwrap();
    let api_port = free_port();
    std::fs::write(
        config_dir.path().join("keyfire.toml"),
        format!(
            r#"[redis]
prefix = "img"

[node]
heartbeat_interval = "200ms"
node_ttl = "1s"
sweep_interval = "1s"
claim_grace = "1s"
drain_timeout = "10s"

[api]
token = "{TOKEN}"

[log]
format = "json"

[handlers.http]
allowed_hosts = ["127.0.0.1", "localhost"]
ca_file = "/mnt/etc-keyfire/ca.pem"
"#
        ),
    )
    .unwrap();
    for p in [config_dir.path().to_path_buf(), certs.path().to_path_buf()] {
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    for f in ["keyfire.toml", "ca.pem"] {
        std::fs::set_permissions(
            config_dir.path().join(f),
            std::os::unix::fs::PermissionsExt::from_mode(0o644),
        )
        .unwrap();
    }
    let logs = tempfile::tempdir().unwrap();
    let log: PathBuf = logs.path().join("serve.log");
    // What the container's environment gives: the Redis URL, the listen address, the node id.
    let env = [
        ("KEYFIRE__REDIS__URL", redis.url()),
        ("KEYFIRE__API__LISTEN", format!("127.0.0.1:{api_port}")),
        ("KEYFIRE__NODE__ID", "image-node".to_string()),
    ];
    let mut node = serve_as_the_image(config_dir.path(), &log, &env);
    let read_log = || std::fs::read_to_string(&log).unwrap_or_default();

    // Up: its API answers the CLI (run from outside, as an operator would).
    wait::until_blocking("serve to come up", Duration::from_secs(30), || {
        if let Some(status) = node.try_wait().unwrap() {
            panic!(
                "serve exited ({status}) as the image runs it:\n{}",
                read_log()
            );
        }
        let nodes = cli(api_port, &["nodes"]);
        match nodes.status.success() {
            true => Ok(()),
            false => Err(format!("{}\n{}", printed(&nodes), read_log())),
        }
    });
    // It really ran without a CA store (the bundled roots), as 10001, with no home.
    let status = std::fs::read_to_string(format!("/proc/{}/status", node.id())).unwrap();
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("10001")),
        "{status}"
    );
    let environ = std::fs::read(format!("/proc/{}/environ", node.id())).unwrap();
    assert!(
        !environ.split(|b| *b == 0).any(|v| v.starts_with(b"HOME=")),
        "HOME is set"
    );
    assert!(read_log().contains("bundled"), "{}", read_log());

    // An http job and an https job (a private CA, trusted through ca_file) reach their
    // receivers.
    for (id, url) in [
        ("plain", format!("http://127.0.0.1:{}/plain", plain.port)),
        (
            "secure",
            format!("https://localhost:{}/secure", secure.port),
        ),
    ] {
        let params = format!(r#"{{"url":"{url}"}}"#);
        let add = cli(
            api_port,
            &[
                "job",
                "add",
                "--id",
                id,
                "--after",
                "1s",
                "--handler",
                "http",
                "--params",
                &params,
            ],
        );
        assert!(add.status.success(), "{}", printed(&add));
    }
    plain.wait_for("done /plain", Duration::from_secs(20));
    secure.wait_for("done /secure", Duration::from_secs(20));

    // SIGTERM while a run is in progress: the node finishes it, records it, and exits 0.
    let add = cli(
        api_port,
        &[
            "job",
            "add",
            "--id",
            "slow",
            "--after",
            "1s",
            "--handler",
            "http",
            "--params",
            &format!(
                r#"{{"url":"http://127.0.0.1:{}/slow?delay=2"}}"#,
                plain.port
            ),
        ],
    );
    assert!(add.status.success(), "{}", printed(&add));
    plain.wait_for("start /slow", Duration::from_secs(20));
    kill(Pid::from_raw(node.id() as i32), Signal::SIGTERM).unwrap();
    let code = wait::until_blocking("an exit after SIGTERM", Duration::from_secs(30), || {
        node.try_wait().unwrap().ok_or_else(read_log)
    })
    .code();
    assert_eq!(code, Some(0), "{}", read_log());
    plain.wait_for("done /slow", Duration::from_secs(5));

    let mut settings = keyfire::Settings::default();
    settings.redis.url = redis.url();
    settings.redis.prefix = "img".into();
    let client = Client::connect(&settings).await.unwrap();
    for id in ["plain", "secure", "slow"] {
        let job = client.get(id).await.unwrap();
        assert_eq!(job.runs, 1, "{id}: {job:?}\n{}", read_log());
        assert_eq!(job.failures, 0, "{id}: {job:?}\n{}", read_log());
    }
}

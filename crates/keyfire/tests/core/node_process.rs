//! A keyfire node as a process of its own, for the tests that kill, freeze or stop one: this
//! test binary started again with `KEYFIRE_TEST_NODE_PROCESS` set runs the ignored test
//! [`node_process`], which is the node (its settings as JSON in `KEYFIRE_TEST_NODE_SETTINGS`; a
//! SIGTERM or SIGINT drains it). Its `slow` handler appends `start|end <firing> <attempt>
//! <node>` lines to the file named by `KEYFIRE_TEST_LOG` (outside keyfire), sleeping the
//! `sleep_ms` param between them; the built-ins (`http`) serve as well.

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use keyfire::{Firing, Node, Registry, Settings};
use keyfire_testkit::World;

/// Set in the node process's environment: this binary is a node, not a test run.
const NODE_ENV: &str = "KEYFIRE_TEST_NODE_PROCESS";
/// The node process's settings, as JSON (the library's `Settings` are plain serde data).
const SETTINGS_ENV: &str = "KEYFIRE_TEST_NODE_SETTINGS";

/// The test that is the node process; a plain test run skips it (ignored), and it does nothing
/// unless [`NODE_ENV`] is set.
#[test]
#[ignore = "the node process that crash tests start; runs only as one"]
fn node_process() {
    if std::env::var_os(NODE_ENV).is_none() {
        return;
    }
    let log = std::env::var("KEYFIRE_TEST_LOG").expect("KEYFIRE_TEST_LOG");
    let json = std::env::var(SETTINGS_ENV).expect(SETTINGS_ENV);
    let settings: Settings = serde_json::from_str(&json).expect("the node's settings as JSON");
    let mut registry = Registry::with_builtins();
    registry.register("slow", move |f: Firing| {
        let log = log.clone();
        async move {
            let line = |what: &str| format!("{what} {} {} {}", f.firing_id, f.attempt, f.node_id);
            append(&log, &line("start"));
            // The handler's work: the run must be in flight for this long.
            let ms = f.params["sleep_ms"].as_u64().unwrap_or(1_000);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            append(&log, &line("end"));
            Ok(())
        }
    });
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime
        .block_on(Node::new(settings, registry).run(async {
            use tokio::signal::unix::{SignalKind, signal};
            let mut term = signal(SignalKind::terminate()).unwrap();
            let mut int = signal(SignalKind::interrupt()).unwrap();
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }))
        .expect("the node runs");
}

/// Appends one line with a single `write` call: 50 runs append at once, and `writeln!` on a
/// `File` writes the text and its newline separately, so lines could interleave.
fn append(path: &str, line: &str) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .expect("open test log");
    f.write_all(format!("{line}\n").as_bytes())
        .expect("write test log");
}

/// A node process, SIGKILLed when dropped: a failing test must not leave it running.
pub(crate) struct NodeProcess(pub(crate) Child);

impl std::ops::Deref for NodeProcess {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for NodeProcess {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl NodeProcess {
    /// Start node `id` on `w`'s Redis and prefix, its runs logged to `log`, with test timings
    /// (heartbeat 200 ms, node_ttl 1 s) and `node` settings (`("LEASE", "2s")`: `node.lease`)
    /// on top.
    pub(crate) fn spawn(w: &World, id: &str, log: &Path, node: &[(&str, &str)]) -> Self {
        let mut settings = serde_json::to_value(&w.settings).expect("settings as JSON");
        let n = &mut settings["node"];
        n["id"] = id.into();
        n["heartbeat_interval"] = "200ms".into();
        n["node_ttl"] = "1s".into();
        for (k, v) in node {
            // `("LEASE", "2s")`: a duration as text, a number as a number.
            n[k.to_ascii_lowercase()] = v
                .parse::<u64>()
                .map(serde_json::Value::from)
                .unwrap_or_else(|_| (*v).into());
        }
        let exe = std::env::current_exe().unwrap();
        let mut cmd = Command::new(&exe);
        cmd.args(["--exact", "node_process::node_process", "--ignored"])
            .args(["--nocapture", "--test-threads", "1", "--quiet"])
            .env(NODE_ENV, "1")
            .env(SETTINGS_ENV, settings.to_string())
            .env("KEYFIRE_TEST_LOG", log);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .map(NodeProcess)
            .unwrap_or_else(|e| panic!("run {} as a node: {e}", exe.display()))
    }
}

/// The lines of a node process's log: (`start` or `end`, firing, attempt, node).
pub(crate) fn log_lines(log: &Path) -> Vec<(String, String, u32, String)> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let p: Vec<&str> = l.split(' ').collect();
            match p.as_slice() {
                [what, fid, attempt, node] => Some((
                    what.to_string(),
                    fid.to_string(),
                    attempt.parse().ok()?,
                    node.to_string(),
                )),
                _ => None,
            }
        })
        .collect()
}

//! The CLI client, black box: `keyfire serve` as a child process with a TOML file, driven by
//! the `keyfire` binary only. Checks output and exit codes.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::support::{World, keyfire_cli, printed, printed_json, wait};
use keyfire_testkit::free_port;

const BIN: &str = env!("CARGO_BIN_EXE_keyfire");

fn write_config(w: &World, dir: &Path, port: u16, extra: &str) -> std::path::PathBuf {
    let path = dir.join("keyfire.toml");
    let text = format!(
        r#"{extra_top}
[redis]
url = "{url}"
prefix = "{prefix}"

[node]
id = "cli-node"
heartbeat_interval = "200ms"
node_ttl = "1s"
sweep_interval = "500ms"
claim_grace = "1s"
timer_horizon = "1500ms"
drain_timeout = "5s"

[api]
listen = "127.0.0.1:{port}"
token = "cli-token"

{extra}
"#,
        extra_top = "",
        url = w.redis.url(),
        prefix = w.settings.redis.prefix,
    );
    std::fs::write(&path, text).unwrap();
    path
}

struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(config: &Path) -> Serve {
    Serve(
        Command::new(BIN)
            .args(["serve", "--config"])
            .arg(config)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("run keyfire serve"),
    )
}

/// Run the CLI against the served API.
pub(crate) fn cli(url: &str, args: &[&str]) -> Output {
    keyfire_cli(url, Some("cli-token"), args)
}

pub(crate) fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

/// Run the CLI; it must exit with `want` and print `says`. What it printed, for more checks.
pub(crate) fn cli_exits(url: &str, args: &[&str], want: i32, says: &str) -> String {
    let o = cli(url, args);
    let text = printed(&o);
    assert_eq!(code(&o), want, "{args:?}: {text}");
    assert!(
        text.contains(says),
        "{args:?} does not say {says:?}: {text}"
    );
    text
}

fn wait_ready(url: &str) {
    wait::until_blocking("serve to list a node", Duration::from_secs(20), || {
        let o = cli(url, &["nodes", "--json"]);
        let up = code(&o) == 0
            && printed_json(&o)["nodes"]
                .as_array()
                .is_some_and(|n| !n.is_empty());
        if up { Ok(()) } else { Err(printed(&o)) }
    });
}

/// `keyfire serve` on a free port with `extra` in its config, ready (it lists a node).
/// Dropping it stops the process, then removes the config's directory.
pub(crate) struct Served {
    server: Serve,
    pub(crate) url: String,
    /// Where the config is; room for the test's own files.
    pub(crate) dir: tempfile::TempDir,
}

pub(crate) fn serve_ready(w: &World, extra: &str) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let config = write_config(w, dir.path(), port, extra);
    let server = serve(&config);
    let url = format!("http://127.0.0.1:{port}");
    tokio::task::block_in_place(|| wait_ready(&url));
    Served { server, url, dir }
}

/// Add a cron job with seconds, see it run, pause it, edit it, list runs,
/// delete it; with the documented exit codes along the way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_drives_a_served_node() {
    let w = World::new().await;
    let mut served = serve_ready(&w, "");
    let url = served.url.clone();

    let nodes = cli(&url, &["nodes"]);
    assert_eq!(code(&nodes), 0);
    assert!(printed(&nodes).contains("cli-node"), "{}", printed(&nodes));

    let add = cli(
        &url,
        &[
            "job",
            "add",
            "--id",
            "tick",
            "--cron",
            "*/1 * * * * *",
            "--handler",
            "noop",
        ],
    );
    assert_eq!(code(&add), 0, "{}", printed(&add));
    assert!(
        printed(&add).contains("created job tick (version 1)"),
        "{}",
        printed(&add)
    );
    assert!(printed(&add).contains("next firings"), "{}", printed(&add));

    // It runs.
    wait::until_blocking("tick to run", Duration::from_secs(15), || {
        let runs = printed_json(&cli(&url, &["job", "runs", "tick", "--json"]));
        let ran = runs["runs"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r["outcome"] == "ok"));
        if ran { Ok(()) } else { Err(runs) }
    });

    let pause = cli(&url, &["job", "pause", "tick"]);
    assert_eq!(code(&pause), 0);
    assert!(
        printed(&pause).contains("job tick is paused"),
        "{}",
        printed(&pause)
    );
    let got = printed_json(&cli(&url, &["job", "get", "tick", "--json"]));
    assert_eq!(got["status"], "paused");
    // Many at once: by id prefix, by handler; exactly one of an id, --handler, --prefix.
    let resume = cli(&url, &["job", "resume", "--prefix", "ti"]);
    assert_eq!(code(&resume), 0, "{}", printed(&resume));
    assert!(
        printed(&resume).contains("resumed 1 of 1 matching jobs"),
        "{}",
        printed(&resume)
    );
    let got = printed_json(&cli(&url, &["job", "get", "tick", "--json"]));
    assert_eq!(got["status"], "active");
    let pause = cli(&url, &["job", "pause", "--handler", "noop", "--json"]);
    assert_eq!(code(&pause), 0, "{}", printed(&pause));
    assert_eq!(
        printed_json(&pause),
        serde_json::json!({"matched": 1, "changed": 1})
    );
    for bad in [
        &["job", "pause"][..],
        &["job", "pause", "tick", "--prefix", "t"],
    ] {
        assert_eq!(code(&cli(&url, bad)), 2, "{bad:?}");
    }
    let empty = cli(&url, &["job", "pause", "--prefix", ""]);
    assert_eq!(code(&empty), 2, "{}", printed(&empty));
    assert!(printed(&empty).contains("id_prefix"), "{}", printed(&empty));

    let edit = cli(
        &url,
        &[
            "job",
            "edit",
            "tick",
            "--cron",
            "0 0 9 * * *",
            "--tz",
            "Europe/Berlin",
        ],
    );
    assert_eq!(code(&edit), 0, "{}", printed(&edit));
    let got = printed_json(&cli(&url, &["job", "get", "tick", "--json"]));
    assert_eq!(got["spec"]["cron"], "0 0 9 * * *");
    assert_eq!(got["spec"]["tz"], "Europe/Berlin");
    let human = cli(&url, &["job", "get", "tick"]);
    assert!(
        printed(&human).contains("cron '0 0 9 * * *' Europe/Berlin"),
        "{}",
        printed(&human)
    );

    let ls = cli(&url, &["job", "ls"]);
    assert!(printed(&ls).starts_with("ID"), "{}", printed(&ls));
    assert!(printed(&ls).contains("tick"), "{}", printed(&ls));
    let runs = cli(&url, &["job", "runs", "tick"]);
    assert_eq!(code(&runs), 0);
    assert!(printed(&runs).contains("ok"), "{}", printed(&runs));

    // Trigger runs it now although paused schedules nothing.
    let trig = cli(&url, &["job", "trigger", "tick"]);
    assert_eq!(code(&trig), 0, "{}", printed(&trig));
    assert!(printed(&trig).starts_with("tick:"), "{}", printed(&trig));
    // A backfill of a paused job is refused naming the job (exit 2); resumed, it schedules.
    let range = [
        "--from",
        "2020-01-01T00:00:00Z",
        "--to",
        "2020-01-05T00:00:00Z",
    ];
    let paused = cli(&url, &[&["job", "backfill", "tick"][..], &range].concat());
    assert_eq!(code(&paused), 2, "{}", printed(&paused));
    assert!(printed(&paused).contains("paused"), "{}", printed(&paused));
    assert_eq!(code(&cli(&url, &["job", "resume", "tick"])), 0);
    let filled = cli(
        &url,
        &[&["job", "backfill", "tick"][..], &range, &["--rate", "50"]].concat(),
    );
    assert_eq!(code(&filled), 0, "{}", printed(&filled));
    assert!(
        printed(&filled).starts_with("scheduled 4 of 4 instants (0 skipped as already run)"),
        "{}",
        printed(&filled)
    );
    let again = printed_json(&cli(
        &url,
        &[&["job", "backfill", "tick", "--json"][..], &range].concat(),
    ));
    assert_eq!(
        (&again["scheduled"], &again["skipped"]),
        (&serde_json::json!(0), &serde_json::json!(4))
    );
    assert_eq!(code(&cli(&url, &["job", "pause", "tick"])), 0);
    let dead = printed_json(&cli(&url, &["dead", "ls", "tick", "--json"]));
    assert_eq!(dead["dead"], serde_json::json!([]));
    assert_eq!(code(&cli(&url, &["dead", "purge", "tick"])), 0);

    // Exit codes: validation 2, not found 3, conflict 4, cannot connect 5, auth 1.
    let bad = cli(
        &url,
        &[
            "job",
            "add",
            "--id",
            "bad",
            "--cron",
            "61 * * * *",
            "--handler",
            "noop",
        ],
    );
    assert_eq!(code(&bad), 2, "{}", printed(&bad));
    assert!(printed(&bad).contains("cron"), "{}", printed(&bad));
    let missing = cli(&url, &["job", "get", "nope"]);
    assert_eq!(code(&missing), 3, "{}", printed(&missing));
    let dup = cli(
        &url,
        &[
            "job",
            "add",
            "--id",
            "tick",
            "--every",
            "1h",
            "--handler",
            "noop",
            "--create-only",
        ],
    );
    assert_eq!(code(&dup), 4, "{}", printed(&dup));
    let gone = cli("http://127.0.0.1:1", &["job", "ls"]);
    assert_eq!(code(&gone), 5, "{}", printed(&gone));
    let mut unauth = Command::new(BIN);
    unauth
        .args(["job", "ls", "--url", &url, "--token", "wrong"])
        .env_remove("KEYFIRE_TOKEN");
    let unauth = unauth.output().unwrap();
    assert_eq!(code(&unauth), 1, "{}", printed(&unauth));
    let usage = cli(&url, &["job", "add", "--cron", "x", "--every", "1s"]);
    assert_eq!(code(&usage), 2);

    // A job from a TOML file, and a task.
    let file = served.dir.path().join("jobs.toml");
    std::fs::write(
        &file,
        "[[jobs]]\nid = \"from-file\"\nevery = \"1h\"\nhandler = \"log\"\nparams = { a = 1 }\n\n[[jobs]]\nid = \"at-file\"\nat = 2099-01-01T00:00:00Z\nhandler = \"noop\"\n",
    )
    .unwrap();
    let from_file = cli(&url, &["job", "add", file.to_str().unwrap()]);
    assert_eq!(code(&from_file), 0, "{}", printed(&from_file));
    let got = printed_json(&cli(&url, &["job", "get", "at-file", "--json"]));
    assert_eq!(got["spec"]["at"], "2099-01-01T00:00:00Z");
    let task = cli(&url, &["task", "add", "--handler", "noop", "--after", "1h"]);
    assert_eq!(code(&task), 0, "{}", printed(&task));
    let task_id = printed(&task).lines().next().unwrap().to_string();
    assert_eq!(
        printed_json(&cli(&url, &["job", "get", &task_id, "--json"]))["id"],
        task_id
    );
    // Cancel: the pending task is cancelled before it runs; then there is nothing left to
    // cancel (exit 4), nor in a recurring job that runs nothing; no job is exit 3.
    let cancelled = cli(&url, &["task", "cancel", &task_id]);
    assert_eq!(code(&cancelled), 0, "{}", printed(&cancelled));
    assert!(
        printed(&cancelled).starts_with(&format!("cancelled {task_id}:")),
        "{}",
        printed(&cancelled)
    );
    assert_eq!(code(&cli(&url, &["task", "cancel", &task_id])), 4);
    assert_eq!(code(&cli(&url, &["job", "cancel", "from-file"])), 4);
    assert_eq!(code(&cli(&url, &["job", "cancel", "nope"])), 3);
    let listed = printed_json(&cli(&url, &["job", "ls", "--json", "--limit", "2"]));
    assert_eq!(listed["jobs"].as_array().unwrap().len(), 2);
    assert!(listed["next_cursor"].is_string());

    let rm = cli(&url, &["job", "rm", "tick"]);
    assert_eq!(code(&rm), 0);
    assert_eq!(code(&cli(&url, &["job", "get", "tick"])), 3);

    let _ = kill(Pid::from_raw(served.server.0.id() as i32), Signal::SIGTERM);
    let status = served.server.0.wait().unwrap();
    assert!(status.success(), "serve exited with {status}");
}

/// An invalid declared job stops `serve`, naming the file, the job and the
/// field, and nothing is written.
#[tokio::test]
async fn serve_refuses_an_invalid_declared_job() {
    let w = World::new().await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        &w,
        dir.path(),
        free_port(),
        "[[jobs]]\nid = \"good\"\nevery = \"1h\"\nhandler = \"log\"\n\n[[jobs]]\nid = \"bad-cron\"\ncron = \"61 * * * *\"\nhandler = \"log\"\n",
    );
    let out = Command::new(BIN)
        .args(["serve", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(config.to_str().unwrap()), "{err}");
    assert!(err.contains("bad-cron"), "{err}");
    assert!(err.contains("invalid cron"), "{err}");
    let jobs = crate::common::snapshot(&w).await;
    assert!(jobs.is_empty(), "something was written: {jobs:?}");
}

/// The delay queue from the CLI: add to a topic, pop, finish (a wrong token is a
/// conflict), rm, topics; a pop that gets nothing exits 3 after its wait. The one-shot
/// `task add --handler` still works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_drives_the_delay_queue() {
    let w = World::new().await;
    let served = serve_ready(&w, "");
    let url = served.url.clone();
    tokio::task::block_in_place(|| {
        let one_shot = cli(&url, &["task", "add", "--handler", "noop", "--after", "1h"]);
        assert_eq!(code(&one_shot), 0, "{}", printed(&one_shot));

        let add = cli(
            &url,
            &[
                "task",
                "add",
                "--topic",
                "orders",
                "--payload",
                r#"{"order": 7}"#,
                "--ttr",
                "30s",
                "--max-deliveries",
                "2",
            ],
        );
        assert_eq!(code(&add), 0, "{}", printed(&add));
        let id = String::from_utf8_lossy(&add.stdout).trim().to_string();
        assert!(!id.is_empty());
        // A task of another topic, to delete (ready at once: this test needs no node serving the
        // `topic` handler, which delayed tasks do).
        let spare = cli(&url, &["task", "add", "--topic", "spare", "--payload", "1"]);
        assert_eq!(code(&spare), 0, "{}", printed(&spare));
        let spare_id = String::from_utf8_lossy(&spare.stdout).trim().to_string();

        let popped = printed_json(&cli(&url, &["task", "pop", "orders", "--json"]));
        assert_eq!(popped["id"], id.as_str());
        assert_eq!(popped["payload"]["order"], 7);
        let token = popped["token"].as_str().unwrap().to_string();

        let wrong = cli(&url, &["task", "finish", &id, "--reservation", "nope"]);
        assert_eq!(code(&wrong), 4, "{}", printed(&wrong));
        let fin = cli(&url, &["task", "finish", &id, "--reservation", &token]);
        assert_eq!(code(&fin), 0, "{}", printed(&fin));
        let got = printed_json(&cli(&url, &["task", "get", &id, "--json"]));
        assert_eq!(got["state"], "done");
        let why = cli(&url, &["topics", "why", "orders", &id]);
        assert_eq!(code(&why), 0, "{}", printed(&why));
        let out = printed(&why);
        assert!(
            out.contains("topic orders") && out.contains("done"),
            "{out}"
        );
        let why = printed_json(&cli(&url, &["topics", "why", "spare", &spare_id, "--json"]));
        assert_eq!(why["state"], "ready");
        let none = cli(&url, &["topics", "why", "orders", "nope"]);
        assert_eq!(code(&none), 3, "{}", printed(&none));

        // Nothing ready: exit 3 after the wait.
        let start = Instant::now();
        let none = cli(&url, &["task", "pop", "orders", "--wait", "1s"]);
        assert_eq!(code(&none), 3, "{}", printed(&none));
        assert!(start.elapsed() >= Duration::from_secs(1));

        let rm = cli(&url, &["task", "rm", &spare_id]);
        assert_eq!(code(&rm), 0, "{}", printed(&rm));
        let again = cli(&url, &["task", "rm", &spare_id]);
        assert_eq!(code(&again), 3, "{}", printed(&again));

        let topics = cli(&url, &["topics"]);
        assert_eq!(code(&topics), 0, "{}", printed(&topics));
        let out = printed(&topics);
        assert!(out.contains("TOPIC") && out.contains("orders"), "{out}");
        let list = printed_json(&cli(&url, &["topics", "--json"]));
        assert_eq!(list["topics"][0]["topic"], "orders");
        assert_eq!(list["topics"][0]["added"], 1);
        assert_eq!(list["topics"][0]["done"], 1);
        assert_eq!(list["topics"][1]["topic"], "spare");
        assert_eq!(list["topics"][1]["deleted"], 1);

        let bad = cli(&url, &["task", "add", "--topic", "a:b", "--payload", "1"]);
        assert_eq!(code(&bad), 2, "{}", printed(&bad));
        assert!(printed(&bad).contains("topic"), "{}", printed(&bad));
        let bad = cli(&url, &["task", "add", "--topic", "t", "--ttr", "0s"]);
        assert_eq!(code(&bad), 2, "{}", printed(&bad));
        let usage = cli(&url, &["task", "add", "--payload", "1"]);
        assert_eq!(code(&usage), 2, "{}", printed(&usage));
    });
}

/// `task add --dedup-key/--dedup-content --dedup-window`: the second add within the window
/// prints the same id (and, in JSON, `duplicate: true`; in text, a note on stderr) and creates
/// nothing; a window of 0 exits 2 naming `dedup.window`; `--dedup-key` with `--id` is a usage
/// error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_enqueues_with_dedup() {
    let w = World::new().await;
    let served = serve_ready(&w, "");
    let url = served.url.clone();

    let add = |extra: &[&str]| {
        let mut args = vec!["task", "add", "--handler", "log", "--after", "1h"];
        args.extend_from_slice(extra);
        cli(&url, &args)
    };
    let first = printed_json(&add(&[
        "--dedup-key",
        "nightly:42",
        "--dedup-window",
        "10m",
        "--json",
    ]));
    let id = first["id"].as_str().unwrap().to_string();
    assert!(first.get("duplicate").is_none(), "{first:#}");
    assert_eq!(first["spec"]["dedup"]["key"], "nightly:42");
    let again = printed_json(&add(&[
        "--dedup-key",
        "nightly:42",
        "--dedup-window",
        "10m",
        "--json",
    ]));
    assert_eq!(again["id"], id.as_str());
    assert_eq!(again["duplicate"], true);
    let text_mode = add(&["--dedup-key", "nightly:42", "--dedup-window", "10m"]);
    assert_eq!(code(&text_mode), 0, "{}", printed(&text_mode));
    let stdout = String::from_utf8_lossy(&text_mode.stdout);
    assert_eq!(stdout.lines().next(), Some(id.as_str()), "{stdout}");
    assert!(
        String::from_utf8_lossy(&text_mode.stderr).contains("duplicate"),
        "{}",
        printed(&text_mode)
    );

    // By content: same params, same task; other params, another.
    let by_content = |p: &str| {
        printed_json(&add(&[
            "--params",
            p,
            "--dedup-content",
            "--dedup-window",
            "1h",
            "--json",
        ]))
    };
    let a = by_content(r#"{"n": 1}"#);
    assert_eq!(by_content(r#"{"n": 1}"#)["id"], a["id"]);
    assert_ne!(by_content(r#"{"n": 2}"#)["id"], a["id"]);

    let bad = add(&["--dedup-key", "k", "--dedup-window", "0s"]);
    assert_eq!(code(&bad), 2, "{}", printed(&bad));
    assert!(printed(&bad).contains("dedup.window"), "{}", printed(&bad));
    let bad = add(&["--dedup-key", "k", "--dedup-window", "1m", "--id", "mine"]);
    assert_eq!(code(&bad), 2, "{}", printed(&bad));
    let bad = add(&["--dedup-key", "k"]);
    assert_eq!(
        code(&bad),
        2,
        "--dedup-key needs --dedup-window: {}",
        printed(&bad)
    );
    let listed = printed_json(&cli(&url, &["job", "ls", "--json"]));
    assert_eq!(
        listed["jobs"].as_array().map(Vec::len),
        Some(3),
        "{listed:#}"
    );
}

/// `task add --topic … --priority` orders pops; `--on-duplicate` debounces one-shot and topic
/// tasks (the note on stderr, `deduplicated` in JSON); a bad priority or mode exits 2 naming
/// the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_adds_with_priorities_and_debounce() {
    let w = World::new().await;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let config = write_config(&w, dir.path(), port, "");
    let _server = serve(&config);
    let url = format!("http://127.0.0.1:{port}");
    wait_ready(&url);

    for (payload, p) in [("1", "0"), ("2", "7")] {
        let o = cli(
            &url,
            &[
                "task",
                "add",
                "--topic",
                "pq",
                "--payload",
                payload,
                "--priority",
                p,
            ],
        );
        assert_eq!(code(&o), 0, "{}", printed(&o));
    }
    let popped = printed_json(&cli(&url, &["task", "pop", "pq", "--max", "2", "--json"]));
    assert_eq!(popped["tasks"][0]["payload"], 2, "{popped:#}");
    assert_eq!(popped["tasks"][0]["priority"], 7);
    assert_eq!(popped["tasks"][1]["payload"], 1);
    let bad = cli(
        &url,
        &[
            "task",
            "add",
            "--topic",
            "pq",
            "--payload",
            "1",
            "--priority",
            "10",
        ],
    );
    assert_eq!(code(&bad), 2, "{}", printed(&bad));
    assert!(printed(&bad).contains("priority"), "{}", printed(&bad));

    let topic_add = |payload: &str, mode: &str| {
        cli(
            &url,
            &[
                "task",
                "add",
                "--topic",
                "dq",
                "--payload",
                payload,
                "--delay",
                "1h",
                "--dedup-key",
                "digest:7",
                "--dedup-window",
                "1h",
                "--on-duplicate",
                mode,
                "--json",
            ],
        )
    };
    let first = printed_json(&topic_add("1", "replace"));
    let again = printed_json(&topic_add("2", "replace"));
    assert_eq!(again["id"], first["id"], "{again:#}");
    assert_eq!(again["deduplicated"], "replaced");
    let bad = topic_add("3", "merge");
    assert_eq!(code(&bad), 2, "{}", printed(&bad));
    assert!(
        printed(&bad).contains("dedup.on_duplicate"),
        "{}",
        printed(&bad)
    );

    let one_shot = |after: &str| {
        cli(
            &url,
            &[
                "task",
                "add",
                "--handler",
                "log",
                "--after",
                after,
                "--dedup-key",
                "d:1",
                "--dedup-window",
                "1h",
                "--on-duplicate",
                "extend",
            ],
        )
    };
    let first = one_shot("10m");
    assert_eq!(code(&first), 0, "{}", printed(&first));
    let again = one_shot("20m");
    assert_eq!(code(&again), 0, "{}", printed(&again));
    assert_eq!(
        String::from_utf8_lossy(&again.stdout).lines().next(),
        String::from_utf8_lossy(&first.stdout).lines().next()
    );
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("extended"),
        "{}",
        printed(&again)
    );
}

/// `keyfire limits`: a limit declared in the config (`[[flow_limits]]`) is set at start;
/// `set`, `get`, `ls` and `rm` drive the rest; a bound of 0 exits 2 naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_manages_flow_limits() {
    let w = World::new().await;
    let declared = "[[flow_limits]]\nkey = \"host:declared.example\"\nrate = 7\n";
    let served = serve_ready(&w, declared);
    let url = served.url.clone();

    let got = printed_json(&cli(
        &url,
        &["limits", "get", "host:declared.example", "--json"],
    ));
    assert_eq!(got["rate"], 7, "{got:#}");
    let set = printed_json(&cli(
        &url,
        &[
            "limits",
            "set",
            "mail",
            "--rate",
            "20",
            "--burst",
            "5",
            "--in-flight",
            "3",
            "--json",
        ],
    ));
    assert_eq!(
        (
            set["rate"].as_u64(),
            set["burst"].as_u64(),
            set["in_flight"].as_u64()
        ),
        (Some(20), Some(5), Some(3))
    );
    let ls = cli(&url, &["limits", "ls"]);
    assert_eq!(code(&ls), 0, "{}", printed(&ls));
    let table = String::from_utf8_lossy(&ls.stdout);
    assert!(
        table.contains("host:declared.example") && table.contains("mail"),
        "{table}"
    );

    let bad = cli(&url, &["limits", "set", "mail", "--in-flight", "0"]);
    assert_eq!(code(&bad), 2, "{}", printed(&bad));
    assert!(printed(&bad).contains("in_flight"), "{}", printed(&bad));
    assert_eq!(
        printed_json(&cli(&url, &["limits", "get", "mail", "--json"]))["in_flight"],
        3
    );

    let rm = cli(&url, &["limits", "rm", "mail"]);
    assert_eq!(code(&rm), 0, "{}", printed(&rm));
    let gone = cli(&url, &["limits", "get", "mail"]);
    assert_eq!(code(&gone), 3, "{}", printed(&gone));
}

/// `job runs --skipped` lists an instant that did not run with its reason; `job why` and
/// `task why` explain the state; an unknown id exits 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_shows_what_did_not_run_and_why() {
    let w = World::new().await;
    let served = serve_ready(&w, "");
    let url = served.url.clone();

    let add = cli(
        &url,
        &[
            "job",
            "add",
            "--id",
            "y",
            "--cron",
            "0 0 1 1 *",
            "--handler",
            "noop",
        ],
    );
    assert_eq!(code(&add), 0, "{}", printed(&add));
    // Its pending firing moved back 5 s (as if no node had claimed it), then the job changed:
    // the change drops that instant, and the ledger says so.
    let due = (w.redis_ms().await / 1_000 - 5) * 1_000;
    let k = keyfire::store::Shards::new(&w.settings.redis.prefix, 1)
        .for_job("y")
        .clone();
    let _: () = redis::pipe()
        .hset(k.job("y"), "next", due)
        .zadd(k.due(), "y", due)
        .query_async(&mut w.conn().await)
        .await
        .unwrap();
    let edit = cli(&url, &["job", "edit", "y", "--params", r#"{"v": 2}"#]);
    assert_eq!(code(&edit), 0, "{}", printed(&edit));
    let runs = cli(&url, &["job", "runs", "y", "--skipped"]);
    assert_eq!(code(&runs), 0, "{}", printed(&runs));
    let table = String::from_utf8_lossy(&runs.stdout);
    assert!(
        table.contains("skipped") && table.contains("updated"),
        "{table}"
    );

    let why = cli(&url, &["job", "why", "y"]);
    assert_eq!(code(&why), 0, "{}", printed(&why));
    let text = String::from_utf8_lossy(&why.stdout);
    assert!(text.starts_with("y nothing stands in its way"), "{text}");
    assert!(
        text.contains("waiting") && text.contains("updated"),
        "{text}"
    );
    assert_eq!(code(&cli(&url, &["job", "pause", "y"])), 0);
    let why = printed_json(&cli(&url, &["task", "why", "y", "--json"]));
    assert_eq!(why["state"], "paused", "{why:#}");
    let unknown = cli(&url, &["job", "why", "nope"]);
    assert_eq!(code(&unknown), 3, "{}", printed(&unknown));
}

/// Calendars declared in TOML before the jobs that name them; `keyfire calendar` lists,
/// shows, sets and removes them (refused while a job names one); `job add` takes `--jitter`
/// and `--exclude`, and refuses what their rules refuse, naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_manages_calendars_and_jittered_excluding_jobs() {
    let w = World::new().await;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let declared = r#"[[calendars]]
name = "de-holidays"
tz = "Europe/Berlin"
dates = ["2026-12-25"]

[[jobs]]
id = "declared"
cron = "0 * * * *"
exclude = ["de-holidays"]
handler = "noop"
"#;
    let config = write_config(&w, dir.path(), port, declared);
    let _server = serve(&config);
    let url = format!("http://127.0.0.1:{port}");
    wait_ready(&url);

    let ls = cli(&url, &["calendar", "ls"]);
    assert_eq!(code(&ls), 0, "{}", printed(&ls));
    assert!(printed(&ls).contains("de-holidays"), "{}", printed(&ls));
    let set = printed_json(&cli(
        &url,
        &[
            "calendar",
            "set",
            "ops",
            "--range",
            "2026-12-24..2026-12-31",
            "--cron",
            "* * 2-3 * * SUN",
            "--json",
        ],
    ));
    assert_eq!(set["ranges"][0]["to"], "2026-12-31", "{set:#}");
    let bad = cli(&url, &["calendar", "set", "ops", "--date", "2026-02-30"]);
    assert_eq!(code(&bad), 2, "{}", printed(&bad));
    assert!(printed(&bad).contains("dates[0]"), "{}", printed(&bad));

    let add = cli(
        &url,
        &[
            "job",
            "add",
            "--id",
            "spread",
            "--every",
            "1h",
            "--jitter",
            "10m",
            "--exclude",
            "ops,de-holidays",
            "--handler",
            "noop",
        ],
    );
    assert_eq!(code(&add), 0, "{}", printed(&add));
    let get = cli(&url, &["job", "get", "spread"]);
    assert!(printed(&get).contains("fires "), "{}", printed(&get));
    assert!(
        printed(&get).contains("ops, de-holidays"),
        "{}",
        printed(&get)
    );
    let add = [
        "job",
        "add",
        "--id",
        "x",
        "--every",
        "1m",
        "--handler",
        "noop",
    ];
    cli_exits(&url, &[&add[..], &["--jitter", "1m"]].concat(), 2, "jitter");
    cli_exits(
        &url,
        &[&add[..], &["--exclude", "nope"]].concat(),
        2,
        "exclude[0]",
    );

    cli_exits(&url, &["calendar", "rm", "ops"], 4, "spread");
    let edit = cli(&url, &["job", "edit", "spread", "--exclude", "de-holidays"]);
    assert_eq!(code(&edit), 0, "{}", printed(&edit));
    let rm = cli(&url, &["calendar", "rm", "ops"]);
    assert_eq!(code(&rm), 0, "{}", printed(&rm));
    assert_eq!(code(&cli(&url, &["calendar", "get", "ops"])), 3);
}

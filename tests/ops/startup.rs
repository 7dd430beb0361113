//! What `keyfire serve` and `keyfire dev` do when their environment is wrong: the real binary
//! exits with the fault's code (`keyfire serve --help`, docs/operations.md) and one line on
//! stderr naming the cause and the setting that fixes it; never a panic. And what they do
//! without what a container may lack: a `HOME`, a writable filesystem, an `/etc/hostname`.

use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use keyfire_server::cli::exit::{Exit, HELP};
use keyfire_testkit::free_port;
use keyfire_testkit::{RedisServer, wait};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

const BIN: &str = env!("CARGO_BIN_EXE_keyfire");

/// `keyfire <args>`, its environment set by [`clean_env`].
fn keyfire(args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args);
    clean_env(&mut cmd);
    cmd
}

/// No `KEYFIRE__*` or `RUST_LOG` of the test's own environment, the API on a free port of its
/// own, and Redis on a closed port (each test sets what it tests).
fn clean_env(cmd: &mut Command) {
    for (k, _) in std::env::vars() {
        if k.to_ascii_uppercase().starts_with("KEYFIRE__") || k == "RUST_LOG" {
            cmd.env_remove(k);
        }
    }
    cmd.env("NO_COLOR", "1")
        .env("KEYFIRE__API__LISTEN", format!("127.0.0.1:{}", free_port()))
        .env(
            "KEYFIRE__REDIS__URL",
            format!("redis://127.0.0.1:{}/0", free_port()),
        );
}

/// Run `cmd` to its end (at most a minute: it must fail, not serve), and return its exit code
/// and the one line it printed on stderr, checked to be one `error: ` line and no panic.
fn fails(mut cmd: Command) -> (i32, String) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run keyfire");
    let out = drain(child.stdout.take().unwrap());
    let err = drain(child.stderr.take().unwrap());
    let status = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait::until_blocking(&format!("{cmd:?} to fail"), Duration::from_secs(60), || {
            child.try_wait().unwrap()
        })
    }))
    .unwrap_or_else(|_| {
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "{cmd:?} still runs after a minute; it should have failed\nstdout:\n{}",
            out.recv().unwrap_or_default()
        );
    });
    let (out, err) = (out.recv().unwrap(), err.recv().unwrap());
    let code = status
        .code()
        .unwrap_or_else(|| panic!("killed by a signal: {status}\n{err}"));
    assert!(!err.contains("panicked"), "a panic:\n{err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(
        lines.len() == 1 && lines[0].starts_with("error: "),
        "stderr is not one `error: ` line (exit {code}):\n{err}\nstdout:\n{out}"
    );
    (code, lines[0].to_string())
}

/// Read a pipe to its end on a thread; the text arrives on the channel.
fn drain(mut pipe: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        let _ = tx.send(text);
    });
    rx
}

fn assert_exit(got: (i32, String), exit: Exit, needles: &[&str]) {
    let (code, line) = got;
    assert_eq!(code, i32::from(exit.code()), "{exit:?}: {line}");
    for needle in needles {
        assert!(line.contains(needle), "{needle:?} not in: {line}");
    }
}

#[test]
fn a_taken_api_port_exits_6_naming_api_listen() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let mut cmd = keyfire(&["serve"]);
    cmd.env("KEYFIRE__API__LISTEN", &addr);
    // The address is checked before Redis: no Redis is needed to learn the port is taken.
    assert_exit(
        fails(cmd),
        Exit::Bind,
        &[
            &format!("api.listen {addr} is taken"),
            "KEYFIRE__API__LISTEN",
        ],
    );
}

#[test]
fn an_unreachable_redis_exits_3_naming_redis_url() {
    let port = free_port();
    let mut cmd = keyfire(&["serve"]);
    cmd.env("KEYFIRE__REDIS__URL", format!("redis://127.0.0.1:{port}/0"));
    assert_exit(
        fails(cmd),
        Exit::RedisUnreachable,
        &[
            &format!("127.0.0.1:{port}"),
            "redis.url",
            "KEYFIRE__REDIS__URL",
        ],
    );
}

/// Whether process `pid` catches SIGTERM (bit 15 of `SigCgt` in /proc/<pid>/status).
fn catches_sigterm(pid: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (15 - 1)) != 0)
}

#[test]
fn a_sigterm_while_starting_does_not_kill_the_node_half_started() {
    // Redis unreachable: the start waits through the connection's retries (seconds).
    let mut cmd = keyfire(&["serve"]);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("run keyfire serve");
    let err = drain(child.stderr.take().unwrap());
    wait::until_blocking(
        "keyfire serve to catch SIGTERM while it starts",
        Duration::from_secs(5),
        || {
            assert!(
                child.try_wait().unwrap().is_none(),
                "keyfire serve ended before it caught SIGTERM"
            );
            catches_sigterm(child.id())
        },
    );
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let status = child.wait().unwrap();
    let err = err.recv().unwrap();
    // It ends as the start ends, with the start's own error, not killed by the signal.
    assert_eq!(
        status.code(),
        Some(i32::from(Exit::RedisUnreachable.code())),
        "{status}: {err}"
    );
    assert!(
        err.trim().starts_with("error: ") && !err.contains("panicked"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn redis_refusing_the_login_or_a_permission_exits_4() {
    let redis = RedisServer::start().unwrap();
    let port = redis.port();
    // The password is set once the fixture saw its server answer (it pings without one); this
    // connection stays logged in.
    let mut admin = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "requirepass", "right"])
        .query_async(&mut admin)
        .await
        .unwrap();
    let serve = |url: String| {
        let mut cmd = keyfire(&["serve"]);
        cmd.env("KEYFIRE__REDIS__URL", url);
        fails(cmd)
    };
    // A wrong password, no password, and a user the server does not know.
    for url in [
        format!("redis://:wrong@127.0.0.1:{port}/0"),
        format!("redis://127.0.0.1:{port}/0"),
        format!("redis://ghost:pw@127.0.0.1:{port}/0"),
    ] {
        assert_exit(
            serve(url),
            Exit::RedisRefused,
            &["redis.password", "KEYFIRE__REDIS__PASSWORD"],
        );
    }
    // The password as a setting of its own: the same.
    let mut cmd = keyfire(&["serve"]);
    cmd.env("KEYFIRE__REDIS__URL", format!("redis://127.0.0.1:{port}/0"))
        .env("KEYFIRE__REDIS__PASSWORD", "wrong");
    assert_exit(
        fails(cmd),
        Exit::RedisRefused,
        &["KEYFIRE__REDIS__PASSWORD"],
    );
    // A user that may log in but not run keyfire's commands: NOPERM.
    let _: () = redis::cmd("ACL")
        .arg(&[
            "SETUSER", "pinger", "on", ">pw", "~*", "+ping", "+hello", "+auth", "+client",
        ])
        .query_async(&mut admin)
        .await
        .unwrap();
    assert_exit(
        serve(format!("redis://pinger:pw@127.0.0.1:{port}/0")),
        Exit::RedisRefused,
        &["no permissions", "redis/keyfire.acl"],
    );
}

#[test]
fn a_config_file_missing_unreadable_or_not_toml_exits_2_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.toml");
    let missing_text = missing.display().to_string();
    assert_exit(
        fails(keyfire(&["serve", "--config", &missing_text])),
        Exit::Config,
        &[&format!("--config {missing_text}"), "No such file"],
    );
    // A directory is a file the loader cannot read.
    let dir_text = dir.path().display().to_string();
    assert_exit(
        fails(keyfire(&["serve", "--config", &dir_text])),
        Exit::Config,
        &[&format!("--config {dir_text}"), "is a directory"],
    );
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[redis\nurl = 1\n").unwrap();
    let bad_text = bad.display().to_string();
    assert_exit(
        fails(keyfire(&["serve", "--config", &bad_text])),
        Exit::Config,
        &[&bad_text, "TOML parse error at line 1", "unclosed table"],
    );
    // An impossible setting, from the environment, is named.
    let mut cmd = keyfire(&["serve"]);
    cmd.env("KEYFIRE__REDIS__SHARDS", "0");
    assert_exit(fails(cmd), Exit::Config, &["redis.shards"]);
}

#[test]
fn dev_with_an_unusable_tmpdir_exits_7_naming_tmpdir() {
    let dir = tempfile::tempdir().unwrap();
    // A directory that is not there, and a file where the directory should be.
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    for tmp in [dir.path().join("missing"), file] {
        let mut cmd = keyfire(&["dev"]);
        cmd.env("TMPDIR", &tmp);
        assert_exit(
            fails(cmd),
            Exit::Filesystem,
            &[&tmp.display().to_string(), "set TMPDIR"],
        );
    }
}

#[test]
fn dev_without_redis_server_exits_3_naming_path() {
    let empty = tempfile::tempdir().unwrap();
    let mut cmd = keyfire(&["dev"]);
    cmd.env("PATH", empty.path());
    assert_exit(
        fails(cmd),
        Exit::RedisUnreachable,
        &["cannot run redis-server", "PATH"],
    );
}

/// `keyfire serve` against `redis` until its API answers (its log says `api listening`), then
/// SIGTERM: it must stop cleanly. `cmd` runs it, directly or inside `unshare`.
fn serves(redis: &RedisServer, mut cmd: Command) {
    cmd.env("KEYFIRE__REDIS__URL", redis.url())
        .env("KEYFIRE__REDIS__PREFIX", format!("startup{}", free_port()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child: Child = cmd.spawn().expect("run keyfire serve");
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let err = drain(child.stderr.take().unwrap());
    // Not `wait::until_blocking`: this loop also gathers the node's output, and on timeout it
    // falls through to stop the node and fail below with that output and its stderr.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut lines = Vec::new();
    while Instant::now() < deadline && !lines.iter().any(|l: &String| l.contains("api listening")) {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(100)) {
            lines.push(line);
        }
        if child.try_wait().unwrap().is_some() {
            break;
        }
    }
    let listening = lines.iter().any(|l| l.contains("api listening"));
    let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
    let status = child.wait().unwrap();
    let err = err.recv().unwrap();
    assert!(
        listening && status.success(),
        "keyfire serve did not start and stop cleanly ({status}):\nstderr:\n{err}\nstdout:\n{}",
        lines.join("\n")
    );
}

#[test]
fn serve_needs_no_home_and_no_writable_cwd() {
    let redis = RedisServer::start().unwrap();
    let mut cmd = keyfire(&["serve"]);
    cmd.env_remove("HOME").current_dir("/proc");
    serves(&redis, cmd);
}

/// Whether this process may make a mount namespace of its own (root, as in CI).
fn can_unshare() -> bool {
    Command::new("unshare")
        .args(["--mount", "--propagation", "private", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `keyfire <args>` in a mount namespace of its own where every filesystem it could write
/// (`/`, `/dev/shm`) is read-only and `/etc/hostname` is empty, from `/`. The shell checks
/// that `/` is read-only before it hands over to keyfire (exit 99 if not).
fn on_a_read_only_root(args: &[&str]) -> Command {
    let script = "mount --bind /dev/null /etc/hostname 2>/dev/null; \
                  mount -o remount,ro,bind / && mount -o remount,ro,bind /dev/shm || exit 98; \
                  if touch /keyfire-ro-probe 2>/dev/null; then exit 99; fi; \
                  cd / && exec \"$@\"";
    let mut cmd = Command::new("unshare");
    cmd.args([
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        script,
        "sh",
    ])
    .arg(BIN)
    .args(args);
    clean_env(&mut cmd);
    cmd
}

#[test]
fn on_a_read_only_root_only_dev_needs_a_writable_tmpdir() {
    if !can_unshare() {
        eprintln!(
            "skipped: `unshare --mount` is not allowed here (needs root, as in CI); \
             serve_needs_no_home_and_no_writable_cwd covers the rest"
        );
        return;
    }
    let redis = RedisServer::start().unwrap();
    // No HOME either, and no /etc/hostname: the node id falls back to the kernel's name.
    let mut cmd = on_a_read_only_root(&["serve"]);
    cmd.env_remove("HOME");
    serves(&redis, cmd);
    // dev needs a directory for its Redis: the temp dir is read-only.
    let mut cmd = on_a_read_only_root(&["dev"]);
    cmd.env("TMPDIR", "/tmp");
    assert_exit(
        fails(cmd),
        Exit::Filesystem,
        &["under /tmp", "Read-only file system", "set TMPDIR"],
    );
}

#[test]
fn help_and_the_docs_list_every_exit_code() {
    let out = Command::new(BIN)
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(
        help.contains(HELP),
        "serve --help lacks the exit codes:\n{help}"
    );
    let docs =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/operations.md"))
            .unwrap();
    for exit in Exit::ALL {
        let help_line = format!("  {}  {}\n", exit.code(), exit.meaning());
        assert!(HELP.contains(&help_line), "{help_line:?} not in HELP");
        let row = format!("| {} | {} |", exit.code(), exit.meaning());
        assert!(docs.contains(&row), "{row:?} not in docs/operations.md");
    }
}

//! `keyfire serve` where the system has no CA store (a slim container image): the node starts,
//! warns once that the http handler trusts the bundled Mozilla roots, and runs `http` jobs.
//! A TLS file it cannot use stops it at start with one line naming the setting, not a panic.
//! The handler's TLS itself is tested with the library (`crates/keyfire/tests/http_tls.rs`).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use keyfire_testkit::{RedisServer, wait};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

/// `keyfire serve --config <config>` as a slim image runs it: `SSL_CERT_FILE` and `SSL_CERT_DIR`
/// point at an empty file and an empty directory, so the system store yields nothing.
fn serve_without_ca_store(dir: &Path, config: &str) -> std::process::Child {
    let path = dir.join("keyfire.toml");
    std::fs::write(&path, config).unwrap();
    let empty_dir = dir.join("no-certs");
    std::fs::create_dir_all(&empty_dir).unwrap();
    let empty_file = dir.join("no-certs.pem");
    std::fs::write(&empty_file, "").unwrap();
    crate::support::keyfire_serve(&path)
        .env("SSL_CERT_FILE", &empty_file)
        .env("SSL_CERT_DIR", &empty_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run keyfire serve")
}

/// A plain HTTP/1.1 receiver on 127.0.0.1 answering 200; counts the requests.
fn receiver() -> (u16, Arc<AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            let mut reader = BufReader::new(conn);
            let mut len = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                if line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; len];
            let _ = reader.read_exact(&mut body);
            seen.fetch_add(1, Ordering::SeqCst);
            let _ = reader
                .get_mut()
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");
        }
    });
    (port, count)
}

#[test]
fn a_node_without_a_system_ca_store_starts_on_the_bundled_roots() {
    let redis = RedisServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (port, calls) = receiver();
    let mut child = serve_without_ca_store(
        dir.path(),
        &format!(
            r#"
[redis]
url = "{url}"
prefix = "tls-roots"

[node]
id = "slim"

[api]
enabled = false

[log]
format = "json"

[[jobs]]
id = "plain"
every = "1s"
handler = "http"
params = {{ url = "http://127.0.0.1:{port}/tick" }}
"#,
            url = redis.url()
        ),
    );
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // Not `wait::until_blocking`: this loop also gathers the node's output, and on timeout it
    // falls through to stop the node and fail below with that output and its stderr.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut lines = Vec::new();
    while calls.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(100)) {
            lines.push(line);
        }
        if let Ok(Some(status)) = child.try_wait() {
            let mut err = String::new();
            let _ = child.stderr.take().unwrap().read_to_string(&mut err);
            panic!(
                "keyfire serve exited with {status}: {err}\n{}",
                lines.join("\n")
            );
        }
    }
    let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
    let status = child.wait().unwrap();
    while let Ok(line) = rx.recv_timeout(Duration::from_millis(500)) {
        lines.push(line);
    }
    let mut err = String::new();
    let _ = child.stderr.take().unwrap().read_to_string(&mut err);
    assert!(
        calls.load(Ordering::SeqCst) > 0,
        "the http job never reached the receiver:\n{}\n{err}",
        lines.join("\n")
    );
    assert!(
        status.success(),
        "keyfire serve exited with {status}: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let warnings: Vec<Value> = lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| {
            l["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("bundled Mozilla roots"))
        })
        .collect();
    assert_eq!(warnings.len(), 1, "{}", lines.join("\n"));
    assert_eq!(warnings[0]["level"], "WARN");
    let message = warnings[0]["fields"]["message"].as_str().unwrap();
    assert!(message.contains("system CA store"), "{message}");
}

#[test]
fn a_tls_file_it_cannot_read_stops_the_node_at_start_naming_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("internal-ca.pem");
    let mut child = serve_without_ca_store(
        dir.path(),
        &format!(
            r#"
[api]
enabled = false

[handlers.http.tls."*.internal.example"]
ca_file = "{}"
"#,
            missing.display()
        ),
    );
    // It stops before it connects to Redis (there is none).
    // A node that does not stop is killed before the test fails, not left running.
    let stopped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait::until_blocking("keyfire serve to stop", Duration::from_secs(30), || {
            child.try_wait().unwrap()
        })
    }))
    .unwrap_or_else(|failed| {
        let _ = child.kill();
        std::panic::resume_unwind(failed)
    });
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    // A failure exit (the settings class, see `keyfire serve --help`), not a panic's 101.
    assert!(
        matches!(stopped.code(), Some(code) if code != 0 && code != 101),
        "{stopped}: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("no error line: {err}"));
    assert!(
        line.contains("handlers.http.tls.\"*.internal.example\".ca_file: cannot read")
            && line.contains("internal-ca.pem"),
        "{line}"
    );
}

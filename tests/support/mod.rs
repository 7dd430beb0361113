//! Shared by the server's integration tests: the tests' world from the testkit
//! (`keyfire_testkit::world`: a real redis-server per test, fast node settings, a recorder
//! the test handlers write to), and what only the server's tests need: running the `keyfire`
//! binary, and TLS certificates.
#![allow(dead_code, unused_imports)]

use std::time::Duration;

use keyfire_testkit::{RedisOptions, RedisServer};

pub(crate) use keyfire_testkit::wait;
pub(crate) use keyfire_testkit::world::*;

/// A test's world on the server's settings (its `api`, `log` and `jobs` sections beside the
/// library's).
pub(crate) type World = keyfire_testkit::world::WorldOf<keyfire_server::settings::ServerSettings>;

/// Run `keyfire dev <args>` (the quick start), wait until its three quick demo jobs have
/// fired (its log says so), stop it with SIGINT and check it exits cleanly. Returns its log.
pub(crate) fn run_keyfire_dev(args: &[&str]) -> Vec<String> {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;

    let mut child = Command::new(env!("CARGO_BIN_EXE_keyfire"))
        .arg("dev")
        .args(args)
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run keyfire dev");
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    let tx2 = tx.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx2.send(line);
        }
    });
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut lines = Vec::new();
    let mut fired = std::collections::HashSet::new();
    // A dev cluster takes several seconds to form before the node starts.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while fired.len() < 3 && std::time::Instant::now() < deadline {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
            if line.contains("fired") {
                for job in ["demo-cron-5s", "demo-every-3s", "demo-once"] {
                    if line.contains(job) {
                        fired.insert(job);
                    }
                }
            }
            lines.push(line);
        }
    }
    let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGINT);
    let status = child.wait().unwrap();
    assert_eq!(
        fired.len(),
        3,
        "demo jobs did not all fire:\n{}",
        lines.join("\n")
    );
    assert!(status.success(), "keyfire dev exited with {status}");
    lines
}

/// The `keyfire` binary under test.
pub(crate) const KEYFIRE_BIN: &str = env!("CARGO_BIN_EXE_keyfire");

/// `keyfire serve --config <config>`, to be started: without the caller's `KEYFIRE__*`
/// variables and `RUST_LOG`, so that the config alone decides.
pub(crate) fn keyfire_serve(config: &std::path::Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(KEYFIRE_BIN);
    cmd.arg("serve").arg("--config").arg(config);
    for (k, _) in std::env::vars() {
        if k.starts_with("KEYFIRE__") || k == "RUST_LOG" {
            cmd.env_remove(k);
        }
    }
    cmd
}

/// Run the `keyfire` CLI against the API at `url`, with `token` as `KEYFIRE_TOKEN` when
/// given, and wait for it to exit.
pub(crate) fn keyfire_cli(url: &str, token: Option<&str>, args: &[&str]) -> std::process::Output {
    let mut cmd = std::process::Command::new(KEYFIRE_BIN);
    cmd.args(args).env("KEYFIRE_URL", url);
    if let Some(token) = token {
        cmd.env("KEYFIRE_TOKEN", token);
    }
    cmd.output().expect("run keyfire")
}

/// What a run printed: its stdout, then its stderr.
pub(crate) fn printed(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A run's stdout as JSON, once it exited 0 (else the test fails with what it printed).
pub(crate) fn printed_json(o: &std::process::Output) -> serde_json::Value {
    assert_eq!(o.status.code(), Some(0), "{}", printed(o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", printed(o)))
}

/// A CA and a server certificate for `localhost` and `127.0.0.1`, written as PEM files.
pub(crate) fn write_certs(
    dir: &std::path::Path,
) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair,
        KeyUsagePurpose,
    };
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "keyfire test CA");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let server_key = KeyPair::generate().unwrap();
    let mut params =
        CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    let cert = params.signed_by(&server_key, &ca).unwrap();
    let (ca_path, cert_path, key_path) = (
        dir.join("ca.pem"),
        dir.join("server.pem"),
        dir.join("server.key"),
    );
    std::fs::write(&ca_path, ca.pem()).unwrap();
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, server_key.serialize_pem()).unwrap();
    (ca_path, cert_path, key_path)
}

/// A redis-server with `options` that also serves TLS (a certificate for 127.0.0.1 signed by a
/// CA made here; clients need not present one), with the CA's PEM file and the dir holding the
/// files (keep it alive). `None` when this redis-server was built without TLS.
pub(crate) fn tls_redis(
    mut options: RedisOptions,
) -> Option<(RedisServer, std::path::PathBuf, tempfile::TempDir)> {
    let certs = tempfile::tempdir().unwrap();
    let (ca, cert, key) = write_certs(certs.path());
    options.extra.extend([
        ("tls-cert-file".into(), cert.display().to_string()),
        ("tls-key-file".into(), key.display().to_string()),
        ("tls-ca-cert-file".into(), ca.display().to_string()),
        ("tls-auth-clients".into(), "no".into()),
    ]);
    match RedisServer::start_with_extra_port(options, "tls-port") {
        Ok(s) => Some((s, ca, certs)),
        Err(e) => {
            let msg = e.to_string();
            // Built without TLS: redis-server refuses the tls-* directives.
            if msg.contains("tls")
                && (msg.contains("Bad directive") || msg.contains("not supported"))
            {
                return None;
            }
            panic!("start redis-server with TLS: {msg}");
        }
    }
}

/// Send `req` and read the answer's body as JSON (panics on a transport error or a body that
/// is not a `T`).
pub(crate) async fn json_of<T: serde::de::DeserializeOwned>(req: reqwest::RequestBuilder) -> T {
    req.send().await.unwrap().json().await.unwrap()
}

/// Install ring as the process's rustls crypto provider, for the tests' own `reqwest` clients
/// built with reqwest's default TLS setup (the library installs no provider of its own).
pub(crate) fn install_tls_provider() {
    // Err: one is installed already, which serves as well.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

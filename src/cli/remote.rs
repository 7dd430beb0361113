//! What the client subcommands (`job`, `task`, `nodes`) share: where the API is, a small HTTP
//! client, exit codes, and table output.
//!
//! Exit codes, for scripts:
//!
//! | code | meaning |
//! | --- | --- |
//! | 0 | done |
//! | 1 | any other error (the server failed, auth refused, …) |
//! | 2 | usage or validation error (bad flags, a bad field: HTTP 400, 413, 422) |
//! | 3 | not found (HTTP 404) |
//! | 4 | conflict (HTTP 409: changed concurrently, or not at the expected version) |
//! | 5 | cannot connect to the API |
//! | 6 | Redis is full (HTTP 507 `redis_full`: it reached maxmemory and refuses writes) |

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use reqwest::{Method, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::settings::ServerSettings;

/// The exit codes documented above.
pub mod exit {
    /// Done.
    pub const OK: u8 = 0;
    /// Any other error.
    pub const ERROR: u8 = 1;
    /// Usage or validation error.
    pub const USAGE: u8 = 2;
    /// Not found.
    pub const NOT_FOUND: u8 = 3;
    /// Conflict.
    pub const CONFLICT: u8 = 4;
    /// Cannot connect.
    pub const CONNECT: u8 = 5;
    /// Redis is full: it refused the write for memory (HTTP 507).
    pub const REDIS_FULL: u8 = 6;
}

/// The help text that lists the exit codes.
pub const EXIT_CODES_HELP: &str = "Exit codes: 0 done, 1 error, 2 usage or validation error, \
3 not found, 4 conflict (changed concurrently), 5 cannot connect to the API, 6 Redis is full \
(it reached maxmemory and refuses writes: free memory or raise maxmemory, then retry).";

/// A failed client command: what to print and which exit code to return.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliError {
    /// The exit code (see [`exit`]).
    pub code: u8,
    /// What went wrong.
    pub message: String,
}

impl CliError {
    /// An error with an exit code.
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// A usage error (exit 2).
    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(exit::USAGE, message)
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CliError {}

/// Result of a client command.
pub type CliResult<T = ()> = Result<T, CliError>;

/// Where the API is and how to talk to it; shared by every client subcommand.
#[derive(Debug, Clone, Args)]
pub struct Remote {
    /// The node's API, such as http://127.0.0.1:8080 (default: from --config's api.listen,
    /// else http://127.0.0.1:8080).
    #[arg(long, env = "KEYFIRE_URL", global = true)]
    pub url: Option<String>,
    /// Bearer token (default: --config's api.token).
    #[arg(long, env = "KEYFIRE_TOKEN", hide_env_values = true, global = true)]
    pub token: Option<String>,
    /// A node's TOML settings, to read api.listen and api.token from.
    #[arg(long, short, global = true)]
    pub config: Option<PathBuf>,
    /// Print JSON (the API's answers) instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
    /// Seconds to wait for an answer.
    #[arg(long, default_value_t = 30, global = true)]
    pub timeout: u64,
}

/// A small client of the API.
#[derive(Debug, Clone)]
pub struct Api {
    base: String,
    token: Option<String>,
    http: reqwest::Client,
    /// Print JSON.
    pub json: bool,
}

impl Remote {
    /// The client these options describe.
    pub fn api(&self) -> CliResult<Api> {
        let settings = match &self.config {
            Some(path) => Some(
                ServerSettings::load(Some(path))
                    .map_err(|e| CliError::usage(format!("{}: {e}", path.display())))?,
            ),
            None => None,
        };
        let url = match (&self.url, &settings) {
            (Some(u), _) => u.clone(),
            (None, Some(s)) => {
                let listen = s.api.listen.replace("0.0.0.0", "127.0.0.1");
                let listen = listen.replace("[::]", "[::1]");
                format!("http://{listen}")
            }
            (None, None) => "http://127.0.0.1:8080".into(),
        };
        let url = url.trim_end_matches('/').to_string();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(CliError::usage(format!(
                "--url must start with http:// or https://, not '{url}'"
            )));
        }
        let token = self
            .token
            .clone()
            .or_else(|| settings.map(|s| s.api.token))
            .filter(|t| !t.is_empty());
        // The http handler's roots (the system store, else the bundled ones), so the CLI
        // works in a container without a CA store too.
        let tls = keyfire::handler::http::default_client_tls()
            .map_err(|e| CliError::new(exit::ERROR, format!("http client: {e}")))?;
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(self.timeout.max(1)))
            .user_agent(concat!("keyfire-cli/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| CliError::new(exit::ERROR, format!("http client: {e}")))?;
        Ok(Api {
            base: url,
            token,
            http,
            json: self.json,
        })
    }
}

/// Percent-encode one path segment (job ids are plain, but be safe with anything typed).
pub fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn status_code(status: StatusCode) -> u8 {
    match status.as_u16() {
        400 | 413 | 422 => exit::USAGE,
        404 => exit::NOT_FOUND,
        409 => exit::CONFLICT,
        507 => exit::REDIS_FULL,
        _ => exit::ERROR,
    }
}

impl Api {
    /// Send a request; decode a 2xx answer as `T` (204: JSON null), or turn the API's error
    /// body into a [`CliError`] with the exit code of its status.
    pub async fn send<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        headers: &[(&str, String)],
    ) -> CliResult<T> {
        let url = format!("{}{path}", self.base);
        let mut req = self.http.request(method.clone(), &url);
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        for (k, v) in headers {
            req = req.header(*k, v);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().await.map_err(|e| {
            if e.is_connect() || e.is_timeout() {
                let what = if e.is_timeout() {
                    "no answer in time"
                } else {
                    "cannot connect"
                };
                CliError::new(
                    exit::CONNECT,
                    format!(
                        "{what}: {} (is `keyfire serve` running there? set --url or KEYFIRE_URL)",
                        self.base
                    ),
                )
            } else {
                CliError::new(exit::CONNECT, format!("{method} {url}: {e}"))
            }
        })?;
        let status = resp.status();
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| CliError::new(exit::CONNECT, format!("reading the answer: {e}")))?;
        if status.is_success() {
            let text: &[u8] = if bytes.is_empty() { b"null" } else { &bytes };
            return serde_json::from_slice(text).map_err(|e| {
                CliError::new(exit::ERROR, format!("unexpected answer from {url}: {e}"))
            });
        }
        let detail: Option<Value> = serde_json::from_slice(&bytes).ok();
        let message = match detail.as_ref().map(|d| &d["error"]) {
            Some(err) if err.is_object() => {
                let msg = err["message"].as_str().unwrap_or("error").to_string();
                match err["field"].as_str() {
                    Some(f) if !msg.contains(f) => format!("{msg} (field: {f})"),
                    _ => msg,
                }
            }
            _ => format!(
                "{status} from {url}: {}",
                String::from_utf8_lossy(&bytes).trim()
            ),
        };
        Err(CliError::new(status_code(status), message))
    }

    /// GET and decode.
    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> CliResult<T> {
        self.send(Method::GET, path, None, &[]).await
    }

    /// Print `value` as pretty JSON.
    pub fn print_json<T: Serialize>(&self, value: &T) {
        println!(
            "{}",
            serde_json::to_string_pretty(value).unwrap_or_else(|_| "null".into())
        );
    }
}

/// Print rows as a table with a header, columns padded to their widest cell.
pub fn print_table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(cell);
                out.push_str(&" ".repeat(widths[i] - cell.chars().count() + 2));
            }
        }
        println!("{}", out.trim_end());
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}

/// An RFC 3339 instant as a short UTC string (`2026-03-09 08:00:00Z`), or `-`.
pub fn short_time(t: Option<&chrono::DateTime<chrono::Utc>>) -> String {
    t.map(|t| t.format("%Y-%m-%d %H:%M:%SZ").to_string())
        .unwrap_or_else(|| "-".into())
}

//! `keyfire doctor`: check the Redis keyfire is pointed at and print each finding with a fix.
//! The checks themselves live in [`crate::doctor`]. `redis.mode` decides what is checked: the
//! server at `redis.url`, or in sentinel and cluster mode every master and the deployment
//! (one section per master in the text output, a `server` field in `--json`).

use std::path::PathBuf;

use clap::Args;

use crate::doctor::{self, Finding, Report};
use crate::settings::ServerSettings;
use keyfire::config::RedisMode;

/// Exit codes of `keyfire doctor`.
pub mod exit {
    /// Every check passed (warnings allowed).
    pub const OK: u8 = 0;
    /// A check failed, or Redis could not be reached.
    pub const FAILED: u8 = 1;
    /// Bad flags or settings file.
    pub const USAGE: u8 = 2;
}

/// `keyfire doctor`.
#[derive(Debug, Args)]
#[command(
    after_help = "Exit codes: 0 every check passed (warnings allowed), 1 a check failed or Redis \
                  is unreachable, 2 bad flags or settings file."
)]
pub struct DoctorArgs {
    /// One Redis server to check, such as redis://127.0.0.1:6379/0, whatever redis.mode says
    /// (default: as the settings say: redis.url, or in sentinel and cluster mode the masters
    /// found through redis.nodes).
    #[arg(long, value_name = "URL")]
    pub redis: Option<String>,
    /// TOML settings file whose [redis] settings to use (mode, url or nodes, credentials, TLS,
    /// shards, prefix); KEYFIRE__ env vars override it.
    #[arg(long, short, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Key prefix whose layout version to check (default: redis.prefix of the settings).
    #[arg(long)]
    pub prefix: Option<String>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Acknowledge a data loss the nodes noticed (Redis came back without keyfire's data):
    /// the `data-loss` finding and `/readyz` stop showing it (it goes by itself after an
    /// hour). Then check as usual.
    #[arg(long)]
    pub ack_data_loss: bool,
}

/// Run `keyfire doctor`; returns the exit code.
pub async fn run(args: DoctorArgs) -> u8 {
    let settings = match ServerSettings::load(args.config.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::USAGE;
        }
    };
    let mut library = settings.library();
    let mut redis = settings.redis;
    if let Some(url) = args.redis {
        redis.mode = RedisMode::Standalone;
        redis.url = url;
    }
    if let Some(prefix) = args.prefix {
        redis.prefix = prefix;
    }
    if args.ack_data_loss {
        library.redis = redis.clone();
        let acked = match keyfire::Client::connect(&library).await {
            Ok(client) => client.ack_data_loss().await,
            Err(e) => Err(e),
        };
        match acked {
            Ok(true) => eprintln!("data loss acknowledged"),
            Ok(false) => eprintln!("no data loss was recorded"),
            Err(e) => {
                eprintln!("error: cannot acknowledge the data loss: {e}");
                return exit::FAILED;
            }
        }
    }
    let report = doctor::diagnose_settings(&redis).await;
    if args.json {
        match serde_json::to_string_pretty(&report) {
            Ok(text) => println!("{text}"),
            Err(e) => {
                eprintln!("error: {e}");
                return exit::FAILED;
            }
        }
    } else {
        print!("{}", render(&report));
    }
    if report.ok { exit::OK } else { exit::FAILED }
}

/// The human-readable report: one line per check, its fix indented below; in sentinel and
/// cluster mode a section for the deployment, then one per master (`master host:port`).
pub fn render(report: &Report) -> String {
    use std::fmt::Write;
    let width = report
        .findings
        .iter()
        .map(|f| f.check.len())
        .max()
        .unwrap_or(0);
    let line = |out: &mut String, f: &Finding| {
        let _ = writeln!(
            out,
            "{:<4}  {:<width$}  {}",
            f.status.label(),
            f.check,
            f.message
        );
        if let Some(fix) = &f.fix {
            let _ = writeln!(out, "{:<4}  {:<width$}  fix: {fix}", "", "");
        }
    };
    let standalone = report.mode == RedisMode::Standalone;
    let mut out = if standalone {
        format!(
            "keyfire doctor: {} (prefix '{}')\n\n",
            report.redis, report.prefix
        )
    } else {
        let shards = report
            .shards
            .map(|n| format!(", redis.shards = {n}"))
            .unwrap_or_default();
        format!(
            "keyfire doctor: {} mode through {} (prefix '{}'{shards})\n",
            report.mode.as_str(),
            report.redis,
            report.prefix
        )
    };
    if standalone {
        for f in &report.findings {
            line(&mut out, f);
        }
    } else {
        let _ = writeln!(out, "\n{}", report.mode.as_str());
        for f in report.findings_on(None) {
            line(&mut out, f);
        }
        // Masters in the order they were listed, then any other server a finding names.
        let mut servers: Vec<&str> = report.servers.iter().map(String::as_str).collect();
        for f in &report.findings {
            if let Some(s) = f.server.as_deref()
                && !servers.contains(&s)
            {
                servers.push(s);
            }
        }
        for server in servers {
            let _ = writeln!(out, "\nmaster {server}");
            for f in report.findings_on(Some(server)) {
                line(&mut out, f);
            }
        }
    }
    let s = report.summary;
    let verdict = match (report.ok, standalone) {
        (true, true) => "this Redis suits keyfire",
        (true, false) => "this deployment suits keyfire",
        (false, _) => "fix the failures above",
    };
    let _ = writeln!(
        out,
        "\n{} ok, {} warning(s), {} failed: {verdict}",
        s.ok, s.warn, s.fail,
    );
    out
}

//! `keyfire limits ls|get|set|rm`: flow-control limits per key, through a node's API.

use clap::{Args, Subcommand};
use reqwest::Method;
use serde_json::json;

use super::remote::{Api, CliResult, EXIT_CODES_HELP, Remote, print_table, segment, short_time};
use crate::api::limits::{LimitList, LimitView};
use keyfire::FlowLimitStatus;

/// `keyfire limits …`.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES_HELP)]
pub struct LimitsArgs {
    #[command(flatten)]
    remote: Remote,
    #[command(subcommand)]
    command: LimitsCommand,
}

#[derive(Debug, Subcommand)]
enum LimitsCommand {
    /// List every limit with what runs and waits under it now.
    Ls,
    /// Show one limit and the firings it holds back, first in line first.
    Get {
        /// The limit key, such as host:api.example.com.
        key: String,
    },
    /// Set (create or replace) a limit: at most RATE firings started per second, at most
    /// IN_FLIGHT running at once (one or both).
    Set {
        /// The limit key: host:<host> for an http target, or a job's limit_key.
        key: String,
        /// Most firings started per second.
        #[arg(long)]
        rate: Option<u32>,
        /// With --rate: most started at once before the pacing applies (default rate / 10).
        #[arg(long)]
        burst: Option<u32>,
        /// Most firings running at once.
        #[arg(long)]
        in_flight: Option<u32>,
    },
    /// Lift a limit: the firings it holds back run at their turn.
    Rm {
        /// The limit key.
        key: String,
    },
}

fn opt(v: Option<u32>) -> String {
    v.map_or("-".to_string(), |v| v.to_string())
}

fn rows(limits: &[FlowLimitStatus]) {
    let rows: Vec<Vec<String>> = limits
        .iter()
        .map(|l| {
            vec![
                l.key.clone(),
                opt(l.rate),
                opt(l.in_flight),
                l.running.to_string(),
                l.started_last_second.to_string(),
                l.held.to_string(),
            ]
        })
        .collect();
    print_table(
        &[
            "KEY",
            "RATE/S",
            "IN FLIGHT",
            "RUNNING",
            "LAST SECOND",
            "HELD",
        ],
        &rows,
    );
}

fn show(api: &Api, v: &LimitView) {
    if api.json {
        api.print_json(v);
        return;
    }
    rows(std::slice::from_ref(&v.status));
    if !v.held_firings.is_empty() {
        println!();
        let held: Vec<Vec<String>> = v
            .held_firings
            .iter()
            .map(|h| vec![h.firing_id.clone(), short_time(h.scheduled_at.as_ref())])
            .collect();
        print_table(&["HELD FIRING", "SCHEDULED (UTC)"], &held);
    }
}

/// Run `keyfire limits …`.
pub async fn run(args: LimitsArgs) -> CliResult {
    let api = args.remote.api()?;
    match args.command {
        LimitsCommand::Ls => {
            let list: LimitList = api.get("/v1/limits").await?;
            if api.json {
                api.print_json(&list);
            } else {
                rows(&list.limits);
            }
        }
        LimitsCommand::Get { key } => {
            let v: LimitView = api.get(&format!("/v1/limits/{}", segment(&key))).await?;
            show(&api, &v);
        }
        LimitsCommand::Set {
            key,
            rate,
            burst,
            in_flight,
        } => {
            let mut body = json!({});
            if let Some(r) = rate {
                body["rate"] = json!(r);
            }
            if let Some(b) = burst {
                body["burst"] = json!(b);
            }
            if let Some(m) = in_flight {
                body["in_flight"] = json!(m);
            }
            let v: LimitView = api
                .send(
                    Method::PUT,
                    &format!("/v1/limits/{}", segment(&key)),
                    Some(&body),
                    &[],
                )
                .await?;
            show(&api, &v);
        }
        LimitsCommand::Rm { key } => {
            let _: serde_json::Value = api
                .send(
                    Method::DELETE,
                    &format!("/v1/limits/{}", segment(&key)),
                    None,
                    &[],
                )
                .await?;
            if !api.json {
                println!("lifted the limit of {key}");
            }
        }
    }
    Ok(())
}

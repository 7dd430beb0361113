//! `keyfire dead ls|replay|purge`: a job's dead letters, through a node's API.

use clap::{Args, Subcommand};
use reqwest::Method;

use super::remote::{Api, CliResult, EXIT_CODES_HELP, Remote, print_table, segment, short_time};
use crate::api::model::{DeadCount, DeadList};

/// `keyfire dead …`.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES_HELP)]
pub struct DeadArgs {
    #[command(flatten)]
    remote: Remote,
    #[command(subcommand)]
    command: DeadCommand,
}

#[derive(Debug, Subcommand)]
enum DeadCommand {
    /// List a job's dead letters (firings that used up their attempts), newest first.
    Ls {
        /// The job's id.
        job: String,
        /// How many.
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Queue dead letters again as attempt 1: one (--firing) or all of the job's.
    Replay {
        /// The job's id.
        job: String,
        /// Only this firing id.
        #[arg(long)]
        firing: Option<String>,
    },
    /// Drop dead letters: one (--firing) or all of the job's.
    Purge {
        /// The job's id.
        job: String,
        /// Only this firing id.
        #[arg(long)]
        firing: Option<String>,
    },
}

fn path(job: &str, tail: &str, firing: Option<&str>) -> String {
    let mut p = format!("/v1/jobs/{}/dead{tail}", segment(job));
    if let Some(f) = firing {
        p.push_str(&format!("?firing={}", segment(f)));
    }
    p
}

async fn count(api: &Api, method: Method, path: &str, verb: &str, job: &str) -> CliResult {
    let c: DeadCount = api.send(method, path, None, &[]).await?;
    if api.json {
        api.print_json(&c);
    } else {
        println!("{verb} {} dead letter(s) of job {job}", c.count);
    }
    Ok(())
}

/// Run `keyfire dead …`.
pub async fn run(args: DeadArgs) -> CliResult {
    let api = args.remote.api()?;
    match args.command {
        DeadCommand::Ls { job, limit } => {
            let list: DeadList = api
                .get(&format!("/v1/jobs/{}/dead?limit={limit}", segment(&job)))
                .await?;
            if api.json {
                api.print_json(&list);
                return Ok(());
            }
            let rows: Vec<Vec<String>> = list
                .dead
                .iter()
                .map(|d| {
                    vec![
                        d.firing_id.clone(),
                        short_time(d.scheduled_at.as_ref()),
                        d.attempts.to_string(),
                        short_time(d.failed_at.as_ref()),
                        d.error.clone().unwrap_or_default().replace('\n', " "),
                    ]
                })
                .collect();
            print_table(
                &[
                    "FIRING",
                    "SCHEDULED (UTC)",
                    "ATTEMPTS",
                    "FAILED (UTC)",
                    "ERROR",
                ],
                &rows,
            );
            Ok(())
        }
        DeadCommand::Replay { job, firing } => {
            let p = path(&job, "/replay", firing.as_deref());
            count(&api, Method::POST, &p, "replayed", &job).await
        }
        DeadCommand::Purge { job, firing } => {
            let p = path(&job, "", firing.as_deref());
            count(&api, Method::DELETE, &p, "purged", &job).await
        }
    }
}

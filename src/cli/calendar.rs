//! `keyfire calendar ls|get|set|rm`: calendars jobs name in `exclude`, through a node's API.

use clap::{Args, Subcommand};
use reqwest::Method;
use serde_json::json;

use super::remote::{Api, CliError, CliResult, EXIT_CODES_HELP, Remote, print_table, segment};
use crate::api::calendars::CalendarList;
use keyfire::CalendarSpec;

/// `keyfire calendar …`.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES_HELP)]
pub struct CalendarArgs {
    #[command(flatten)]
    remote: Remote,
    #[command(subcommand)]
    command: CalendarCommand,
}

#[derive(Debug, Subcommand)]
enum CalendarCommand {
    /// List every calendar.
    Ls,
    /// Show one calendar.
    Get {
        /// Its name.
        name: String,
    },
    /// Create or replace a calendar; each instant of the jobs that name it is judged by it
    /// from now on.
    Set {
        /// Its name, such as de-holidays.
        name: String,
        /// IANA zone its days and expressions are read in (default UTC).
        #[arg(long)]
        tz: Option<String>,
        /// A day to exclude, YYYY-MM-DD (repeat the flag for more).
        #[arg(long = "date")]
        dates: Vec<String>,
        /// Days to exclude, FROM..TO, both included, such as 2026-12-24..2026-12-31.
        #[arg(long = "range")]
        ranges: Vec<String>,
        /// A cron expression whose instants to exclude, such as "* * 2-3 * * SUN".
        #[arg(long = "cron")]
        crons: Vec<String>,
    },
    /// Delete a calendar (refused while jobs name it).
    Rm {
        /// Its name.
        name: String,
    },
}

fn rows(calendars: &[CalendarSpec]) {
    let rows: Vec<Vec<String>> = calendars
        .iter()
        .map(|c| {
            vec![
                c.name.clone(),
                c.tz.clone().unwrap_or_else(|| "UTC".into()),
                c.dates.len().to_string(),
                c.ranges.len().to_string(),
                c.cron.len().to_string(),
            ]
        })
        .collect();
    print_table(&["NAME", "TZ", "DATES", "RANGES", "CRON"], &rows);
}

fn show(api: &Api, c: &CalendarSpec) {
    if api.json {
        api.print_json(c);
        return;
    }
    println!("calendar {} ({})", c.name, c.tz.as_deref().unwrap_or("UTC"));
    for d in &c.dates {
        println!("  date   {d}");
    }
    for r in &c.ranges {
        println!("  range  {} .. {}", r.from, r.to);
    }
    for e in &c.cron {
        println!("  cron   {e}");
    }
}

/// Run `keyfire calendar …`.
pub async fn run(args: CalendarArgs) -> CliResult {
    let api = args.remote.api()?;
    match args.command {
        CalendarCommand::Ls => {
            let list: CalendarList = api.get("/v1/calendars").await?;
            if api.json {
                api.print_json(&list);
            } else {
                rows(&list.calendars);
            }
        }
        CalendarCommand::Get { name } => {
            let c: CalendarSpec = api
                .get(&format!("/v1/calendars/{}", segment(&name)))
                .await?;
            show(&api, &c);
        }
        CalendarCommand::Set {
            name,
            tz,
            dates,
            ranges,
            crons,
        } => {
            let mut parsed = Vec::new();
            for r in &ranges {
                let Some((from, to)) = r.split_once("..") else {
                    return Err(CliError::usage(format!(
                        "--range '{r}' must be FROM..TO, such as 2026-12-24..2026-12-31"
                    )));
                };
                parsed.push(json!({"from": from, "to": to}));
            }
            let mut body = json!({"dates": dates, "ranges": parsed, "cron": crons});
            if let Some(tz) = tz {
                body["tz"] = json!(tz);
            }
            let c: CalendarSpec = api
                .send(
                    Method::PUT,
                    &format!("/v1/calendars/{}", segment(&name)),
                    Some(&body),
                    &[],
                )
                .await?;
            show(&api, &c);
        }
        CalendarCommand::Rm { name } => {
            let _: serde_json::Value = api
                .send(
                    Method::DELETE,
                    &format!("/v1/calendars/{}", segment(&name)),
                    None,
                    &[],
                )
                .await?;
            if !api.json {
                println!("deleted calendar {name}");
            }
        }
    }
    Ok(())
}

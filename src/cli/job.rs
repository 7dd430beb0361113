//! `keyfire job add|get|ls|edit|rm|pause|resume|trigger|backfill|cancel|runs|why`: manage jobs through a
//! node's API (`pause` and `resume` also many at once, by `--handler` or `--prefix`).

use std::io::Read;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use reqwest::Method;
use serde_json::{Map, Value};

use super::remote::{
    Api, CliError, CliResult, EXIT_CODES_HELP, Remote, print_table, segment, short_time,
};
use crate::api::cancel::CancelView;
use crate::api::model::{JobList, JobView, RunList, Triggered};

/// `keyfire job …`.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES_HELP)]
pub struct JobArgs {
    #[command(flatten)]
    remote: Remote,
    #[command(subcommand)]
    command: JobCommand,
}

/// The jobs `job pause` and `job resume` act on: exactly one of an id, `--handler`, `--prefix`.
#[derive(Debug, Clone, Args)]
#[group(required = true, multiple = false)]
pub struct Which {
    /// The job's id.
    id: Option<String>,
    /// Every job (one-shot tasks included) whose handler is this.
    #[arg(long)]
    handler: Option<String>,
    /// Every job whose id starts with this, such as billing-.
    #[arg(long)]
    prefix: Option<String>,
}

/// Fields of a job that flags can set (`job add`, `job edit`).
#[derive(Debug, Default, Clone, Args)]
pub struct SpecFlags {
    /// Cron expression: 5 fields, 6 with seconds, or a macro like @hourly.
    #[arg(long, conflicts_with_all = ["every", "at", "after"])]
    pub cron: Option<String>,
    /// Fixed rate, such as 30s or "1h 30m".
    #[arg(long, conflicts_with_all = ["at", "after"])]
    pub every: Option<String>,
    /// One-shot at an RFC 3339 instant, such as 2026-12-01T09:00:00Z.
    #[arg(long, conflicts_with = "after")]
    pub at: Option<String>,
    /// One-shot after a delay, such as 10m.
    #[arg(long)]
    pub after: Option<String>,
    /// IANA zone of the cron expression, such as Europe/Berlin.
    #[arg(long)]
    pub tz: Option<String>,
    /// Cron and every jobs: fire each instant up to this much later, by a fixed offset per
    /// instant, such as 30s ("" clears it).
    #[arg(long)]
    pub jitter: Option<String>,
    /// Calendars whose instants to skip, comma-separated ("" clears them).
    #[arg(long)]
    pub exclude: Option<String>,
    /// Handler name.
    #[arg(long)]
    pub handler: Option<String>,
    /// Handler params, as JSON.
    #[arg(long)]
    pub params: Option<String>,
    /// Nothing fires before this RFC 3339 instant ("" clears it).
    #[arg(long)]
    pub start_at: Option<String>,
    /// Nothing fires after this RFC 3339 instant ("" clears it).
    #[arg(long)]
    pub end_at: Option<String>,
    /// End the job after this many successful firings ("" clears it).
    #[arg(long)]
    pub max_runs: Option<String>,
    /// Pause the job after this many failed firings in a row ("" clears it).
    #[arg(long)]
    pub pause_after_failures: Option<String>,
}

#[derive(Debug, Subcommand)]
enum JobCommand {
    /// Create or replace jobs from a TOML or JSON file, or from flags.
    ///
    /// The file holds one job (a TOML table or JSON object), several (`[[jobs]]` in TOML, a
    /// JSON array), or `-` reads it from stdin. Flags set fields of a single job.
    Add {
        /// TOML or JSON file (`-`: stdin).
        file: Option<PathBuf>,
        /// The job's id.
        #[arg(long)]
        id: Option<String>,
        #[command(flatten)]
        spec: SpecFlags,
        /// Only create: fail with exit code 4 when the job exists.
        #[arg(long)]
        create_only: bool,
    },
    /// Show a job and its next five firings.
    Get {
        /// The job's id.
        id: String,
    },
    /// List jobs, in id order.
    Ls {
        /// Only jobs in this state: active, paused, finished or waiting.
        #[arg(long)]
        status: Option<String>,
        /// Only jobs run by this handler.
        #[arg(long)]
        handler: Option<String>,
        /// At most this many jobs (default: all).
        #[arg(long)]
        limit: Option<usize>,
        /// Start after this id (a cursor from a previous listing).
        #[arg(long)]
        after: Option<String>,
    },
    /// Change a job: with flags, set those fields; without, open it in $EDITOR (as JSON).
    ///
    /// The change applies only if nobody changed the job meanwhile (exit code 4 otherwise).
    Edit {
        /// The job's id.
        id: String,
        #[command(flatten)]
        spec: SpecFlags,
    },
    /// Delete a job, its pending firing and its history.
    Rm {
        /// The job's id.
        id: String,
    },
    /// Pause a job, or every job of a handler (--handler) or under an id prefix (--prefix):
    /// it fires nothing until resumed.
    Pause {
        #[command(flatten)]
        which: Which,
    },
    /// Resume a paused job, or every one of a handler or under an id prefix: it is scheduled
    /// from the first firing after the pause began, so its misfire policy decides what the
    /// pause skipped (a pause shorter than the misfire tolerance loses nothing).
    Resume {
        #[command(flatten)]
        which: Which,
    },
    /// Run a job once now, without moving its schedule. Prints the firing id.
    Trigger {
        /// The job's id.
        id: String,
    },
    /// Run each instant of a job's schedule from --from to --to (RFC 3339, both included)
    /// once, each as a firing of its own, at --rate runs per second (default 10, at most
    /// 100). Instants already run are skipped. Prints how many were scheduled and skipped.
    Backfill {
        /// The job's id.
        id: String,
        /// The first instant of the range, such as 2026-03-01T00:00:00Z.
        #[arg(long)]
        from: String,
        /// The last instant of the range (not in the future; at most 10,000 instants).
        #[arg(long)]
        to: String,
        /// Runs per second, from 0.01 to 100.
        #[arg(long)]
        rate: Option<f64>,
    },
    /// Cancel what a job has in progress: its running firings are stopped (on whichever
    /// node runs them) and recorded `cancelled`, attempts queued for a retry and a one-shot
    /// job's pending instant are removed and recorded `cancelled`; none is retried. Prints
    /// each firing as `stopping ID` or `cancelled ID`. Exit 4 when there was nothing to
    /// cancel.
    Cancel {
        /// The job's id.
        id: String,
    },
    /// Show a job's most recent runs, newest first.
    Runs {
        /// The job's id.
        id: String,
        /// How many runs (and, with --skipped, how many skip records).
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Also the instants that were due and did not run, with their reasons, in one
        /// timeline with the runs.
        #[arg(long)]
        skipped: bool,
    },
    /// Explain why a job runs or does not, now: its next firing, what stands in its way
    /// (paused, outside its window, a flow limit, no node for its handler, Redis full, a
    /// failing attempt, a run in progress), and its last runs and skips.
    Why {
        /// The job's id.
        id: String,
    },
}

/// Run `keyfire job …`.
pub async fn run(args: JobArgs) -> CliResult {
    let api = args.remote.api()?;
    match args.command {
        JobCommand::Add {
            file,
            id,
            spec,
            create_only,
        } => add(&api, file.as_deref(), id, &spec, create_only).await,
        JobCommand::Get { id } => {
            let job: JobView = api.get(&format!("/v1/jobs/{}", segment(&id))).await?;
            if api.json {
                api.print_json(&job);
            } else {
                print_job(&job);
            }
            Ok(())
        }
        JobCommand::Ls {
            status,
            handler,
            limit,
            after,
        } => ls(&api, status, handler, limit, after).await,
        JobCommand::Edit { id, spec } => edit(&api, &id, &spec).await,
        JobCommand::Rm { id } => {
            let _: Value = api
                .send(
                    Method::DELETE,
                    &format!("/v1/jobs/{}", segment(&id)),
                    None,
                    &[],
                )
                .await?;
            if api.json {
                api.print_json(&serde_json::json!({"deleted": id}));
            } else {
                println!("deleted job {id}");
            }
            Ok(())
        }
        JobCommand::Pause { which } => pause_resume(&api, which, "pause").await,
        JobCommand::Resume { which } => pause_resume(&api, which, "resume").await,
        JobCommand::Runs { id, limit, skipped } => runs(&api, &id, limit, skipped).await,
        JobCommand::Why { id } => super::why::why(&api, &id).await,
        JobCommand::Cancel { id } => {
            cancel(&api, &format!("/v1/jobs/{}/cancel", segment(&id))).await
        }
        JobCommand::Backfill { id, from, to, rate } => {
            let mut body = serde_json::json!({"from": from, "to": to});
            if let Some(r) = rate {
                body["rate"] = r.into();
            }
            let b: Value = api
                .send(
                    Method::POST,
                    &format!("/v1/jobs/{}/backfill", segment(&id)),
                    Some(&body),
                    &[],
                )
                .await?;
            if api.json {
                api.print_json(&b);
            } else {
                println!(
                    "scheduled {} of {} instants ({} skipped as already run){}",
                    b["scheduled"],
                    b["instants"],
                    b["skipped"],
                    match (b["first_at"].as_str(), b["last_at"].as_str()) {
                        (Some(f), Some(l)) => format!(", due from {f} to {l}"),
                        _ => String::new(),
                    }
                );
            }
            Ok(())
        }
        JobCommand::Trigger { id } => {
            let t: Triggered = api
                .send(
                    Method::POST,
                    &format!("/v1/jobs/{}/trigger", segment(&id)),
                    None,
                    &[],
                )
                .await?;
            if api.json {
                api.print_json(&t);
            } else {
                println!("{}", t.firing_id);
            }
            Ok(())
        }
    }
}

/// `POST` a cancel to `path` (a job's or a task's) and print what it did.
pub(super) async fn cancel(api: &Api, path: &str) -> CliResult {
    let done: CancelView = api.send(Method::POST, path, None, &[]).await?;
    if api.json {
        api.print_json(&done);
    } else {
        for f in &done.stopping {
            println!("stopping {f}");
        }
        for f in &done.cancelled {
            println!("cancelled {f}");
        }
    }
    Ok(())
}

/// Convert TOML to JSON; TOML datetimes become RFC 3339 strings.
pub fn toml_to_json(v: toml::Value) -> Value {
    match v {
        toml::Value::String(s) => Value::String(s),
        toml::Value::Integer(i) => Value::from(i),
        toml::Value::Float(f) => Value::from(f),
        toml::Value::Boolean(b) => Value::Bool(b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(a) => Value::Array(a.into_iter().map(toml_to_json).collect()),
        toml::Value::Table(t) => {
            Value::Object(t.into_iter().map(|(k, v)| (k, toml_to_json(v))).collect())
        }
    }
}

/// Read jobs from a TOML or JSON file: one job, a list, or `[[jobs]]`.
pub fn read_jobs(path: &Path) -> CliResult<Vec<Value>> {
    let (text, name) = if path == Path::new("-") {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| CliError::usage(format!("reading stdin: {e}")))?;
        (s, "stdin".to_string())
    } else {
        let s = std::fs::read_to_string(path)
            .map_err(|e| CliError::usage(format!("{}: {e}", path.display())))?;
        (s, path.display().to_string())
    };
    let is_json = path.extension().is_some_and(|e| e == "json")
        || (path.extension().is_none_or(|e| e != "toml")
            && text.trim_start().starts_with(['{', '[']));
    let value = if is_json {
        serde_json::from_str::<Value>(&text)
            .map_err(|e| CliError::usage(format!("{name}: not valid JSON: {e}")))?
    } else {
        let table: toml::Table = text
            .parse()
            .map_err(|e| CliError::usage(format!("{name}: not valid TOML: {e}")))?;
        toml_to_json(toml::Value::Table(table))
    };
    let jobs = match value {
        Value::Array(items) => items,
        Value::Object(mut map)
            if map.len() == 1 && map.get("jobs").is_some_and(Value::is_array) =>
        {
            match map.remove("jobs") {
                Some(Value::Array(items)) => items,
                _ => unreachable!("checked above"),
            }
        }
        obj @ Value::Object(_) => vec![obj],
        _ => {
            return Err(CliError::usage(format!(
                "{name}: expected a job or a list of jobs"
            )));
        }
    };
    if jobs.is_empty() {
        return Err(CliError::usage(format!("{name}: no jobs in it")));
    }
    Ok(jobs)
}

fn set_or_clear(map: &mut Map<String, Value>, key: &str, value: &Option<String>) {
    if let Some(v) = value {
        if v.is_empty() {
            map.remove(key);
        } else {
            map.insert(key.into(), Value::String(v.clone()));
        }
    }
}

/// Apply flags to a job spec (JSON object). A new schedule replaces the old one.
pub fn apply_flags(map: &mut Map<String, Value>, f: &SpecFlags) -> CliResult {
    let schedule = [
        ("cron", &f.cron),
        ("every", &f.every),
        ("at", &f.at),
        ("after", &f.after),
    ];
    if schedule.iter().any(|(_, v)| v.is_some()) {
        for key in ["cron", "every", "at", "after"] {
            map.remove(key);
        }
        if f.cron.is_none() {
            map.remove("tz");
        }
    }
    for (key, value) in schedule {
        set_or_clear(map, key, value);
    }
    set_or_clear(map, "tz", &f.tz);
    set_or_clear(map, "jitter", &f.jitter);
    if let Some(e) = &f.exclude {
        let names: Vec<Value> = e
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(|n| Value::String(n.into()))
            .collect();
        if names.is_empty() {
            map.remove("exclude");
        } else {
            map.insert("exclude".into(), Value::Array(names));
        }
    }
    set_or_clear(map, "handler", &f.handler);
    set_or_clear(map, "start_at", &f.start_at);
    set_or_clear(map, "end_at", &f.end_at);
    for (key, flag, value) in [
        ("max_runs", "--max-runs", &f.max_runs),
        (
            "pause_after_failures",
            "--pause-after-failures",
            &f.pause_after_failures,
        ),
    ] {
        match value.as_deref() {
            None => {}
            Some("") => {
                map.remove(key);
            }
            Some(v) => {
                let n: u64 = v.parse().map_err(|_| {
                    CliError::usage(format!("{flag} must be a whole number, not '{v}'"))
                })?;
                map.insert(key.into(), n.into());
            }
        }
    }
    if let Some(p) = &f.params {
        let v: Value = serde_json::from_str(p)
            .map_err(|e| CliError::usage(format!("--params is not valid JSON: {e}")))?;
        map.insert("params".into(), v);
    }
    Ok(())
}

fn has_flags(f: &SpecFlags) -> bool {
    [
        &f.cron,
        &f.every,
        &f.at,
        &f.after,
        &f.tz,
        &f.jitter,
        &f.exclude,
        &f.handler,
        &f.params,
        &f.start_at,
        &f.end_at,
        &f.max_runs,
        &f.pause_after_failures,
    ]
    .iter()
    .any(|v| v.is_some())
}

async fn put(api: &Api, spec: Value, if_match: Option<u64>) -> CliResult<(JobView, bool)> {
    let id = spec["id"].as_str().unwrap_or_default().to_string();
    if id.is_empty() {
        return Err(CliError::usage(
            "the job has no id (give --id or an id field)",
        ));
    }
    let headers: Vec<(&str, String)> = if_match
        .map(|v| vec![("if-match", format!("\"{v}\""))])
        .unwrap_or_default();
    let job: JobView = api
        .send(
            Method::PUT,
            &format!("/v1/jobs/{}", segment(&id)),
            Some(&spec),
            &headers,
        )
        .await?;
    let created = job.version == 1;
    Ok((job, created))
}

async fn add(
    api: &Api,
    file: Option<&Path>,
    id: Option<String>,
    flags: &SpecFlags,
    create_only: bool,
) -> CliResult {
    let mut specs = match file {
        Some(path) => read_jobs(path)?,
        None => vec![Value::Object(Map::new())],
    };
    if (id.is_some() || has_flags(flags)) && specs.len() > 1 {
        return Err(CliError::usage(
            "flags set fields of one job; the file holds several",
        ));
    }
    for spec in &mut specs {
        let Value::Object(map) = spec else {
            return Err(CliError::usage(
                "each job must be a table (TOML) or an object (JSON)",
            ));
        };
        if let Some(id) = &id {
            map.insert("id".into(), Value::String(id.clone()));
        }
        apply_flags(map, flags)?;
    }
    let mut done = Vec::new();
    for spec in specs {
        let (job, created) = put(api, spec, create_only.then_some(0)).await?;
        if !api.json {
            println!(
                "{} job {} (version {})",
                if created { "created" } else { "updated" },
                job.id,
                job.version
            );
            print_next_firings(&job);
        }
        done.push(job);
    }
    if api.json {
        if done.len() == 1 {
            api.print_json(&done[0]);
        } else {
            api.print_json(&done);
        }
    }
    Ok(())
}

async fn edit(api: &Api, id: &str, flags: &SpecFlags) -> CliResult {
    let current: JobView = api.get(&format!("/v1/jobs/{}", segment(id))).await?;
    let mut spec = current.spec.clone();
    if has_flags(flags) {
        let Value::Object(map) = &mut spec else {
            return Err(CliError::new(1, "the stored spec is not an object"));
        };
        apply_flags(map, flags)?;
    } else {
        spec = edit_in_editor(&spec)?;
        if spec == current.spec {
            if api.json {
                api.print_json(&current);
            } else {
                println!("no change to job {id}");
            }
            return Ok(());
        }
    }
    if spec["id"] != Value::String(id.to_string()) {
        return Err(CliError::usage(
            "the id cannot be changed (add a new job instead)",
        ));
    }
    let (job, _) = put(api, spec, Some(current.version)).await?;
    if api.json {
        api.print_json(&job);
    } else {
        println!("updated job {} (version {})", job.id, job.version);
        print_next_firings(&job);
    }
    Ok(())
}

fn edit_in_editor(spec: &Value) -> CliResult<Value> {
    let editor = std::env::var("VISUAL")
        .or_else(|_| std::env::var("EDITOR"))
        .map_err(|_| CliError::usage("set $EDITOR, or give the fields to change as flags"))?;
    let mut file = tempfile::Builder::new()
        .prefix("keyfire-job-")
        .suffix(".json")
        .tempfile()
        .map_err(|e| CliError::new(1, format!("temp file: {e}")))?;
    let text = serde_json::to_string_pretty(spec).unwrap_or_default();
    std::io::Write::write_all(&mut file, format!("{text}\n").as_bytes())
        .map_err(|e| CliError::new(1, format!("temp file: {e}")))?;
    // $EDITOR may carry arguments ("code -w").
    let mut parts = editor.split_whitespace();
    let program = parts.next().unwrap_or("vi");
    let status = std::process::Command::new(program)
        .args(parts)
        .arg(file.path())
        .status()
        .map_err(|e| CliError::usage(format!("cannot run the editor '{editor}': {e}")))?;
    if !status.success() {
        return Err(CliError::usage(format!(
            "the editor exited with {status}; nothing changed"
        )));
    }
    let edited = std::fs::read_to_string(file.path())
        .map_err(|e| CliError::new(1, format!("reading the edited file: {e}")))?;
    serde_json::from_str(&edited)
        .map_err(|e| CliError::usage(format!("the edited job is not valid JSON: {e}")))
}

async fn ls(
    api: &Api,
    status: Option<String>,
    handler: Option<String>,
    limit: Option<usize>,
    after: Option<String>,
) -> CliResult {
    let mut jobs = Vec::new();
    let mut cursor = after;
    let next_cursor = loop {
        let want = limit.map_or(1000, |l| (l - jobs.len()).clamp(1, 1000));
        let mut query = vec![("limit", want.to_string())];
        if let Some(s) = &status {
            query.push(("status", s.clone()));
        }
        if let Some(h) = &handler {
            query.push(("handler", h.clone()));
        }
        if let Some(c) = &cursor {
            query.push(("after", c.clone()));
        }
        let qs = serde_urlencoded::to_string(&query).unwrap_or_default();
        let page: JobList = api.get(&format!("/v1/jobs?{qs}")).await?;
        jobs.extend(page.jobs);
        match page.next_cursor {
            Some(c) if limit.is_none_or(|l| jobs.len() < l) => cursor = Some(c),
            other => break other,
        }
    };
    if api.json {
        api.print_json(&JobList { jobs, next_cursor });
        return Ok(());
    }
    let rows: Vec<Vec<String>> = jobs
        .iter()
        .map(|j| {
            vec![
                j.id.clone(),
                j.status.clone(),
                j.spec["handler"].as_str().unwrap_or("-").to_string(),
                schedule_text(&j.spec),
                short_time(j.next_at.as_ref()),
                j.runs.to_string(),
                j.failures.to_string(),
            ]
        })
        .collect();
    print_table(
        &[
            "ID",
            "STATUS",
            "HANDLER",
            "SCHEDULE",
            "NEXT (UTC)",
            "RUNS",
            "FAILED",
        ],
        &rows,
    );
    if let Some(c) = next_cursor {
        println!("(more: --after {c})");
    }
    Ok(())
}

async fn pause_resume(api: &Api, which: Which, what: &str) -> CliResult {
    let selection = match (which.id, which.handler, which.prefix) {
        (Some(id), _, _) => return pause_resume_one(api, &id, what).await,
        (None, Some(h), _) => serde_json::json!({"handler": h}),
        (None, None, Some(p)) => serde_json::json!({"id_prefix": p}),
        (None, None, None) => {
            return Err(CliError::usage("give a job id, --handler or --prefix"));
        }
    };
    let done: Value = api
        .send(
            Method::POST,
            &format!("/v1/jobs:{what}"),
            Some(&selection),
            &[],
        )
        .await?;
    if api.json {
        api.print_json(&done);
    } else {
        let past = if what == "pause" { "paused" } else { "resumed" };
        println!(
            "{past} {} of {} matching jobs",
            done["changed"], done["matched"]
        );
    }
    Ok(())
}

async fn pause_resume_one(api: &Api, id: &str, what: &str) -> CliResult {
    let job: JobView = api
        .send(
            Method::POST,
            &format!("/v1/jobs/{}/{what}", segment(id)),
            None,
            &[],
        )
        .await?;
    if api.json {
        api.print_json(&job);
    } else {
        println!("job {} is {}", job.id, job.status);
        print_next_firings(&job);
    }
    Ok(())
}

async fn runs(api: &Api, id: &str, limit: usize, skipped: bool) -> CliResult {
    let include = if skipped { "&include=skipped" } else { "" };
    let list: RunList = api
        .get(&format!(
            "/v1/jobs/{}/runs?limit={limit}{include}",
            segment(id)
        ))
        .await?;
    if api.json {
        api.print_json(&list);
        return Ok(());
    }
    if let Some(timeline) = &list.timeline {
        super::why::print_timeline(timeline);
        return Ok(());
    }
    let rows: Vec<Vec<String>> = list
        .runs
        .iter()
        .map(|r| {
            let took = match (r.claimed_at, r.finished_at) {
                (Some(a), Some(b)) => format!("{}ms", (b - a).num_milliseconds()),
                _ => "-".into(),
            };
            vec![
                short_time(r.scheduled_at.as_ref()),
                r.attempt.to_string(),
                r.node.clone(),
                r.outcome.clone(),
                took,
                r.error.clone().unwrap_or_default().replace('\n', " "),
            ]
        })
        .collect();
    print_table(
        &[
            "SCHEDULED (UTC)",
            "ATTEMPT",
            "NODE",
            "OUTCOME",
            "TOOK",
            "ERROR",
        ],
        &rows,
    );
    Ok(())
}

/// A one-line description of a spec's schedule.
pub fn schedule_text(spec: &Value) -> String {
    if let Some(c) = spec["cron"].as_str() {
        match spec["tz"].as_str() {
            Some(tz) => format!("cron '{c}' {tz}"),
            None => format!("cron '{c}'"),
        }
    } else if let Some(e) = spec["every"].as_str() {
        format!("every {e}")
    } else if let Some(a) = spec["at"].as_str() {
        format!("at {a}")
    } else {
        "-".into()
    }
}

/// Print a job's next firings, indented.
pub fn print_next_firings(job: &JobView) {
    if job.next_firings.is_empty() {
        println!("  no next firing ({})", job.status);
        return;
    }
    println!("  next firings (UTC, {}):", job.tz);
    for f in &job.next_firings {
        match &f.fires_at {
            Some(at) => println!("    {}  {}  fires {at} (jitter)", f.utc, f.local),
            None => println!("    {}  {}", f.utc, f.local),
        }
    }
}

fn print_job(job: &JobView) {
    let s = &job.spec;
    let mut lines = vec![
        ("id", job.id.clone()),
        (
            "status",
            format!("{} (version {})", job.status, job.version),
        ),
        ("schedule", schedule_text(s)),
        ("handler", s["handler"].as_str().unwrap_or("-").to_string()),
    ];
    if !s["params"].is_null() {
        lines.push(("params", s["params"].to_string()));
    }
    if let Some(e) = s["exclude"].as_array() {
        let names: Vec<&str> = e.iter().filter_map(Value::as_str).collect();
        lines.push(("exclude", names.join(", ")));
    }
    for key in ["start_at", "end_at", "misfire_tolerance", "jitter"] {
        if let Some(v) = s[key].as_str() {
            lines.push((key, v.to_string()));
        }
    }
    lines.push((
        "runs",
        format!(
            "{} ({} failed, {} missed)",
            job.runs, job.failures, job.missed
        ),
    ));
    if let Some(l) = &job.run_limits {
        let mut text = format!(
            "{} succeeded (max_runs {}), {} failed in a row (pause_after_failures {})",
            l.succeeded,
            s["max_runs"].as_u64().map_or("-".into(), |n| n.to_string()),
            l.failure_streak,
            s["pause_after_failures"]
                .as_u64()
                .map_or("-".into(), |n| n.to_string()),
        );
        if let Some(why) = &l.stopped {
            text.push_str(&format!("; stopped by {why}"));
        }
        lines.push(("limits", text));
    }
    lines.push(("last", short_time(job.last_at.as_ref())));
    lines.push(("created", short_time(job.created_at.as_ref())));
    lines.push(("updated", short_time(job.updated_at.as_ref())));
    for (k, v) in lines {
        println!("{:<10} {v}", format!("{k}:"));
    }
    print_next_firings(job);
}

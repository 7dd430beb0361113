//! `keyfire task …`: one-shot tasks (`add --handler`, `cancel`) and the delay queue's tasks
//! (`add --topic`, `pop`, `finish`, `touch`, `get`, `rm`), through a node's API.

use std::time::Duration;

use clap::{Args, Subcommand};
use reqwest::Method;
use serde_json::{Map, Value, json};

use super::job::print_next_firings;
use super::remote::{Api, CliError, CliResult, EXIT_CODES_HELP, Remote, exit, segment};
use crate::api::model::JobView;
use crate::api::topics::{Added, FinishedMany, MAX_WAIT, Popped, ReservedView, TaskView, Touched};

/// `keyfire task …`.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES_HELP)]
pub struct TaskArgs {
    #[command(flatten)]
    remote: Remote,
    #[command(subcommand)]
    command: TaskCommand,
}

// Parsed once per process: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum TaskCommand {
    /// Enqueue a one-shot task (--handler), or add a task to a delay-queue topic (--topic).
    /// Prints its id.
    Add {
        /// Handler name (a one-shot task run by keyfire).
        #[arg(long, required_unless_present = "topic", conflicts_with = "topic")]
        handler: Option<String>,
        /// Handler params, as JSON.
        #[arg(long, conflicts_with = "topic")]
        params: Option<String>,
        /// Run (or be ready) at this RFC 3339 instant.
        #[arg(long, conflicts_with_all = ["after", "delay"])]
        at: Option<String>,
        /// Run after this delay, such as 30m.
        #[arg(long, conflicts_with = "topic")]
        after: Option<String>,
        /// The task's id (default: a new one); adding an id that exists leaves that task as
        /// it is (one-shot or topic task alike).
        #[arg(long)]
        id: Option<String>,
        /// Deduplicate by this key: a task enqueued with it within --dedup-window is printed
        /// (with a note on stderr) and nothing new is created (one-shot or topic task).
        #[arg(long, requires = "dedup_window", conflicts_with = "id")]
        dedup_key: Option<String>,
        /// Deduplicate by content: the handler and params (a topic task: the topic and
        /// payload) make the key.
        #[arg(long, requires = "dedup_window", conflicts_with_all = ["id", "dedup_key"])]
        dedup_content: bool,
        /// How long a dedup key holds after the first enqueue, such as 10m (at most 24h).
        #[arg(long)]
        dedup_window: Option<String>,
        /// What a duplicate does to the pending task the dedup key names: keep (default),
        /// replace (it takes this task's params or payload), extend (its instant moves to this
        /// task's, never earlier) or replace_extend (debounce).
        #[arg(long, requires = "dedup_window", value_name = "MODE")]
        on_duplicate: Option<String>,
        /// Add to this delay-queue topic: the task is handed to a consumer that pops it.
        #[arg(long)]
        topic: Option<String>,
        /// The topic task's payload, as JSON.
        #[arg(long, requires = "topic")]
        payload: Option<String>,
        /// Ready after this delay, such as 30s (default: at once).
        #[arg(long, requires = "topic")]
        delay: Option<String>,
        /// How long a consumer may hold it before it goes to another (default 60s).
        #[arg(long, requires = "topic")]
        ttr: Option<String>,
        /// Deliveries before it goes to the topic's dead letters (default 5).
        #[arg(long, requires = "topic")]
        max_deliveries: Option<u32>,
        /// The topic task's priority, 0 (default) to 9: pops take the highest ready first.
        #[arg(long, requires = "topic")]
        priority: Option<u8>,
        /// Run only after this one-shot task succeeded (--after is then the delay after
        /// that success); if it ends otherwise, this task goes to its dead letters.
        #[arg(long, value_name = "TASK_ID", conflicts_with_all = ["topic", "at", "dedup_key", "dedup_content"])]
        after_task: Option<String>,
    },
    /// Enqueue one-shot tasks as a batch from a JSON file (`-`: stdin): an array of tasks (as
    /// `POST /v1/tasks` takes them), or `{"tasks": [...]}`; with --topic, tasks of that
    /// delay-queue topic (as `POST /v1/topics/{topic}/tasks` takes them). With --on-complete,
    /// one callback is sent once every task has ended, with the counts. Prints the batch's id
    /// (with --on-complete), then each task's id.
    Batch {
        /// The file of tasks, or `-` for stdin.
        file: String,
        /// Add the tasks to this delay-queue topic (each ends when finished, dead-lettered or
        /// deleted).
        #[arg(long)]
        topic: Option<String>,
        /// Send the batch's completion callback to this URL.
        #[arg(long, value_name = "URL")]
        on_complete: Option<String>,
        /// Sign the completion callback with this secret (`whsec_…`; repeat for two while
        /// rotating). Default: the secrets configured for the URL's host.
        #[arg(long, requires = "on_complete", value_name = "SECRET")]
        signing_secret: Vec<String>,
    },
    /// Show a batch's progress: its tasks succeeded, died, cancelled and pending, and when it
    /// completed. Exit 3 when there is no such batch.
    BatchStatus {
        /// The batch's id, as `task batch --on-complete` printed it.
        id: String,
    },
    /// Pop the oldest ready task of a topic (or up to --max tasks) and reserve it; prints it
    /// and its token. Exit 3 when none came within --wait.
    Pop {
        /// The topic.
        topic: String,
        /// How long to wait for a task, such as 10s (at most 60s).
        #[arg(long, default_value = "0s")]
        wait: String,
        /// Take up to this many tasks (1 to 1000), each with its own reservation token.
        #[arg(long)]
        max: Option<usize>,
    },
    /// Finish many popped tasks of a topic at once; prints each one's outcome (done, lost,
    /// not_found). Exit 4 when any reservation was lost.
    FinishMany {
        /// The topic they were popped from.
        topic: String,
        /// The tasks, as ID=TOKEN (the reservation token its pop printed).
        #[arg(required = true, value_name = "ID=TOKEN")]
        tasks: Vec<String>,
    },
    /// Finish (acknowledge) a popped task. Exit 4 when the reservation was lost.
    Finish {
        /// The task's id.
        id: String,
        /// The reservation token its pop printed. (Not `--token`: that is the API's bearer
        /// token, a flag every client subcommand takes.)
        #[arg(long, value_name = "TOKEN")]
        reservation: String,
    },
    /// Extend a popped task's reservation. Exit 4 when the reservation was lost.
    Touch {
        /// The task's id.
        id: String,
        /// The reservation token its pop printed. (Not `--token`: that is the API's bearer
        /// token, a flag every client subcommand takes.)
        #[arg(long, value_name = "TOKEN")]
        reservation: String,
        /// The new time-to-run from now (default: the task's own).
        #[arg(long)]
        ttr: Option<String>,
    },
    /// Show a topic's task: its state and deliveries.
    Get {
        /// The task's id.
        id: String,
    },
    /// Cancel a one-shot task: before it runs (it is then finished, its run recorded
    /// `cancelled`), or while it runs (stopped on whichever node runs it); never retried.
    /// Prints `cancelled ID` or `stopping ID`. Exit 4 when there was nothing to cancel (it
    /// ran already).
    Cancel {
        /// The task's id.
        id: String,
    },
    /// Delete a topic's task, in any state, for good.
    Rm {
        /// The task's id.
        id: String,
    },
    /// Explain why a one-shot task has run or not: when it is due, what stands in its way
    /// (paused, a flow limit, no node for its handler, Redis full, a failing attempt, its
    /// run in progress), and its runs and skips.
    Why {
        /// The task's id.
        id: String,
    },
}

/// Run `keyfire task …`.
pub async fn run(mut args: TaskArgs) -> CliResult {
    if let TaskCommand::Pop { wait, .. } = &args.command {
        // (A wait above the limit is refused by the node, naming `wait`.)
        // The answer may take the whole wait: give the request that long and more.
        let wait = parse_duration("--wait", wait)?.min(MAX_WAIT);
        args.remote.timeout = args.remote.timeout.max(wait.as_secs() + 10);
    }
    let api = args.remote.api()?;
    match args.command {
        TaskCommand::Add {
            topic: Some(topic),
            payload,
            at,
            id,
            delay,
            ttr,
            max_deliveries,
            priority,
            dedup_key,
            dedup_content,
            dedup_window,
            on_duplicate,
            ..
        } => {
            let mut body = Map::new();
            if let Some(d) = dedup_body(dedup_key, dedup_content, dedup_window, on_duplicate) {
                body.insert("dedup".into(), d);
            }
            if let Some(p) = priority {
                body.insert("priority".into(), p.into());
            }
            let payload = match payload {
                Some(p) => serde_json::from_str(&p)
                    .map_err(|e| CliError::usage(format!("--payload is not valid JSON: {e}")))?,
                None => Value::Null,
            };
            body.insert("payload".into(), payload);
            for (k, v) in [("at", at), ("id", id), ("delay", delay), ("ttr", ttr)] {
                if let Some(v) = v {
                    body.insert(k.into(), Value::String(v));
                }
            }
            if let Some(n) = max_deliveries {
                body.insert("max_deliveries".into(), n.into());
            }
            let path = format!("/v1/topics/{}/tasks", segment(&topic));
            let added: Added = api
                .send(Method::POST, &path, Some(&Value::Object(body)), &[])
                .await?;
            if api.json {
                api.print_json(&added);
            } else {
                println!("{}", added.id);
                if let Some(d) = &added.deduplicated {
                    eprintln!(
                        "duplicate: the task its dedup key names was {d}; nothing new was added"
                    );
                }
            }
            Ok(())
        }
        TaskCommand::Add {
            handler,
            params,
            at,
            after,
            id,
            dedup_key,
            dedup_content,
            dedup_window,
            on_duplicate,
            after_task,
            ..
        } => {
            let dedup = dedup_body(dedup_key, dedup_content, dedup_window, on_duplicate);
            let task = OneShot {
                handler: handler.unwrap_or_default(),
                params,
                at,
                after,
                id,
                dedup,
                after_task,
            };
            add_one_shot(&api, task).await
        }
        TaskCommand::Batch {
            file,
            topic,
            on_complete,
            signing_secret,
        } => match topic {
            Some(topic) => {
                super::batch::add_to_topic(&api, &topic, &file, on_complete, signing_secret).await
            }
            None => super::batch::enqueue(&api, &file, on_complete, signing_secret).await,
        },
        TaskCommand::BatchStatus { id } => super::batch::status(&api, &id).await,
        TaskCommand::Pop { topic, wait, max } => {
            let mut path = format!("/v1/topics/{}/pop?wait={}", segment(&topic), segment(&wait));
            let tasks = match max {
                Some(n) => {
                    path.push_str(&format!("&max={n}"));
                    let popped: Popped = api.send(Method::POST, &path, None, &[]).await?;
                    popped.tasks
                }
                None => {
                    let popped: Option<ReservedView> =
                        api.send(Method::POST, &path, None, &[]).await?;
                    popped.into_iter().collect()
                }
            };
            if tasks.is_empty() {
                return Err(CliError::new(
                    exit::NOT_FOUND,
                    format!("no task of topic '{topic}' became ready within {wait}"),
                ));
            }
            if api.json {
                match max {
                    Some(_) => api.print_json(&Popped { tasks }),
                    None => api.print_json(&tasks[0]),
                }
                return Ok(());
            }
            for (i, task) in tasks.iter().enumerate() {
                if i > 0 {
                    println!();
                }
                println!("id          {}", task.id);
                println!("reservation {}", task.token);
                println!("topic       {}", task.topic);
                println!("deliveries  {}", task.deliveries);
                if task.priority > 0 {
                    println!("priority    {}", task.priority);
                }
                println!("deadline    {}", task.deadline.to_rfc3339());
                println!("payload     {}", task.payload);
            }
            Ok(())
        }
        TaskCommand::FinishMany { topic, tasks } => {
            let items = tasks
                .iter()
                .map(|t| match t.split_once('=') {
                    Some((id, token)) => Ok(json!({"id": id, "token": token})),
                    None => Err(CliError::usage(format!("each task is ID=TOKEN, not '{t}'"))),
                })
                .collect::<CliResult<Vec<_>>>()?;
            let path = format!("/v1/topics/{}/finish", segment(&topic));
            let done: FinishedMany = api
                .send(Method::POST, &path, Some(&json!({"tasks": items})), &[])
                .await?;
            let lost = done
                .results
                .iter()
                .filter(|r| r.outcome != keyfire::queue::Finished::Done)
                .count();
            if api.json {
                api.print_json(&done);
            } else {
                for r in &done.results {
                    let outcome = serde_json::to_value(r.outcome).unwrap_or_default();
                    println!("{} {}", r.id, outcome.as_str().unwrap_or("?"));
                }
            }
            if lost > 0 {
                return Err(CliError::new(
                    exit::CONFLICT,
                    format!("{lost} of {} tasks were not finished", done.results.len()),
                ));
            }
            Ok(())
        }
        TaskCommand::Finish { id, reservation } => {
            let path = format!("/v1/tasks/{}/finish", segment(&id));
            let _: Value = api
                .send(
                    Method::POST,
                    &path,
                    Some(&json!({"token": reservation})),
                    &[],
                )
                .await?;
            if !api.json {
                println!("finished {id}");
            }
            Ok(())
        }
        TaskCommand::Touch {
            id,
            reservation,
            ttr,
        } => {
            let path = format!("/v1/tasks/{}/touch", segment(&id));
            let body = match ttr {
                Some(t) => json!({"token": reservation, "ttr": t}),
                None => json!({"token": reservation}),
            };
            let touched: Touched = api.send(Method::POST, &path, Some(&body), &[]).await?;
            if api.json {
                api.print_json(&touched);
            } else {
                println!("{} reserved until {}", id, touched.deadline.to_rfc3339());
            }
            Ok(())
        }
        TaskCommand::Get { id } => {
            let task: TaskView = api.get(&format!("/v1/tasks/{}", segment(&id))).await?;
            if api.json {
                api.print_json(&task);
            } else {
                println!("id          {}", task.id);
                println!("topic       {}", task.topic);
                println!("state       {}", task.state);
                println!("deliveries  {} of {}", task.deliveries, task.max_deliveries);
                println!("due         {}", task.due_at.to_rfc3339());
                if let Some(p) = &task.payload {
                    println!("payload     {p}");
                }
            }
            Ok(())
        }
        TaskCommand::Why { id } => super::why::why(&api, &id).await,
        TaskCommand::Cancel { id } => {
            super::job::cancel(&api, &format!("/v1/tasks/{}/cancel", segment(&id))).await
        }
        TaskCommand::Rm { id } => {
            let path = format!("/v1/tasks/{}", segment(&id));
            let _: Value = api.send(Method::DELETE, &path, None, &[]).await?;
            if !api.json {
                println!("deleted {id}");
            }
            Ok(())
        }
    }
}

fn parse_duration(flag: &str, text: &str) -> CliResult<Duration> {
    keyfire::job::parse_duration(text).map_err(|e| CliError::usage(format!("{flag}: {e}")))
}

/// The flags of `keyfire task add --handler …`.
struct OneShot {
    handler: String,
    params: Option<String>,
    at: Option<String>,
    after: Option<String>,
    id: Option<String>,
    /// The `dedup` object, from the --dedup-* flags.
    dedup: Option<Value>,
    after_task: Option<String>,
}

/// The `dedup` object of a body, from the --dedup-* and --on-duplicate flags.
fn dedup_body(
    key: Option<String>,
    content: bool,
    window: Option<String>,
    on_duplicate: Option<String>,
) -> Option<Value> {
    if key.is_none() && !content && window.is_none() {
        return None;
    }
    let mut d = Map::new();
    if let Some(k) = key {
        d.insert("key".into(), Value::String(k));
    }
    if content {
        d.insert("content".into(), Value::Bool(true));
    }
    if let Some(w) = window {
        d.insert("window".into(), Value::String(w));
    }
    if let Some(o) = on_duplicate {
        d.insert("on_duplicate".into(), Value::String(o));
    }
    Some(Value::Object(d))
}

/// `keyfire task add --handler …`: a one-shot task run by keyfire.
async fn add_one_shot(api: &Api, task: OneShot) -> CliResult {
    let OneShot {
        handler,
        params,
        at,
        after,
        id,
        dedup,
        after_task,
    } = task;
    let mut body = Map::new();
    body.insert("handler".into(), Value::String(handler));
    if let Some(d) = dedup {
        body.insert("dedup".into(), d);
    }
    if let Some(p) = params {
        let v: Value = serde_json::from_str(&p)
            .map_err(|e| CliError::usage(format!("--params is not valid JSON: {e}")))?;
        body.insert("params".into(), v);
    }
    for (k, v) in [
        ("at", at),
        ("after", after),
        ("id", id),
        ("after_task", after_task),
    ] {
        if let Some(v) = v {
            body.insert(k.into(), Value::String(v));
        }
    }
    let task: JobView = api
        .send(Method::POST, "/v1/tasks", Some(&Value::Object(body)), &[])
        .await?;
    if api.json {
        api.print_json(&task);
    } else {
        println!("{}", task.id);
        if task.duplicate {
            match task.deduplicated.as_deref() {
                Some(d) if d != "kept" => eprintln!(
                    "duplicate: the task its dedup key names was {d}; nothing new was created"
                ),
                _ => eprintln!(
                    "duplicate: a task with this dedup key was enqueued within its window; nothing new was created"
                ),
            }
        }
        print_next_firings(&task);
    }
    Ok(())
}

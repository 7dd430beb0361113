//! `keyfire task batch` and `keyfire task batch-status`: one-shot tasks (or a topic's tasks,
//! with `--topic`) enqueued together, with a completion callback when asked.

use reqwest::Method;
use serde_json::{Value, json};

use super::remote::{Api, CliError, CliResult};
use crate::api::model::TaskList;
use crate::api::topic_batch::AddedBatch;
use keyfire::BatchStatus;

/// The tasks of `file` (`-`: stdin): an array, or an object with `tasks`.
fn read_tasks(file: &str) -> Result<Vec<Value>, CliError> {
    let text = if file == "-" {
        std::io::read_to_string(std::io::stdin())
            .map_err(|e| CliError::usage(format!("cannot read stdin: {e}")))?
    } else {
        std::fs::read_to_string(file)
            .map_err(|e| CliError::usage(format!("cannot read {file}: {e}")))?
    };
    let v: Value = serde_json::from_str(&text)
        .map_err(|e| CliError::usage(format!("{file} is not valid JSON: {e}")))?;
    match v {
        Value::Array(tasks) => Ok(tasks),
        Value::Object(mut m) => match m.remove("tasks") {
            Some(Value::Array(tasks)) => Ok(tasks),
            _ => Err(CliError::usage(format!(
                "{file}: expected an array of tasks, or an object with `tasks`"
            ))),
        },
        _ => Err(CliError::usage(format!(
            "{file}: expected an array of tasks, or an object with `tasks`"
        ))),
    }
}

/// The request body: the tasks of `file`, and the completion callback when asked.
fn batch_body(file: &str, on_complete: Option<String>, secrets: Vec<String>) -> CliResult<Value> {
    let tasks = read_tasks(file)?;
    let mut body = json!({ "tasks": tasks });
    if let Some(url) = on_complete {
        body["on_complete"] = json!({ "url": url });
        if !secrets.is_empty() {
            body["on_complete"]["signing_secrets"] = json!(secrets);
        }
    }
    Ok(body)
}

/// `keyfire task batch --topic TOPIC FILE [--on-complete URL [--signing-secret S]...]`.
pub(super) async fn add_to_topic(
    api: &Api,
    topic: &str,
    file: &str,
    on_complete: Option<String>,
    secrets: Vec<String>,
) -> CliResult {
    let body = batch_body(file, on_complete, secrets)?;
    let path = format!("/v1/topics/{}/tasks/batch", super::remote::segment(topic));
    let added: AddedBatch = api.send(Method::POST, &path, Some(&body), &[]).await?;
    if api.json {
        api.print_json(&added);
        return Ok(());
    }
    if let Some(id) = &added.batch_id {
        println!("batch {id}");
    }
    for task in &added.tasks {
        println!("{}", task.id);
    }
    Ok(())
}

/// `keyfire task batch FILE [--on-complete URL [--signing-secret S]...]`.
pub(super) async fn enqueue(
    api: &Api,
    file: &str,
    on_complete: Option<String>,
    secrets: Vec<String>,
) -> CliResult {
    let body = batch_body(file, on_complete, secrets)?;
    let list: TaskList = api
        .send(Method::POST, "/v1/tasks/batch", Some(&body), &[])
        .await?;
    if api.json {
        api.print_json(&list);
        return Ok(());
    }
    if let Some(id) = &list.batch_id {
        println!("batch {id}");
    }
    for task in &list.tasks {
        println!("{}", task.id);
    }
    Ok(())
}

/// `keyfire task batch-status ID`.
pub(super) async fn status(api: &Api, id: &str) -> CliResult {
    let path = format!("/v1/batches/{}", super::remote::segment(id));
    let b: BatchStatus = api.send(Method::GET, &path, None, &[]).await?;
    if api.json {
        api.print_json(&b);
        return Ok(());
    }
    let at = |ms: i64| {
        chrono::DateTime::<chrono::Utc>::from_timestamp_millis(ms)
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
            .unwrap_or_default()
    };
    println!("batch      {}", b.id);
    println!("total      {}", b.total);
    println!("succeeded  {}", b.succeeded);
    println!("died       {}", b.died);
    println!("cancelled  {}", b.cancelled);
    println!("pending    {}", b.pending);
    println!("created    {}", at(b.created_ms));
    match b.completed_ms {
        Some(ms) => println!("completed  {}", at(ms)),
        None => println!("completed  -"),
    }
    Ok(())
}

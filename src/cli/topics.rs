//! `keyfire topics`: the delay queue's topics, with their tasks by state; `keyfire topics set`
//! and `get`: a topic's settings (its number of partitions); `keyfire topics dead
//! list|replay|purge`: a topic's dead letters (the shape of `keyfire dead` for a job's);
//! `keyfire topics pause|resume`; `keyfire topics why TOPIC ID`: why a task is where it is.

use clap::{Args, Subcommand};
use reqwest::Method;
use serde_json::json;

use super::remote::{Api, CliResult, EXIT_CODES_HELP, Remote, print_table, segment, short_time};
use crate::api::model::DeadCount;
use crate::api::topic_dead::TopicDeadList;
use crate::api::topic_pause::TopicPaused;
use crate::api::topic_why::TaskWhyView;
use crate::api::topics::{TopicList, TopicView};

/// `keyfire topics`.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES_HELP)]
pub struct TopicsArgs {
    #[command(flatten)]
    remote: Remote,
    #[command(subcommand)]
    command: Option<TopicsCommand>,
}

#[derive(Debug, Subcommand)]
enum TopicsCommand {
    /// Declare a topic's settings (before its first tasks).
    Set {
        /// The topic.
        topic: String,
        /// How many partitions its tasks spread over (1 to 64), each on a shard of its own
        /// while there are shards enough. Set once, before the topic's first task.
        #[arg(long)]
        partitions: usize,
    },
    /// Show a topic's settings.
    Get {
        /// The topic.
        topic: String,
    },
    /// A topic's dead letters (tasks delivered max-deliveries times without a finish).
    Dead {
        #[command(subcommand)]
        command: DeadCommand,
    },
    /// Pause a topic: its pops reserve nothing until it is resumed (adds go on).
    Pause {
        /// The topic.
        topic: String,
    },
    /// Resume a paused topic: its ready tasks are delivered again, in order.
    Resume {
        /// The topic.
        topic: String,
    },
    /// Why a task is where it is (delayed, ready, reserved, dead, done or deleted), in reasons.
    Why {
        /// The task's topic.
        topic: String,
        /// The task's id.
        id: String,
    },
}

#[derive(Debug, Subcommand)]
enum DeadCommand {
    /// List a topic's dead letters, newest first, with why and when each died.
    #[command(alias = "ls")]
    List {
        /// The topic.
        topic: String,
        /// How many (1 to 1000).
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Make dead letters ready again (deliveries reset to 0): those --id names, or all.
    Replay {
        /// The topic.
        topic: String,
        /// Only this task (repeat for more).
        #[arg(long = "id")]
        ids: Vec<String>,
    },
    /// Delete dead letters for good: those --id names, or all.
    Purge {
        /// The topic.
        topic: String,
        /// Only this task (repeat for more).
        #[arg(long = "id")]
        ids: Vec<String>,
    },
}

fn dead_path(topic: &str, tail: &str, ids: &[String]) -> String {
    let mut p = format!("/v1/topics/{}/dead{tail}", segment(topic));
    if !ids.is_empty() {
        let ids: Vec<String> = ids.iter().map(|i| segment(i)).collect();
        p.push_str(&format!("?ids={}", ids.join(",")));
    }
    p
}

async fn dead(api: &Api, command: DeadCommand) -> CliResult {
    let (method, path, verb, topic) = match command {
        DeadCommand::List { topic, limit } => {
            let list: TopicDeadList = api
                .get(&format!(
                    "/v1/topics/{}/dead?limit={limit}",
                    segment(&topic)
                ))
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
                        d.id.clone(),
                        format!("{}/{}", d.deliveries, d.max_deliveries),
                        short_time(d.died_at.as_ref()),
                        d.error.clone().unwrap_or_default().replace('\n', " "),
                    ]
                })
                .collect();
            print_table(&["TASK", "DELIVERIES", "DIED (UTC)", "ERROR"], &rows);
            return Ok(());
        }
        DeadCommand::Replay { topic, ids } => (
            Method::POST,
            dead_path(&topic, "/replay", &ids),
            "replayed",
            topic,
        ),
        DeadCommand::Purge { topic, ids } => {
            (Method::DELETE, dead_path(&topic, "", &ids), "purged", topic)
        }
    };
    let c: DeadCount = api.send(method, &path, None, &[]).await?;
    if api.json {
        api.print_json(&c);
    } else {
        println!("{verb} {} dead letter(s) of topic {topic}", c.count);
    }
    Ok(())
}

async fn pause(api: &Api, topic: &str, verb: &str) -> CliResult {
    let p: TopicPaused = api
        .send(
            Method::POST,
            &format!("/v1/topics/{}/{verb}", segment(topic)),
            None,
            &[],
        )
        .await?;
    if api.json {
        api.print_json(&p);
    } else {
        let state = if p.paused { "paused" } else { "not paused" };
        let already = if p.changed { "" } else { " (already)" };
        println!("topic {} {state}{already}", p.topic);
    }
    Ok(())
}

/// Ask the node why task `id` of `topic` is where it is, and print it: the summary, then
/// each reason (as `keyfire job why` does), then the task's instants.
async fn why(api: &Api, topic: &str, id: &str) -> CliResult {
    let why: TaskWhyView = api
        .get(&format!(
            "/v1/topics/{}/tasks/{}/why",
            segment(topic),
            segment(id)
        ))
        .await?;
    if api.json {
        api.print_json(&why);
        return Ok(());
    }
    println!("{}", why.summary);
    println!();
    for c in &why.causes {
        let code = serde_json::to_value(c.code).unwrap_or_default();
        println!("  {:<15} {}", code.as_str().unwrap_or("-"), c.message);
    }
    println!("  {:<15} {}", "due", why.due_at.to_rfc3339());
    println!(
        "  {:<15} {} of {}",
        "deliveries", why.deliveries, why.max_deliveries
    );
    if let Some(d) = &why.deadline {
        println!("  {:<15} {}", "deadline", d.to_rfc3339());
    }
    Ok(())
}

fn show(api: &Api, v: &TopicView) {
    if api.json {
        api.print_json(v);
    } else {
        let paused = if v.paused { "  paused" } else { "" };
        println!("{}  partitions {}{paused}", v.topic, v.partitions);
    }
}

/// Run `keyfire topics`.
pub async fn run(args: TopicsArgs) -> CliResult {
    let api = args.remote.api()?;
    match args.command {
        Some(TopicsCommand::Set { topic, partitions }) => {
            let v: TopicView = api
                .send(
                    Method::PUT,
                    &format!("/v1/topics/{}", segment(&topic)),
                    Some(&json!({ "partitions": partitions })),
                    &[],
                )
                .await?;
            show(&api, &v);
            return Ok(());
        }
        Some(TopicsCommand::Get { topic }) => {
            let v: TopicView = api.get(&format!("/v1/topics/{}", segment(&topic))).await?;
            show(&api, &v);
            return Ok(());
        }
        Some(TopicsCommand::Dead { command }) => return dead(&api, command).await,
        Some(TopicsCommand::Pause { topic }) => return pause(&api, &topic, "pause").await,
        Some(TopicsCommand::Resume { topic }) => return pause(&api, &topic, "resume").await,
        Some(TopicsCommand::Why { topic, id }) => return why(&api, &topic, &id).await,
        None => {}
    }
    let list: TopicList = api.get("/v1/topics").await?;
    if api.json {
        api.print_json(&list);
        return Ok(());
    }
    let rows: Vec<Vec<String>> = list
        .topics
        .iter()
        .map(|t| {
            [
                t.partitions as u64,
                t.delayed,
                t.ready,
                t.reserved,
                t.dead,
                t.added,
                t.done,
                t.redelivered,
            ]
            .iter()
            .fold(vec![t.topic.clone()], |mut row, n| {
                row.push(n.to_string());
                row
            })
            .into_iter()
            .chain([if t.paused { "yes" } else { "" }.to_string()])
            .collect()
        })
        .collect();
    print_table(
        &[
            "TOPIC",
            "PARTITIONS",
            "DELAYED",
            "READY",
            "RESERVED",
            "DEAD",
            "ADDED",
            "DONE",
            "REDELIVERED",
            "PAUSED",
        ],
        &rows,
    );
    Ok(())
}

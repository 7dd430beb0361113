//! `keyfire topics`: the delay queue's topics, with their tasks by state; `keyfire topics set`
//! and `get`: a topic's settings (its number of partitions).

use clap::{Args, Subcommand};
use reqwest::Method;
use serde_json::json;

use super::remote::{CliResult, EXIT_CODES_HELP, Remote, print_table, segment};
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
}

fn show(api: &super::remote::Api, v: &TopicView) {
    if api.json {
        api.print_json(v);
    } else {
        println!("{}  partitions {}", v.topic, v.partitions);
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
        ],
        &rows,
    );
    Ok(())
}

//! `keyfire topics`: the delay queue's topics, with their tasks by state.

use clap::Args;

use super::remote::{CliResult, EXIT_CODES_HELP, Remote, print_table};
use crate::api::topics::TopicList;

/// `keyfire topics`.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES_HELP)]
pub struct TopicsArgs {
    #[command(flatten)]
    remote: Remote,
}

/// Run `keyfire topics`.
pub async fn run(args: TopicsArgs) -> CliResult {
    let api = args.remote.api()?;
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

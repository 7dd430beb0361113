//! `keyfire nodes`: the cluster's live nodes, through a node's API.

use clap::Args;

use super::remote::{CliResult, EXIT_CODES_HELP, Remote, print_table, short_time};
use crate::api::model::NodeList;

/// `keyfire nodes`.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES_HELP)]
pub struct NodesArgs {
    #[command(flatten)]
    remote: Remote,
}

/// Run `keyfire nodes`.
pub async fn run(args: NodesArgs) -> CliResult {
    let api = args.remote.api()?;
    let list: NodeList = api.get("/v1/nodes").await?;
    if api.json {
        api.print_json(&list);
        return Ok(());
    }
    let rows: Vec<Vec<String>> = list
        .nodes
        .iter()
        .map(|n| {
            let opt = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
            vec![
                n.id.clone(),
                n.version.clone().unwrap_or_else(|| "-".into()),
                format!("{}/{}", opt(n.running), opt(n.max_concurrent_runs)),
                n.load.map_or("-".into(), |l| format!("{:.0}%", l * 100.0)),
                opt(n.runs_started),
                n.share.map_or("-".into(), |s| format!("{:.1}%", s * 100.0)),
                short_time(n.last_seen_at.as_ref()),
                n.handlers.join(","),
            ]
        })
        .collect();
    print_table(
        &[
            "ID",
            "VERSION",
            "RUNNING",
            "LOAD",
            "RUNS",
            "SHARE",
            "LAST SEEN (UTC)",
            "HANDLERS",
        ],
        &rows,
    );
    Ok(())
}

//! `keyfire job why ID` and `keyfire task why ID`: why a job or a one-shot task runs or does
//! not, now; and the timeline of runs and skips that `keyfire job runs --skipped` prints.

use super::remote::{Api, CliResult, print_table, segment, short_time};
use crate::api::why::{EntryKind, TimelineEntry, WhyView};

/// Ask the node why `id` runs or does not, and print it: the summary, then each reason,
/// then the last runs and skips.
pub async fn why(api: &Api, id: &str) -> CliResult {
    let why: WhyView = api.get(&format!("/v1/jobs/{}/why", segment(id))).await?;
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
    if let Some(next) = &why.next_at {
        println!("  {:<15} {}", "next", next.to_rfc3339());
    }
    if !why.recent.is_empty() {
        println!();
        print_timeline(&why.recent);
    }
    Ok(())
}

/// Runs and skips, one line each, newest first.
pub fn print_timeline(entries: &[TimelineEntry]) {
    let rows: Vec<Vec<String>> = entries
        .iter()
        .map(|e| match (e.kind, &e.run, &e.skipped) {
            (EntryKind::Run, Some(r), _) => vec![
                short_time(r.scheduled_at.as_ref()),
                "run".into(),
                format!("{} (attempt {}, {})", r.outcome, r.attempt, r.node),
                r.error.clone().unwrap_or_default().replace('\n', " "),
            ],
            (_, _, Some(s)) => {
                let reason = serde_json::to_value(s.reason).unwrap_or_default();
                let what = if s.count == 1 {
                    "1 instant".to_string()
                } else {
                    format!(
                        "{} instants from {}",
                        s.count,
                        short_time(s.first_at.as_ref())
                    )
                };
                vec![
                    short_time(s.last_at.as_ref()),
                    "skipped".into(),
                    reason.as_str().unwrap_or("-").to_string(),
                    match &s.detail {
                        Some(d) => format!("{what}; {d}"),
                        None => what,
                    },
                ]
            }
            _ => vec![
                short_time(e.at.as_ref()),
                "-".into(),
                "-".into(),
                "-".into(),
            ],
        })
        .collect();
    print_table(&["INSTANT (UTC)", "KIND", "WHAT", "DETAIL"], &rows);
}

//! What the checker reads from the node processes' own logs (`<node>.log` in the round's
//! directory): the lines that say a node found Redis had lost keyfire's data, and those that
//! say it fenced itself, each with its time.
//!
//! A node logs in keyfire's `human` format (`tracing`'s full format: an RFC 3339 timestamp
//! first, maybe wrapped in ANSI colour codes) or, with `KEYFIRE__LOG__FORMAT=json`, one JSON
//! object per line with a `timestamp` field; both are read. The timestamp is the host's clock,
//! which is Redis's (every process of a round runs on one host; a node's skewed clock is
//! keyfire's, not `tracing`'s).

use std::path::Path;

use super::model::{NodeLogEvent, NodeLogKind};

/// The start of the ERROR line a node logs when it finds that Redis lost keyfire's data.
pub const DATA_LOSS: &str = "Redis lost keyfire's data";
/// The start of the ERROR line a node logs when it fences itself.
pub const FENCED: &str = "no heartbeat: fencing this node";

/// What a line says, if it is one the checker judges.
fn kind_of(line: &str) -> Option<NodeLogKind> {
    if line.contains(DATA_LOSS) {
        Some(NodeLogKind::DataLoss)
    } else if line.contains(FENCED) {
        Some(NodeLogKind::Fenced)
    } else {
        None
    }
}

/// `text` without ANSI escape sequences (`ESC [ … letter`).
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // The sequence runs to its final byte, a letter.
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The time of a log line (ms), in either format.
fn time_of(line: &str) -> Option<i64> {
    let line = line.trim_start();
    let stamp = if line.starts_with('{') {
        let v: serde_json::Value = serde_json::from_str(line).ok()?;
        v["timestamp"].as_str()?.to_string()
    } else {
        line.split_whitespace().next()?.to_string()
    };
    chrono::DateTime::parse_from_rfc3339(&stamp)
        .ok()
        .map(|t| t.timestamp_millis())
}

/// The judged lines of one node's log text.
pub fn parse(node: &str, text: &str) -> Vec<NodeLogEvent> {
    text.lines()
        .filter_map(|raw| {
            let what = kind_of(raw)?;
            let line = strip_ansi(raw);
            Some(NodeLogEvent {
                node: node.to_string(),
                at_ms: time_of(&line)?,
                what,
            })
        })
        .collect()
}

/// The judged lines of the logs of `nodes` in `dir` (a missing log has none).
pub fn read(dir: &Path, nodes: &[String]) -> Vec<NodeLogEvent> {
    let mut out = Vec::new();
    for node in nodes {
        let bytes = std::fs::read(dir.join(format!("{node}.log"))).unwrap_or_default();
        out.extend(parse(node, &String::from_utf8_lossy(&bytes)));
    }
    out.sort_by_key(|e| e.at_ms);
    out
}

/// How many lines saying `needle` a log holds from byte `from` on, and its length: the
/// harness counts a node's data-loss lines since a fault began.
pub fn count_from(path: &Path, from: u64, needle: &str) -> (usize, u64) {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else {
        return (0, from);
    };
    let mut buf = Vec::new();
    if f.seek(SeekFrom::Start(from)).is_err() || f.read_to_end(&mut buf).is_err() {
        return (0, from);
    }
    let n = String::from_utf8_lossy(&buf).matches(needle).count();
    (n, from + buf.len() as u64)
}

/// The length of a file (0 when it is missing).
pub fn len_of(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_and_json_lines_are_read_with_their_time() {
        let text = concat!(
            "\u{1b}[2m2026-12-06T07:02:42.123456Z\u{1b}[0m \u{1b}[31mERROR\u{1b}[0m ",
            "\u{1b}[2mkeyfire::engine::membership\u{1b}[0m\u{1b}[2m:\u{1b}[0m no heartbeat: ",
            "fencing this node (its runs stop, it claims nothing) before others take its runs ",
            "over \u{1b}[3mnode\u{1b}[0m\u{1b}[2m=\u{1b}[0mn1\n",
            "2026-12-06T07:02:43.500000Z  WARN keyfire: something else\n",
            "2026-12-06T07:02:44.000001Z ERROR keyfire::engine: Redis lost keyfire's data ",
            "(the data marker changed); writing back what this node owns\n",
            "{\"timestamp\":\"2026-12-06T07:02:45.250Z\",\"level\":\"ERROR\",\"fields\":",
            "{\"message\":\"Redis lost keyfire's data\"}}\n",
            "torn line: Redis lost keyfire's data\n",
        );
        let t = |s: &str| {
            chrono::DateTime::parse_from_rfc3339(s)
                .unwrap()
                .timestamp_millis()
        };
        assert_eq!(
            parse("n1", text),
            vec![
                NodeLogEvent {
                    node: "n1".into(),
                    at_ms: t("2026-12-06T07:02:42.123Z"),
                    what: NodeLogKind::Fenced,
                },
                NodeLogEvent {
                    node: "n1".into(),
                    at_ms: t("2026-12-06T07:02:44.000Z"),
                    what: NodeLogKind::DataLoss,
                },
                NodeLogEvent {
                    node: "n1".into(),
                    at_ms: t("2026-12-06T07:02:45.250Z"),
                    what: NodeLogKind::DataLoss,
                },
            ]
        );
    }

    #[test]
    fn lines_are_counted_from_an_offset() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("n1.log");
        std::fs::write(&path, "a Redis lost keyfire's data\n").unwrap();
        let from = len_of(&path);
        assert_eq!(count_from(&path, 0, DATA_LOSS).0, 1);
        assert_eq!(count_from(&path, from, DATA_LOSS), (0, from));
        std::fs::write(
            &path,
            "a Redis lost keyfire's data\nb Redis lost keyfire's data\n",
        )
        .unwrap();
        assert_eq!(count_from(&path, from, DATA_LOSS).0, 1);
        assert_eq!(count_from(&dir.path().join("none"), 0, DATA_LOSS), (0, 0));
    }
}

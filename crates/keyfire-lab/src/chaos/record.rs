//! The recorder: what every chaos handler writes, outside keyfire, one JSON line per event,
//! to an append-only file per node process.
//!
//! Times are in ms since the Unix epoch. `claimed_ms` is Redis time at the claim (from
//! [`keyfire::Firing::claimed_at`]). `at_ms` is the host's real clock when the event happened:
//! the chaos harness runs Redis and every node on one host, so that clock *is* Redis's clock
//! (`TIME` reads the same `gettimeofday`); a node whose keyfire clock is skewed still writes
//! the host's real time here (its known skew is taken off).

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

/// Start or end of a handler run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ev {
    /// The handler was called.
    Start,
    /// The handler returned, or was dropped.
    End,
}

/// How a handler run ended, as the handler saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Returned `Ok`: the side effect happened.
    Ok,
    /// Returned an error on purpose (`fail` param).
    Failed,
    /// Saw its cancel token and returned (lease lost, shutdown, replaced).
    Cancelled,
    /// Dropped by keyfire before it returned (timeout of a hanging handler, or cancel grace).
    Dropped,
}

/// One line of a node's run log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunEvent {
    /// Start or end.
    pub ev: Ev,
    /// Unique per handler run: `<node>/<pid>/<seq>`; a start and its end share it.
    pub run: String,
    /// The node id.
    pub node: String,
    /// The job id.
    pub job: String,
    /// `<job id>:<instant ms>`.
    pub firing: String,
    /// The firing's scheduled instant (ms).
    pub scheduled_ms: i64,
    /// Redis time at the claim (ms).
    pub claimed_ms: i64,
    /// The attempt keyfire granted.
    pub attempt: u32,
    /// The workload's version of the job (`v` param; 0 when absent).
    #[serde(default)]
    pub v: u64,
    /// Host (= Redis) clock at the event (ms).
    pub at_ms: i64,
    /// How the run ended (end events only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
}

/// The host's real clock, in ms.
pub fn host_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Appends run events to one file. Each event is one `write` of one line with `O_APPEND`, so
/// a SIGKILL can lose only the events not yet written, never tear a line in the middle of
/// the file (a torn last line is skipped by [`read_events`]).
#[derive(Debug)]
pub struct RunLog {
    file: Mutex<std::fs::File>,
    prefix: String,
    seq: AtomicU64,
}

impl RunLog {
    /// Open (create) `path` for appending, for node `node`.
    pub fn open(path: &Path, node: &str) -> std::io::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(Self {
            file: Mutex::new(file),
            prefix: format!("{node}/{}", std::process::id()),
            seq: AtomicU64::new(0),
        })
    }

    /// A fresh run id.
    pub fn next_run(&self) -> String {
        format!(
            "{}/{}",
            self.prefix,
            self.seq.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// Append one event.
    pub fn write(&self, event: &RunEvent) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(event).map_err(std::io::Error::other)?;
        line.push(b'\n');
        let mut f = self.file.lock().expect("run log lock");
        f.write_all(&line)
    }
}

/// Read every event of every `*.jsonl` file in `dir`. Lines that do not parse (a line torn
/// by a SIGKILL mid-write) are skipped and counted.
pub fn read_events(dir: &Path) -> std::io::Result<(Vec<RunEvent>, usize)> {
    read_lines_of(dir, "jsonl")
}

/// Every line of every `*.<ext>` file in `dir` (in file name order) read as a `T`, and the
/// count of lines that did not parse.
pub(crate) fn read_lines_of<T: serde::de::DeserializeOwned>(
    dir: &Path,
    ext: &str,
) -> std::io::Result<(Vec<T>, usize)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    files.sort();
    let mut events = Vec::new();
    let mut torn = 0;
    for path in files {
        let text = std::fs::read_to_string(&path)?;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            match serde_json::from_str::<T>(line) {
                Ok(e) => events.push(e),
                Err(_) => torn += 1,
            }
        }
    }
    Ok((events, torn))
}

/// Follows one node's run log as it grows, to tell which runs have started and not ended
/// (the harness pauses a node while it runs firings). Reads only what was appended since
/// the last poll.
#[derive(Debug)]
pub struct RunTail {
    path: PathBuf,
    offset: u64,
    /// The start of a line not complete yet.
    partial: Vec<u8>,
    /// Runs started and not ended: run id → when it started (host ms).
    open: HashMap<String, i64>,
}

impl RunTail {
    /// Follow the run log at `path` (it may not exist yet).
    pub fn new(path: PathBuf) -> Self {
        Self {
            path,
            offset: 0,
            partial: Vec::new(),
            open: HashMap::new(),
        }
    }

    /// Read what was appended; the start instants (host ms) of the runs in flight. A run of a
    /// process that was SIGKILLed stays open for ever: callers look at recent starts only.
    pub fn poll(&mut self) -> Vec<i64> {
        if let Ok(mut f) = std::fs::File::open(&self.path)
            && f.seek(SeekFrom::Start(self.offset)).is_ok()
        {
            let mut buf = Vec::new();
            if f.read_to_end(&mut buf).is_ok() {
                self.offset += buf.len() as u64;
                self.partial.extend_from_slice(&buf);
            }
        }
        let complete = match self.partial.iter().rposition(|b| *b == b'\n') {
            Some(i) => self.partial.drain(..=i).collect::<Vec<u8>>(),
            None => Vec::new(),
        };
        for line in complete.split(|b| *b == b'\n') {
            let Ok(e) = serde_json::from_slice::<RunEvent>(line) else {
                continue;
            };
            match e.ev {
                Ev::Start => {
                    self.open.insert(e.run, e.at_ms);
                }
                Ev::End => {
                    self.open.remove(&e.run);
                }
            }
        }
        self.open.values().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The start of `run`, attempt 1 of `j:1000` (version 1) on `n1`, logged at `at_ms`.
    fn started(run: String, at_ms: i64) -> RunEvent {
        RunEvent {
            ev: Ev::Start,
            run,
            node: "n1".into(),
            job: "j".into(),
            firing: "j:1000".into(),
            scheduled_ms: 1000,
            claimed_ms: 1001,
            attempt: 1,
            v: 1,
            at_ms,
            outcome: None,
        }
    }

    #[test]
    fn events_read_back_as_written_skipping_torn_lines() {
        let dir = tempfile::tempdir().unwrap();
        let log = RunLog::open(&dir.path().join("n1.jsonl"), "n1").unwrap();
        let e = RunEvent {
            ev: Ev::End,
            v: 2,
            outcome: Some(Outcome::Ok),
            ..started(log.next_run(), 1002)
        };
        log.write(&e).unwrap();
        drop(log);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.path().join("n1.jsonl"))
            .unwrap();
        f.write_all(b"{\"ev\":\"sta").unwrap();
        let (events, torn) = read_events(dir.path()).unwrap();
        assert_eq!(events, vec![e]);
        assert_eq!(torn, 1);
    }

    #[test]
    fn a_tail_sees_the_runs_in_flight() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("n1.jsonl");
        let mut tail = RunTail::new(path.clone());
        assert!(tail.poll().is_empty());
        let log = RunLog::open(&path, "n1").unwrap();
        let (a, b) = (log.next_run(), log.next_run());
        log.write(&started(a.clone(), 10)).unwrap();
        log.write(&started(b.clone(), 20)).unwrap();
        assert_eq!(tail.poll().len(), 2);
        log.write(&RunEvent {
            ev: Ev::End,
            outcome: Some(Outcome::Ok),
            ..started(a, 30)
        })
        .unwrap();
        // Half a line: not read until it is whole.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        let end_b = serde_json::to_string(&RunEvent {
            ev: Ev::End,
            outcome: Some(Outcome::Ok),
            ..started(b, 40)
        })
        .unwrap();
        let (head, rest) = end_b.split_at(10);
        f.write_all(head.as_bytes()).unwrap();
        assert_eq!(tail.poll(), vec![20]);
        f.write_all(format!("{rest}\n").as_bytes()).unwrap();
        assert!(tail.poll().is_empty());
    }
}

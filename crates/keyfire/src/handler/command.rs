//! The `command` built-in handler: run a program, no shell. Registered only when
//! `handlers.command.enabled` is true, and it runs only programs listed in
//! `handlers.command.allowed_programs`.
//!
//! Params (JSON):
//!
//! | field | meaning |
//! | --- | --- |
//! | `program` | required; exactly as listed in `allowed_programs` (a path, or a name looked up on `PATH`) |
//! | `args` | array of strings; `{{job_id}}`, `{{firing_id}}`, `{{scheduled_at}}`, `{{attempt}}` are filled in |
//! | `env` | object of extra environment variables |
//! | `timeout` | such as `"30s"`; default `handlers.command.timeout` |
//!
//! The program also gets `KEYFIRE_JOB_ID`, `KEYFIRE_FIRING_ID`, `KEYFIRE_SCHEDULED_AT` and
//! `KEYFIRE_ATTEMPT` in its environment. Exit status 0 is success. Any other status, a signal
//! or the timeout is a failed attempt whose error holds the status and the output (stdout, then
//! stderr), truncated to `handlers.command.max_output_bytes` (at least half of it for stderr when it has that much): the run record keeps only the
//! error text. A program that is not allowed, or cannot be started, fails without retry.
//!
//! The program runs in a process group of its own (on Unix). Its timeout, or the run's cancel
//! (a cancel request, overlap `replace`, shutdown), stops the whole group: `SIGTERM`, then
//! `SIGKILL` after [`STOP_GRACE`] if any of it is still there. A run dropped by the node (the
//! job's own timeout) kills the group at once.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncReadExt};

use super::template::render;
use super::{Firing, Handler, HandlerError, HandlerResult};
use crate::config::CommandHandlerSettings;

/// How long a stopped program's process group has after `SIGTERM` before `SIGKILL`: within
/// the second the node gives a cancelled run to return.
pub(crate) const STOP_GRACE: Duration = Duration::from_millis(500);

/// The program's process group while it may run: dropped (the run's future dropped by the
/// node), it kills the whole group.
struct Group(Option<i32>);

impl Group {
    #[cfg(unix)]
    fn signal(&self, sig: libc::c_int) {
        if let Some(pgid) = self.0 {
            // SAFETY: killpg(2) takes two integers and touches no memory of ours. Its error
            // (ESRCH: the group is gone already) is ignored.
            unsafe {
                libc::killpg(pgid, sig);
            }
        }
    }

    /// Stop the group: `SIGTERM`, then `SIGKILL` after [`STOP_GRACE`] unless the program
    /// exited; reaps the program.
    async fn stop(&mut self, child: &mut tokio::process::Child) {
        #[cfg(unix)]
        {
            self.signal(libc::SIGTERM);
            if tokio::time::timeout(STOP_GRACE, child.wait()).await.is_ok() {
                // The program is gone; what it left in its group goes now.
                self.signal(libc::SIGKILL);
                self.0 = None;
                return;
            }
            self.signal(libc::SIGKILL);
            self.0 = None;
        }
        let _ = child.kill().await;
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        #[cfg(unix)]
        self.signal(libc::SIGKILL);
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    program: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    timeout: Option<String>,
}

/// The `command` handler.
#[derive(Clone)]
pub(super) struct CommandHandler {
    settings: Arc<CommandHandlerSettings>,
}

impl CommandHandler {
    /// A handler with these settings.
    pub(super) fn new(settings: &CommandHandlerSettings) -> Self {
        Self {
            settings: Arc::new(settings.clone()),
        }
    }
}

impl Handler for CommandHandler {
    fn run(&self, firing: Firing) -> BoxFuture<'static, HandlerResult> {
        let settings = self.settings.clone();
        Box::pin(async move { run(&settings, firing).await })
    }
}

/// Read all of `r`, keeping at most `max` bytes (the rest is drained so the child never blocks
/// on a full pipe). Returns the kept bytes and whether anything was dropped.
async fn read_capped(mut r: impl AsyncRead + Unpin, max: usize) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut dropped = false;
    let mut buf = [0u8; 8192];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = max.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
                dropped |= n > room;
            }
        }
    }
    (kept, dropped)
}

async fn run(settings: &CommandHandlerSettings, f: Firing) -> HandlerResult {
    let p: Params = serde_json::from_value(f.params.clone())
        .map_err(|e| HandlerError::abort(format!("command: bad params: {e}")))?;
    if !settings
        .allowed_programs
        .iter()
        .any(|a| a == "*" || a == &p.program)
    {
        return Err(HandlerError::abort(format!(
            "command: program '{}' is not in handlers.command.allowed_programs",
            p.program
        )));
    }
    let timeout = match &p.timeout {
        Some(t) => crate::job::parse_duration(t)
            .map_err(|e| HandlerError::abort(format!("command: bad timeout: {e}")))?,
        None => settings.timeout,
    };
    let mut cmd = tokio::process::Command::new(&p.program);
    cmd.args(p.args.iter().map(|a| render(a, &f)))
        .envs(&p.env)
        .env("KEYFIRE_JOB_ID", &f.job_id)
        .env("KEYFIRE_FIRING_ID", &f.firing_id)
        .env(
            "KEYFIRE_SCHEDULED_AT",
            f.scheduled_at
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        )
        .env("KEYFIRE_ATTEMPT", f.attempt.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    cmd.process_group(0);
    let mut child = cmd
        .spawn()
        .map_err(|e| HandlerError::abort(format!("command: cannot start '{}': {e}", p.program)))?;
    // Its own group: the group id is its process id.
    let mut group = Group(child.id().map(|pid| pid as i32));
    let max = settings.max_output_bytes;
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    let out = tokio::spawn(read_capped(stdout, max));
    let err = tokio::spawn(read_capped(stderr, max));

    let waited = tokio::select! {
        r = tokio::time::timeout(timeout, child.wait()) => r,
        () = f.cancel.cancelled() => {
            group.stop(&mut child).await;
            return Err(HandlerError::retry(format!("command: '{}' cancelled", p.program)));
        }
    };
    let status = match waited {
        Ok(Ok(status)) => Some(status),
        Ok(Err(e)) => {
            return Err(HandlerError::retry(format!(
                "command: waiting for '{}': {e}",
                p.program
            )));
        }
        Err(_) => {
            group.stop(&mut child).await;
            None
        }
    };
    // Exited by itself: nothing of its group is signalled (its group id may be reused once
    // the program is reaped and its group empty).
    group.0 = None;
    let (out, out_cut) = out.await.unwrap_or_default();
    let (err, err_cut) = err.await.unwrap_or_default();
    match status {
        Some(s) if s.success() => {
            tracing::debug!(
                job = %f.job_id,
                firing = %f.firing_id,
                stdout = %String::from_utf8_lossy(&out),
                "command succeeded"
            );
            Ok(())
        }
        _ => {
            let what = match status {
                Some(s) => match s.code() {
                    Some(code) => format!("exited with status {code}"),
                    None => format!("was killed ({s})"),
                },
                None => format!("timed out after {}", humantime::format_duration(timeout)),
            };
            // Within the limit overall; stderr (often the useful part) keeps at least half of
            // it when it has that much to say, stdout takes the rest.
            let cut = |bytes: &[u8], n: usize| -> String {
                let text = String::from_utf8_lossy(&bytes[..n.min(bytes.len())]).into_owned();
                text.trim_end_matches('\u{FFFD}').to_string()
            };
            let err_budget = err.len().min(max / 2);
            let out_part = cut(&out, max - err_budget);
            let err_part = cut(&err, max - out_part.len());
            let truncated =
                out_cut || err_cut || out_part.len() < out.len() || err_part.len() < err.len();
            let mut output = out_part;
            if !err_part.is_empty() {
                if !output.is_empty() && !output.ends_with('\n') {
                    output.push('\n');
                }
                output.push_str(&err_part);
            }
            let mut message = format!("command: '{}' {what}", p.program);
            let output = output.trim_end();
            if !output.is_empty() {
                message.push_str(": ");
                message.push_str(output);
            }
            if truncated {
                message.push_str(" [output truncated]");
            }
            Err(HandlerError::retry(message))
        }
    }
}

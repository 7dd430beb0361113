//! A keyfire node as a separate process, for crash tests: settings from `KEYFIRE__…`
//! environment variables; its `slow` handler appends `start|end <firing> <attempt> <node>`
//! lines to the file named by `KEYFIRE_TEST_LOG` (outside keyfire), sleeping `sleep_ms`
//! between them.

use std::io::Write;
use std::time::Duration;

use keyfire::{Firing, Registry, Settings};

/// Appends one line with a single `write` call: 50 runs append at once, and `writeln!`
/// on a `File` writes the text and its newline separately, so lines could interleave.
fn append(path: &str, line: &str) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .expect("open test log");
    f.write_all(format!("{line}\n").as_bytes())
        .expect("write test log");
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let settings = Settings::load(None)?;
    keyfire_server::cli::init_logging(&settings.log);
    let log = std::env::var("KEYFIRE_TEST_LOG")?;
    let mut registry = Registry::with_builtins();
    registry.register("slow", move |f: Firing| {
        let log = log.clone();
        async move {
            let line = |what: &str| format!("{what} {} {} {}", f.firing_id, f.attempt, f.node_id);
            append(&log, &line("start"));
            let ms = f.params["sleep_ms"].as_u64().unwrap_or(1_000);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            append(&log, &line("end"));
            Ok(())
        }
    });
    keyfire_server::cli::serve::run_node(settings, registry).await
}

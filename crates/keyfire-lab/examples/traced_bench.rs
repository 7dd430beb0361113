//! `keyfire bench` with the server's OpenTelemetry traces on, to measure what exporting costs
//! a firing: the bench's in-process nodes run under the subscriber and tracer `[telemetry]`
//! installs, exporting every span (sampling 1.0) over OTLP/HTTP to the collector at
//! `KEYFIRE_BENCH_OTLP` (default `http://127.0.0.1:4318`; `off`: no traces, the same build
//! as a baseline). Arguments as `keyfire bench`'s:
//!
//! ```text
//! cargo run --release -p keyfire-lab --example traced_bench -- burst --n 50000
//! ```

use clap::Parser;
use keyfire_server::settings::{LogSettings, TelemetrySettings};

/// As the `keyfire` binary: the cost measured is the one a node pays.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `keyfire bench`, traced.
#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    bench: keyfire_lab::cli::bench::BenchArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let endpoint =
        std::env::var("KEYFIRE_BENCH_OTLP").unwrap_or_else(|_| "http://127.0.0.1:4318".into());
    if endpoint == "off" {
        return keyfire_lab::cli::bench::run(args.bench).await;
    }
    let telemetry = TelemetrySettings {
        enabled: true,
        endpoint,
        sampling_ratio: 1.0,
        ..TelemetrySettings::default()
    };
    // As the bench's own logging: warnings and errors on stderr (its stdout is the report).
    let log = LogSettings {
        level: "warn".into(),
        ..LogSettings::default()
    };
    let exporting = keyfire_server::telemetry::init(&log, &telemetry)?;
    let result = keyfire_lab::cli::bench::run(args.bench).await;
    if let Some(t) = exporting {
        t.shutdown().await;
    }
    result
}

//! The `keyfire` binary's subcommands, one file each.

pub mod cron;
pub mod dead;
pub mod dev;
pub mod doctor;
pub mod job;
pub mod limits;
pub mod nodes;
pub mod remote;
pub mod serve;
pub mod task;
pub mod topics;

use keyfire::config::LogSettings;

/// Set up `tracing` output: `RUST_LOG` wins over the configured level.
pub fn init_logging(log: &LogSettings) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(&log.level));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let _ = if log.format == "json" {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
    tracing::info!("shutdown requested");
}

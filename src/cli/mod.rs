//! The `keyfire` binary's subcommands, one file each.

mod batch;
pub mod calendar;
pub mod cron;
pub mod dead;
#[cfg(feature = "lab")]
pub mod dev;
pub mod doctor;
pub mod exit;
pub mod job;
pub mod limits;
pub mod nodes;
pub mod remote;
pub mod serve;
pub mod task;
pub mod topics;
pub mod why;

use crate::settings::{LogSettings, TelemetrySettings};

/// Set up `tracing` output: `RUST_LOG` wins over the configured level. No traces: `serve`
/// sets up both with [`crate::telemetry::init`].
pub fn init_logging(log: &LogSettings) {
    let _ = crate::telemetry::init(log, &TelemetrySettings::default());
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
    shutdown_signals().await
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM received from the moment it is called (the handlers
/// are installed here, not when first polled): a node calls it before it starts, so a signal
/// sent while it starts stops it once started, drained, instead of killing it outright.
pub fn shutdown_signals() -> impl std::future::Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{SignalKind, signal};
    // A handler that cannot be installed must not stop the node at once: wait on the other.
    let listen = |kind: SignalKind, name: &'static str| {
        let installed = signal(kind).map_err(|e| {
            tracing::warn!(error = %e, "cannot listen for {name}; stop the node with the other signal");
        });
        async move {
            match installed {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(()) => std::future::pending().await,
            }
        }
    };
    let int = listen(SignalKind::interrupt(), "SIGINT");
    let term = listen(SignalKind::terminate(), "SIGTERM");
    async move {
        tokio::select! {
            _ = int => {}
            _ = term => {}
        }
        tracing::info!("shutdown requested");
    }
}

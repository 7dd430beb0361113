//! Built-in handlers that need no code: `log`, `noop`, `http`, (when enabled) `command`. The
//! delay queue's `topic` handler lives with the queue (`crate::queue`).

use super::{Firing, HandlerResult, Registry};
use crate::config::HandlerSettings;
use crate::error::Result;

/// Register every built-in handler. `command` runs programs on the node, so it is registered
/// only when the node's config turns it on: a job naming it is then refused at creation
/// (unknown handler) on a cluster where no node allows it. Fails when the `http` handler
/// cannot be built (a TLS file it names cannot be read or used).
pub(super) fn register_all(r: &mut Registry, settings: &HandlerSettings) -> Result<()> {
    r.register("log", log);
    r.register("noop", noop);
    #[cfg(feature = "http")]
    {
        let http = super::http::HttpHandler::new(&settings.http)?;
        r.set_callback_sender(std::sync::Arc::new(http.clone()));
        r.register("http", http);
    }
    if settings.command.enabled {
        r.register(
            "command",
            super::command::CommandHandler::new(&settings.command),
        );
    }
    Ok(())
}

/// Logs the firing and its params at info level.
async fn log(f: Firing) -> HandlerResult {
    tracing::info!(
        job = %f.job_id,
        firing = %f.firing_id,
        scheduled = %f.scheduled_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        attempt = f.attempt,
        params = %f.params,
        "fired"
    );
    Ok(())
}

/// Does nothing, successfully.
async fn noop(_: Firing) -> HandlerResult {
    Ok(())
}

//! A Rust service embedding a keyfire node: it registers its own handler, declares a cron job
//! and runs until Ctrl-C. Against a Redis 7 with `notify-keyspace-events Ex` (or one that lets
//! keyfire turn it on):
//!
//! ```sh
//! REDIS_URL=redis://127.0.0.1:6379 cargo run -p keyfire-embed-example
//! ```
//!
//! It is a package of its own, built as a service builds it: `keyfire` with its default
//! features and without `internals`, `tokio` with only the features named here, and
//! `serde_json`. The library installs no global `tracing` subscriber, `metrics` recorder or
//! rustls crypto provider, so the service keeps its own.

use keyfire::{Client, Firing, HandlerError, JobSpec, Node, Registry, Settings};

/// The service's own work: here, a report sent every weekday morning.
async fn send_report(firing: Firing) -> Result<(), HandlerError> {
    // `firing_id` is the same for every attempt of one firing: use it as an idempotency key.
    let to = firing.params["to"].as_str().unwrap_or("ops@example.com");
    println!(
        "sending report {} to {to} (attempt {})",
        firing.firing_id, firing.attempt
    );
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The library's settings are plain data with defaults (and serde support, to read them
    // from the service's own configuration): here, the defaults and the service's Redis.
    let mut settings = Settings::default();
    if let Ok(url) = std::env::var("REDIS_URL") {
        settings.redis.url = url;
    }
    settings.check()?;

    let mut registry = Registry::with_builtins();
    registry.register("send-report", send_report);

    // The node claims and runs firings until the handle is shut down.
    let node = Node::new(settings.clone(), registry).start().await?;

    // A client manages jobs without running a node (any process can hold one).
    let client = Client::connect(&settings).await?;
    let job = client
        .upsert(
            JobSpec::cron("weekday-report", "0 9 * * MON-FRI", "send-report")
                .tz("Europe/Berlin")
                .params(serde_json::json!({ "to": "ops@example.com" })),
        )
        .await?;
    println!(
        "{} declared; next firing at {:?} ms",
        job.spec.id, job.next_ms
    );

    tokio::signal::ctrl_c().await?;
    // Leave the live set, stop claiming, let running firings finish (up to node.drain_timeout).
    node.shutdown().await;
    Ok(())
}

//! `keyfire serve`: run a node and its REST API.

use std::collections::{BTreeSet, HashSet};
use std::net::SocketAddr;
use std::path::Path;

use anyhow::Context;
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::api::{self, ApiState};
use crate::settings::ServerSettings;
use keyfire::client::Client;
use keyfire::error::{Error, Result};
use keyfire::handler::Registry;
use keyfire::job::JobSpec;
use keyfire::{Node, NodeHandle};

/// The fields in which two specs differ, by name.
fn differing_fields(a: &JobSpec, b: &JobSpec) -> Vec<String> {
    let (Ok(Value::Object(a)), Ok(Value::Object(b))) =
        (serde_json::to_value(a), serde_json::to_value(b))
    else {
        return vec!["spec".into()];
    };
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .cloned()
        .collect()
}

/// Whether the stored job is what the file declares. A declared `after` was resolved to `at`
/// when the job was created; it is not re-resolved (and so re-scheduled) at every start.
fn same_as_declared(declared: &JobSpec, stored: &JobSpec) -> bool {
    if declared == stored {
        return true;
    }
    if declared.after.is_some() && stored.at.is_some() && stored.after.is_none() {
        let mut resolved = declared.clone();
        resolved.after = None;
        resolved.at = stored.at;
        return &resolved == stored;
    }
    false
}

fn declared_error(id: &str, e: Error) -> Error {
    Error::Config(format!("[[jobs]] id '{id}': {e}"))
}

/// Check every declared job as an upsert would, writing nothing: one bad job stops the start
/// before anything is applied. Errors name the job's id and the field.
pub async fn check_declared_jobs(client: &Client, settings: &ServerSettings) -> Result<()> {
    let mut seen = HashSet::new();
    let calendars: Vec<String> = settings.calendars.iter().map(|c| c.name.clone()).collect();
    for spec in &settings.jobs {
        if !seen.insert(spec.id.as_str()) {
            return Err(Error::Config(format!(
                "[[jobs]] id '{}' is declared twice",
                spec.id
            )));
        }
        client
            .validate_with_calendars(spec, &calendars)
            .await
            .map_err(|e| declared_error(&spec.id, e))?;
    }
    Ok(())
}

/// Upsert the jobs declared in the settings, by id, and report the ones that differ from Redis
/// (naming the fields). With `prune`, delete the recurring jobs that are not declared.
pub async fn apply_declared_jobs(client: &Client, settings: &ServerSettings) -> Result<()> {
    for spec in &settings.jobs {
        match client.find(&spec.id).await? {
            Some(stored) if same_as_declared(spec, &stored.spec) => {
                tracing::debug!(job = %spec.id, "declared job unchanged");
                continue;
            }
            Some(stored) => tracing::info!(
                job = %spec.id,
                fields = %differing_fields(spec, &stored.spec).join(","),
                "declared job differs from Redis; updating"
            ),
            None => tracing::info!(job = %spec.id, "creating declared job"),
        }
        client
            .upsert(spec.clone())
            .await
            .map_err(|e| declared_error(&spec.id, e))?;
    }
    if settings.prune {
        prune(client, settings).await?;
    }
    Ok(())
}

/// Delete recurring (cron or every) jobs that the settings do not declare. One-shot jobs and
/// tasks are left alone: services enqueue them at run time.
pub async fn prune(client: &Client, settings: &ServerSettings) -> Result<Vec<String>> {
    let declared: HashSet<&str> = settings.jobs.iter().map(|j| j.id.as_str()).collect();
    let mut pruned = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let ids = client.list_ids(cursor.as_deref(), 500).await?;
        if ids.is_empty() {
            break;
        }
        let page = client.get_many(&ids).await?;
        cursor = ids.last().cloned();
        for record in &page {
            let recurring = record.spec.cron.is_some() || record.spec.every.is_some();
            if recurring && !declared.contains(record.spec.id.as_str()) {
                match client.delete(&record.spec.id).await {
                    Ok(()) | Err(Error::NotFound(_)) => {
                        tracing::info!(job = %record.spec.id, "pruned job not declared in the config (prune = true)");
                        pruned.push(record.spec.id.clone());
                    }
                    Err(e) => return Err(e),
                }
            }
        }
    }
    Ok(pruned)
}

/// Run a node with the settings in `config` until SIGINT or SIGTERM.
pub async fn run(config: Option<&Path>) -> anyhow::Result<()> {
    let what = || match config {
        Some(p) => format!("config {}", p.display()),
        None => "config (defaults and KEYFIRE__ environment)".into(),
    };
    if let Some(path) = config {
        check_readable(path)?;
    }
    let settings = ServerSettings::load(config).with_context(what)?;
    let telemetry = crate::telemetry::init(&settings.log, &settings.telemetry)?;
    let registry = Registry::for_node(&settings.library()).with_context(what)?;
    // Not under the config's name: from here on, what fails is Redis, the address or a node
    // part, and the error names the setting itself; except a declared job or limit the file
    // holds, which the file's name helps find.
    let result = run_node(settings, registry)
        .await
        .map_err(|e| match e.downcast_ref::<Error>() {
            Some(Error::Config(_) | Error::Invalid(_)) => e.context(what()),
            _ => e,
        });
    if let Some(telemetry) = telemetry {
        telemetry.shutdown().await;
    }
    result
}

/// Refuse a `--config` that cannot be read as a file, naming it and why (the config loader
/// would call a directory "not found" and an unreadable file a parse error).
fn check_readable(path: &Path) -> Result<()> {
    let unreadable = |why: String| {
        Err(Error::Config(format!(
            "--config {}: {why}: give --config a readable TOML file",
            path.display()
        )))
    };
    match std::fs::metadata(path) {
        Err(e) => return unreadable(format!("cannot read it ({e})")),
        Ok(m) if m.is_dir() => return unreadable("is a directory".into()),
        Ok(_) => {}
    }
    if let Err(e) = std::fs::File::open(path) {
        return unreadable(format!("cannot read it ({e})"));
    }
    Ok(())
}

/// A running node and the API it serves.
pub struct Served {
    node: NodeHandle,
    /// Writes the declared jobs, topics and limits back when Redis lost them.
    rewrite: JoinHandle<()>,
    api: Option<(
        SocketAddr,
        CancellationToken,
        JoinHandle<std::io::Result<()>>,
    )>,
}

impl Served {
    /// The address the API listens on, when it is enabled.
    pub fn api_addr(&self) -> Option<SocketAddr> {
        self.api.as_ref().map(|(addr, _, _)| *addr)
    }

    /// The node.
    pub fn node(&self) -> &NodeHandle {
        &self.node
    }

    /// Stop the API (requests in flight finish), then the node (it drains its runs).
    pub async fn shutdown(self) {
        if let Some((_, stop, task)) = self.api {
            stop.cancel();
            match task.await {
                Ok(Err(e)) => tracing::warn!(error = %e, "api server ended with an error"),
                Err(e) => tracing::warn!(error = %e, "api server task failed"),
                Ok(Ok(())) => {}
            }
        }
        self.rewrite.abort();
        self.node.shutdown().await;
    }
}

/// Put the declared calendars, flow limits and topics (their partition counts).
async fn apply_declared_limits_and_topics(
    client: &Client,
    settings: &ServerSettings,
) -> Result<()> {
    for (i, c) in settings.calendars.iter().enumerate() {
        client
            .put_calendar(c.clone())
            .await
            .map_err(|e| Error::Config(format!("[[calendars]] {i} ('{}'): {e}", c.name)))?;
        tracing::info!(calendar = %c.name, "calendar declared");
    }
    for limit in &settings.flow_limits {
        client.put_limit(limit.clone()).await?;
        tracing::info!(key = %limit.key, rate = ?limit.rate, in_flight = ?limit.in_flight, "flow limit declared");
    }
    for (i, t) in settings.topics.iter().enumerate() {
        client
            .queue()
            .set_partitions(&t.name, t.partitions)
            .await
            .map_err(|e| Error::Config(format!("[[topics]] {i} ('{}'): {e}", t.name)))?;
        tracing::info!(topic = %t.name, partitions = t.partitions, "topic declared");
    }
    Ok(())
}

/// Each time the node finds that Redis lost keyfire's data, write back what the settings
/// declare: flow limits, topics, jobs. A write that fails (Redis still loading, say) is
/// tried again every second until it succeeds or the next loss.
async fn write_back_after_losses(
    client: Client,
    settings: ServerSettings,
    mut losses: tokio::sync::watch::Receiver<u64>,
) {
    while losses.changed().await.is_ok() {
        loop {
            let done = async {
                apply_declared_limits_and_topics(&client, &settings).await?;
                apply_declared_jobs(&client, &settings).await
            }
            .await;
            match done {
                Ok(()) => {
                    tracing::warn!(
                        jobs = settings.jobs.len(),
                        topics = settings.topics.len(),
                        flow_limits = settings.flow_limits.len(),
                        calendars = settings.calendars.len(),
                        "declared jobs, topics, flow limits and calendars written back after Redis lost them"
                    );
                    break;
                }
                Err(e) => {
                    tracing::error!(error = %e, "writing the declared jobs, topics and flow limits back failed; trying again");
                    tokio::select! {
                        _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
                        r = losses.changed() => if r.is_err() { return },
                    }
                }
            }
        }
    }
}

/// Bind the API, check the declared jobs, start the node, apply the declared jobs and serve
/// the API. Nothing is written when a declared job is invalid.
pub async fn start(settings: ServerSettings, registry: Registry) -> anyhow::Result<Served> {
    let names = registry.names();
    settings.check()?;
    // The server's Prometheus recorder, before the node records anything (the library
    // records through the `metrics` facade and installs no recorder of its own).
    let _ = crate::metrics::handle();
    // The address first: a taken port is reported at once, not after Redis's connection
    // retries, and binding writes nothing.
    let listener = if settings.api.enabled {
        Some(api::bind(&settings.api).await?)
    } else {
        None
    };
    let client = Client::connect(&settings.library())
        .await?
        .allow_handlers(names.clone());
    check_declared_jobs(&client, &settings).await?;
    // Declared limits and topics first, so no firing of this node runs unlimited before they
    // apply, and no task of a declared topic is served before its partitions are.
    apply_declared_limits_and_topics(&client, &settings).await?;
    let node = Node::new(settings.library(), registry).start().await?;
    if let Err(e) = apply_declared_jobs(&client, &settings).await {
        node.shutdown().await;
        return Err(e.into());
    }
    let rewrite = tokio::spawn(write_back_after_losses(
        client.clone(),
        settings.clone(),
        node.data_losses(),
    ));
    let api = match listener {
        Some(listener) => {
            let addr = listener.local_addr()?;
            let stop = CancellationToken::new();
            let state = ApiState::new(client, &settings);
            let task = tokio::spawn(api::serve(listener, state, stop.clone().cancelled_owned()));
            tracing::info!(
                url = %format!("http://{addr}"),
                auth = settings.api.auth_enabled(),
                "api listening"
            );
            Some((addr, stop, task))
        }
        None => None,
    };
    Ok(Served { node, rewrite, api })
}

/// Start a node and its API, run until a shutdown signal.
pub async fn run_node(settings: ServerSettings, registry: Registry) -> anyhow::Result<()> {
    // Before the start: a SIGTERM sent while the node starts must not kill it half-started.
    let shutdown = super::shutdown_signals();
    let served = start(settings, registry).await?;
    shutdown.await;
    served.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declared_after_is_not_resolved_again() {
        let declared = JobSpec::after("once", "10m", "log");
        let mut stored = declared.clone();
        stored.after = None;
        stored.at = chrono::DateTime::from_timestamp_millis(1_000);
        assert!(same_as_declared(&declared, &stored));
        let mut changed = stored.clone();
        changed.handler = "noop".into();
        assert!(!same_as_declared(&declared, &changed));
        assert_eq!(
            differing_fields(&declared, &changed),
            ["after", "at", "handler"]
        );
    }
}

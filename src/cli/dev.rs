//! `keyfire dev`: a Redis of its own plus a node with demo jobs, to see firings at once.

use crate::settings::ServerSettings;
use keyfire::config::RedisMode;
use keyfire::handler::Registry;
use keyfire::job::JobSpec;
use keyfire_testkit::{RedisCluster, RedisOptions, RedisServer};

/// The demo jobs `keyfire dev` declares.
pub fn demo_jobs() -> Vec<JobSpec> {
    vec![
        JobSpec::cron("demo-cron-5s", "*/5 * * * * *", "log")
            .params(serde_json::json!({"what": "cron, every 5 seconds"})),
        JobSpec::every("demo-every-3s", "3s", "log")
            .params(serde_json::json!({"what": "fixed rate, every 3 seconds"})),
        JobSpec::cron("demo-berlin-9am", "0 9 * * MON-FRI", "log")
            .tz("Europe/Berlin")
            .params(serde_json::json!({"what": "weekdays 09:00 in Berlin"})),
    ]
}

/// Start redis-server (shipped redis.conf, free port, temp dir) and a node until Ctrl-C. With
/// `cluster`, a Redis Cluster of its own (3 masters with a replica each) and 12 shards.
pub async fn run(cluster: bool) -> anyhow::Result<()> {
    let mut settings = ServerSettings::default();
    super::init_logging(&settings.log);
    if cluster {
        let redis = RedisCluster::start(3, 1)?;
        settings.redis.mode = RedisMode::Cluster;
        settings.redis.nodes = redis.nodes();
        settings.redis.shards = 12;
        tracing::info!(
            masters = ?redis.masters()?,
            "dev Redis Cluster started (3 masters, 3 replicas); `redis-cli -c -p <port>` looks around"
        );
        return run_dev_node(settings).await;
    }
    let redis = RedisServer::start_with(RedisOptions {
        persistent: true,
        ..Default::default()
    })?;
    settings.redis.url = redis.url();
    tracing::info!(
        redis = %redis.url(),
        dir = %redis.dir().display(),
        "dev Redis started; point `redis-cli -p {}` at it to look around",
        redis.port()
    );
    run_dev_node(settings).await
}

/// The dev node: demo jobs, the API on its usual port when free; runs until Ctrl-C.
async fn run_dev_node(mut settings: ServerSettings) -> anyhow::Result<()> {
    settings.node.id = "dev-node".into();
    settings.node.drain_timeout = std::time::Duration::from_secs(5);
    settings.jobs = demo_jobs();
    let mut oneshot = JobSpec::after("demo-once", "2s", "log");
    oneshot.params = serde_json::json!({"what": "one-shot, 2 seconds after start"});
    settings.jobs.push(oneshot);
    // The API on its usual port when free, else on any free port (the log names it).
    if std::net::TcpListener::bind(&settings.api.listen).is_err() {
        settings.api.listen = "127.0.0.1:0".into();
    }
    let registry = Registry::for_node(&settings.library())?;
    super::serve::run_node(settings, registry).await
}

//! What an embedding service relies on: a node runs beside the service's own global
//! recorder and subscriber, because keyfire installs neither.

use keyfire::{Node, Registry, Settings};
use keyfire_testkit::RedisServer;

#[tokio::test]
async fn a_node_leaves_the_global_metrics_recorder_to_the_application() {
    let redis = RedisServer::start().expect("start redis-server");
    let mut settings = Settings::default();
    settings.redis.url = redis.url();
    settings.redis.prefix = "embed".into();
    let node = Node::new(settings, Registry::with_builtins())
        .start()
        .await
        .expect("start a node");
    // The application installs its own recorder after the node started: this fails when a
    // library installed one first.
    metrics::set_global_recorder(metrics::NoopRecorder)
        .expect("the global recorder is still free for the application");
    node.shutdown().await;
}

//! What an embedding service relies on: a node runs beside the service's own global
//! recorder, subscriber and TLS crypto provider, because keyfire installs none of them; and
//! the library's settings claim no address of the service's for an API keyfire does not serve.

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

/// Building the built-in handlers, the `http` one with its TLS clients included, leaves the
/// process's rustls crypto provider unset: the service picks its own (or none).
#[cfg(feature = "http")]
#[test]
fn building_the_builtins_installs_no_tls_provider() {
    use keyfire::handler::http::HttpHandler;
    assert!(rustls::crypto::CryptoProvider::get_default().is_none());
    let _ = Registry::with_builtins();
    let settings = Settings::default();
    let registry = Registry::with_builtins_from(&settings.handlers).expect("the built-ins");
    assert!(registry.contains("http"));
    HttpHandler::for_node(&settings).expect("the node's http handler");
    keyfire::handler::http::default_client_tls().expect("the default client TLS");
    // A provider of the caller's choosing, given to the handler alone.
    let chosen = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    HttpHandler::with_provider(&settings.handlers.http, chosen).expect("with a provider");
    assert!(
        rustls::crypto::CryptoProvider::get_default().is_none(),
        "a library installed a process-wide rustls provider"
    );
}

/// A firing of the `http` handler of `settings` calling `url`.
#[cfg(feature = "http")]
async fn call(
    settings: &keyfire::config::HttpHandlerSettings,
    url: &str,
) -> keyfire::HandlerResult {
    use keyfire::{Firing, Handler};
    let handler = keyfire::handler::http::HttpHandler::new(settings).expect("the http handler");
    handler
        .run(Firing {
            job_id: "call".into(),
            firing_id: "call:1".into(),
            scheduled_at: chrono::Utc::now(),
            claimed_at: chrono::Utc::now(),
            attempt: 1,
            params: serde_json::json!({ "url": url, "timeout": "5s" }),
            node_id: "n".into(),
            cancel: Default::default(),
            report: Default::default(),
        })
        .await
}

/// A service that embeds the library serves no keyfire API, so its `http` handler refuses
/// no address as "the node's own API": not 127.0.0.1:8080 (the server's default `api.listen`,
/// and a port the service may well use itself). Given an API address, the same call is
/// refused under `handlers.http.block_own_api`.
#[cfg(feature = "http")]
#[tokio::test]
async fn a_library_only_service_calls_127_0_0_1_8080() {
    let url = "http://127.0.0.1:8080/hook";
    // A receiver there when the port is free; when something else holds it, whatever answers
    // (or the refused connection) is not keyfire refusing the call itself.
    let receiver = tokio::net::TcpListener::bind("127.0.0.1:8080").await.ok();
    let served = receiver.is_some();
    if let Some(listener) = receiver {
        tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut buf = [0u8; 4096];
                let _ = socket.read(&mut buf).await;
                let _ = socket
                    .write_all(b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n")
                    .await;
            }
        });
    }
    let library = Settings::default();
    assert_eq!(library.handlers.http.own_api, None);
    assert!(library.handlers.http.block_own_api);
    let result = call(&library.handlers.http, url).await;
    if served {
        assert!(result.is_ok(), "{result:?}");
    } else if let Err(e) = &result {
        assert!(!format!("{e:?}").contains("block_own_api"), "{e:?}");
    }

    let mut server = library.handlers.http.clone();
    server.own_api = Some("127.0.0.1:8080".into());
    let refused = call(&server, url)
        .await
        .expect_err("the own API is refused");
    assert!(
        format!("{refused:?}").contains("block_own_api"),
        "{refused:?}"
    );
}

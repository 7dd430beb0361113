//! The `http` handler over TLS, against a local receiver (tokio-rustls, a small HTTP/1.1
//! responder) whose certificate a CA made here signs: that CA trusted through
//! `handlers.http.ca_file`, client certificates (mutual TLS), per-host settings
//! (`handlers.http.tls."<pattern>"`) picked on every redirect hop and for callbacks, and the
//! errors bad files give (naming the setting, never a panic).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keyfire::Registry;
use keyfire::config::{HandlerSettings, HttpHandlerSettings, HttpTlsSettings, Settings};
use keyfire::handler::http::HttpHandler;
use keyfire::handler::{
    Callback, CallbackCall, CallbackSender, Firing, Handler, HandlerError, HandlerResult,
};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// A certificate authority made for one test.
struct Ca(CertifiedIssuer<'static, KeyPair>);

/// A certificate the CA signed, and its key.
struct Leaf {
    cert: CertificateDer<'static>,
    cert_pem: String,
    key: KeyPair,
}

impl Ca {
    fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        Self(CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap())
    }

    fn pem(&self) -> String {
        self.0.pem()
    }

    fn roots(&self) -> RootCertStore {
        let mut roots = RootCertStore::empty();
        roots.add(self.0.der().clone()).unwrap();
        roots
    }

    /// A server certificate for the receivers here (`localhost`, `127.0.0.1`).
    fn localhost(&self) -> Leaf {
        self.leaf(
            &["localhost", "127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
        )
    }

    /// A client certificate for `keyfire.client.test`.
    fn client(&self) -> Leaf {
        self.leaf(
            &["keyfire.client.test"],
            ExtendedKeyUsagePurpose::ClientAuth,
        )
    }

    fn leaf(&self, names: &[&str], purpose: ExtendedKeyUsagePurpose) -> Leaf {
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names.clone()).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, &names[0]);
        params.extended_key_usages = vec![purpose];
        let cert = params.signed_by(&key, &self.0).unwrap();
        Leaf {
            cert: cert.der().clone(),
            cert_pem: cert.pem(),
            key,
        }
    }
}

impl Leaf {
    fn key_der(&self) -> PrivateKeyDer<'static> {
        PrivatePkcs8KeyDer::from(self.key.serialize_der()).into()
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A server config presenting `server`; with `clients`, it requires a client certificate
/// that CA signed.
fn server_config(server: &Leaf, clients: Option<&Ca>) -> Arc<ServerConfig> {
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = match clients {
        Some(ca) => builder.with_client_cert_verifier(
            WebPkiClientVerifier::builder_with_provider(Arc::new(ca.roots()), provider())
                .build()
                .unwrap(),
        ),
        None => builder.with_no_client_auth(),
    };
    Arc::new(
        builder
            .with_single_cert(vec![server.cert.clone()], server.key_der())
            .unwrap(),
    )
}

/// One request a receiver answered.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    /// The client certificate presented, if any.
    client_cert: Option<CertificateDer<'static>>,
}

/// The answer to a request for a path, given the receiver's own address.
type Respond = Arc<dyn Fn(&str, SocketAddr) -> String + Send + Sync>;

fn ok() -> Respond {
    Arc::new(|_, _| "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok".into())
}

fn redirect(location: &str) -> String {
    format!(
        "HTTP/1.1 307 Temporary Redirect\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    )
}

/// A receiver on 127.0.0.1: HTTPS with `tls`, else plain HTTP.
struct Receiver {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Receiver {
    async fn start(tls: Option<Arc<ServerConfig>>, respond: Respond) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (log, respond, tls) = (log.clone(), respond.clone(), tls.clone());
                tokio::spawn(async move {
                    match tls {
                        None => answer(tcp, None, &log, &*respond, addr).await,
                        Some(config) => {
                            // A refused handshake (no or bad client certificate) ends here:
                            // the request is never seen.
                            let Ok(stream) = TlsAcceptor::from(config).accept(tcp).await else {
                                return;
                            };
                            let cert = stream
                                .get_ref()
                                .1
                                .peer_certificates()
                                .and_then(|c| c.first().cloned());
                            answer(stream, cert, &log, &*respond, addr).await;
                        }
                    }
                });
            }
        });
        Self { addr, seen }
    }

    fn port(&self) -> u16 {
        self.addr.port()
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    fn paths(&self) -> Vec<String> {
        self.seen().into_iter().map(|s| s.path).collect()
    }
}

/// Read one HTTP/1.1 request, note it, answer it and close.
async fn answer<S: AsyncRead + AsyncWrite + Unpin>(
    stream: S,
    client_cert: Option<CertificateDer<'static>>,
    log: &Mutex<Vec<Seen>>,
    respond: &(dyn Fn(&str, SocketAddr) -> String + Send + Sync),
    addr: SocketAddr,
) {
    let mut conn = BufReader::new(stream);
    let mut line = String::new();
    if conn.read_line(&mut line).await.unwrap_or(0) == 0 {
        return;
    }
    let path = line
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_string();
    let mut len = 0usize;
    loop {
        let mut header = String::new();
        if conn.read_line(&mut header).await.unwrap_or(0) == 0 {
            return;
        }
        if header == "\r\n" {
            break;
        }
        if let Some(v) = header.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; len];
    if conn.read_exact(&mut body).await.is_err() {
        return;
    }
    log.lock().unwrap().push(Seen {
        path: path.clone(),
        client_cert,
    });
    let reply = respond(&path, addr);
    let stream = conn.get_mut();
    let _ = stream.write_all(reply.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// The PEM files of a test, in a temp dir.
struct Files(tempfile::TempDir);

impl Files {
    fn new() -> Self {
        Self(tempfile::tempdir().unwrap())
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }
}

/// Settings a failed attempt does not wait long on.
fn settings() -> HttpHandlerSettings {
    HttpHandlerSettings {
        timeout: Duration::from_secs(20),
        ..Default::default()
    }
}

fn tls(ca_file: Option<&Path>, identity: Option<(&Path, &Path)>) -> HttpTlsSettings {
    HttpTlsSettings {
        ca_file: ca_file.map(Path::to_path_buf),
        client_cert: identity.map(|(c, _)| c.to_path_buf()),
        client_key: identity.map(|(_, k)| k.to_path_buf()),
    }
}

async fn call(handler: &HttpHandler, url: &str) -> HandlerResult {
    let now = chrono::Utc::now();
    handler
        .run(Firing {
            job_id: "tls".into(),
            firing_id: format!("tls:{}", now.timestamp_millis()),
            scheduled_at: now,
            claimed_at: now,
            attempt: 1,
            params: json!({ "url": url, "body": {"hello": "tls"} }),
            node_id: "n".into(),
            cancel: Default::default(),
            report: Default::default(),
        })
        .await
}

/// The result is a failed attempt (retried), and its message.
fn failed_attempt(r: HandlerResult) -> String {
    match r {
        Err(HandlerError::Retry { message, .. }) => message,
        other => panic!("expected a failed attempt, got {other:?}"),
    }
}

#[tokio::test]
async fn a_private_ca_in_ca_file_is_trusted() {
    let ca = Ca::new("keyfire test CA");
    let server = ca.localhost();
    let receiver = Receiver::start(Some(server_config(&server, None)), ok()).await;
    let url = format!("https://127.0.0.1:{}/hook", receiver.port());
    let files = Files::new();
    // Several certificates in one file: another CA first, then the receiver's.
    let other = Ca::new("another CA");
    let ca_file = files.write("ca.pem", &format!("{}{}", other.pem(), ca.pem()));

    // Without it, the receiver's certificate is not trusted: a failed attempt, not a panic.
    let plain = HttpHandler::new(&settings()).unwrap();
    let message = failed_attempt(call(&plain, &url).await);
    assert!(message.contains("certificate"), "{message}");
    assert!(receiver.paths().is_empty());

    let trusting = HttpHandler::new(&HttpHandlerSettings {
        ca_file: Some(ca_file),
        ..settings()
    })
    .unwrap();
    call(&trusting, &url).await.unwrap();
    let seen = receiver.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/hook");
    assert_eq!(seen[0].client_cert, None);
}

#[tokio::test]
async fn a_client_certificate_is_presented_when_configured() {
    let server_ca = Ca::new("server CA");
    let client_ca = Ca::new("client CA");
    let server = server_ca.localhost();
    let client = client_ca.client();
    let receiver = Receiver::start(Some(server_config(&server, Some(&client_ca))), ok()).await;
    let url = format!("https://127.0.0.1:{}/hook", receiver.port());
    let files = Files::new();
    let ca_file = files.write("ca.pem", &server_ca.pem());
    let cert = files.write("client.pem", &client.cert_pem);
    let key = files.write("client.key", &client.key.serialize_pem());

    let anonymous = HttpHandler::new(&HttpHandlerSettings {
        ca_file: Some(ca_file.clone()),
        ..settings()
    })
    .unwrap();
    failed_attempt(call(&anonymous, &url).await);
    assert!(receiver.paths().is_empty(), "{:?}", receiver.seen());

    let identified = HttpHandler::new(&HttpHandlerSettings {
        ca_file: Some(ca_file),
        client_cert: Some(cert),
        client_key: Some(key),
        ..settings()
    })
    .unwrap();
    call(&identified, &url).await.unwrap();
    let seen = receiver.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].client_cert.as_ref(), Some(&client.cert));
}

#[tokio::test]
async fn per_host_settings_apply_to_their_host_on_every_hop_and_callback() {
    let server_ca = Ca::new("internal CA");
    let client_ca = Ca::new("internal client CA");
    let server = server_ca.localhost();
    let client = client_ca.client();
    let stranger = Ca::new("unrelated CA");
    // Answers `/to-ip` with a redirect to itself by address (no per-host settings there).
    let respond: Respond = Arc::new(|path, addr| match path {
        "/to-ip" => redirect(&format!("https://127.0.0.1:{}/by-ip", addr.port())),
        _ => "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok".into(),
    });
    let internal = Receiver::start(Some(server_config(&server, Some(&client_ca))), respond).await;
    let port = internal.port();
    // A plain receiver that sends every request on to the internal one by name.
    let front = Receiver::start(
        None,
        Arc::new(move |_, _| redirect(&format!("https://localhost:{port}/hop"))),
    )
    .await;
    let files = Files::new();
    let ca_file = files.write("ca.pem", &server_ca.pem());
    let stranger_file = files.write("stranger.pem", &stranger.pem());
    let cert = files.write("client.pem", &client.cert_pem);
    let key = files.write("client.key", &client.key.serialize_pem());

    let mut s = settings();
    // The most specific pattern wins: `localhost` over `*`, which trusts only a stranger.
    s.tls.insert("*".into(), tls(Some(&stranger_file), None));
    s.tls
        .insert("LocalHost".into(), tls(Some(&ca_file), Some((&cert, &key))));
    let handler = HttpHandler::new(&s).unwrap();

    call(&handler, &format!("https://localhost:{port}/named"))
        .await
        .unwrap();
    // The same receiver by address: no settings for that host, so neither its CA nor the
    // client certificate.
    let message = failed_attempt(call(&handler, &format!("https://127.0.0.1:{port}/by-ip")).await);
    assert!(message.contains("certificate"), "{message}");
    assert_eq!(internal.paths(), ["/named"]);

    // Each hop picks its host's settings: plain http to 127.0.0.1, then https to localhost...
    call(
        &handler,
        &format!("http://127.0.0.1:{}/start", front.port()),
    )
    .await
    .unwrap();
    assert_eq!(front.paths(), ["/start"]);
    assert_eq!(internal.paths(), ["/named", "/hop"]);
    // ...and from localhost on to 127.0.0.1, which they do not cover.
    failed_attempt(call(&handler, &format!("https://localhost:{port}/to-ip")).await);
    assert_eq!(internal.paths(), ["/named", "/hop", "/to-ip"]);

    // Callbacks go through the same clients.
    let now = chrono::Utc::now().timestamp_millis();
    let callback = |url: String| CallbackCall {
        id: "tls:1:succeeded".into(),
        job_id: "tls".into(),
        firing_id: "tls:1".into(),
        attempts: 1,
        target: Callback {
            url,
            secrets: vec![],
        },
        payload: "{}".into(),
        attempt: 1,
        now_ms: now,
    };
    CallbackSender::send(
        &handler,
        callback(format!("https://localhost:{port}/callback")),
    )
    .await
    .unwrap();
    assert!(
        CallbackSender::send(
            &handler,
            callback(format!("https://127.0.0.1:{port}/callback"))
        )
        .await
        .is_err()
    );
    let seen = internal.seen();
    assert_eq!(seen.last().unwrap().path, "/callback");
    assert_eq!(seen.iter().filter(|s| s.path == "/callback").count(), 1);
    assert!(
        seen.iter()
            .all(|s| s.client_cert.as_ref() == Some(&client.cert))
    );
}

#[test]
fn bad_tls_files_are_errors_naming_the_setting() {
    let ca = Ca::new("keyfire test CA");
    let client = ca.client();
    let other = ca.leaf(&["other.test"], ExtendedKeyUsagePurpose::ClientAuth);
    let files = Files::new();
    let ca_file = files.write("ca.pem", &ca.pem());
    let cert = files.write("client.pem", &client.cert_pem);
    let key = files.write("client.key", &client.key.serialize_pem());
    let other_key = files.write("other.key", &other.key.serialize_pem());
    let broken = files.write(
        "broken.pem",
        "-----BEGIN CERTIFICATE-----\nnot base64 at all!\n-----END CERTIFICATE-----\n",
    );
    let missing = files.path("missing.pem");
    let refused = |change: &dyn Fn(&mut HttpHandlerSettings)| {
        let mut s = settings();
        change(&mut s);
        match HttpHandler::new(&s) {
            Ok(_) => panic!("{s:?} was accepted"),
            Err(e) => e.to_string(),
        }
    };
    let expect = |err: String, wanted: &[&str]| {
        for w in wanted {
            assert!(err.contains(w), "{err:?} lacks {w:?}");
        }
        // One line.
        assert!(!err.contains('\n'), "{err:?}");
    };

    let missing_text = missing.display().to_string();
    expect(
        refused(&|s| s.ca_file = Some(missing.clone())),
        &[
            "handlers.http.ca_file: cannot read",
            missing_text.as_str(),
            "No such file or directory",
        ],
    );
    // A key where certificates belong.
    expect(
        refused(&|s| s.ca_file = Some(key.clone())),
        &["handlers.http.ca_file: no PEM certificate in", "client.key"],
    );
    expect(
        refused(&|s| s.ca_file = Some(broken.clone())),
        &["handlers.http.ca_file:", "broken.pem is not valid PEM"],
    );
    expect(
        refused(&|s| {
            s.tls.insert(
                "api.internal".into(),
                tls(Some(&ca_file), Some((&cert, &cert))),
            );
        }),
        &[
            "handlers.http.tls.\"api.internal\".client_key: no private key in",
            "client.pem",
        ],
    );
    expect(
        refused(&|s| {
            s.client_cert = Some(key.clone());
            s.client_key = Some(key.clone());
        }),
        &["handlers.http.client_cert: no PEM certificate in"],
    );
    expect(
        refused(&|s| {
            s.client_cert = Some(cert.clone());
            s.client_key = Some(other_key.clone());
        }),
        &[
            "handlers.http.client_key:",
            "other.key is not the key of the certificate in",
        ],
    );
    expect(
        refused(&|s| s.client_cert = Some(cert.clone())),
        &["handlers.http.client_key: must be set with handlers.http.client_cert"],
    );
    expect(
        refused(&|s| {
            s.tls
                .insert("*.internal".into(), tls(None, Some((&missing, &key))));
        }),
        &["handlers.http.tls.\"*.internal\".client_cert: cannot read"],
    );

    // The good files build; and the same errors come out of the registry a node runs.
    let mut good = settings();
    good.ca_file = Some(ca_file);
    good.client_cert = Some(cert);
    good.client_key = Some(key);
    HttpHandler::new(&good).unwrap();
    let mut bad = good.clone();
    bad.ca_file = Some(missing);
    let err = Registry::with_builtins_from(&HandlerSettings {
        http: bad.clone(),
        ..Default::default()
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("handlers.http.ca_file: cannot read"), "{err}");
    let mut node = Settings::default();
    node.handlers.http = bad;
    // The settings check passes (it does not read files); building the node's registry fails.
    node.check().unwrap();
    let err = Registry::for_node(&node).unwrap_err().to_string();
    assert!(err.contains("handlers.http.ca_file: cannot read"), "{err}");
}

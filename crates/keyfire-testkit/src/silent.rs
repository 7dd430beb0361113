//! An HTTP receiver that reads a request and never answers: a run that calls it stays in
//! flight until it is stopped, and the receiver tells when the request came in and when its
//! connection was closed.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// Accepts one connection on 127.0.0.1 and holds it, answering nothing.
pub struct SilentReceiver {
    /// Where it listens.
    pub addr: SocketAddr,
    events: mpsc::UnboundedReceiver<&'static str>,
}

impl SilentReceiver {
    /// Listening on a free port.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (events, seen) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 64 * 1024];
            let mut got = Vec::new();
            let mut told = false;
            loop {
                match sock.read(&mut buf).await {
                    Ok(0) | Err(_) => {
                        let _ = events.send("closed");
                        return;
                    }
                    Ok(n) => {
                        got.extend_from_slice(&buf[..n]);
                        if !told && got.windows(4).any(|w| w == b"\r\n\r\n") {
                            told = true;
                            let _ = events.send("request");
                        }
                    }
                }
            }
        });
        Self { addr, events: seen }
    }

    /// What it saw next, within 15 s: `"request"` (a request's head came in) or `"closed"`
    /// (the caller closed the connection); `None` once it has stopped.
    pub async fn next(&mut self) -> Option<&'static str> {
        tokio::time::timeout(Duration::from_secs(15), self.events.recv())
            .await
            .expect("the receiver heard nothing")
    }
}

//! A TCP proxy between one node and Redis that the harness controls: it passes traffic, drops
//! it (closes every connection and refuses new ones), or stalls it (holds every byte in both
//! directions, connections open), so a node can be cut off from Redis while it believes it
//! still owns its firings.

use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// What the proxy does with traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Forward both ways.
    Pass,
    /// Close every connection; accept and close new ones at once.
    Drop,
    /// Forward nothing, close nothing: the node's commands hang in flight.
    Stall,
}

/// A running proxy. Dropping it stops accepting and closes every connection.
#[derive(Debug)]
pub struct Proxy {
    port: u16,
    mode: watch::Sender<Mode>,
    stop: CancellationToken,
}

impl Proxy {
    /// Listen on a free local port and forward to `upstream` (`host:port`).
    pub async fn start(upstream: String) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let (mode, rx) = watch::channel(Mode::Pass);
        let stop = CancellationToken::new();
        let upstream = Arc::new(upstream);
        let token = stop.clone();
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    _ = token.cancelled() => return,
                    a = listener.accept() => a,
                };
                let Ok((down, _)) = accepted else { continue };
                if *rx.borrow() == Mode::Drop {
                    drop(down);
                    continue;
                }
                let (rx, token, upstream) = (rx.clone(), token.clone(), upstream.clone());
                tokio::spawn(async move {
                    let Ok(up) = TcpStream::connect(upstream.as_str()).await else {
                        return;
                    };
                    let _ = down.set_nodelay(true);
                    let _ = up.set_nodelay(true);
                    let (dr, dw) = down.into_split();
                    let (ur, uw) = up.into_split();
                    // Either direction ending (EOF, error, drop mode, stop) ends both.
                    tokio::select! {
                        _ = pipe(dr, uw, rx.clone()) => {}
                        _ = pipe(ur, dw, rx) => {}
                        _ = token.cancelled() => {}
                    }
                });
            }
        });
        Ok(Self { port, mode, stop })
    }

    /// The local port nodes connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:<port>/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Switch mode: `Drop` closes every open connection at once.
    pub fn set(&self, mode: Mode) {
        self.mode.send_replace(mode);
    }

    /// The current mode.
    pub fn mode(&self) -> Mode {
        *self.mode.borrow()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Wait until the mode is `Pass` (true) or `Drop` (false).
async fn passing(mode: &mut watch::Receiver<Mode>) -> bool {
    match mode.wait_for(|m| *m != Mode::Stall).await {
        Ok(m) => *m == Mode::Pass,
        Err(_) => false,
    }
}

/// Copy `from` to `to` while the mode allows; return when either side closes or on `Drop`.
async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut mode: watch::Receiver<Mode>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        if !passing(&mut mode).await {
            return;
        }
        // Read, but give up the read when the mode changes (stall: stop taking bytes, so they
        // pile up in the kernel buffers; drop: close).
        let n = tokio::select! {
            r = from.read(&mut buf) => match r {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            },
            _ = mode.changed() => continue,
        };
        // Bytes read before a stall are held until it ends.
        if !passing(&mut mode).await {
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn echo_server() -> String {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            loop {
                let Ok((mut s, _)) = l.accept().await else {
                    return;
                };
                tokio::spawn(async move {
                    let mut b = [0u8; 1024];
                    while let Ok(n) = s.read(&mut b).await {
                        if n == 0 || s.write_all(&b[..n]).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        addr
    }

    async fn roundtrip(s: &mut TcpStream, ms: u64) -> Option<Vec<u8>> {
        s.write_all(b"ping").await.ok()?;
        let mut b = [0u8; 4];
        match tokio::time::timeout(Duration::from_millis(ms), s.read_exact(&mut b)).await {
            Ok(Ok(_)) => Some(b.to_vec()),
            _ => None,
        }
    }

    #[tokio::test]
    async fn passes_stalls_and_drops() {
        let proxy = Proxy::start(echo_server().await).await.unwrap();
        let addr = format!("127.0.0.1:{}", proxy.port());
        let mut s = TcpStream::connect(&addr).await.unwrap();
        assert_eq!(roundtrip(&mut s, 1000).await.unwrap(), b"ping");
        proxy.set(Mode::Stall);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(roundtrip(&mut s, 200).await.is_none(), "stalled");
        proxy.set(Mode::Pass);
        // The stalled bytes arrive late, then the connection works again.
        let mut b = [0u8; 4];
        tokio::time::timeout(Duration::from_secs(1), s.read_exact(&mut b))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&b, b"ping");
        assert_eq!(roundtrip(&mut s, 1000).await.unwrap(), b"ping");
        proxy.set(Mode::Drop);
        let mut b = [0u8; 4];
        let r = tokio::time::timeout(Duration::from_secs(1), s.read(&mut b)).await;
        assert!(matches!(r, Ok(Ok(0)) | Ok(Err(_))), "closed on drop: {r:?}");
        let mut s2 = TcpStream::connect(&addr).await.unwrap();
        assert!(
            roundtrip(&mut s2, 200).await.is_none(),
            "refused while dropping"
        );
        proxy.set(Mode::Pass);
        let mut s3 = TcpStream::connect(&addr).await.unwrap();
        assert_eq!(roundtrip(&mut s3, 1000).await.unwrap(), b"ping");
    }
}

//! An HTTP receiver for callbacks: answers 200 to every request and keeps its path and JSON
//! body (null when the body is not JSON).

use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What an [`http_receiver`] got: (path, body) per request, in arrival order.
pub type Received = Arc<Mutex<Vec<(String, Value)>>>;

/// A receiver on a free loopback port: its base URL (`http://127.0.0.1:<port>`) and what it
/// got. It lives as long as the test's runtime.
pub async fn http_receiver() -> (String, Received) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen: Received = Arc::default();
    let kept = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let kept = kept.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                // Headers, then as many body bytes as content-length says.
                loop {
                    let n = sock.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).to_string();
                    let Some(end) = text.find("\r\n\r\n") else {
                        continue;
                    };
                    let len = text[..end]
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse::<usize>().ok())?
                        })
                        .unwrap_or(0);
                    if buf.len() < end + 4 + len {
                        continue;
                    }
                    let path = text.split_whitespace().nth(1).unwrap_or("").to_string();
                    let body =
                        serde_json::from_slice(&buf[end + 4..end + 4 + len]).unwrap_or(Value::Null);
                    kept.lock().unwrap().push((path, body));
                    let _ = sock
                        .write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                        )
                        .await;
                    return;
                }
            });
        }
    });
    (url, seen)
}

//! Credentials, TLS and URLs: the [`Access`] every client to a data server is built with (the
//! settings' ACL user and password, which override a URL's, and `redis.tls`), a client's
//! address, and URLs with their secrets redacted.

#[cfg(feature = "tls")]
use redis::TlsCertificates;
#[cfg(all(feature = "tls", any(feature = "cluster", feature = "sentinel")))]
use redis::TlsMode;
use redis::{Client, ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisError, RedisResult};

use crate::config::RedisSettings;
use crate::error::{Error, Result};

/// `host:port` of a client's server (the socket path for a unix socket).
pub fn client_addr(client: &Client) -> String {
    match client.get_connection_info().addr() {
        ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
            format!("{host}:{port}")
        }
        ConnectionAddr::Unix(path) => path.display().to_string(),
        other => format!("{other:?}"),
    }
}

/// A Redis URL fit for messages and logs: `redis://user:secret@host/0` →
/// `redis://user:***@host/0`. A URL that does not parse as a Redis URL keeps nothing of its
/// user part (`scheme://***@host/…`), so a malformed one cannot leak a secret either.
pub fn redact_url(url: &str) -> String {
    match redis::parse_redis_url(url) {
        Some(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        Some(_) => url.to_string(),
        None => {
            let Some((scheme, rest)) = url.split_once("://") else {
                return url.to_string();
            };
            let end = rest.find('/').unwrap_or(rest.len());
            let (authority, path) = rest.split_at(end);
            match authority.rsplit_once('@') {
                Some((_, host)) => format!("{scheme}://***@{host}{path}"),
                None => url.to_string(),
            }
        }
    }
}

/// A client for one data server at `target`, with the settings' credentials (which override
/// the URL's) and TLS, as the store's own connections have them.
pub fn data_client(target: impl IntoConnectionInfo, s: &RedisSettings) -> Result<Client> {
    let access = Access::from_settings(s)?;
    access
        .client(target)
        .map_err(|e| Error::redis_op("a client for a data server", e))
}

/// A client for a sentinel at `target`: the settings' TLS, credentials from its own URL (a
/// sentinel's credentials are not the data servers').
pub fn sentinel_client(target: impl IntoConnectionInfo, s: &RedisSettings) -> Result<Client> {
    let mut access = Access::from_settings(s)?;
    access.username = None;
    access.password = None;
    access
        .client(target)
        .map_err(|e| Error::redis_op("a client for a sentinel", e))
}

/// Credentials and TLS applied to every connection to a data server.
pub(super) struct Access {
    pub(super) username: Option<String>,
    pub(super) password: Option<String>,
    pub(super) tls: Option<Tls>,
    /// Sentinel or cluster addresses, for messages.
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    pub(super) seeds: Vec<String>,
}

pub(super) struct Tls {
    pub(super) insecure: bool,
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    ca_pem: Option<Vec<u8>>,
}

impl Access {
    pub(super) fn from_settings(s: &RedisSettings) -> Result<Self> {
        let tls = if s.tls {
            // redis-rs builds its rustls configuration on the process-wide crypto provider.
            // The caller chooses it by installing one before connecting; without one, ring
            // (the provider keyfire builds rustls with) is installed here, as rustls itself
            // would on first use.
            #[cfg(feature = "tls")]
            if rustls::crypto::CryptoProvider::get_default().is_none() {
                let _ = rustls::crypto::ring::default_provider().install_default();
            }
            let ca_pem = match &s.tls_ca {
                Some(path) => Some(std::fs::read(path).map_err(|e| {
                    Error::Config(format!("redis.tls_ca: cannot read {}: {e}", path.display()))
                })?),
                None => None,
            };
            Some(Tls {
                insecure: s.tls_insecure,
                ca_pem,
            })
        } else {
            None
        };
        Ok(Self {
            username: s.username.clone(),
            password: s.password.clone(),
            tls,
            seeds: s.nodes.iter().map(|n| redact_url(n)).collect(),
        })
    }

    #[cfg(feature = "tls")]
    pub(super) fn certs(&self) -> Option<TlsCertificates> {
        let tls = self.tls.as_ref()?;
        // Verification off: no roots needed (and a CA would turn verification back on).
        if tls.insecure {
            return None;
        }
        tls.ca_pem.as_ref().map(|pem| TlsCertificates {
            client_tls: None,
            root_cert: Some(pem.clone()),
        })
    }

    #[cfg(all(feature = "tls", any(feature = "cluster", feature = "sentinel")))]
    pub(super) fn tls_mode(&self) -> Option<TlsMode> {
        self.tls.as_ref().map(|t| {
            if t.insecure {
                TlsMode::Insecure
            } else {
                TlsMode::Secure
            }
        })
    }

    /// A client for `target` (a URL or a `ConnectionInfo`) with the credentials and TLS applied.
    pub(super) fn client(&self, target: impl IntoConnectionInfo) -> RedisResult<Client> {
        let info = self.apply(target.into_connection_info()?);
        #[cfg(feature = "tls")]
        if matches!(info.addr(), ConnectionAddr::TcpTls { .. })
            && let Some(certs) = self.certs()
        {
            return Client::build_with_tls(info, certs);
        }
        Client::open(info)
    }

    /// `info` with the settings' credentials and, when `redis.tls` is on, a TLS address.
    pub(super) fn apply(&self, info: ConnectionInfo) -> ConnectionInfo {
        let mut redis_info = info.redis_settings().clone();
        if let Some(user) = &self.username {
            redis_info = redis_info.set_username(user);
        }
        if let Some(password) = &self.password {
            redis_info = redis_info.set_password(password);
        }
        let addr = match (info.addr().clone(), &self.tls) {
            (ConnectionAddr::Tcp(host, port), Some(tls)) => ConnectionAddr::TcpTls {
                host,
                port,
                insecure: tls.insecure,
                tls_params: None,
            },
            (
                ConnectionAddr::TcpTls {
                    host,
                    port,
                    insecure,
                    ..
                },
                Some(tls),
            ) => ConnectionAddr::TcpTls {
                host,
                port,
                insecure: insecure || tls.insecure,
                tls_params: None,
            },
            (addr, _) => addr,
        };
        info.set_addr(addr).set_redis_settings(redis_info)
    }

    pub(super) fn connect_error(&self, target: &str, e: RedisError) -> Error {
        let who = match &self.username {
            Some(user) => format!(" as user '{user}'"),
            None if self.password.is_some() => " with redis.password".to_string(),
            None => String::new(),
        };
        let hint = match e.kind() {
            redis::ErrorKind::AuthenticationFailed => {
                " (check redis.username and redis.password, or the URL's credentials)"
            }
            _ if e.code() == Some("WRONGPASS") || e.code() == Some("NOAUTH") => {
                " (check redis.username and redis.password, or the URL's credentials)"
            }
            _ => "",
        };
        Error::redis_op(format!("connecting to {target}{who}{hint}"), e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_and_tls_apply_to_every_client() {
        let access = Access {
            username: Some("keyfire".into()),
            password: Some("secret".into()),
            tls: Some(Tls {
                insecure: true,
                ca_pem: None,
            }),
            seeds: Vec::new(),
        };
        let client = access.client("redis://other:pw@h:7000/2").unwrap();
        let info = client.get_connection_info();
        assert_eq!(info.redis_settings().username(), Some("keyfire"));
        assert_eq!(info.redis_settings().password(), Some("secret"));
        assert_eq!(info.redis_settings().db(), 2);
        assert!(matches!(
            info.addr(),
            ConnectionAddr::TcpTls {
                insecure: true,
                port: 7000,
                ..
            }
        ));
        let plain = Access {
            username: None,
            password: None,
            tls: None,
            seeds: Vec::new(),
        };
        let client = plain.client("redis://u:pw@h:7000").unwrap();
        assert_eq!(
            client.get_connection_info().redis_settings().password(),
            Some("pw")
        );
        assert!(matches!(
            client.get_connection_info().addr(),
            ConnectionAddr::Tcp(..)
        ));
        assert_eq!(client_addr(&client), "h:7000");
    }
}

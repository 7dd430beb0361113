//! `[handlers]`: the settings of the built-in handlers, `http` (allowed hosts, blocked
//! networks, signing secrets, TLS) and `command`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Settings of the built-in handlers.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HandlerSettings {
    /// The `http` handler.
    pub http: HttpHandlerSettings,
    /// The `command` handler.
    pub command: CommandHandlerSettings,
}

impl HandlerSettings {
    /// Refuse handler settings that cannot work, naming the setting.
    pub fn check(&self) -> Result<()> {
        self.http.check()?;
        self.command.check()
    }
}

/// The `http` handler: calls a URL, success on 2xx.
#[derive(Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpHandlerSettings {
    /// Hosts it may call: `example.com`, `*.example.com` (any subdomain), or `*` (any host).
    /// An empty list refuses every call.
    pub allowed_hosts: Vec<String>,
    /// Networks it never connects to, judged on the address a name resolves to (at connect
    /// time, on every redirect), so DNS rebinding and redirects cannot get around it. CIDRs or
    /// single addresses. The default refuses link-local addresses and the cloud metadata
    /// services; private ranges are allowed (add `10.0.0.0/8` etc. to refuse them, or set
    /// `[]` to allow everything).
    pub blocked_networks: Vec<String>,
    /// Refuse calls to the API this process serves, at [`HttpHandlerSettings::own_api`]: its
    /// address and port, or, when it listens on every interface, any local address at that
    /// port.
    pub block_own_api: bool,
    /// The `host:port` of the API this process serves, which `block_own_api` refuses to call.
    /// Not read from configuration: the `keyfire` server sets it from `api.listen` when its
    /// API is enabled; a service that serves an API of its own may set it. None (the
    /// default): no address is refused for being the process's own.
    #[serde(skip)]
    pub own_api: Option<String>,
    /// Signing secrets by target host (patterns as in `allowed_hosts`; the most specific
    /// matching pattern wins): `"orders.internal" = ["whsec_…"]`. Two secrets sign with both
    /// (a rotation). A job's own `signing_secrets` win over these.
    pub signing_secrets: BTreeMap<String, Vec<String>>,
    /// Timeout of one call when the job's params give none.
    #[serde(with = "crate::job::duration_serde")]
    pub timeout: Duration,
    /// Longest timeout a job's params may ask for.
    #[serde(with = "crate::job::duration_serde")]
    pub max_timeout: Duration,
    /// Bytes of a failed response's body kept in the run's error (and of any response's
    /// body sent in a callback).
    pub max_error_body_bytes: usize,
    /// A PEM file of CA certificates trusted for `https://` on top of the default roots (the
    /// system's CA store, or the bundled Mozilla roots when the system has none): an internal
    /// CA.
    pub ca_file: Option<PathBuf>,
    /// A PEM file of the client certificate (then its chain) presented to servers that ask
    /// for one (mutual TLS). Needs `client_key`.
    pub client_cert: Option<PathBuf>,
    /// A PEM file of `client_cert`'s private key (PKCS#8, PKCS#1 or SEC1).
    pub client_key: Option<PathBuf>,
    /// TLS by target host (patterns as in `allowed_hosts`; the most specific matching pattern
    /// wins): `[handlers.http.tls."api.internal"]` with `ca_file` (more roots for those hosts,
    /// on top of `ca_file` above) and/or `client_cert` + `client_key` (the identity presented
    /// to those hosts instead of the one above).
    pub tls: BTreeMap<String, HttpTlsSettings>,
}

/// The TLS of the `http` handler's connections to the hosts of one
/// [`HttpHandlerSettings::tls`] pattern.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpTlsSettings {
    /// A PEM file of CA certificates these hosts are also trusted by.
    pub ca_file: Option<PathBuf>,
    /// A PEM file of the client certificate (then its chain) presented to these hosts.
    pub client_cert: Option<PathBuf>,
    /// A PEM file of `client_cert`'s private key.
    pub client_key: Option<PathBuf>,
}

impl HttpTlsSettings {
    /// Refuse a setting that cannot work, without reading the files (the handler reads them
    /// when it is built, at node start): `name` is `handlers.http` or
    /// `handlers.http.tls."<pattern>"`.
    fn check(&self, name: &str) -> Result<()> {
        for (key, path) in [
            ("ca_file", &self.ca_file),
            ("client_cert", &self.client_cert),
            ("client_key", &self.client_key),
        ] {
            if path.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
                return Err(Error::Config(format!(
                    "{name}.{key}: is empty; give the path of a PEM file, or leave it out"
                )));
            }
        }
        match (&self.client_cert, &self.client_key) {
            (Some(_), None) => Err(Error::Config(format!(
                "{name}.client_key: must be set with {name}.client_cert (the certificate's private key)"
            ))),
            (None, Some(_)) => Err(Error::Config(format!(
                "{name}.client_cert: must be set with {name}.client_key (the key's certificate)"
            ))),
            _ => Ok(()),
        }
    }
}

/// What [`HttpHandlerSettings::blocked_networks`] holds by default: link-local addresses
/// (where AWS, GCP, Azure and Oracle serve instance metadata at 169.254.169.254, and ECS task
/// credentials at 169.254.170.2), AWS's IPv6 metadata address, Alibaba Cloud's metadata
/// address and Oracle Cloud Classic's.
pub const DEFAULT_BLOCKED_NETWORKS: &[&str] = &[
    "169.254.0.0/16",
    "fe80::/10",
    "fd00:ec2::254/128",
    "100.100.100.200/32",
    "192.0.0.192/32",
];

impl Default for HttpHandlerSettings {
    fn default() -> Self {
        Self {
            allowed_hosts: vec!["*".into()],
            blocked_networks: DEFAULT_BLOCKED_NETWORKS
                .iter()
                .map(|s| s.to_string())
                .collect(),
            block_own_api: true,
            own_api: None,
            signing_secrets: BTreeMap::new(),
            timeout: Duration::from_secs(30),
            max_timeout: Duration::from_secs(300),
            max_error_body_bytes: 1024,
            ca_file: None,
            client_cert: None,
            client_key: None,
            tls: BTreeMap::new(),
        }
    }
}

/// Secrets never appear in debug output (logs), only their fingerprints.
impl std::fmt::Debug for HttpHandlerSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secrets: BTreeMap<&String, Vec<String>> = self
            .signing_secrets
            .iter()
            .map(|(host, list)| {
                let shown = list.iter().map(|s| crate::webhook::redact(s)).collect();
                (host, shown)
            })
            .collect();
        f.debug_struct("HttpHandlerSettings")
            .field("allowed_hosts", &self.allowed_hosts)
            .field("blocked_networks", &self.blocked_networks)
            .field("block_own_api", &self.block_own_api)
            .field("own_api", &self.own_api)
            .field("signing_secrets", &secrets)
            .field("timeout", &self.timeout)
            .field("max_timeout", &self.max_timeout)
            .field("max_error_body_bytes", &self.max_error_body_bytes)
            // Paths only: the key file's contents are never read here.
            .field("ca_file", &self.ca_file)
            .field("client_cert", &self.client_cert)
            .field("client_key", &self.client_key)
            .field("tls", &self.tls)
            .finish()
    }
}

impl HttpHandlerSettings {
    /// The parsed [`HttpHandlerSettings::blocked_networks`]; the error names the entry.
    pub fn blocked_nets(&self) -> Result<Vec<ipnet::IpNet>> {
        self.blocked_networks
            .iter()
            .map(|text| {
                let t = text.trim();
                t.parse::<ipnet::IpNet>()
                    .or_else(|_| t.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                    .map_err(|_| {
                        Error::Config(format!(
                            "handlers.http.blocked_networks: '{text}' is not a network such as 169.254.0.0/16 or an address"
                        ))
                    })
            })
            .collect()
    }

    /// The TLS settings for every host (`ca_file`, `client_cert`, `client_key`).
    pub fn default_tls(&self) -> HttpTlsSettings {
        HttpTlsSettings {
            ca_file: self.ca_file.clone(),
            client_cert: self.client_cert.clone(),
            client_key: self.client_key.clone(),
        }
    }

    /// Refuse settings that cannot work, naming the setting. The TLS files are read when the
    /// handler is built (node start), not here: settings are also loaded by commands that
    /// run elsewhere (`keyfire` against a remote API), where those files need not exist.
    pub fn check(&self) -> Result<()> {
        let bad = |name: &str, why: String| Err(Error::Config(format!("{name}: {why}")));
        if self.timeout.is_zero() {
            return bad("handlers.http.timeout", "must be greater than zero".into());
        }
        if self.max_timeout < self.timeout {
            return bad(
                "handlers.http.max_timeout",
                "must be at least handlers.http.timeout".into(),
            );
        }
        self.blocked_nets()?;
        for (host, secrets) in &self.signing_secrets {
            let name = host_setting("handlers.http.signing_secrets", host)?;
            if secrets.is_empty() || secrets.len() > crate::webhook::MAX_ACTIVE_SECRETS {
                return bad(
                    &name,
                    "give one secret, or two while rotating (both sign)".into(),
                );
            }
            for (i, s) in secrets.iter().enumerate() {
                if let Err(why) = crate::webhook::SigningSecret::parse(s) {
                    return bad(&format!("{name}[{i}]"), why);
                }
            }
        }
        self.default_tls().check("handlers.http")?;
        for (host, tls) in &self.tls {
            let name = host_setting("handlers.http.tls", host)?;
            if *tls == HttpTlsSettings::default() {
                return bad(&name, "set ca_file, or client_cert and client_key".into());
            }
            tls.check(&name)?;
        }
        Ok(())
    }
}

/// The name of the setting `map."<host>"` of a map keyed by host pattern; refused when the
/// key names no host.
fn host_setting(map: &str, host: &str) -> Result<String> {
    let name = format!("{map}.\"{host}\"");
    if host.trim().is_empty() {
        return Err(Error::Config(format!(
            "{name}: name a host pattern (example.com, *.example.com or *)"
        )));
    }
    Ok(name)
}

/// The `command` handler: runs a program (no shell). Off unless enabled.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CommandHandlerSettings {
    /// Register the `command` handler on this node.
    pub enabled: bool,
    /// Programs it may run, exactly as jobs name them (`/usr/bin/backup`), or `*` for any.
    pub allowed_programs: Vec<String>,
    /// Timeout of one run when the job's params give none.
    #[serde(with = "crate::job::duration_serde")]
    pub timeout: Duration,
    /// Bytes of output (stdout, then stderr) kept in a failed run's error.
    pub max_output_bytes: usize,
}

impl Default for CommandHandlerSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            allowed_programs: Vec::new(),
            timeout: Duration::from_secs(300),
            max_output_bytes: 4096,
        }
    }
}

impl CommandHandlerSettings {
    /// Refuse `command` handler settings that cannot work, naming the setting.
    pub fn check(&self) -> Result<()> {
        let bad = |name: &str, why: &str| Err(Error::Config(format!("{name}: {why}")));
        if self.timeout.is_zero() {
            return bad("handlers.command.timeout", "must be greater than zero");
        }
        if self.enabled && self.allowed_programs.is_empty() {
            return bad(
                "handlers.command.allowed_programs",
                "name at least one program (or \"*\") when handlers.command.enabled is true",
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Settings;
    use crate::config::tests::refusal;

    #[test]
    fn http_handler_settings_are_checked_by_name() {
        let refused = |f: &dyn Fn(&mut HttpHandlerSettings)| refusal(|s| f(&mut s.handlers.http));
        let err = refused(&|h| h.blocked_networks.push("10.0.0.0/33".into()));
        assert!(
            err.contains("handlers.http.blocked_networks") && err.contains("10.0.0.0/33"),
            "{err}"
        );
        let err = refused(&|h| {
            h.signing_secrets
                .insert("api.example.com".into(), vec!["nope".into()]);
        });
        assert!(
            err.contains("handlers.http.signing_secrets.\"api.example.com\"[0]"),
            "{err}"
        );
        let err = refused(&|h| {
            h.signing_secrets.insert("*".into(), vec![]);
        });
        assert!(err.contains("handlers.http.signing_secrets"), "{err}");
        let err = refused(&|h| h.max_timeout = Duration::from_secs(1));
        assert!(err.contains("handlers.http.max_timeout"), "{err}");
        let err = refused(&|h| h.timeout = Duration::ZERO);
        assert!(err.contains("handlers.http.timeout"), "{err}");
    }

    #[test]
    fn signing_secrets_are_never_debug_printed() {
        let secret = crate::webhook::SigningSecret::from_key(vec![1u8; 32]).expose();
        let mut s = Settings::default();
        s.handlers
            .http
            .signing_secrets
            .insert("*".into(), vec![secret.clone()]);
        s.handlers.http.blocked_networks.push("10.0.0.1".into());
        s.check().unwrap();
        let shown = format!("{s:?}");
        let b64 = secret.trim_start_matches("whsec_");
        assert!(
            !shown.contains(b64) && shown.contains("redacted"),
            "{shown}"
        );
    }

    #[test]
    fn http_tls_settings_are_checked_by_name() {
        let refused = |f: &dyn Fn(&mut HttpHandlerSettings)| refusal(|s| f(&mut s.handlers.http));
        let err = refused(&|h| h.client_cert = Some("/c.pem".into()));
        assert!(
            err.contains("handlers.http.client_key: must be set"),
            "{err}"
        );
        let err = refused(&|h| h.client_key = Some("/k.pem".into()));
        assert!(
            err.contains("handlers.http.client_cert: must be set"),
            "{err}"
        );
        let err = refused(&|h| h.ca_file = Some("".into()));
        assert!(err.contains("handlers.http.ca_file: is empty"), "{err}");
        let err = refused(&|h| {
            h.tls.insert(
                "api.internal".into(),
                HttpTlsSettings {
                    client_cert: Some("/c.pem".into()),
                    ..Default::default()
                },
            );
        });
        assert!(
            err.contains("handlers.http.tls.\"api.internal\".client_key: must be set"),
            "{err}"
        );
        let err = refused(&|h| {
            h.tls
                .insert("api.internal".into(), HttpTlsSettings::default());
        });
        assert!(
            err.contains("handlers.http.tls.\"api.internal\": set ca_file"),
            "{err}"
        );
        let err = refused(&|h| {
            let tls = HttpTlsSettings {
                ca_file: Some("/ca.pem".into()),
                ..Default::default()
            };
            h.tls.insert(" ".into(), tls);
        });
        assert!(err.contains("name a host pattern"), "{err}");

        let mut s = Settings::default();
        s.handlers.http.ca_file = Some("/nowhere/ca.pem".into());
        s.handlers.http.client_cert = Some("/nowhere/c.pem".into());
        s.handlers.http.client_key = Some("/nowhere/k.pem".into());
        // The files are not read by the check (a remote CLI checks the same settings).
        s.check().unwrap();
    }
}

//! The `http` handler's TLS: the roots it trusts and the client certificate it presents, for
//! every host (`handlers.http.ca_file`, `client_cert`, `client_key`) and per host pattern
//! (`handlers.http.tls."<pattern>"`).
//!
//! reqwest's own TLS setup verifies through the platform verifier, which refuses to build a
//! client when the system has no CA store (a slim container image has no `ca-certificates`).
//! So the handler builds its rustls configuration itself: the system's CA store when it holds
//! a usable certificate, else the bundled Mozilla roots (`webpki-roots`) with one warning;
//! plus the certificates of `ca_file`. The files are read here, at node start, and every
//! problem is an error naming the setting.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore};

use crate::config::{HttpHandlerSettings, HttpTlsSettings};
use crate::error::{Error, Result};

/// The roots every `https://` connection trusts before `ca_file` adds its own.
#[derive(Debug, Clone)]
pub(super) struct DefaultRoots {
    pub(super) store: RootCertStore,
    /// Why the system's store was not used (the bundled Mozilla roots were), when it was not.
    pub(super) warning: Option<String>,
}

impl DefaultRoots {
    /// The roots given what the system store yielded: its certificates when any is usable,
    /// else the bundled Mozilla roots and a warning naming what happened (`errors`: the
    /// loader's complaints).
    pub(super) fn from_system(certs: Vec<CertificateDer<'static>>, errors: &[String]) -> Self {
        let found = certs.len();
        let mut store = RootCertStore::empty();
        let (added, _) = store.add_parsable_certificates(certs);
        if added > 0 {
            return Self {
                store,
                warning: None,
            };
        }
        let why = if found > 0 {
            format!("none of its {found} certificates parses")
        } else if errors.is_empty() {
            "it holds no certificate".to_string()
        } else {
            // A missing directory per entry of the search path: a few say enough.
            let shown: Vec<&str> = errors.iter().take(3).map(String::as_str).collect();
            let more = errors.len().saturating_sub(shown.len());
            let more = if more > 0 {
                format!("; {more} more")
            } else {
                String::new()
            };
            format!("{}{more}", shown.join("; "))
        };
        store.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        Self {
            store,
            warning: Some(format!(
                "the system CA store gave no usable certificate ({why}): the http handler \
                 trusts the {} bundled Mozilla roots instead, plus handlers.http.ca_file; \
                 install the system's CA certificates (ca-certificates) or point SSL_CERT_FILE \
                 at a PEM bundle to use those",
                webpki_roots::TLS_SERVER_ROOTS.len()
            )),
        }
    }

    /// The system's roots, read once per process (so the warning, if any, is logged once).
    pub(super) fn system() -> &'static Self {
        static ROOTS: OnceLock<DefaultRoots> = OnceLock::new();
        ROOTS.get_or_init(|| {
            let found = rustls_native_certs::load_native_certs();
            let errors: Vec<String> = found.errors.iter().map(ToString::to_string).collect();
            let roots = Self::from_system(found.certs, &errors);
            match &roots.warning {
                Some(warning) => tracing::warn!("{warning}"),
                None => tracing::debug!(
                    roots = roots.store.len(),
                    "http handler: trusting the system CA store"
                ),
            }
            roots
        })
    }
}

/// The crypto provider keyfire's TLS uses when the caller gives none: the process default
/// if the process installed one (`CryptoProvider::install_default`), else rustls's ring
/// provider, used by keyfire's own configurations only and never installed process-wide.
pub(super) fn default_provider() -> Arc<CryptoProvider> {
    CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()))
}

fn bad(setting: &str, why: String) -> Error {
    Error::Config(format!("{setting}: {why}"))
}

fn read(setting: &str, path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| bad(setting, format!("cannot read {}: {e}", path.display())))
}

/// The certificates of a PEM file (other sections, such as a key, are skipped); at least one.
fn certificates(setting: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>> {
    let text = read(setting, path)?;
    let certs = CertificateDer::pem_slice_iter(&text)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| bad(setting, format!("{} is not valid PEM: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(bad(
            setting,
            format!(
                "no PEM certificate in {} (-----BEGIN CERTIFICATE-----)",
                path.display()
            ),
        ));
    }
    Ok(certs)
}

/// A client certificate chain and its key.
struct Identity {
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

impl Clone for Identity {
    fn clone(&self) -> Self {
        Self {
            chain: self.chain.clone(),
            key: self.key.clone_key(),
        }
    }
}

/// The TLS files of one place in the settings (`handlers.http` or
/// `handlers.http.tls."<pattern>"`), read and checked.
#[derive(Clone, Default)]
struct Material {
    roots: Vec<CertificateDer<'static>>,
    identity: Option<Identity>,
}

impl Material {
    /// Read the files `tls` names; `name` is where it sits in the settings.
    fn load(name: &str, tls: &HttpTlsSettings, provider: &CryptoProvider) -> Result<Self> {
        let mut out = Self::default();
        if let Some(path) = &tls.ca_file {
            let setting = format!("{name}.ca_file");
            let certs = certificates(&setting, path)?;
            // Refused now rather than ignored: a CA file that trusts nothing is a mistake.
            let mut check = RootCertStore::empty();
            for (i, cert) in certs.iter().enumerate() {
                check.add(cert.clone()).map_err(|e| {
                    bad(
                        &setting,
                        format!(
                            "certificate {} in {} is not usable as a CA: {e}",
                            i + 1,
                            path.display()
                        ),
                    )
                })?;
            }
            out.roots = certs;
        }
        match (&tls.client_cert, &tls.client_key) {
            (Some(cert_path), Some(key_path)) => {
                let cert_setting = format!("{name}.client_cert");
                let key_setting = format!("{name}.client_key");
                let chain = certificates(&cert_setting, cert_path)?;
                let text = read(&key_setting, key_path)?;
                let key = PrivateKeyDer::from_pem_slice(&text).map_err(|e| match e {
                    pem::Error::NoItemsFound => bad(
                        &key_setting,
                        format!(
                            "no private key in {} (PEM: PRIVATE KEY, RSA PRIVATE KEY or EC \
                             PRIVATE KEY)",
                            key_path.display()
                        ),
                    ),
                    e => bad(
                        &key_setting,
                        format!("{} is not valid PEM: {e}", key_path.display()),
                    ),
                })?;
                let signer = provider
                    .key_provider
                    .load_private_key(key.clone_key())
                    .map_err(|e| {
                        bad(
                            &key_setting,
                            format!("the key in {} is not usable: {e}", key_path.display()),
                        )
                    })?;
                match rustls::sign::CertifiedKey::new(chain.clone(), signer).keys_match() {
                    // A key that cannot tell its public half is taken on trust, as rustls does.
                    Ok(())
                    | Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => {}
                    Err(rustls::Error::InconsistentKeys(_)) => {
                        return Err(bad(
                            &key_setting,
                            format!(
                                "the key in {} is not the key of the certificate in {}",
                                key_path.display(),
                                cert_path.display()
                            ),
                        ));
                    }
                    Err(e) => {
                        return Err(bad(
                            &cert_setting,
                            format!(
                                "the first certificate in {} is not usable: {e}",
                                cert_path.display()
                            ),
                        ));
                    }
                }
                out.identity = Some(Identity { chain, key });
            }
            // `HttpHandlerSettings::check` names the missing half; built without that check,
            // say it here too.
            (Some(_), None) => {
                return Err(bad(
                    &format!("{name}.client_key"),
                    format!("must be set with {name}.client_cert"),
                ));
            }
            (None, Some(_)) => {
                return Err(bad(
                    &format!("{name}.client_cert"),
                    format!("must be set with {name}.client_key"),
                ));
            }
            (None, None) => {}
        }
        Ok(out)
    }
}

/// A rustls client configuration and where it sits in the settings (for errors).
pub(super) struct Profile {
    pub(super) setting: String,
    pub(super) config: ClientConfig,
}

/// The TLS configurations of a handler: one for every host, and one per
/// `handlers.http.tls` pattern (lower-cased, most specific first).
pub(super) struct Profiles {
    pub(super) default: Profile,
    pub(super) by_host: Vec<(String, Profile)>,
}

impl Profiles {
    /// Read the TLS files `settings` names and make the configurations, trusting `roots` and
    /// the `ca_file`s.
    pub(super) fn load(
        settings: &HttpHandlerSettings,
        roots: &DefaultRoots,
        provider: &Arc<CryptoProvider>,
    ) -> Result<Self> {
        let top = Material::load("handlers.http", &settings.default_tls(), provider)?;
        let default = Profile::new("handlers.http".into(), roots, &top, None, provider)?;
        let mut by_host = Vec::with_capacity(settings.tls.len());
        for (pattern, tls) in &settings.tls {
            let setting = format!("handlers.http.tls.\"{pattern}\"");
            let own = Material::load(&setting, tls, provider)?;
            let profile = Profile::new(setting, roots, &top, Some(&own), provider)?;
            by_host.push((pattern.trim().to_ascii_lowercase(), profile));
        }
        super::most_specific_first(&mut by_host);
        Ok(Self { default, by_host })
    }
}

impl Profile {
    /// Trust `roots`, `top`'s CA file and `own`'s; present `own`'s identity, else `top`'s.
    fn new(
        setting: String,
        roots: &DefaultRoots,
        top: &Material,
        own: Option<&Material>,
        provider: &Arc<CryptoProvider>,
    ) -> Result<Self> {
        let fail = |e: rustls::Error| bad(&setting, format!("TLS configuration refused: {e}"));
        let mut store = roots.store.clone();
        for cert in top.roots.iter().chain(own.iter().flat_map(|m| &m.roots)) {
            // Checked when the file was read.
            store.add(cert.clone()).map_err(fail)?;
        }
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(fail)?
            .with_root_certificates(store);
        let identity = own
            .and_then(|m| m.identity.as_ref())
            .or(top.identity.as_ref());
        let mut config = match identity.cloned() {
            Some(id) => builder
                .with_client_auth_cert(id.chain, id.key)
                .map_err(fail)?,
            None => builder.with_no_client_auth(),
        };
        // What reqwest offers itself when built without HTTP/2.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self { setting, config })
    }
}

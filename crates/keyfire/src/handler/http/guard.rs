//! The host rules (`handlers.http.allowed_hosts` and the host patterns of other settings) and
//! the guard against server-side request forgery: the networks `handlers.http.blocked_networks`
//! refuses, the node's own API (`handlers.http.block_own_api`), and the resolver that drops
//! what the guard refuses, so the check is made on the addresses actually connected to.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use ipnet::IpNet;

use crate::config::HttpHandlerSettings;

/// Whether `host` matches one of `allowed`: an exact name, `*.suffix` (any subdomain, not the
/// bare suffix), or `*`. Names compare case-insensitively.
pub fn host_allowed(allowed: &[String], host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    allowed.iter().any(|pattern| {
        let pattern = pattern.trim().to_ascii_lowercase();
        if pattern == "*" {
            true
        } else if let Some(suffix) = pattern.strip_prefix("*.") {
            host.len() > suffix.len() + 1
                && host.ends_with(suffix)
                && host[..host.len() - suffix.len()].ends_with('.')
        } else {
            // Bracketed IPv6 literals appear without brackets in `Url::host_str`.
            pattern.trim_start_matches('[').trim_end_matches(']') == host
        }
    })
}

/// Sort `(pattern, value)` pairs so that the first whose pattern matches a host (by
/// [`host_allowed`]) is the most specific: exact names, then longer suffixes, `*` last.
pub(super) fn most_specific_first<T>(patterns: &mut [(String, T)]) {
    patterns.sort_by_key(|(p, _)| (p == "*", p.starts_with("*."), std::cmp::Reverse(p.len())));
}

/// The entry of the first pattern (in [`most_specific_first`] order) that matches `host`.
pub(super) fn for_host<'a, T>(patterns: &'a [(String, T)], host: &str) -> Option<&'a T> {
    patterns
        .iter()
        .find(|(pattern, _)| host_allowed(std::slice::from_ref(pattern), host))
        .map(|(_, v)| v)
}

/// An IP literal host (`1.2.3.4`, `[::1]`), as `Url::host_str` gives it.
pub(super) fn ip_literal(host: &str) -> Option<IpAddr> {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

/// What the handler refuses to connect to.
#[derive(Debug)]
pub(super) struct Guard {
    blocked: Vec<IpNet>,
    pub(super) own: Option<OwnApi>,
}

/// The node's own API address, when `handlers.http.block_own_api` is on.
#[derive(Debug)]
pub(super) struct OwnApi {
    pub(super) port: u16,
    ips: Vec<IpAddr>,
    /// It listens on every interface (`0.0.0.0`, `::`).
    any_local: bool,
}

impl Guard {
    pub(super) fn new(settings: &HttpHandlerSettings, own_api: Option<&str>) -> Self {
        Self {
            // `Settings::check` refused bad entries; one that slipped through blocks nothing.
            blocked: settings.blocked_nets().unwrap_or_default(),
            own: own_api
                .filter(|_| settings.block_own_api)
                .and_then(OwnApi::from_listen),
        }
    }

    /// Why `ip` may not be connected to (`None`: it may). `own_port`: the connection goes to
    /// the port of the node's own API.
    pub(super) fn refuse(&self, ip: IpAddr, own_port: bool) -> Option<String> {
        let ip = ip.to_canonical();
        for candidate in [Some(ip), embedded_v4(ip).map(IpAddr::V4)]
            .into_iter()
            .flatten()
        {
            if let Some(net) = self.blocked.iter().find(|n| n.contains(&candidate)) {
                return Some(format!(
                    "address {ip} is in {net}, which handlers.http.blocked_networks refuses"
                ));
            }
        }
        if own_port
            && let Some(own) = &self.own
            && own.is_own(ip)
        {
            return Some(format!(
                "address {ip} port {} is this node's own API (handlers.http.block_own_api)",
                own.port
            ));
        }
        None
    }
}

/// The IPv4 address inside an IPv6 one that reaches it: NAT64 (`64:ff9b::/96`), 6to4
/// (`2002::/16`) and IPv4-compatible (`::a.b.c.d`). IPv4-mapped addresses are made IPv4 by
/// `to_canonical` already.
fn embedded_v4(ip: IpAddr) -> Option<Ipv4Addr> {
    let IpAddr::V6(v6) = ip else { return None };
    let s = v6.segments();
    let o = v6.octets();
    if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0; 4] {
        return Some(Ipv4Addr::new(o[12], o[13], o[14], o[15]));
    }
    if s[0] == 0x2002 {
        return Some(Ipv4Addr::new(o[2], o[3], o[4], o[5]));
    }
    if s[..6] == [0; 6] && !v6.is_loopback() && !v6.is_unspecified() {
        return Some(Ipv4Addr::new(o[12], o[13], o[14], o[15]));
    }
    None
}

impl OwnApi {
    fn from_listen(listen: &str) -> Option<Self> {
        use std::net::ToSocketAddrs;
        let addrs: Vec<SocketAddr> = listen.to_socket_addrs().ok()?.collect();
        let port = addrs.first()?.port();
        Some(Self {
            port,
            ips: addrs.iter().map(|a| a.ip().to_canonical()).collect(),
            any_local: addrs.iter().any(|a| a.ip().is_unspecified()),
        })
    }

    fn is_own(&self, ip: IpAddr) -> bool {
        // Connecting to 0.0.0.0 or :: reaches this host.
        ip.is_unspecified()
            || self.ips.contains(&ip)
            || (ip.is_loopback() && (self.any_local || self.ips.iter().any(IpAddr::is_loopback)))
            // Listening on every interface: any address of this host, and a socket binds only
            // to an address of this host.
            || (self.any_local && std::net::UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok())
    }
}

/// A connection refused by the guard (found in a `reqwest` error's sources).
#[derive(Debug)]
pub(super) struct Blocked(String);

impl std::fmt::Display for Blocked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Blocked {}

/// Resolves names and drops the addresses the guard refuses, so the check is made on the very
/// addresses the connection uses.
pub(super) struct GuardedResolver {
    pub(super) guard: Arc<Guard>,
    pub(super) own_port: bool,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let guard = self.guard.clone();
        let own_port = self.own_port;
        let host = name.as_str().to_string();
        Box::pin(async move {
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let mut refused = None;
            let allowed: Vec<SocketAddr> = found
                .into_iter()
                .filter(|a| match guard.refuse(a.ip(), own_port) {
                    None => true,
                    Some(why) => {
                        refused.get_or_insert(why);
                        false
                    }
                })
                .collect();
            match (allowed.is_empty(), refused) {
                (true, Some(why)) => Err(Box::new(Blocked(format!("'{host}' resolves to {why}")))
                    as Box<dyn std::error::Error + Send + Sync>),
                _ => Ok(Box::new(allowed.into_iter()) as reqwest::dns::Addrs),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_match_exactly_by_suffix_or_any() {
        let allowed: Vec<String> = ["api.example.com", "*.internal.test", "[::1]"]
            .map(String::from)
            .to_vec();
        assert!(host_allowed(&allowed, "api.example.com"));
        assert!(host_allowed(&allowed, "API.Example.com."));
        assert!(!host_allowed(&allowed, "example.com"));
        assert!(!host_allowed(&allowed, "evilapi.example.com"));
        assert!(host_allowed(&allowed, "a.internal.test"));
        assert!(host_allowed(&allowed, "a.b.internal.test"));
        assert!(!host_allowed(&allowed, "internal.test"));
        assert!(!host_allowed(&allowed, "xinternal.test"));
        assert!(host_allowed(&allowed, "::1"));
        assert!(host_allowed(&["*".to_string()], "anything"));
        assert!(!host_allowed(&[], "anything"));
    }

    fn guard(extra: &[&str], own: Option<&str>) -> Guard {
        let mut s = HttpHandlerSettings::default();
        s.blocked_networks
            .extend(extra.iter().map(|e| e.to_string()));
        Guard::new(&s, own)
    }

    #[test]
    fn the_guard_refuses_metadata_in_every_spelling() {
        let g = guard(&[], None);
        for ip in [
            "169.254.169.254",
            "169.254.170.2",
            "fe80::1",
            "fd00:ec2::254",
            "100.100.100.200",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "2002:a9fe:a9fe::1",
            "::169.254.169.254",
        ] {
            let why = g.refuse(ip.parse().unwrap(), false);
            assert!(why.is_some_and(|w| w.contains("blocked_networks")), "{ip}");
        }
        // Private ranges and loopback stay allowed by default.
        for ip in [
            "10.1.2.3",
            "192.168.1.1",
            "172.16.0.1",
            "127.0.0.1",
            "::1",
            "fd00::1",
        ] {
            assert_eq!(g.refuse(ip.parse().unwrap(), false), None, "{ip}");
        }
        let g = guard(&["10.0.0.0/8"], None);
        assert!(g.refuse("10.1.2.3".parse().unwrap(), false).is_some());
    }

    #[test]
    fn the_guard_knows_the_nodes_own_api() {
        let g = guard(&[], Some("127.0.0.1:8080"));
        assert_eq!(g.own.as_ref().unwrap().port, 8080);
        for ip in [
            "127.0.0.1",
            "0.0.0.0",
            "::",
            "::ffff:127.0.0.1",
            "127.0.0.2",
        ] {
            let why = g.refuse(ip.parse().unwrap(), true);
            assert!(why.is_some_and(|w| w.contains("block_own_api")), "{ip}");
            // Another port: an ordinary local receiver.
            assert_eq!(g.refuse(ip.parse().unwrap(), false), None, "{ip}");
        }
        assert_eq!(g.refuse("10.9.9.9".parse().unwrap(), true), None);
        let any = guard(&[], Some("0.0.0.0:8080"));
        assert!(any.refuse("127.0.0.1".parse().unwrap(), true).is_some());
        let off = HttpHandlerSettings {
            block_own_api: false,
            ..Default::default()
        };
        assert!(Guard::new(&off, Some("127.0.0.1:8080")).own.is_none());
    }
}

//! `[[listener]]`: the sockets the server binds, each with its optional TLS and allowlist.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use agentwire::tokio::ListenerConfig;
use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use super::error::ConfigError;

/// One `[[listener]]`: a socket, named so protocol sections can refer to it, serving every
/// protocol whose `listener` is this name, each on its own path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct Listener {
    /// The name protocol sections use in their `listener` key. Default `"main"`.
    pub name: String,
    /// `IP:PORT` to bind (port 0: any free port). Default `"127.0.0.1:8080"`.
    pub listen: String,
    /// Serve `wss://` with this certificate and key; absent: plain `ws://`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<ListenerTls>,
    /// Client addresses allowed to connect: IPs (`10.0.0.7`, `::1`) or CIDRs
    /// (`10.0.0.0/8`); any other address is refused before the WebSocket handshake.
    /// Empty (the default): everyone.
    pub allow: Vec<String>,
    /// Milliseconds a client has to complete the WebSocket handshake (TLS included).
    /// Default 10000.
    pub handshake_timeout_ms: u64,
    /// Handshakes in progress at once on this listener; more are refused. Default 4096.
    pub max_pending_handshakes: usize,
    /// Handshakes in progress at once from one client address (IPv6: one /64). Default 64.
    pub max_pending_handshakes_per_address: usize,
    /// Largest HTTP request head of the upgrade, in bytes. Default 16384.
    pub max_header_bytes: usize,
}

impl Default for Listener {
    fn default() -> Self {
        let d = ListenerConfig::default();
        Self {
            name: "main".to_owned(),
            listen: "127.0.0.1:8080".to_owned(),
            tls: None,
            allow: Vec::new(),
            handshake_timeout_ms: duration_ms(d.handshake_timeout),
            max_pending_handshakes: d.max_pending_handshakes,
            max_pending_handshakes_per_address: d.max_pending_handshakes_per_address,
            max_header_bytes: d.max_header_bytes,
        }
    }
}

impl Listener {
    /// The address to bind.
    pub fn socket_addr(&self) -> Result<SocketAddr, ConfigError> {
        self.listen.parse().map_err(|e| {
            ConfigError::invalid(
                "listen",
                format!("{:?} is not an IP:PORT address ({e})", self.listen),
            )
        })
    }

    /// The allowlist as networks (a bare IP is its /32 or /128); empty means everyone.
    pub fn allowlist(&self) -> Result<Vec<IpNet>, ConfigError> {
        self.allow
            .iter()
            .enumerate()
            .map(|(i, entry)| {
                parse_allow(entry).ok_or_else(|| {
                    ConfigError::invalid(
                        format!("allow[{i}]"),
                        format!("{entry:?} is neither an IP address nor a CIDR (10.0.0.0/8)"),
                    )
                })
            })
            .collect()
    }

    /// The transport settings of the listener (handshake timeout, pending-handshake caps,
    /// header size). TLS is not set here: the TLS module builds it from [`Self::tls`].
    pub fn listener_config(&self) -> ListenerConfig {
        ListenerConfig::default()
            .with_handshake_timeout(Duration::from_millis(self.handshake_timeout_ms))
            .with_max_pending_handshakes(self.max_pending_handshakes)
            .with_max_pending_handshakes_per_address(self.max_pending_handshakes_per_address)
            .with_max_header_bytes(self.max_header_bytes)
    }
}

/// An allowlist entry: `IP/PREFIX`, or a bare IP as its host network.
fn parse_allow(entry: &str) -> Option<IpNet> {
    let entry = entry.trim();
    if entry.contains('/') {
        entry.parse::<IpNet>().ok()
    } else {
        entry.parse::<std::net::IpAddr>().ok().map(IpNet::from)
    }
}

/// `[listener.tls]`: the listener serves `wss://`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ListenerTls {
    /// PEM file with the certificate chain, leaf first.
    pub cert: PathBuf,
    /// PEM file with the private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// Seconds between checks of both files for changes; a changed pair is loaded for new
    /// connections without a restart (open ones keep theirs). Default 10.
    #[serde(default = "default_reload_secs")]
    pub reload_secs: u64,
}

impl ListenerTls {
    /// TLS from `cert` and `key` with the default reload interval.
    pub fn new(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        Self {
            cert: cert.into(),
            key: key.into(),
            reload_secs: default_reload_secs(),
        }
    }
}

fn default_reload_secs() -> u64 {
    10
}

/// A duration in whole milliseconds (saturating).
pub(crate) fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

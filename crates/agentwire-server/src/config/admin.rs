//! `[admin]`, `[log]` and `[keys]`: the server-wide settings.

use serde::{Deserialize, Serialize};

/// `[admin]`: the plain-HTTP listener with `/healthz`, `/readyz` and `/metrics`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct Admin {
    /// Serve the admin listener. Default true.
    pub enabled: bool,
    /// `IP:PORT` of the admin listener. Default `"127.0.0.1:9090"`.
    pub listen: String,
}

impl Default for Admin {
    fn default() -> Self {
        Self {
            enabled: true,
            listen: "127.0.0.1:9090".to_owned(),
        }
    }
}

/// How log lines are written (to stderr, one event per line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum LogFormat {
    /// Human-readable text (colours only on a terminal). Default.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// `[log]`: logging.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct Log {
    /// `"text"` or `"json"`. Default `"text"`.
    pub format: LogFormat,
    /// A `tracing` filter: a level (`"info"`) or directives (`"info,agentwire_tokio=debug"`);
    /// `RUST_LOG`, when set, wins. Default `"info"`.
    pub level: String,
}

impl Default for Log {
    fn default() -> Self {
        Self {
            format: LogFormat::Text,
            level: "info".to_owned(),
        }
    }
}

/// `[keys]`: how rotated credentials (MCPW API keys, Chopsticks runner secrets) change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct Keys {
    /// Seconds a key removed from the configuration (or key file) stays valid, so clients
    /// can move to the new one. Default 300.
    pub overlap_secs: u64,
    /// Seconds between checks of the key files for changes (SIGHUP reloads at once).
    /// Default 10.
    pub reload_secs: u64,
}

impl Default for Keys {
    fn default() -> Self {
        Self {
            overlap_secs: 300,
            reload_secs: 10,
        }
    }
}

//! The configuration file of `agentwire serve`: one TOML file covering every setting and
//! limit of every server, with documented defaults, overridable by environment variables and
//! flags.
//!
//! With no file at all the defaults serve all five protocols on one listener, `main` on
//! `127.0.0.1:8080`, by path, with the admin endpoints on `127.0.0.1:9090`.
//! [`defaults_toml`] is the complete file with every key, its default and a comment
//! (`agentwire config defaults` prints it).
//!
//! | Section | What it holds |
//! |---|---|
//! | `[admin]` | `enabled`, `listen` of the plain-HTTP admin listener (`/healthz`, `/readyz`, `/metrics`) |
//! | `[log]` | `format` (`text` or `json`) and `level` (a `tracing` filter) |
//! | `[keys]` | `overlap_secs` a rotated-out key stays valid, `reload_secs` between key-file checks |
//! | `[runtime]` | `flavor` (`multi-thread` or `current-thread`) and `worker_threads` (0: one per core) of the tokio runtime `agentwire serve` runs on |
//! | `[[listener]]` | `name`, `listen`, `allow` (IPs/CIDRs), handshake caps; `[listener.tls]` `cert`, `key`, `reload_secs` |
//! | `[bus]` | the JSON-RPC bus (default path `/bus`) |
//! | `[chopsticks]` | the Chopsticks controller (`/chopsticks`), `runner_secret`, `runner_secrets_file` |
//! | `[mcpw]` | the MCPW orchestrator (`/ws`), `api_keys`, `api_keys_file` |
//! | `[llmrtc]` | the llmrtc server (`/llmrtc`) with its WebRTC settings |
//! | `[relay]` | the agent relay (`/agent/ws`, the spec's path) and its study log (`./agentwire-logs`) |
//!
//! Every protocol section has `enabled`, `listener` (the name of a `[[listener]]`), `path`,
//! the protocol's own settings and limits, and a `[<protocol>.transport]` table (per-address
//! cap, WebSocket pings, read buffer, outbound queue). Durations are whole numbers whose unit ends the
//! key's name (`_ms`, `_secs`); 0 means "off" only where a key's comment says so.
//!
//! Unknown keys are errors, and every error names the key and where it was set:
//! ``agentwire.toml:12: key `bus.max_message_bytes`: invalid type: string "big", expected
//! usize``. [`Config::validate`] checks what types cannot: every protocol's `listener`
//! exists, no two enabled protocols share a path on one listener, paths are URL paths,
//! listener names and addresses are unique, addresses and allowlist entries parse, limits
//! that cannot be zero are not, `runtime.worker_threads` fits its flavor, and the llmrtc
//! playbook and transcript files load.
//!
//! Overrides, one scheme for both: a key path (`bus.max_message_bytes`; `listener.0.listen`
//! or `listener[0].listen` for the first listener) and a value read as a TOML value (`1024`,
//! `true`, `["a", "b"]`, `"text"`), or as a plain string when it is not one
//! (`--set bus.path=/events`).
//!
//! - Environment: `AGENTWIRE__<SECTION>__<KEY>=value` ([`ENV_PREFIX`]), segments separated
//!   by two underscores, case-insensitive: `AGENTWIRE__BUS__MAX_MESSAGE_BYTES=2097152`,
//!   `AGENTWIRE__LISTENER__0__LISTEN=0.0.0.0:8080`. [`environment`] reads them.
//! - Flags: `--set bus.max_message_bytes=2097152`, repeatable.
//!
//! Flags win over the environment, which wins over the file; an override inside
//! `[[listener]]` when the file has none applies to the default listener. An override names
//! itself in errors (``environment variable AGENTWIRE__BUS__PATH: key `bus.path`: ...``).
//! [`Config::resolve`] does it all.

mod admin;
mod bus;
mod chopsticks;
mod error;
mod listener;
mod llmrtc;
mod locate;
mod mcpw;
mod overrides;
mod relay;
mod runtime;
mod transport;
mod validate;

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

pub use self::admin::{Admin, Keys, Log, LogFormat};
pub use self::bus::{BusMatchMode, BusPayload, BusSection};
pub use self::chopsticks::ChopsticksSection;
pub use self::error::{ConfigError, Source};
pub use self::listener::{Listener, ListenerTls};
pub use self::llmrtc::LlmrtcSection;
pub use self::mcpw::{McpwCompression, McpwSection};
pub use self::overrides::{environment, ENV_PREFIX};
pub use self::relay::{RelaySection, RelaySync};
pub use self::runtime::{Runtime, RuntimeFlavor, MAX_WORKER_THREADS};
pub use self::transport::Transport;

use self::locate::KeyIndex;
use self::overrides::Override;

/// The whole configuration: one field per section of the file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct Config {
    /// `[admin]`.
    pub admin: Admin,
    /// `[log]`.
    pub log: Log,
    /// `[keys]`.
    pub keys: Keys,
    /// `[runtime]`.
    pub runtime: Runtime,
    /// `[[listener]]`, in file order. Default: one, `main` on `127.0.0.1:8080`.
    pub listener: Vec<Listener>,
    /// `[bus]`.
    pub bus: BusSection,
    /// `[chopsticks]`.
    pub chopsticks: ChopsticksSection,
    /// `[mcpw]`.
    pub mcpw: McpwSection,
    /// `[llmrtc]`.
    pub llmrtc: LlmrtcSection,
    /// `[relay]`.
    pub relay: RelaySection,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            admin: Admin::default(),
            log: Log::default(),
            keys: Keys::default(),
            runtime: Runtime::default(),
            listener: vec![Listener::default()],
            bus: BusSection::default(),
            chopsticks: ChopsticksSection::default(),
            mcpw: McpwSection::default(),
            llmrtc: LlmrtcSection::default(),
            relay: RelaySection::default(),
        }
    }
}

/// One of the five protocols.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Protocol {
    /// `[bus]`.
    Bus,
    /// `[chopsticks]`.
    Chopsticks,
    /// `[mcpw]`.
    Mcpw,
    /// `[llmrtc]`.
    Llmrtc,
    /// `[relay]`.
    Relay,
}

impl Protocol {
    /// All five, in the file's order.
    pub const ALL: [Self; 5] = [
        Self::Bus,
        Self::Chopsticks,
        Self::Mcpw,
        Self::Llmrtc,
        Self::Relay,
    ];

    /// The section name: `bus`, `chopsticks`, `mcpw`, `llmrtc`, `relay`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Bus => "bus",
            Self::Chopsticks => "chopsticks",
            Self::Mcpw => "mcpw",
            Self::Llmrtc => "llmrtc",
            Self::Relay => "relay",
        }
    }
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Where one protocol is served: the keys every protocol section shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Endpoint<'a> {
    /// The protocol.
    pub protocol: Protocol,
    /// Its `enabled`.
    pub enabled: bool,
    /// Its `listener` (a listener name).
    pub listener: &'a str,
    /// Its `path`.
    pub path: &'a str,
    /// Its `[<protocol>.transport]`.
    pub transport: &'a Transport,
}

impl Config {
    /// Parses `text` (a whole file; `origin` names it in errors, usually its path) and
    /// validates it. Errors name the key and the line.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Self, ConfigError> {
        build(Some((text, origin)), Vec::new())
    }

    /// Reads, parses and validates the file at `path`.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = read(path)?;
        Self::from_toml_str(&text, &path.display().to_string())
    }

    /// The configuration the server runs with: the file (if any; else the defaults), then
    /// the `AGENTWIRE__*` variables of `env`, then the `--set KEY=VALUE` arguments in
    /// `sets`, validated. The binary passes [`environment()`] (tests pass their own).
    pub fn resolve(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
        sets: &[String],
    ) -> Result<Self, ConfigError> {
        let mut all = overrides::from_env(env)?;
        all.extend(overrides::from_flags(sets)?);
        match file {
            Some(path) => {
                let text = read(path)?;
                build(Some((&text, &path.display().to_string())), all)
            }
            None => build(None, all),
        }
    }

    /// Checks what the types cannot (see the module docs). Errors name the key; use
    /// [`from_toml_str`](Self::from_toml_str) or [`resolve`](Self::resolve) to have them
    /// name the line too.
    pub fn validate(&self) -> Result<(), ConfigError> {
        validate::validate(self)?;
        self.runtime.validate()
    }

    /// The listener named `name`.
    pub fn listener(&self, name: &str) -> Option<&Listener> {
        self.listener.iter().find(|l| l.name == name)
    }

    /// Where each of the five protocols is served (enabled or not), in the file's order.
    pub fn endpoints(&self) -> [Endpoint<'_>; 5] {
        fn e<'a>(
            protocol: Protocol,
            enabled: bool,
            listener: &'a str,
            path: &'a str,
            transport: &'a Transport,
        ) -> Endpoint<'a> {
            Endpoint {
                protocol,
                enabled,
                listener,
                path,
                transport,
            }
        }
        [
            e(
                Protocol::Bus,
                self.bus.enabled,
                &self.bus.listener,
                &self.bus.path,
                &self.bus.transport,
            ),
            e(
                Protocol::Chopsticks,
                self.chopsticks.enabled,
                &self.chopsticks.listener,
                &self.chopsticks.path,
                &self.chopsticks.transport,
            ),
            e(
                Protocol::Mcpw,
                self.mcpw.enabled,
                &self.mcpw.listener,
                &self.mcpw.path,
                &self.mcpw.transport,
            ),
            e(
                Protocol::Llmrtc,
                self.llmrtc.enabled,
                &self.llmrtc.listener,
                &self.llmrtc.path,
                &self.llmrtc.transport,
            ),
            e(
                Protocol::Relay,
                self.relay.enabled,
                &self.relay.listener,
                &self.relay.path,
                &self.relay.transport,
            ),
        ]
    }

    /// The endpoint of `protocol`.
    pub fn endpoint(&self, protocol: Protocol) -> Endpoint<'_> {
        let all = self.endpoints();
        let i = Protocol::ALL
            .iter()
            .position(|p| *p == protocol)
            .unwrap_or_default();
        all[i]
    }

    /// The whole configuration as TOML (every key, defaults included): what
    /// [`from_toml_str`](Self::from_toml_str) reads back to the same configuration. Fails
    /// only for a path that is not UTF-8, which TOML cannot hold.
    pub fn to_toml_string(&self) -> Result<String, ConfigError> {
        toml::to_string(self).map_err(|e| ConfigError::Unrepresentable {
            message: e.to_string(),
        })
    }
}

/// The complete default configuration file: every key with its default value and a
/// one-line comment (unit and meaning). It parses back to [`Config::default`].
pub fn defaults_toml() -> String {
    include_str!("defaults.toml").to_owned()
}

/// The largest configuration file read (1 MiB: the complete defaults file is about 20 KiB).
pub const MAX_FILE_BYTES: u64 = 1 << 20;

fn read(path: &Path) -> Result<String, ConfigError> {
    use std::io::Read as _;
    let failed = |source| ConfigError::Read {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(failed)?;
    let mut text = String::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(failed)?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(ConfigError::TooLarge {
            path: path.to_owned(),
            max: MAX_FILE_BYTES,
        });
    }
    Ok(text)
}

/// File (text, origin), then overrides, then deserialization and validation, with every
/// error located at the file line or the override that set the key.
fn build(file: Option<(&str, &str)>, overrides: Vec<Override>) -> Result<Config, ConfigError> {
    let file_index = file.map(|(text, origin)| (KeyIndex::new(text), origin.to_owned()));
    let mut table = match file {
        Some((text, origin)) => text
            .parse::<toml::Table>()
            .map_err(|e| parse_error(&e, file_index.as_ref().map(|(i, _)| i), origin))?,
        None => toml::Table::new(),
    };
    let mut set_by: BTreeMap<String, Source> = BTreeMap::new();
    if !overrides.is_empty() {
        let defaults = toml::Table::try_from(Config::default()).unwrap_or_default();
        for o in &overrides {
            overrides::apply(&mut table, o, &defaults)?;
            set_by.insert(o.key(), o.source.clone());
        }
    }
    let locate = |key: &str| -> Option<Source> {
        let mut path = Some(key);
        while let Some(p) = path {
            if let Some(source) = set_by.get(p) {
                return Some(source.clone());
            }
            path = locate::parent(p);
        }
        let (index, origin) = file_index.as_ref()?;
        index.line_of_key(key).map(|line| Source::File {
            origin: origin.clone(),
            line,
        })
    };
    // Deserialize from the merged table's own text, whose spans name the bad key.
    let canonical = toml::to_string(&table).map_err(|e| ConfigError::Parse {
        where_: None,
        key: None,
        message: e.to_string(),
    })?;
    let config: Config = toml::from_str(&canonical).map_err(|e| {
        let index = KeyIndex::new(&canonical);
        let key = e
            .span()
            .and_then(|span| index.key_at(span.start))
            .map(str::to_owned);
        ConfigError::Parse {
            where_: key.as_deref().and_then(locate),
            message: describe(e.message()),
            key,
        }
    })?;
    config.validate().map_err(|e| match e {
        ConfigError::Invalid {
            where_: None,
            key,
            message,
        } => ConfigError::Invalid {
            where_: locate(&key),
            key,
            message,
        },
        other => other,
    })?;
    Ok(config)
}

/// A syntax error of the file: its line, and the key when the index knows it.
fn parse_error(e: &toml::de::Error, index: Option<&KeyIndex>, origin: &str) -> ConfigError {
    let span = e.span();
    let line = match (span.as_ref(), index) {
        (Some(span), Some(index)) => Some(index.line_of(span.start)),
        _ => None,
    };
    let key = match (span, index) {
        (Some(span), Some(index)) => index.key_at(span.start).map(str::to_owned),
        _ => None,
    };
    ConfigError::Parse {
        where_: line.map(|line| Source::File {
            origin: origin.to_owned(),
            line,
        }),
        key,
        message: describe(e.message()),
    }
}

/// The parser's message, with the list of every field of a section after "unknown field"
/// replaced by a pointer to the defaults file, and Rust type names of sections by "a table".
fn describe(message: &str) -> String {
    let message = message.trim();
    if message.starts_with("unknown field") {
        let head = message.split(", expected").next().unwrap_or(message);
        return format!(
            "{} (not a setting of this section; `agentwire config defaults` lists every key)",
            head.replacen("unknown field", "unknown key", 1)
        );
    }
    match message.split_once("expected struct ") {
        Some((head, _)) => format!("{head}expected a table"),
        None => message.to_owned(),
    }
}

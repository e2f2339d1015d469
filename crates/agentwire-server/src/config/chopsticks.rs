//! `[chopsticks]`: the Chopsticks controller.

use std::path::PathBuf;
use std::time::Duration;

use agentwire::chopsticks::{ControllerConfig, Limits};
use serde::{Deserialize, Serialize};

use crate::chopsticks::controller_app::{Actor, DEFAULT_ACTOR_USER_ID};

/// `[chopsticks]`: the controller, its runner secrets, timers and limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct ChopsticksSection {
    /// Serve the controller. Default true.
    pub enabled: bool,
    /// Name of the `[[listener]]` it is served on. Default `"main"`.
    pub listener: String,
    /// URL path on that listener. Default `"/chopsticks"`.
    pub path: String,
    /// Runner secret every agent's hello must carry; absent (and no `runner_secrets_file`):
    /// not checked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runner_secret: Option<String>,
    /// File of accepted runner secrets, one per line (blank lines and `#` comments
    /// skipped), reloaded when it changes or on SIGHUP; a removed secret stays valid for
    /// `[keys] overlap_secs`. Used together with `runner_secret`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runner_secrets_file: Option<PathBuf>,
    /// Protocol versions the controller accepts in a hello. Default `["1.0.0"]`.
    pub supported_versions: Vec<String>,
    /// Seconds a connection has to send its hello. Default 8.
    pub hello_timeout_secs: u64,
    /// Seconds an agent has to answer a request. Default 30.
    pub request_timeout_secs: u64,
    /// Seconds without a message after which an agent is dropped. Default 45.
    pub stale_after_secs: u64,
    /// Acting user sent with every op as `actorUserId`. Default `"chopsticks-controller"`.
    pub actor_user_id: String,
    /// Admin token sent with every op as `adminToken`; absent: none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin_token: Option<String>,
    /// Largest frame in bytes. Default 65536.
    pub max_frame_bytes: usize,
    /// Connections one IP may hold (the controller's own cap). Default 20.
    pub max_connections_per_ip: usize,
    /// Connections served at once. Default 200.
    pub max_connections: usize,
    /// Messages per second one connection may send. Default 100.
    pub max_messages_per_second: u32,
    /// Requests awaiting one agent's answer. Default 256.
    pub max_pending_per_agent: usize,
    /// Guilds one agent may report. Default 10000.
    pub max_guilds_per_agent: usize,
    /// Sessions tracked at once. Default 10000.
    pub max_sessions: usize,
    /// Transport settings of the controller route.
    pub transport: super::transport::Transport,
}

impl Default for ChopsticksSection {
    fn default() -> Self {
        let c = ControllerConfig::default();
        let l = &c.limits;
        Self {
            enabled: true,
            listener: "main".to_owned(),
            path: "/chopsticks".to_owned(),
            runner_secret: None,
            runner_secrets_file: None,
            supported_versions: c.supported_versions.iter().cloned().collect(),
            hello_timeout_secs: c.hello_timeout.as_secs(),
            request_timeout_secs: c.request_timeout.as_secs(),
            stale_after_secs: c.stale_after.as_secs(),
            actor_user_id: DEFAULT_ACTOR_USER_ID.to_owned(),
            admin_token: None,
            max_frame_bytes: l.max_frame_bytes,
            max_connections_per_ip: l.max_connections_per_ip,
            max_connections: l.max_connections,
            max_messages_per_second: l.max_messages_per_second,
            max_pending_per_agent: l.max_pending_per_agent,
            max_guilds_per_agent: l.max_guilds_per_agent,
            max_sessions: l.max_sessions,
            transport: super::transport::Transport::default(),
        }
    }
}

impl ChopsticksSection {
    /// The controller machine's configuration (with `runner_secret`; secrets from
    /// `runner_secrets_file` are applied by the key rotation at run time).
    pub fn controller_config(&self) -> ControllerConfig {
        let mut limits = Limits::default();
        limits.max_frame_bytes = self.max_frame_bytes;
        limits.max_connections_per_ip = self.max_connections_per_ip;
        limits.max_connections = self.max_connections;
        limits.max_messages_per_second = self.max_messages_per_second;
        limits.max_pending_per_agent = self.max_pending_per_agent;
        limits.max_guilds_per_agent = self.max_guilds_per_agent;
        limits.max_sessions = self.max_sessions;
        let mut cfg = ControllerConfig::default()
            .with_supported_versions(self.supported_versions.iter().cloned())
            .with_hello_timeout(Duration::from_secs(self.hello_timeout_secs))
            .with_request_timeout(Duration::from_secs(self.request_timeout_secs))
            .with_stale_after(Duration::from_secs(self.stale_after_secs))
            .with_limits(limits);
        if let Some(secret) = &self.runner_secret {
            cfg = cfg.with_runner_secret(secret.clone());
        }
        cfg
    }

    /// The acting user sent with every op.
    pub fn actor(&self) -> Actor {
        Actor {
            user_id: self.actor_user_id.clone(),
            admin_token: self.admin_token.clone(),
        }
    }
}

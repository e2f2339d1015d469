//! Role configuration and limits, with documented defaults.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::message::PROTOCOL_VERSION;

/// Bounds on what peers can make the controller hold or do.
///
/// Every collection that peer input can grow has a limit here.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Largest message body accepted, in bytes. Default 65,536 (64 KiB), as the real
    /// controller; exactly the limit is accepted, one byte more gets `"Frame too large"`.
    pub max_frame_bytes: usize,
    /// Connections allowed from one IP address. Default 20; the 21st is closed with 1008
    /// `too-many-connections`.
    pub max_connections_per_ip: usize,
    /// Connections allowed in total. Default 200; the 201st is closed with 1008 `server-full`.
    pub max_connections: usize,
    /// Messages accepted per connection per second. Default 100; the excess is dropped.
    pub max_messages_per_second: u32,
    /// Requests awaiting a `resp` per agent. Default 256; `request` fails beyond it.
    pub max_pending_per_agent: usize,
    /// Guild ids kept per agent. Default 10,000; longer lists are truncated (and reported).
    pub max_guilds_per_agent: usize,
    /// Voice sessions (music and assistant) tracked in total. Default 10,000; `add` events
    /// beyond it are dropped (and reported), and selecting an agent for one more session
    /// fails with `CommandError::TooManySessions`.
    pub max_sessions: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_frame_bytes: 64 * 1024,
            max_connections_per_ip: 20,
            max_connections: 200,
            max_messages_per_second: 100,
            max_pending_per_agent: 256,
            max_guilds_per_agent: 10_000,
            max_sessions: 10_000,
        }
    }
}

/// Configuration of the [`Controller`](crate::Controller).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ControllerConfig {
    /// Versions accepted in `hello`. Default `{"1.0.0"}`. The version-mismatch error names
    /// exactly this set ("Controller expects 1.0.0 or 2.0.0.").
    pub supported_versions: BTreeSet<String>,
    /// If not empty, every `hello` must carry one of these `runnerSecret`s (constant-time
    /// compare). An empty secret, configured or presented, never matches. The controller
    /// starts with these; [`Controller::rotate_runner_secrets`](crate::Controller::rotate_runner_secrets)
    /// replaces them at run time. Default empty (not checked).
    pub runner_secrets: Vec<String>,
    /// Time a connection has to send a valid `hello`. Default 8 s; then close 1008
    /// `hello-required`.
    pub hello_timeout: Duration,
    /// Time an agent has to answer a `req`. Default 30 s (the spec's; the real controller
    /// uses 20 s).
    pub request_timeout: Duration,
    /// An agent with no message (or pong reported through `Controller::touch`) for this long
    /// is dropped. Default 45 s.
    pub stale_after: Duration,
    /// Limits on what peers can make the controller hold.
    pub limits: Limits,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            supported_versions: BTreeSet::from([PROTOCOL_VERSION.to_owned()]),
            runner_secrets: Vec::new(),
            hello_timeout: Duration::from_secs(8),
            request_timeout: Duration::from_secs(30),
            stale_after: Duration::from_secs(45),
            limits: Limits::default(),
        }
    }
}

impl ControllerConfig {
    /// Sets the one runner secret every `hello` must carry.
    pub fn with_runner_secret(mut self, secret: impl Into<String>) -> Self {
        self.runner_secrets = vec![secret.into()];
        self
    }

    /// Sets the runner secrets a `hello` may carry (any one of them).
    pub fn with_runner_secrets<S: Into<String>>(
        mut self,
        secrets: impl IntoIterator<Item = S>,
    ) -> Self {
        self.runner_secrets = secrets.into_iter().map(Into::into).collect();
        self
    }

    /// Replaces the supported version set.
    pub fn with_supported_versions<I, S>(mut self, versions: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.supported_versions = versions.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the request timeout.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Sets the hello deadline.
    pub fn with_hello_timeout(mut self, timeout: Duration) -> Self {
        self.hello_timeout = timeout;
        self
    }

    /// Sets the stale-agent window.
    pub fn with_stale_after(mut self, after: Duration) -> Self {
        self.stale_after = after;
        self
    }

    /// Replaces the limits.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }
}

/// Configuration of the [`Agent`](crate::Agent).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AgentConfig {
    /// This agent's id (sent in every message).
    pub agent_id: String,
    /// Discord bot user id. Default `None` (sent as `null`).
    pub bot_user_id: Option<String>,
    /// Discord bot tag. Default `None` (sent as `null`).
    pub tag: Option<String>,
    /// Pool id. Default `"default"`.
    pub pool_id: String,
    /// Guilds the agent is in.
    pub guild_ids: Vec<String>,
    /// Whether the audio node is ready. Default `true`.
    pub ready: bool,
    /// Version written in `hello`. Default `"1.0.0"`.
    pub protocol_version: String,
    /// Runner secret sent in `hello`. Default `None`.
    pub runner_secret: Option<String>,
    /// Runner id added to every message, as the real agent does. Default `None`.
    pub runner_id: Option<String>,
    /// Interval of the `hello` + `guilds` heartbeat. Default 30 s.
    pub heartbeat_interval: Duration,
    /// Largest controller message accepted, in bytes. Default 1 MiB.
    pub max_frame_bytes: usize,
}

impl AgentConfig {
    /// A configuration for agent `agent_id` with the defaults above.
    pub fn new(agent_id: impl Into<String>) -> Self {
        Self {
            agent_id: agent_id.into(),
            bot_user_id: None,
            tag: None,
            pool_id: "default".to_owned(),
            guild_ids: Vec::new(),
            ready: true,
            protocol_version: PROTOCOL_VERSION.to_owned(),
            runner_secret: None,
            runner_id: None,
            heartbeat_interval: Duration::from_secs(30),
            max_frame_bytes: 1024 * 1024,
        }
    }

    /// Sets the guild list.
    pub fn with_guilds<I, S>(mut self, guilds: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.guild_ids = guilds.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the pool id.
    pub fn with_pool(mut self, pool: impl Into<String>) -> Self {
        self.pool_id = pool.into();
        self
    }

    /// Sets the protocol version written in `hello`.
    pub fn with_protocol_version(mut self, v: impl Into<String>) -> Self {
        self.protocol_version = v.into();
        self
    }

    /// Sets the runner secret.
    pub fn with_runner_secret(mut self, secret: impl Into<String>) -> Self {
        self.runner_secret = Some(secret.into());
        self
    }

    /// Sets the bot user id and tag.
    pub fn with_bot(mut self, user_id: impl Into<String>, tag: impl Into<String>) -> Self {
        self.bot_user_id = Some(user_id.into());
        self.tag = Some(tag.into());
        self
    }

    /// Sets the heartbeat interval.
    pub fn with_heartbeat_interval(mut self, interval: Duration) -> Self {
        self.heartbeat_interval = interval;
        self
    }
}

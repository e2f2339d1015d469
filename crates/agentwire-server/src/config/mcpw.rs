//! `[mcpw]`: the MCPW orchestrator.

use std::path::PathBuf;
use std::time::Duration;

use agentwire::core::Rate;
use agentwire::mcpw::crdt::CrdtLimits;
use agentwire::mcpw::orchestrator::UpgradeConfig;
use agentwire::mcpw::{CompressPolicy, OrchestratorConfig, OrchestratorLimits};
use serde::{Deserialize, Serialize};

use super::listener::duration_ms;
use super::transport::Transport;

/// When outgoing payloads over 1 KiB are gzipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum McpwCompression {
    /// When the result is smaller (the reference server's rule). Default.
    #[default]
    IfSmaller,
    /// The spec's adaptive rule: skip payloads that look incompressible.
    Entropy,
    /// Never.
    Never,
}

/// `[mcpw]`: the orchestrator, its upgrade policy (API keys, subprotocols), timers and
/// limits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct McpwSection {
    /// Serve the orchestrator. Default true.
    pub enabled: bool,
    /// Name of the `[[listener]]` it is served on. Default `"main"`.
    pub listener: String,
    /// URL path on that listener. Default `"/ws"`.
    pub path: String,
    /// Accepted API keys (`Authorization: Bearer` or `X-API-Key`); empty (and no
    /// `api_keys_file`): no authentication.
    pub api_keys: Vec<String>,
    /// File of accepted API keys, one per line (blank lines and `#` comments skipped),
    /// reloaded when it changes or on SIGHUP; a removed key stays valid for `[keys]
    /// overlap_secs`. Used together with `api_keys`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_keys_file: Option<PathBuf>,
    /// Refuse upgrades that do not offer `mcp.v<n>` (426). Default true.
    pub require_subprotocol: bool,
    /// Protocol versions spoken; of those an agent offers, the highest is selected.
    /// Default `[1]`.
    pub protocol_versions: Vec<u8>,
    /// New connections per minute per API key (0: no limit). Default 60.
    pub connect_rate_per_minute: u32,
    /// New connections one API key may open at once after a quiet period. Default 20.
    pub connect_burst: u32,
    /// Messages per minute per connection (0: no limit). Default 1000.
    pub rate_per_minute: u32,
    /// Messages a connection may send at once after a quiet period. Default 100.
    pub rate_burst: u32,
    /// Shared secret for HMAC-SHA256 message authentication (every frame carries its tag;
    /// one without gets 4001); absent: off. From the environment:
    /// `AGENTWIRE__MCPW__HMAC_SECRET`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hmac_secret: Option<String>,
    /// `"if-smaller"`, `"entropy"` or `"never"`. Default `"if-smaller"`.
    pub compression: McpwCompression,
    /// Milliseconds small messages the orchestrator starts wait to leave together as one
    /// batch (0: every message leaves at once). Default 0.
    pub batch_linger_ms: u64,
    /// Expected heartbeat period of an agent, seconds. Default 30.
    pub heartbeat_secs: u64,
    /// Heartbeat periods without one after which an agent is unhealthy (no new tasks).
    /// Default 2.
    pub unhealthy_after: u32,
    /// Heartbeat periods without one after which an agent is removed (its tasks
    /// reassigned). Default 3.
    pub remove_after: u32,
    /// Seconds a connection has to register (0: wait forever). Default 30.
    pub register_timeout_secs: u64,
    /// Deadline of a task that names none, seconds. Default 300.
    pub default_task_deadline_secs: u64,
    /// Agents a task is tried on before it fails (first assignment included). Default 3.
    pub max_task_attempts: u32,
    /// Longest `graceful_timeout_ms` honoured in `agent.shutdown`, seconds. Default 300.
    pub max_shutdown_grace_secs: u64,
    /// Seconds messages about a cancelled task are still accepted. Default 30.
    pub cancel_grace_secs: u64,
    /// Seconds the answer to a message with an `idempotency_key` is kept. Default 300.
    pub idempotency_ttl_secs: u64,
    /// Timeout of a collaboration whose request gives none, seconds. Default 30.
    pub default_collaboration_timeout_secs: u64,
    /// Longest collaboration timeout honoured, seconds. Default 300.
    pub max_collaboration_timeout_secs: u64,
    /// Routing weight of an agent's confidence. Default 0.5.
    pub routing_confidence: f64,
    /// Routing weight of the task's focus areas among the agent's specialties. Default 0.2.
    pub routing_specialty: f64,
    /// Routing weight of an agent's spare capacity (1 - load). Default 0.3.
    pub routing_capacity: f64,
    /// Alternatives recorded in `routing_metadata.alternative_agents`. Default 3.
    pub routing_max_alternatives: usize,
    /// Connections at once (503 beyond). Default 10000.
    pub max_connections: usize,
    /// Registered agents at once. Default 1024.
    pub max_agents: usize,
    /// Largest message in bytes. Default 1048576.
    pub max_message_bytes: usize,
    /// Capabilities one agent may declare. Default 64.
    pub max_capabilities: usize,
    /// Tasks held (queued, assigned or running). Default 10000.
    pub max_tasks: usize,
    /// Collaborations in flight. Default 1024.
    pub max_collaborations: usize,
    /// Agents one collaboration may require. Default 32.
    pub max_collaborators: usize,
    /// Longest id (agent, task, message), bytes. Default 256.
    pub max_id_bytes: usize,
    /// Label sets per metric family. Default 256.
    pub max_metric_series: usize,
    /// Deepest JSON nesting. Default 128.
    pub max_json_depth: usize,
    /// Cancelled task ids remembered during `cancel_grace_secs`. Default 1024.
    pub max_cancelled_tasks: usize,
    /// Idempotency keys remembered with their answers. Default 4096.
    pub max_idempotency_keys: usize,
    /// Bytes of answers kept under idempotency keys, all keys together. Default 4194304.
    pub max_idempotency_bytes: usize,
    /// Bytes one streamed message may reach while it is reassembled. Default 8388608.
    pub max_stream_bytes: usize,
    /// Streamed messages reassembled at once on one connection. Default 4.
    pub max_streams: usize,
    /// Shared-state keys (counters and sets together). Default 1024.
    pub crdt_max_keys: usize,
    /// Actors in one G-Counter. Default 1024.
    pub crdt_max_counter_actors: usize,
    /// Tags plus tombstones in one OR-Set. Default 65536.
    pub crdt_max_set_tags: usize,
    /// Actors in the merged vector clock. Default 1024.
    pub crdt_max_clock_actors: usize,
    /// Operations in one sync. Default 1024.
    pub crdt_max_ops_per_sync: usize,
    /// Longest key, actor, element or tag, bytes. Default 256.
    pub crdt_max_string_bytes: usize,
    /// Distinct syncing agents remembered for deduplication. Default 4096.
    pub crdt_max_origins: usize,
    /// Sync sequence numbers remembered per agent (how far out of order syncs may
    /// arrive). Default 4096.
    pub crdt_sync_window: usize,
    /// Transport settings of the orchestrator route.
    pub transport: Transport,
}

impl Default for McpwSection {
    fn default() -> Self {
        let c = OrchestratorConfig::default();
        let u = UpgradeConfig::default();
        let l = &c.limits;
        let k = &c.crdt;
        let (rate_per_minute, rate_burst) = rate_of(c.rate);
        let (connect_rate_per_minute, connect_burst) = rate_of(u.connect_rate);
        Self {
            enabled: true,
            listener: "main".to_owned(),
            path: "/ws".to_owned(),
            api_keys: u.api_keys.clone(),
            api_keys_file: None,
            require_subprotocol: u.require_subprotocol,
            protocol_versions: u.protocol_versions.clone(),
            connect_rate_per_minute,
            connect_burst,
            rate_per_minute,
            rate_burst,
            hmac_secret: None,
            compression: McpwCompression::IfSmaller,
            batch_linger_ms: c.batch_linger.map_or(0, duration_ms),
            heartbeat_secs: c.heartbeat_interval.as_secs(),
            unhealthy_after: c.unhealthy_after,
            remove_after: c.remove_after,
            register_timeout_secs: c.register_timeout.map_or(0, |d| d.as_secs()),
            default_task_deadline_secs: c.default_task_deadline.as_secs(),
            max_task_attempts: c.max_task_attempts,
            max_shutdown_grace_secs: c.max_shutdown_grace.as_secs(),
            cancel_grace_secs: c.cancel_grace.as_secs(),
            idempotency_ttl_secs: c.idempotency_ttl.as_secs(),
            default_collaboration_timeout_secs: c.default_collaboration_timeout.as_secs(),
            max_collaboration_timeout_secs: c.max_collaboration_timeout.as_secs(),
            routing_confidence: c.routing.confidence,
            routing_specialty: c.routing.specialty,
            routing_capacity: c.routing.capacity,
            routing_max_alternatives: c.routing.max_alternatives,
            max_connections: u.max_connections.max(l.max_connections),
            max_agents: l.max_agents,
            max_message_bytes: l.max_message_bytes,
            max_capabilities: l.max_capabilities,
            max_tasks: l.max_tasks,
            max_collaborations: l.max_collaborations,
            max_collaborators: l.max_collaborators,
            max_id_bytes: l.max_id_bytes,
            max_metric_series: l.max_metric_series,
            max_json_depth: l.max_json_depth,
            max_cancelled_tasks: l.max_cancelled_tasks,
            max_idempotency_keys: l.max_idempotency_keys,
            max_idempotency_bytes: l.max_idempotency_bytes,
            max_stream_bytes: l.max_stream_bytes,
            max_streams: l.max_streams,
            crdt_max_keys: k.max_keys,
            crdt_max_counter_actors: k.max_counter_actors,
            crdt_max_set_tags: k.max_set_tags,
            crdt_max_clock_actors: k.max_clock_actors,
            crdt_max_ops_per_sync: k.max_ops_per_sync,
            crdt_max_string_bytes: k.max_string_bytes,
            crdt_max_origins: k.max_origins,
            crdt_sync_window: k.sync_window,
            transport: Transport::default(),
        }
    }
}

/// A per-minute rate as `(count per minute, burst)`; `None` is `(0, burst default)`.
fn rate_of(rate: Option<Rate>) -> (u32, u32) {
    rate.map_or((0, 0), |r| {
        let per_minute = Duration::from_secs(60).as_nanos() / r.interval().as_nanos().max(1);
        (u32::try_from(per_minute).unwrap_or(u32::MAX), r.burst())
    })
}

/// A rate of `per_minute` with `burst`, or none for 0.
fn per_minute(per_minute: u32, burst: u32) -> Option<Rate> {
    (per_minute > 0).then(|| Rate::per_minute(per_minute, burst.max(1)))
}

impl McpwSection {
    /// The orchestrator machine's configuration (HMAC from `hmac_secret`).
    pub fn orchestrator_config(&self) -> OrchestratorConfig {
        let mut limits = OrchestratorLimits::default();
        limits.max_connections = self.max_connections;
        limits.max_agents = self.max_agents;
        limits.max_message_bytes = self.max_message_bytes;
        limits.max_capabilities = self.max_capabilities;
        limits.max_tasks = self.max_tasks;
        limits.max_collaborations = self.max_collaborations;
        limits.max_collaborators = self.max_collaborators;
        limits.max_id_bytes = self.max_id_bytes;
        limits.max_metric_series = self.max_metric_series;
        limits.max_json_depth = self.max_json_depth;
        limits.max_cancelled_tasks = self.max_cancelled_tasks;
        limits.max_idempotency_keys = self.max_idempotency_keys;
        limits.max_idempotency_bytes = self.max_idempotency_bytes;
        limits.max_stream_bytes = self.max_stream_bytes;
        limits.max_streams = self.max_streams;
        let mut crdt = CrdtLimits::default();
        crdt.max_keys = self.crdt_max_keys;
        crdt.max_counter_actors = self.crdt_max_counter_actors;
        crdt.max_set_tags = self.crdt_max_set_tags;
        crdt.max_clock_actors = self.crdt_max_clock_actors;
        crdt.max_ops_per_sync = self.crdt_max_ops_per_sync;
        crdt.max_string_bytes = self.crdt_max_string_bytes;
        crdt.max_origins = self.crdt_max_origins;
        crdt.sync_window = self.crdt_sync_window;
        let mut cfg = OrchestratorConfig::default()
            .with_rate(per_minute(self.rate_per_minute, self.rate_burst))
            .with_heartbeat_interval(Duration::from_secs(self.heartbeat_secs))
            .with_missed_heartbeats(self.unhealthy_after, self.remove_after)
            .with_register_timeout(
                (self.register_timeout_secs > 0)
                    .then(|| Duration::from_secs(self.register_timeout_secs)),
            )
            .with_default_task_deadline(Duration::from_secs(self.default_task_deadline_secs))
            .with_max_task_attempts(self.max_task_attempts)
            .with_cancel_grace(Duration::from_secs(self.cancel_grace_secs))
            .with_idempotency_ttl(Duration::from_secs(self.idempotency_ttl_secs))
            .with_compression(match self.compression {
                McpwCompression::IfSmaller => CompressPolicy::IfSmaller,
                McpwCompression::Entropy => CompressPolicy::SPEC_ENTROPY,
                McpwCompression::Never => CompressPolicy::Never,
            })
            .with_batch_linger(
                (self.batch_linger_ms > 0).then(|| Duration::from_millis(self.batch_linger_ms)),
            )
            .with_crdt_limits(crdt)
            .with_limits(limits);
        cfg.max_shutdown_grace = Duration::from_secs(self.max_shutdown_grace_secs);
        cfg.default_collaboration_timeout =
            Duration::from_secs(self.default_collaboration_timeout_secs);
        cfg.max_collaboration_timeout = Duration::from_secs(self.max_collaboration_timeout_secs);
        cfg.routing.confidence = self.routing_confidence;
        cfg.routing.specialty = self.routing_specialty;
        cfg.routing.capacity = self.routing_capacity;
        cfg.routing.max_alternatives = self.routing_max_alternatives;
        if let Some(secret) = self.hmac_secret.as_deref().filter(|s| !s.is_empty()) {
            cfg = cfg.with_hmac_secret(secret.as_bytes());
        }
        cfg
    }

    /// The upgrade policy: API keys (from `api_keys`; the key file is applied by the key
    /// rotation at run time), subprotocol rule, connection cap and connect rate.
    pub fn upgrade_config(&self) -> UpgradeConfig {
        UpgradeConfig::default()
            .with_api_keys(self.api_keys.iter().cloned())
            .with_required_subprotocol(self.require_subprotocol)
            .with_max_connections(self.max_connections)
            .with_protocol_versions(self.protocol_versions.iter().copied())
            .with_connect_rate(per_minute(self.connect_rate_per_minute, self.connect_burst))
    }
}

//! Every configuration of the crate, with documented defaults: the codec's [`CodecConfig`]
//! (holding its [`Limits`] and [`Compression`]) and the orchestrator's [`OrchestratorConfig`]
//! (holding its [`OrchestratorLimits`]).
//!
//! Longer than the workspace's 700 lines because the crate's anatomy keeps every setting
//! here, each field with its default and what exceeding it answers.

/// What [`Header::parse`](crate::Header::parse) does with a non-zero reserved field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ReservedPolicy {
    /// Refuse the frame with [`HeaderError::ReservedNotZero`](crate::HeaderError) (default:
    /// a field the spec says "must be 0" that is not 0 means a peer we do not understand).
    #[default]
    Reject,
    /// Keep the value in [`Header::reserved`](crate::Header::reserved) and go on, as the
    /// reference implementation does (it never checks the field).
    Ignore,
}

/// Decode limits: every size a peer controls is checked against one of these before memory
/// is reserved for it.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Limits {
    /// Largest header data size accepted, i.e. payload bytes on the wire. Default 1 MiB
    /// (1,048,576; exactly this is allowed), the reference's limit.
    pub max_payload: u32,
    /// Largest inflated payload of a compressed frame. Default 10 MiB, enforced while
    /// inflating: a gzip bomb costs at most this much memory.
    pub max_decompressed: usize,
    /// Largest number of messages in one batch. Default 100.
    pub max_batch: usize,
    /// Largest JSON text frame. Default 1 MiB, as for binary payloads.
    pub max_text: usize,
    /// What to do with a non-zero reserved header field. Default [`ReservedPolicy::Reject`].
    pub reserved: ReservedPolicy,
    /// Deepest nesting of arrays and objects in a message, counted in its JSON form (the
    /// envelope is level 1, `params` level 2). Default 128
    /// ([`agentwire_core::DEFAULT_MAX_JSON_DEPTH`]), checked with
    /// [`agentwire_core::check_json_depth`] over the whole text before anything is parsed,
    /// so nothing deeper is decoded, stored or forwarded; deeper is
    /// [`DecodeError::TooDeep`](crate::DecodeError::TooDeep), code 4007. A 24-byte frame's
    /// payload (the params, an error object or a batch body) sits one level deeper in the
    /// JSON form, so it is checked against one level less: whatever is accepted in one form
    /// can be forwarded in the other. serde_json itself parses at most 127 levels, so a
    /// larger value admits no more.
    pub max_json_depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_payload: 1 << 20,
            max_decompressed: 10 << 20,
            max_batch: 100,
            max_text: 1 << 20,
            reserved: ReservedPolicy::Reject,
            max_json_depth: agentwire_core::DEFAULT_MAX_JSON_DEPTH,
        }
    }
}

/// The deflate implementation behind gzip.
///
/// Both are pure Rust. [`Backend::default`] is zlib-rs when the `zlib-rs` feature is on (the
/// default), else miniz_oxide; the README has the measurement behind that choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Backend {
    /// `miniz_oxide`, flate2's default backend (always available).
    MinizOxide,
    /// `zlib-rs` through flate2 (feature `zlib-rs`, on by default).
    #[cfg(feature = "zlib-rs")]
    ZlibRs,
}

#[allow(clippy::derivable_impls)] // the default depends on a feature
impl Default for Backend {
    fn default() -> Self {
        #[cfg(feature = "zlib-rs")]
        {
            Self::ZlibRs
        }
        #[cfg(not(feature = "zlib-rs"))]
        {
            Self::MinizOxide
        }
    }
}

/// When the encoder tries to gzip a payload.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub enum CompressPolicy {
    /// Never compress.
    Never,
    /// Compress every payload longer than [`Compression::threshold`], and send the result
    /// only if it is smaller (the reference's rule; default).
    #[default]
    IfSmaller,
    /// The spec's `ShouldCompress`: as [`IfSmaller`](Self::IfSmaller), but skip payloads whose
    /// first 1 KiB has a Shannon entropy of `max_bits_per_byte` or more (the spec uses 6.5),
    /// which would not shrink and only cost CPU.
    Entropy {
        /// Entropy (bits per byte, 0-8) at or above which compression is skipped.
        max_bits_per_byte: f64,
    },
}

impl CompressPolicy {
    /// The spec's `ShouldCompress` policy with its 6.5 bits-per-byte cut-off.
    pub const SPEC_ENTROPY: Self = Self::Entropy {
        max_bits_per_byte: 6.5,
    };
}

/// How outgoing payloads are compressed.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Compression {
    /// Payloads of at most this many bytes are sent as they are. Default 1024 (the
    /// reference compresses only payloads *longer* than 1024 bytes).
    pub threshold: usize,
    /// Deflate level, 0-9. Default 1: at 1 KiB-64 KiB JSON it is several times faster than 6
    /// for a few percent larger output (README, "Benchmarks").
    pub level: u32,
    /// The deflate implementation. Default [`Backend::default`].
    pub backend: Backend,
    /// When to try. Default [`CompressPolicy::IfSmaller`].
    pub policy: CompressPolicy,
}

impl Default for Compression {
    fn default() -> Self {
        Self {
            threshold: 1024,
            level: 1,
            backend: Backend::default(),
            policy: CompressPolicy::IfSmaller,
        }
    }
}

/// Everything a [`Codec`](crate::Codec) is configured with.
#[derive(Clone, Debug, PartialEq, Default)]
#[non_exhaustive]
pub struct CodecConfig {
    /// Decode limits.
    pub limits: Limits,
    /// Outgoing compression.
    pub compression: Compression,
    /// The body the encoder writes for a batch in a 24-byte frame. Default
    /// [`BatchForm::Json`], the spec's; the decoder reads both.
    pub batch: BatchForm,
}

/// Bounds on what peers (and commands) can make the orchestrator hold.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OrchestratorLimits {
    /// Connections at once; one more is closed 1013 `server-full` at once. Default 10,000
    /// (the upgrade policy should refuse it earlier with 503).
    pub max_connections: usize,
    /// Registered agents at once; one more registration gets 4003. Default 1,024.
    pub max_agents: usize,
    /// Largest message (a frame, and a binary payload after decompression), in bytes.
    /// Default 1 MiB, exactly the limit allowed; larger gets 4007.
    pub max_message_bytes: usize,
    /// Capabilities one agent may declare. Default 64; more gets 4005 on `capabilities`.
    pub max_capabilities: usize,
    /// Tasks held (queued, assigned or running). Default 10,000; `submit_task` beyond it
    /// fails with [`CommandError::TooManyTasks`](crate::orchestrator::CommandError::TooManyTasks).
    pub max_tasks: usize,
    /// Collaborations in flight. Default 1,024; one more gets 4003.
    pub max_collaborations: usize,
    /// Agents one collaboration may require. Default 32; more gets 4005 on `required_agents`.
    pub max_collaborators: usize,
    /// Longest id (agent, task, message) in bytes. Default 256; longer gets 4005.
    pub max_id_bytes: usize,
    /// Label sets per metric family. Default 256.
    pub max_metric_series: usize,
    /// Deepest nesting of a message in its JSON form (the codec's
    /// [`Limits::max_json_depth`]): deeper gets 4007 and is
    /// never forwarded or stored. A task's `context` and `requirements` travel two levels
    /// down in `task.assigned`, so [`submit_task`](crate::orchestrator::Orchestrator::submit_task)
    /// refuses them deeper than this minus 2 ([`CommandError::TooDeep`](crate::orchestrator::CommandError::TooDeep)).
    /// Default 128 ([`agentwire_core::DEFAULT_MAX_JSON_DEPTH`]).
    pub max_json_depth: usize,
    /// Cancelled tasks remembered for their
    /// [`cancel_grace`](OrchestratorConfig::cancel_grace) (so that messages about them
    /// already in flight are not answered 4008). Default 1,024; beyond it the oldest is
    /// forgotten early.
    pub max_cancelled_tasks: usize,
    /// Idempotency keys remembered with their answers (see
    /// [`idempotency_ttl`](OrchestratorConfig::idempotency_ttl)). Default 4,096; beyond it
    /// the oldest is forgotten early.
    pub max_idempotency_keys: usize,
    /// Bytes of answers kept under idempotency keys, all keys together. Default 4 MiB;
    /// beyond it the oldest keys are forgotten early (an answer larger than this is not kept).
    pub max_idempotency_bytes: usize,
    /// Bytes the parts of streamed messages may hold on one connection while they are
    /// reassembled (the crate's spec decision 50): a streamed message may be this large.
    /// Default 8 MiB; beyond it the stream is dropped with 4007.
    pub max_stream_bytes: usize,
    /// Streamed messages being reassembled at once on one connection. Default 4; a new one
    /// beyond it gets 4003.
    pub max_streams: usize,
}

impl Default for OrchestratorLimits {
    fn default() -> Self {
        Self {
            max_connections: 10_000,
            max_agents: 1024,
            max_message_bytes: 1 << 20,
            max_capabilities: 64,
            max_tasks: 10_000,
            max_collaborations: 1024,
            max_collaborators: 32,
            max_id_bytes: 256,
            max_metric_series: 256,
            max_json_depth: agentwire_core::DEFAULT_MAX_JSON_DEPTH,
            max_cancelled_tasks: 1024,
            max_idempotency_keys: 4096,
            max_idempotency_bytes: 4 << 20,
            max_stream_bytes: 8 << 20,
            max_streams: 4,
        }
    }
}

/// Configuration of the [`Orchestrator`](crate::orchestrator::Orchestrator).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct OrchestratorConfig {
    /// Messages per connection over time, counted before anything else is done with a
    /// message; beyond it the message gets error 4002. Default `Some(1000/min, burst 100)`
    /// (the reference server's); `None` turns it off.
    pub rate: Option<agentwire_core::Rate>,
    /// The heartbeat period agents are expected to keep. Default 30 s.
    pub heartbeat_interval: std::time::Duration,
    /// Heartbeat periods without one after which an agent is unhealthy (no new tasks).
    /// Default 2.
    pub unhealthy_after: u32,
    /// Heartbeat periods without one after which an agent is removed (its tasks are
    /// reassigned, its connection closed 1008 `heartbeat-timeout`). Default 3.
    pub remove_after: u32,
    /// Time a connection has to send `agent.register`. Default `Some(30 s)`; then close 1008
    /// `register-required`. `None` waits forever.
    pub register_timeout: Option<std::time::Duration>,
    /// Deadline of a task submitted without one. Default 5 min.
    pub default_task_deadline: std::time::Duration,
    /// Agents a task is tried on before it fails (first assignment included). Default 3.
    pub max_task_attempts: u32,
    /// Longest `graceful_timeout_ms` honoured in `agent.shutdown`. Default 5 min.
    pub max_shutdown_grace: std::time::Duration,
    /// How long after a task is cancelled (deadline, [`cancel_task`], handed over by
    /// `agent.shutdown`) the messages its agent had already sent about it are taken without
    /// a 4008: `task.progress` is dropped, a `task.complete` request is answered 4006 naming
    /// the task. After it, they are unknown tasks (4008). Default 30 s.
    ///
    /// [`cancel_task`]: crate::orchestrator::Orchestrator::cancel_task
    pub cancel_grace: std::time::Duration,
    /// How long the answer to a message with an `idempotency_key` is kept: the same key
    /// (same agent, same method, same params) within it gets that answer again and is not
    /// applied twice. Default 5 min.
    pub idempotency_ttl: std::time::Duration,
    /// Timeout of a collaboration whose request gives none, and the longest honoured.
    /// Default 30 s and 5 min.
    pub default_collaboration_timeout: std::time::Duration,
    /// See [`default_collaboration_timeout`](Self::default_collaboration_timeout).
    pub max_collaboration_timeout: std::time::Duration,
    /// How the routing score is weighed.
    pub routing: RoutingWeights,
    /// Bounds of the replicated state `state.sync` merges into.
    pub crdt: crate::crdt::CrdtLimits,
    /// What peers can make the orchestrator hold.
    pub limits: OrchestratorLimits,
    /// HMAC-SHA256 message authentication with a shared secret: when set, every frame must
    /// carry its tag where [`signing`](crate::signing) puts it, else it is refused with
    /// 4001 and not handled; every frame the orchestrator sends carries one. Default `None`
    /// (off).
    pub hmac: Option<crate::signing::Signer>,
    /// When outgoing payloads are gzipped (above 1 KiB, and only if smaller). Default
    /// [`CompressPolicy::IfSmaller`], the reference server's rule;
    /// [`CompressPolicy::SPEC_ENTROPY`] is the spec's adaptive `ShouldCompress`, which skips
    /// payloads whose first 1 KiB looks incompressible.
    pub compression: CompressPolicy,
    /// Sender-side batching (the spec's "batch small messages"; the crate's spec decision
    /// 58): small messages the orchestrator starts (`task.assigned`, forwarded
    /// `collaboration.request`s, `state.sync` notifications; 1 KiB of JSON at most) to a
    /// peer speaking the JSON or 12-byte form wait up to this long and leave together as
    /// one batch (at once when `max_batch` are waiting); errors and answers never wait.
    /// Default `None`: every message leaves at once.
    pub batch_linger: Option<std::time::Duration>,
}

impl Default for OrchestratorConfig {
    fn default() -> Self {
        Self {
            rate: Some(agentwire_core::Rate::per_minute(1000, 100)),
            heartbeat_interval: std::time::Duration::from_secs(30),
            unhealthy_after: 2,
            remove_after: 3,
            register_timeout: Some(std::time::Duration::from_secs(30)),
            default_task_deadline: std::time::Duration::from_secs(300),
            max_task_attempts: 3,
            max_shutdown_grace: std::time::Duration::from_secs(300),
            cancel_grace: std::time::Duration::from_secs(30),
            idempotency_ttl: std::time::Duration::from_secs(300),
            default_collaboration_timeout: std::time::Duration::from_secs(30),
            max_collaboration_timeout: std::time::Duration::from_secs(300),
            routing: RoutingWeights::default(),
            crdt: crate::crdt::CrdtLimits::default(),
            limits: OrchestratorLimits::default(),
            hmac: None,
            compression: CompressPolicy::IfSmaller,
            batch_linger: None,
        }
    }
}

impl OrchestratorConfig {
    /// Sets [`rate`](Self::rate).
    pub fn with_rate(mut self, rate: Option<agentwire_core::Rate>) -> Self {
        self.rate = rate;
        self
    }

    /// Sets [`heartbeat_interval`](Self::heartbeat_interval).
    pub fn with_heartbeat_interval(mut self, d: std::time::Duration) -> Self {
        self.heartbeat_interval = d;
        self
    }

    /// Sets [`unhealthy_after`](Self::unhealthy_after) and
    /// [`remove_after`](Self::remove_after) (kept at least `unhealthy_after`).
    pub fn with_missed_heartbeats(mut self, unhealthy_after: u32, remove_after: u32) -> Self {
        self.unhealthy_after = unhealthy_after.max(1);
        self.remove_after = remove_after.max(self.unhealthy_after);
        self
    }

    /// Sets [`register_timeout`](Self::register_timeout).
    pub fn with_register_timeout(mut self, d: Option<std::time::Duration>) -> Self {
        self.register_timeout = d;
        self
    }

    /// Sets [`default_task_deadline`](Self::default_task_deadline).
    pub fn with_default_task_deadline(mut self, d: std::time::Duration) -> Self {
        self.default_task_deadline = d;
        self
    }

    /// Sets [`max_task_attempts`](Self::max_task_attempts) (at least 1).
    pub fn with_max_task_attempts(mut self, n: u32) -> Self {
        self.max_task_attempts = n.max(1);
        self
    }

    /// Sets [`cancel_grace`](Self::cancel_grace).
    pub fn with_cancel_grace(mut self, d: std::time::Duration) -> Self {
        self.cancel_grace = d;
        self
    }

    /// Sets [`idempotency_ttl`](Self::idempotency_ttl).
    pub fn with_idempotency_ttl(mut self, d: std::time::Duration) -> Self {
        self.idempotency_ttl = d;
        self
    }

    /// Sets [`limits`](Self::limits).
    pub fn with_limits(mut self, limits: OrchestratorLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Turns HMAC message authentication on with the shared `secret` (see
    /// [`hmac`](Self::hmac)).
    pub fn with_hmac_secret(mut self, secret: &[u8]) -> Self {
        self.hmac = Some(crate::signing::Signer::new(secret));
        self
    }

    /// Sets [`batch_linger`](Self::batch_linger).
    pub fn with_batch_linger(mut self, linger: Option<std::time::Duration>) -> Self {
        self.batch_linger = linger;
        self
    }

    /// Sets [`compression`](Self::compression).
    pub fn with_compression(mut self, policy: CompressPolicy) -> Self {
        self.compression = policy;
        self
    }

    /// Sets [`crdt`](Self::crdt).
    pub fn with_crdt_limits(mut self, crdt: crate::crdt::CrdtLimits) -> Self {
        self.crdt = crdt;
        self
    }
}

/// Weights of the routing score.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct RoutingWeights {
    /// Weight of the capability's confidence. Default 0.5.
    pub confidence: f64,
    /// Weight of the share of the task's focus areas among the capability's specialties.
    /// Default 0.2.
    pub specialty: f64,
    /// Weight of spare capacity (1 - load). Default 0.3.
    pub capacity: f64,
    /// Alternatives recorded in `routing_metadata.alternative_agents`. Default 3.
    pub max_alternatives: usize,
}

impl Default for RoutingWeights {
    fn default() -> Self {
        Self {
            confidence: 0.5,
            specialty: 0.2,
            capacity: 0.3,
            max_alternatives: 3,
        }
    }
}

/// The body a batch frame (type 6, flag `BATCH`) carries.
///
/// Both are read whatever this says (the first byte tells them apart: `{` starts the JSON
/// body, a binary body starts with its count's high byte, 0 for any count a decoder accepts);
/// it chooses only what the encoder writes ([`CodecConfig::batch`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum BatchForm {
    /// The spec's `BatchMessage` params: `{"messages": [JSON form, ...], "count": n}`
    /// (default).
    #[default]
    Json,
    /// What the real server's `createBinaryBatch` writes: a u32 BE message count, then per
    /// message a u32 BE length and the message's JSON form.
    Binary,
}

/// How an [`Agent`](crate::Agent) waits between connection attempts: `initial`,
/// doubled after each failure in a row, at most `max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reconnect {
    /// The first wait. Default 500 ms.
    pub initial: std::time::Duration,
    /// The longest wait. Default 30 s.
    pub max: std::time::Duration,
    /// How long a connection must stay open for the next wait to start from `initial`
    /// again; shorter ones (refused right after the upgrade) keep doubling it. Default 30 s.
    pub stable_after: std::time::Duration,
}

impl Default for Reconnect {
    fn default() -> Self {
        Self {
            initial: std::time::Duration::from_millis(500),
            max: std::time::Duration::from_secs(30),
            stable_after: std::time::Duration::from_secs(30),
        }
    }
}

impl Reconnect {
    /// Waits from `initial` doubling up to `max` (and the default `stable_after`).
    pub fn new(initial: std::time::Duration, max: std::time::Duration) -> Self {
        Self {
            initial,
            max,
            ..Self::default()
        }
    }

    /// The wait after `failures` failures in a row (1: `initial`).
    pub fn delay(&self, failures: u32) -> std::time::Duration {
        let doublings = failures.saturating_sub(1).min(20);
        self.initial.saturating_mul(1 << doublings).min(self.max)
    }
}

/// How an [`Agent`](crate::Agent) sends a request again after a retryable error (4002 Rate
/// Limited, 4003 Server Error): at most `max_attempts` sends in all, waiting `initial`
/// doubled after each refusal up to `max`, or the error's `data.retry_after_ms` when that is
/// longer (at most 10 min). A retry is a new message (new id or sequence id) with the same
/// params, idempotency key included.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// Sends of one request at most, the first included; 1 turns retries off. Default 4.
    pub max_attempts: u32,
    /// The wait after the first refusal. Default 500 ms.
    pub initial: std::time::Duration,
    /// The longest backoff wait (a longer `retry_after_ms` is honoured). Default 10 s.
    pub max: std::time::Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 4,
            initial: std::time::Duration::from_millis(500),
            max: std::time::Duration::from_secs(10),
        }
    }
}

impl RetryPolicy {
    /// The longest `retry_after_ms` honoured.
    pub const MAX_RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(600);

    /// Sends at most `max_attempts` times (at least 1), waiting `initial` doubling to `max`.
    pub fn new(max_attempts: u32, initial: std::time::Duration, max: std::time::Duration) -> Self {
        Self {
            max_attempts: max_attempts.max(1),
            initial,
            max,
        }
    }

    /// The wait after the `refusals`-th refusal in a row (1: `initial`), or `retry_after`
    /// when that is longer (capped at [`MAX_RETRY_AFTER`](Self::MAX_RETRY_AFTER)); at
    /// least 1 ms.
    pub fn delay(
        &self,
        refusals: u32,
        retry_after: Option<std::time::Duration>,
    ) -> std::time::Duration {
        let doublings = refusals.saturating_sub(1).min(20);
        let backoff = self.initial.saturating_mul(1 << doublings).min(self.max);
        retry_after
            .map_or(backoff, |r| r.min(Self::MAX_RETRY_AFTER).max(backoff))
            .max(std::time::Duration::from_millis(1))
    }
}

/// Everything an [`Agent`](crate::Agent) is configured with.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct AgentConfig {
    /// The `agent.register` params sent on every new connection; its `agent_id` is the
    /// agent's id in every message it sends.
    pub register: crate::params::AgentRegister,
    /// Speak 24-byte binary frames instead of JSON text until `protocol.set_binary`
    /// switches the connection to the 12-byte form. Default `false`.
    pub binary: bool,
    /// How often `agent.heartbeat` goes out once registered. Default 30 s (the
    /// orchestrator's period); a server that asks for a shorter `heartbeat_interval_ms`
    /// (at least 1 s) gets that.
    pub heartbeat_interval: std::time::Duration,
    /// Reconnect waits. Default [`Reconnect::default`].
    pub reconnect: Reconnect,
    /// Tasks held at once (assigned and not completed); one more is
    /// [`AgentEvent::TaskDropped`](crate::AgentEvent::TaskDropped). Default 64.
    pub max_tasks: usize,
    /// Collaboration requests awaiting the application's answer; one more is answered
    /// with a 4003 error. Default 64.
    pub max_collaborations: usize,
    /// How long [`Agent::shutdown`](crate::Agent::shutdown) lasts at most: it is sent as
    /// `agent.shutdown`'s `graceful_timeout_ms`, and the agent closes the connection when
    /// it ends, answered or not, finished or not. Default 5 s.
    pub shutdown_timeout: std::time::Duration,
    /// How requests refused with a retryable error (4002 Rate Limited, 4003 Server Error)
    /// are sent again. Default [`RetryPolicy::default`].
    pub retry: RetryPolicy,
    /// `agent.capability.update` and `collaboration.request` requests awaiting an answer;
    /// one more is [`AgentCommandError::TooManyPending`](crate::AgentCommandError::TooManyPending).
    /// Default 64.
    pub max_pending: usize,
    /// The codec: decode limits and compression (its
    /// [`policy`](Compression::policy) is the adaptive-compression setting:
    /// [`CompressPolicy::SPEC_ENTROPY`] for the spec's rule). Default
    /// [`CodecConfig::default`].
    pub codec: CodecConfig,
    /// HMAC-SHA256 message authentication with a shared secret: when set, every frame the
    /// agent sends carries its tag where [`signing`](crate::signing) puts it, and frames
    /// from the server without a good one are reported
    /// ([`AgentEvent::ProtocolViolation`](crate::AgentEvent::ProtocolViolation), 4001) and
    /// not handled. Default `None` (off).
    pub hmac: Option<crate::signing::Signer>,
    /// The protocol versions the agent speaks, offered at the upgrade as the subprotocols
    /// [`subprotocols`](Self::subprotocols) lists; the server selects the highest it
    /// speaks too ([`Agent::protocol_version`](crate::Agent::protocol_version), the crate's
    /// spec decision 49). Default [`VERSIONS`](crate::VERSIONS), every version the crate
    /// speaks (`[1]`, the only version there is).
    pub protocol_versions: Vec<u8>,
    /// A message too large for one frame (over the codec's
    /// [`max_payload`](Limits::max_payload) in the 24-byte form, its
    /// [`max_text`](Limits::max_text) in the others, e.g. a large task result) is streamed
    /// as `stream.part` notifications carrying slices of this many bytes of its JSON form
    /// (the crate's spec decision 50). Default 256 KiB.
    pub stream_part_bytes: usize,
    /// Sender-side batching (the crate's spec decision 58): small messages the agent
    /// starts (heartbeats, progress reports, requests; 1 KiB of JSON at most) wait up to
    /// this long and leave together as one batch, in the JSON and 12-byte forms (a
    /// 24-byte batch's entries would lose their sequence ids); answers never wait.
    /// Default `None`: every message leaves at once.
    pub batch_linger: Option<std::time::Duration>,
    /// Keep a replica of the shared CRDT state: after each registration the agent fetches
    /// the whole state (`state.get`), then applies the syncs other agents make and sends its
    /// own ([`Agent::state_increment`](crate::Agent::state_increment) and the like).
    /// Default `false`.
    pub shared_state: bool,
    /// Bounds on the replica (checked on every sync and full sync the server sends).
    /// Default [`CrdtLimits::default`](crate::crdt::CrdtLimits).
    pub crdt: crate::crdt::CrdtLimits,
    /// Own `state.sync`s awaiting the server's answer; one more local change is refused.
    /// Default 64.
    pub max_pending_syncs: usize,
}

impl AgentConfig {
    /// The defaults, registering with `register`.
    pub fn new(register: crate::params::AgentRegister) -> Self {
        Self {
            register,
            binary: false,
            heartbeat_interval: std::time::Duration::from_secs(30),
            reconnect: Reconnect::default(),
            max_tasks: 64,
            max_collaborations: 64,
            shutdown_timeout: std::time::Duration::from_secs(5),
            retry: RetryPolicy::default(),
            max_pending: 64,
            codec: CodecConfig::default(),
            hmac: None,
            protocol_versions: crate::VERSIONS.to_vec(),
            stream_part_bytes: 256 << 10,
            batch_linger: None,
            shared_state: false,
            crdt: crate::crdt::CrdtLimits::default(),
            max_pending_syncs: 64,
        }
    }

    /// Keeps a replica of the shared CRDT state (`true`) or not.
    #[must_use]
    pub fn with_shared_state(mut self, shared: bool) -> Self {
        self.shared_state = shared;
        self
    }

    /// Signs every frame with the shared `secret` and checks the server's (see
    /// [`hmac`](Self::hmac)).
    #[must_use]
    pub fn with_hmac_secret(mut self, secret: &[u8]) -> Self {
        self.hmac = Some(crate::signing::Signer::new(secret));
        self
    }

    /// Sets [`protocol_versions`](Self::protocol_versions).
    #[must_use]
    pub fn with_protocol_versions(mut self, versions: impl IntoIterator<Item = u8>) -> Self {
        self.protocol_versions = versions.into_iter().collect();
        self
    }

    /// The subprotocols the driver offers at the upgrade: `mcp.v<n>` for each of
    /// [`protocol_versions`](Self::protocol_versions), the highest first.
    pub fn subprotocols(&self) -> Vec<String> {
        let mut versions = self.protocol_versions.clone();
        versions.sort_unstable_by(|a, b| b.cmp(a));
        versions.dedup();
        versions
            .into_iter()
            .map(crate::codes::subprotocol_of)
            .collect()
    }

    /// Sets [`batch_linger`](Self::batch_linger).
    #[must_use]
    pub fn with_batch_linger(mut self, linger: Option<std::time::Duration>) -> Self {
        self.batch_linger = linger;
        self
    }

    /// Sets the adaptive-compression policy of outgoing payloads.
    #[must_use]
    pub fn with_compression(mut self, policy: CompressPolicy) -> Self {
        self.codec.compression.policy = policy;
        self
    }

    /// Speaks 24-byte binary frames (`true`) or JSON text.
    #[must_use]
    pub fn with_binary(mut self, binary: bool) -> Self {
        self.binary = binary;
        self
    }

    /// Sets the heartbeat period.
    #[must_use]
    pub fn with_heartbeat_interval(mut self, interval: std::time::Duration) -> Self {
        self.heartbeat_interval = interval;
        self
    }

    /// Sets the reconnect waits.
    #[must_use]
    pub fn with_reconnect(mut self, reconnect: Reconnect) -> Self {
        self.reconnect = reconnect;
        self
    }

    /// Sets the task limit.
    #[must_use]
    pub fn with_max_tasks(mut self, max: usize) -> Self {
        self.max_tasks = max;
        self
    }

    /// Sets [`shutdown_timeout`](Self::shutdown_timeout).
    #[must_use]
    pub fn with_shutdown_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// Sets [`retry`](Self::retry).
    #[must_use]
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }
}

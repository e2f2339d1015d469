//! The code spaces of the header ([`MessageType`], [`Flags`], [`Method`]) and the names of
//! protocol versions as subprotocols: the bottom of the crate, imported by the header, the
//! errors and the configuration alike.

use std::fmt;

/// The subprotocol that names protocol version `version`: `mcp.v<version>` (the crate's
/// spec decision 49: versions are negotiated as subprotocols).
pub fn subprotocol_of(version: u8) -> String {
    format!("mcp.v{version}")
}

/// The protocol version a subprotocol names (`mcp.v2` is 2), if it names one.
pub fn version_of(subprotocol: &str) -> Option<u8> {
    let digits = subprotocol.strip_prefix("mcp.v")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|v| *v > 0)
}

agentwire_core::open_codes! {
    /// The message type byte: an open newtype, so unknown types survive a round trip.
    #[derive(Default)]
    pub struct MessageType(u8);
    /// A request (0); a response echoes its sequence id (binary) or id (JSON).
    REQUEST = 0;
    /// A response (1).
    RESPONSE = 1;
    /// A notification (2): no response expected.
    NOTIFICATION = 2;
    /// An error (3): the payload is an [`ErrorBody`](crate::ErrorBody).
    ERROR = 3;
    /// Keepalive ping (4).
    PING = 4;
    /// Keepalive pong (5).
    PONG = 5;
    /// A batch of messages (6).
    BATCH = 6;
    /// A progress update (7), e.g. `task.progress`.
    PROGRESS = 7;
}

/// The flags field: an open bit set, so unknown bits survive a round trip.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Flags(pub u16);

impl Flags {
    /// No flag set.
    pub const NONE: Self = Self(0);
    /// The payload is a gzip member (bit 0).
    pub const COMPRESSED: Self = Self(1 << 0);
    /// The payload is encrypted (bit 1); the codec does not decrypt.
    pub const ENCRYPTED: Self = Self(1 << 1);
    /// The payload holds several messages (bit 2).
    pub const BATCH: Self = Self(1 << 2);
    /// High priority (bit 3; in the spec, not in the reference).
    pub const PRIORITY: Self = Self(1 << 3);
    /// Part of a streaming response (bit 4; in the spec, not in the reference).
    pub const STREAMING: Self = Self(1 << 4);
    /// Every named bit.
    pub const KNOWN: Self = Self(0x1f);

    const NAMES: [(Self, &'static str); 5] = [
        (Self::COMPRESSED, "COMPRESSED"),
        (Self::ENCRYPTED, "ENCRYPTED"),
        (Self::BATCH, "BATCH"),
        (Self::PRIORITY, "PRIORITY"),
        (Self::STREAMING, "STREAMING"),
    ];

    /// Whether every bit of `other` is set.
    pub fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// These flags with the bits of `other` set.
    #[must_use]
    pub fn with(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// These flags with the bits of `other` cleared.
    #[must_use]
    pub fn without(self, other: Self) -> Self {
        Self(self.0 & !other.0)
    }

    /// The bits no constant names.
    pub fn unknown_bits(self) -> u16 {
        self.0 & !Self::KNOWN.0
    }
}

impl std::ops::BitOr for Flags {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        self.with(rhs)
    }
}

impl fmt::Debug for Flags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            return f.write_str("NONE");
        }
        let mut first = true;
        let mut sep = |f: &mut fmt::Formatter<'_>| {
            let s = if first { "" } else { " | " };
            first = false;
            f.write_str(s)
        };
        for (flag, name) in Self::NAMES {
            if self.contains(flag) {
                sep(f)?;
                f.write_str(name)?;
            }
        }
        if self.unknown_bits() != 0 {
            sep(f)?;
            write!(f, "{:#06x}", self.unknown_bits())?;
        }
        Ok(())
    }
}

agentwire_core::open_codes! {
    /// The method code: an open newtype, so unknown codes survive a round trip.
    ///
    /// 1-9 are the reference implementation's codes; 10-19 are ours for the spec's agent methods
    /// (the reference has none for them). 0 means "the name travels in the payload".
    #[derive(Default)]
    pub struct Method(u16), text fn as_str;
    /// 0: no code; the method name travels in the payload.
    UNKNOWN = 0, "unknown";
    /// 1 (reference): `initialize`.
    INITIALIZE = 1, "initialize";
    /// 2 (reference): `tool.list`.
    TOOL_LIST = 2, "tool.list";
    /// 3 (reference): `tool.execute`.
    TOOL_EXECUTE = 3, "tool.execute";
    /// 4 (reference): `context.get`.
    CONTEXT_GET = 4, "context.get";
    /// 5 (reference): `context.update`.
    CONTEXT_UPDATE = 5, "context.update";
    /// 6 (reference): `event.subscribe`.
    EVENT_SUBSCRIBE = 6, "event.subscribe";
    /// 7 (reference): `event.unsubscribe`.
    EVENT_UNSUBSCRIBE = 7, "event.unsubscribe";
    /// 8 (reference): `ping`.
    PING = 8, "ping";
    /// 9 (reference): `pong`.
    PONG = 9, "pong";
    /// 10 (ours): `agent.register`.
    AGENT_REGISTER = 10, "agent.register";
    /// 11 (ours): `registration.confirmed`.
    REGISTRATION_CONFIRMED = 11, "registration.confirmed";
    /// 12 (ours): `agent.heartbeat`.
    AGENT_HEARTBEAT = 12, "agent.heartbeat";
    /// 13 (ours): `task.assigned`.
    TASK_ASSIGNED = 13, "task.assigned";
    /// 14 (ours): `task.progress`.
    TASK_PROGRESS = 14, "task.progress";
    /// 15 (ours): `task.complete`.
    TASK_COMPLETE = 15, "task.complete";
    /// 16 (ours): `agent.capability.update`.
    AGENT_CAPABILITY_UPDATE = 16, "agent.capability.update";
    /// 17 (ours): `collaboration.request`.
    COLLABORATION_REQUEST = 17, "collaboration.request";
    /// 18 (ours): `state.sync`.
    STATE_SYNC = 18, "state.sync";
    /// 19 (ours): `agent.shutdown`.
    AGENT_SHUTDOWN = 19, "agent.shutdown";
}

impl Method {
    /// Every named method, by code.
    pub const KNOWN: &'static [(Self, &'static str)] = &[
        (Self::UNKNOWN, "unknown"),
        (Self::INITIALIZE, "initialize"),
        (Self::TOOL_LIST, "tool.list"),
        (Self::TOOL_EXECUTE, "tool.execute"),
        (Self::CONTEXT_GET, "context.get"),
        (Self::CONTEXT_UPDATE, "context.update"),
        (Self::EVENT_SUBSCRIBE, "event.subscribe"),
        (Self::EVENT_UNSUBSCRIBE, "event.unsubscribe"),
        (Self::PING, "ping"),
        (Self::PONG, "pong"),
        (Self::AGENT_REGISTER, "agent.register"),
        (Self::REGISTRATION_CONFIRMED, "registration.confirmed"),
        (Self::AGENT_HEARTBEAT, "agent.heartbeat"),
        (Self::TASK_ASSIGNED, "task.assigned"),
        (Self::TASK_PROGRESS, "task.progress"),
        (Self::TASK_COMPLETE, "task.complete"),
        (Self::AGENT_CAPABILITY_UPDATE, "agent.capability.update"),
        (Self::COLLABORATION_REQUEST, "collaboration.request"),
        (Self::STATE_SYNC, "state.sync"),
        (Self::AGENT_SHUTDOWN, "agent.shutdown"),
    ];

    /// The code of a wire method name; [`Method::UNKNOWN`] for names without one.
    pub fn from_name(name: &str) -> Self {
        match name {
            "unknown" => Self::UNKNOWN,
            "initialize" => Self::INITIALIZE,
            "tool.list" => Self::TOOL_LIST,
            "tool.execute" => Self::TOOL_EXECUTE,
            "context.get" => Self::CONTEXT_GET,
            "context.update" => Self::CONTEXT_UPDATE,
            "event.subscribe" => Self::EVENT_SUBSCRIBE,
            "event.unsubscribe" => Self::EVENT_UNSUBSCRIBE,
            "ping" => Self::PING,
            "pong" => Self::PONG,
            "agent.register" => Self::AGENT_REGISTER,
            "registration.confirmed" => Self::REGISTRATION_CONFIRMED,
            "agent.heartbeat" => Self::AGENT_HEARTBEAT,
            "task.assigned" => Self::TASK_ASSIGNED,
            "task.progress" => Self::TASK_PROGRESS,
            "task.complete" => Self::TASK_COMPLETE,
            "agent.capability.update" => Self::AGENT_CAPABILITY_UPDATE,
            "collaboration.request" => Self::COLLABORATION_REQUEST,
            "state.sync" => Self::STATE_SYNC,
            "agent.shutdown" => Self::AGENT_SHUTDOWN,
            _ => Self::UNKNOWN,
        }
    }
}

//! The relay's output side: the queue of frames, closes and events, the study-log records
//! that precede what they record, and the counters.

use std::time::Instant;

use agentwire_core::{ConnId, FrameBuf, Outbox, Utf8Bytes};
use bytes::Bytes;
use serde::Serialize;

use super::inbound::Inbound;
use super::members::Members;
use super::pending::Pending;
use super::study_log::{Recorded, StudyLog};
use crate::codec::{write_envelope, write_request, ErrorRef, Route};
use crate::error::ProtocolError;
use crate::event::RelayEvent;
use crate::id::SessionId;
use crate::log::Direction;
use crate::message::{types, ErrorCode, RelayPresence, Role};
use crate::texts;

/// Counters a test or a metrics exporter can read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RelayStats {
    /// Frames received on accepted connections.
    pub received: u64,
    /// Agent messages forwarded to a host.
    pub to_host: u64,
    /// Frames sent to agents by forwarding (a push to three agents counts three).
    pub to_agents: u64,
    /// `error` messages the relay itself sent.
    pub errors_sent: u64,
    /// Study-log records emitted.
    pub log_records: u64,
    /// The relay's own study-log records (joins, presence, errors, ...) not emitted because
    /// their session's log reached
    /// [`Limits::max_log_bytes_per_session`](crate::Limits::max_log_bytes_per_session).
    pub log_records_dropped: u64,
}

/// The study-log payload of an `error` that refused a message: the `error` as sent, plus
/// the refused message's type and size (never its payload).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RefusalRecord<'a> {
    code: &'a ErrorCode,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    refused_type: Option<&'a str>,
    refused_bytes: usize,
}

/// `relay.disconnect` log payload (the reference relay's record).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DisconnectRecord<'a> {
    client_id: &'a str,
    role: Role,
    #[serde(skip_serializing_if = "Option::is_none")]
    client_name: Option<&'a str>,
}

/// Where the relay's outputs go, in order, with the study-log state and the counters.
#[derive(Debug)]
pub(super) struct Emitter {
    pub(super) out: Outbox<RelayEvent>,
    pub(super) stats: RelayStats,
    pub(super) study_log: StudyLog,
    /// The message [`Machine::handle_frame`](agentwire_core::Machine::handle_frame) is
    /// handling.
    pub(super) inbound: Inbound,
}

impl Emitter {
    /// An empty queue over `study_log`.
    pub(super) fn new(study_log: StudyLog) -> Self {
        Self {
            out: Outbox::new(),
            stats: RelayStats::default(),
            study_log,
            inbound: Inbound::default(),
        }
    }

    /// Emits a study-log record of `session`, if records are on and it fits.
    pub(super) fn log(
        &mut self,
        session: &SessionId,
        direction: Direction,
        msg_type: &'static str,
        payload: Utf8Bytes,
        now: Instant,
    ) {
        match self
            .study_log
            .record(session, direction, msg_type, payload, now)
        {
            Recorded::Off => {}
            Recorded::Dropped => self.stats.log_records_dropped += 1,
            Recorded::Record(record) => {
                self.stats.log_records += 1;
                self.out.event(RelayEvent::Log(record));
            }
        }
    }

    /// Emits a JSON payload the relay makes as a study-log record of `session`.
    pub(super) fn log_json<P: Serialize>(
        &mut self,
        session: &SessionId,
        msg_type: &'static str,
        payload: &P,
        now: Instant,
    ) {
        let payload = json_bytes(payload);
        self.log(session, Direction::Internal, msg_type, payload, now);
    }

    /// Sends a message the relay makes to `conn`; its session, if it is a member, logs it
    /// (internal) first.
    pub(super) fn send_own<P: Serialize + ?Sized>(
        &mut self,
        members: &Members,
        conn: ConnId,
        msg_type: &'static str,
        reply_to: Option<&str>,
        payload: &P,
        now: Instant,
    ) {
        let mut buf = Vec::with_capacity(128);
        let range = write_envelope(&mut buf, msg_type, reply_to, payload);
        let bytes = Bytes::from(buf);
        if let Some(session) = members.session_of(conn) {
            let payload = Utf8Bytes::from_encoder(bytes.slice(range));
            self.log(&session, Direction::Internal, msg_type, payload, now);
        }
        self.out
            .send(conn, FrameBuf::Text(Utf8Bytes::from_encoder(bytes)));
    }

    /// Sends an `error` the relay makes (not a refusal of the message being handled).
    pub(super) fn send_error(
        &mut self,
        members: &Members,
        conn: ConnId,
        code: &ErrorCode,
        message: &str,
        reply_to: Option<&str>,
        now: Instant,
    ) {
        self.stats.errors_sent += 1;
        let payload = ErrorRef { code, message };
        self.send_own(members, conn, types::ERROR, reply_to, &payload, now);
    }

    /// Reports a peer's violation.
    pub(super) fn violation(&mut self, conn: ConnId, error: ProtocolError) {
        self.out
            .event(RelayEvent::ProtocolViolation { conn, error });
    }

    /// Answers the message being handled with an `error`: the frame as any `error`, the
    /// study-log record (for a member's session) with the refused message's type and size
    /// added, never its payload.
    pub(super) fn send_refusal(
        &mut self,
        members: &Members,
        conn: ConnId,
        code: &ErrorCode,
        message: &str,
        reply_to: Option<&str>,
        now: Instant,
    ) {
        self.stats.errors_sent += 1;
        let mut buf = Vec::with_capacity(128);
        write_envelope(
            &mut buf,
            types::ERROR,
            reply_to,
            &ErrorRef { code, message },
        );
        if let Some(session) = members.session_of(conn) {
            let record = RefusalRecord {
                code,
                message,
                refused_type: self.inbound.msg_type.as_deref(),
                refused_bytes: self.inbound.bytes,
            };
            let payload = json_bytes(&record);
            self.log(&session, Direction::Internal, types::ERROR, payload, now);
        }
        self.out.send(
            conn,
            FrameBuf::Text(Utf8Bytes::from_encoder(Bytes::from(buf))),
        );
    }

    /// Answers the message being handled with `error`'s code and `text`, then reports it.
    pub(super) fn refuse(
        &mut self,
        members: &Members,
        conn: ConnId,
        error: ProtocolError,
        text: &str,
        reply_to: Option<&str>,
        now: Instant,
    ) {
        self.send_refusal(members, conn, &error.code(), text, reply_to, now);
        self.violation(conn, error);
    }
}

impl Emitter {
    /// Sends `session`'s host (if it has one) the list of its agents, `relay.presence`.
    pub(super) fn presence(&mut self, members: &Members, session: &SessionId, now: Instant) {
        let Some((host, agents)) = members.presence(session) else {
            return;
        };
        let payload = RelayPresence {
            session_id: session.as_str().to_owned(),
            agent_count: u32::try_from(agents.len()).unwrap_or(u32::MAX),
            agents,
        };
        self.send_own(members, host, types::RELAY_PRESENCE, None, &payload, now);
    }

    /// Records that member `conn` of `session`, in `role`, disconnected (`relay.disconnect`,
    /// the reference relay's record).
    pub(super) fn log_disconnect(
        &mut self,
        members: &Members,
        conn: ConnId,
        session: &SessionId,
        role: Role,
        now: Instant,
    ) {
        if !self.study_log.enabled() {
            return;
        }
        let (client_id, client_name) = members.identity(conn);
        let record = DisconnectRecord {
            client_id,
            role,
            client_name,
        };
        self.log_json(session, types::RELAY_DISCONNECT, &record, now);
    }

    /// Answers each of `failed`, the requests outstanding when their host left, with
    /// SESSION_NOT_ACTIVE; returns how many there were.
    pub(super) fn host_gone(
        &mut self,
        members: &Members,
        failed: &[Pending],
        now: Instant,
    ) -> usize {
        for p in failed {
            let code = &ErrorCode::SESSION_NOT_ACTIVE;
            self.send_error(members, p.agent, code, texts::HOST_GONE, p.reply_to(), now);
        }
        failed.len()
    }
}

/// `payload` as JSON text (the relay's own payload types always serialize).
fn json_bytes<P: Serialize>(payload: &P) -> Utf8Bytes {
    let payload = serde_json::to_vec(payload).unwrap_or_default();
    Utf8Bytes::from_encoder(Bytes::from(payload))
}

/// Copies a received message once: the frame to forward, and its payload as a slice of the
/// same bytes (for the log).
pub(super) fn copy_frame(route: &Route<'_>) -> (FrameBuf, Utf8Bytes) {
    let bytes = Bytes::copy_from_slice(route.text.as_bytes());
    let payload = Utf8Bytes::from_encoder(bytes.slice(route.payload_range()));
    (FrameBuf::Text(Utf8Bytes::from_encoder(bytes)), payload)
}

/// An agent request sent without `id`, as the relay forwards it: re-encoded with `id` (the
/// relay's) as `{"v","type","id","payload"}` (other envelope fields are not kept), and its
/// payload as a slice of the new bytes (for the log).
pub(super) fn frame_with_id(route: &Route<'_>, id: &str) -> (FrameBuf, Utf8Bytes) {
    let mut buf = Vec::with_capacity(route.text.len() + id.len() + 8);
    let range = write_request(&mut buf, &route.msg_type, id, route.payload);
    split_frame(buf, range)
}

/// The host's answer to a request the agent sent without `id`, as the agent gets it: the
/// relay's `replyTo` taken out, `{"v","type","payload"}`.
pub(super) fn frame_without_reply_to(route: &Route<'_>) -> (FrameBuf, Utf8Bytes) {
    let mut buf = Vec::with_capacity(route.text.len());
    let range = write_envelope(&mut buf, &route.msg_type, None, route.payload);
    split_frame(buf, range)
}

fn split_frame(buf: Vec<u8>, payload: std::ops::Range<usize>) -> (FrameBuf, Utf8Bytes) {
    let bytes = Bytes::from(buf);
    let payload = Utf8Bytes::from_encoder(bytes.slice(payload));
    (FrameBuf::Text(Utf8Bytes::from_encoder(bytes)), payload)
}

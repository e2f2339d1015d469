//! [`LoggingRelay`]: the [`Relay`] with its study log written in the owner task.
//!
//! agentwire-tokio routes a machine's `Send` outputs straight to the connections' queues but
//! hands events to the application through a channel, so an application that wrote
//! [`RelayEvent::Log`] records from that channel could write a line after the message it
//! records was already on the wire. This wrapper closes that gap without a transport change:
//! it is itself the [`Machine`] the transport drives, and when the driver drains
//! [`poll_output`](Machine::poll_output) it writes each `Log` record synchronously (one
//! `write` to the session's file, `fsync` for `session.ended`) before it returns the record as
//! an event, and so before the driver can see the `Send` the relay queued after it.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::time::Instant;

use agentwire::agent_relay::{
    Direction, Envelope, ErrorCode, ErrorPayload, LogRecord, Relay, RelayEvent, RelayMessage,
    SessionId,
};
use agentwire::core::{ConnId, Frame, Machine, Output, PeerInfo};

use super::log_writer::{Appended, LogError, LogOp, StudyLog};

/// The `error` code a host gets when the study log of its session could not be written (ours;
/// the spec has none for it).
pub const LOG_WRITE_FAILED: &str = "LOG_WRITE_FAILED";

/// What the [`LoggingRelay`] tells the application.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerEvent {
    /// An event of the relay (every one but [`RelayEvent::Log`], which becomes
    /// [`Logged`](Self::Logged) or [`LogFailed`](Self::LogFailed)).
    Relay(RelayEvent),
    /// A study-log record was written (before the message it records is sent).
    Logged {
        /// The record.
        record: LogRecord,
        /// Its `eventIndex` in the session's file.
        event_index: u64,
        /// Whether the file was `fsync`ed after it.
        synced: bool,
        /// Bytes of a torn last line trimmed as the file was reopened for it.
        trimmed: u64,
    },
    /// The study log failed: a record (`record: Some`) was not written, or not synced, or a
    /// file could not be synced as it was closed (`record: None`). The session's host gets an
    /// `error` [`LOG_WRITE_FAILED`] at the end of the step ([`ReportedToHost`](Self::ReportedToHost)).
    LogFailed {
        /// The session.
        session: SessionId,
        /// The record's type and direction, if a record failed.
        record: Option<(&'static str, Direction)>,
        /// The file.
        path: PathBuf,
        /// What failed.
        op: LogOp,
        /// The error, as text.
        error: String,
    },
    /// A session's host was sent `error` [`LOG_WRITE_FAILED`] for the failures of one step.
    ReportedToHost {
        /// The session.
        session: SessionId,
        /// Its host.
        host: ConnId,
        /// Failures reported.
        failures: usize,
    },
}

/// Failures of one session in the current step, for its host.
#[derive(Debug)]
struct Failures {
    count: usize,
    last: String,
}

/// The [`Relay`] plus its [`StudyLog`]: drives like a `Relay` (same inputs, same frames, in
/// the same order), and writes every study-log record before returning the output after it.
///
/// A write failure is reported twice, never swallowed: as [`ServerEvent::LogFailed`] at
/// once, and, once the relay's outputs of the step are drained, to the session's host (if
/// it has one) as one `error` per session
/// `{"code":"LOG_WRITE_FAILED","message":"Study log write failed for session ...: N record(s)
/// ... (op path: cause)"}` without `replyTo`. The message itself is still forwarded (the
/// study goes on; the host knows its log has a hole). That `error` is not itself logged. When
/// a session empties, its file is synced and closed at the end of the step.
///
/// The writes are blocking `std::fs` calls in the task that owns the relay (a `write` per
/// record, an `fsync` per `session.ended`): every connection waits for them. That is the
/// price of writing each line before the message it records is routed.
pub struct LoggingRelay {
    relay: Relay,
    log: StudyLog,
    /// Outputs made by the wrapper, returned before the relay's next ones.
    ready: VecDeque<Output<ServerEvent>>,
    failures: BTreeMap<SessionId, Failures>,
}

impl std::fmt::Debug for LoggingRelay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoggingRelay")
            .field("relay", &self.relay)
            .field("log", &self.log)
            .finish_non_exhaustive()
    }
}

impl LoggingRelay {
    /// Wraps `relay`, writing its records to `log`.
    pub fn new(relay: Relay, log: StudyLog) -> Self {
        Self {
            relay,
            log,
            ready: VecDeque::new(),
            failures: BTreeMap::new(),
        }
    }

    /// The relay.
    pub fn relay(&self) -> &Relay {
        &self.relay
    }

    /// The relay, for its commands ([`Relay::close`], ...).
    pub fn relay_mut(&mut self) -> &mut Relay {
        &mut self.relay
    }

    /// The writer.
    pub fn log(&self) -> &StudyLog {
        &self.log
    }

    fn failed(&mut self, record: Option<&LogRecord>, e: LogError) -> Output<ServerEvent> {
        let text = e.to_string();
        let f = self.failures.entry(e.session.clone()).or_insert(Failures {
            count: 0,
            last: String::new(),
        });
        f.count += 1;
        f.last.clone_from(&text);
        Output::Event(ServerEvent::LogFailed {
            session: e.session,
            record: record.map(|r| (r.msg_type, r.direction)),
            path: e.path,
            op: e.op,
            error: e.error.to_string(),
        })
    }

    /// The relay has nothing more for this step: close the files of sessions that ended and
    /// tell hosts about this step's failures.
    fn end_of_step(&mut self) {
        let ended: Vec<SessionId> = self
            .log
            .open_sessions()
            .filter(|s| {
                self.relay.host_of(s.as_str()).is_none()
                    && self.relay.agents_of(s.as_str()).is_empty()
            })
            .cloned()
            .collect();
        for session in ended {
            if let Err(e) = self.log.close(session.as_str()) {
                let out = self.failed(None, e);
                self.ready.push_back(out);
            }
        }
        for (session, f) in std::mem::take(&mut self.failures) {
            let Some(host) = self.relay.host_of(session.as_str()) else {
                continue;
            };
            let message = format!(
                "Study log write failed for session {:?}: {} record(s) or sync(s) failed \
                 in this step; last: {}",
                session.as_str(),
                f.count,
                f.last
            );
            let error = ErrorPayload::new(ErrorCode::new(LOG_WRITE_FAILED), message);
            let frame = Envelope::new(RelayMessage::Error(error)).to_frame();
            self.ready.push_back(Output::Send { conn: host, frame });
            self.ready
                .push_back(Output::Event(ServerEvent::ReportedToHost {
                    session,
                    host,
                    failures: f.count,
                }));
        }
    }
}

impl Machine for LoggingRelay {
    type Event = ServerEvent;

    fn handle_connect(&mut self, conn: ConnId, peer: &PeerInfo, now: Instant) {
        self.relay.handle_connect(conn, peer, now);
    }

    fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, now: Instant) {
        self.relay.handle_frame(conn, frame, now);
    }

    fn handle_disconnect(&mut self, conn: ConnId, now: Instant) {
        self.relay.handle_disconnect(conn, now);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.relay.handle_timeout(now);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.relay.poll_timeout()
    }

    /// The relay's outputs in order, each `Log` record written (and synced when due) before
    /// it is returned as [`ServerEvent::Logged`]; then the wrapper's own (host `error`s,
    /// failed closes) once the relay has none left.
    fn poll_output(&mut self) -> Option<Output<ServerEvent>> {
        if let Some(out) = self.ready.pop_front() {
            return Some(out);
        }
        Some(match self.relay.poll_output() {
            Some(Output::Event(RelayEvent::Log(record))) => match self.log.append(&record) {
                Ok(Appended {
                    event_index,
                    synced,
                    trimmed,
                }) => Output::Event(ServerEvent::Logged {
                    record,
                    event_index,
                    synced,
                    trimmed,
                }),
                Err(e) => self.failed(Some(&record), e),
            },
            Some(Output::Event(e)) => Output::Event(ServerEvent::Relay(e)),
            Some(Output::Send { conn, frame }) => Output::Send { conn, frame },
            Some(Output::Close { conn, code, reason }) => Output::Close { conn, code, reason },
            None => {
                self.end_of_step();
                return self.ready.pop_front();
            }
        })
    }
}

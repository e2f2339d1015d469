//! [`LoggingRelay`]: the [`Relay`] with its study log written in the owner task.
//!
//! agentwire-tokio routes a machine's `Send` outputs straight to the connections' queues but
//! hands events to the application through a channel, so an application that wrote
//! [`RelayEvent::Log`] records from that channel could write a line after the message it
//! records was already on the wire. This wrapper closes that gap without a transport change:
//! it is itself the [`Machine`] the transport drives, and when the driver drains
//! [`poll_output`](Machine::poll_output) it writes each `Log` record synchronously (one
//! `write` to the session's file) before it returns the record as an event, and so before the
//! driver can see the `Send` the relay queued after it.
//!
//! The `fsync` before `session.ended` is the one slow call. With a sync worker
//! ([`LoggingRelay::with_sync_worker`]) it runs off the owner task: the `session.ended`
//! frames wait in the wrapper (and every later output to the same connections waits behind
//! them, so no connection sees its messages reordered) while every other connection goes on;
//! the worker reports back through [`LoggingRelay::sync_done`]. Without one it runs inline.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;
use std::time::Instant;

use agentwire::agent_relay::message::types;
use agentwire::agent_relay::{
    Direction, Envelope, ErrorCode, ErrorPayload, LogRecord, Relay, RelayEvent, RelayMessage,
    Route, SessionEnded, SessionId, VersionRule,
};
use agentwire::core::{CloseCode, ConnId, Disconnect, Frame, FrameBuf, Machine, Output, PeerInfo};

use super::log_writer::{Appended, LogError, LogOp, Repair, StudyLog, SyncHandle};

/// The `error` code a host gets when the study log of its session could not be written (ours;
/// the spec has none for it).
pub const LOG_WRITE_FAILED: &str = "LOG_WRITE_FAILED";

/// Outputs one connection may have waiting behind a sync (the transport's own send queue
/// holds 256 frames); one more closes it 1013 `log-sync-backlog`, as a slow reader.
pub const MAX_HELD_PER_CONN: usize = 256;

/// One `fsync` for the sync worker: run [`SyncJob::run`] on a thread that may block, then
/// hand the result to [`LoggingRelay::sync_done`].
pub struct SyncJob {
    /// Names the job in [`LoggingRelay::sync_done`].
    pub ticket: u64,
    /// The session whose file is synced.
    pub session: SessionId,
    run: SyncHandle,
}

impl std::fmt::Debug for SyncJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyncJob")
            .field("ticket", &self.ticket)
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

impl SyncJob {
    /// Runs the `fsync` (blocking); returns what [`LoggingRelay::sync_done`] takes.
    pub fn run(self) -> (u64, Result<(), String>) {
        (self.ticket, (self.run)().map_err(|e| e.to_string()))
    }
}

/// What the [`LoggingRelay`] tells the application.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
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
        /// Whether the file was `fsync`ed after it ([`SyncPolicy::EveryRecord`](super::log_writer::SyncPolicy)).
        synced: bool,
        /// Whether the file is synced before the message is sent (`session.ended`): see
        /// [`Synced`](Self::Synced).
        sync_due: bool,
    },
    /// A session's file was `fsync`ed for a `session.ended`, which is then forwarded.
    Synced {
        /// The session.
        session: SessionId,
        /// Whether the sync ran off the owner task (on the sync worker).
        off_task: bool,
    },
    /// A warning: a session's file had an unreadable last line (torn write, garbage, too
    /// deep, ...) when it was reopened; the bad tail was moved aside and the indexes continue
    /// after the last good record.
    LogRepaired {
        /// The session.
        session: SessionId,
        /// The session's file.
        path: PathBuf,
        /// What was moved where, and why.
        repair: Repair,
    },
    /// The study log failed: a record (`record: Some`) was not written, or not synced, or a
    /// file could not be synced (`record: None`). The session's host gets an `error`
    /// [`LOG_WRITE_FAILED`] at the end of the step ([`ReportedToHost`](Self::ReportedToHost)).
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
    /// A `session.ended` was not forwarded because the study session's log was not saved
    /// (a record of it failed, or the sync did): each agent it was for got `error`
    /// `LOG_FLUSH_FAILED` instead (with the same `replyTo`).
    SessionEndWithheld {
        /// The session.
        session: SessionId,
        /// The agent told.
        agent: ConnId,
        /// Why the log is not saved.
        reason: String,
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

/// What the `Send`s of the `session.ended` being output wait for.
#[derive(Debug, Clone)]
enum Gate {
    /// The sync worker's job `ticket`.
    Ticket(u64),
    /// The log is not saved: each becomes an `error`.
    Failed(String),
}

/// An output waiting behind a sync.
#[derive(Debug)]
struct Held {
    /// The sync it waits for itself (`None`: only for the ones before it).
    ticket: Option<u64>,
    out: Output<ServerEvent>,
}

/// The [`Relay`] plus its [`StudyLog`]: drives like a `Relay` (same inputs, same frames, in
/// the same order per connection), and writes every study-log record before returning the
/// output after it.
///
/// A write failure is reported twice, never swallowed: as [`ServerEvent::LogFailed`] at
/// once, and, once the relay's outputs of the step are drained, to the session's host (if
/// it has one) as one `error` per session
/// `{"code":"LOG_WRITE_FAILED","message":"Study log write failed for session ...: N record(s)
/// ... (op path: cause)"}` without `replyTo`. The message itself is still forwarded (the
/// study goes on; the host knows its log has a hole), except `session.ended`: if any record
/// of the study session (since the last `session.started` or `session.ended`) failed, or the
/// `fsync` fails, the
/// agents get `error` `LOG_FLUSH_FAILED` ("... was not saved ...", the `replyTo` of the
/// `session.ended`) instead, never a `session.ended` whose `logFile` is missing or
/// incomplete. When a session empties, its file is synced and closed at the end of the step.
///
/// Writes are blocking `std::fs` calls in the task that owns the relay (a `write` per
/// record); the `fsync` before `session.ended` runs there too unless a sync worker takes it.
pub struct LoggingRelay {
    relay: Relay,
    log: StudyLog,
    /// Outputs made by the wrapper, returned before the relay's next ones.
    ready: VecDeque<Output<ServerEvent>>,
    /// This step's failures, per relay session (whose host is told).
    failures: BTreeMap<SessionId, Failures>,
    /// The relay session of each log session (file) records were written to: a study
    /// session's records carry its id, not the relay session's.
    relay_of: BTreeMap<SessionId, SessionId>,
    /// Where sync jobs go; `None`: sync inline.
    worker: Option<tokio::sync::mpsc::Sender<SyncJob>>,
    next_ticket: u64,
    /// Syncs given to the worker and not yet done, with their session.
    in_flight: BTreeMap<u64, SessionId>,
    /// Done syncs still named by held outputs.
    done: BTreeMap<u64, Result<(), String>>,
    /// Outputs per connection waiting behind a sync, in order.
    held: BTreeMap<ConnId, VecDeque<Held>>,
    /// The session whose `session.ended` is being output, once its first record is seen.
    ending: Option<SessionId>,
    /// A record of the message being output asks for a sync.
    sync_wanted: bool,
    /// What the `Send`s of the `session.ended` being output wait for.
    gate: Option<Gate>,
    /// Records per session that failed since its last `session.started` or `session.ended`.
    lost: BTreeMap<SessionId, u64>,
    /// Connections closed for [`MAX_HELD_PER_CONN`]: later outputs to them are dropped.
    overflowed: BTreeSet<ConnId>,
}

impl std::fmt::Debug for LoggingRelay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoggingRelay")
            .field("relay", &self.relay)
            .field("log", &self.log)
            .field("syncs_in_flight", &self.in_flight.len())
            .finish_non_exhaustive()
    }
}

impl LoggingRelay {
    /// Wraps `relay`, writing its records to `log`; the `fsync` before `session.ended` runs
    /// inline.
    pub fn new(relay: Relay, log: StudyLog) -> Self {
        Self {
            relay,
            log,
            ready: VecDeque::new(),
            failures: BTreeMap::new(),
            relay_of: BTreeMap::new(),
            worker: None,
            next_ticket: 0,
            in_flight: BTreeMap::new(),
            done: BTreeMap::new(),
            held: BTreeMap::new(),
            ending: None,
            sync_wanted: false,
            gate: None,
            lost: BTreeMap::new(),
            overflowed: BTreeSet::new(),
        }
    }

    /// Wraps `relay`, handing each `fsync` before a `session.ended` to `worker` (which runs
    /// [`SyncJob::run`] off this task and reports to [`sync_done`](Self::sync_done) in job
    /// order). When the worker's queue is full or gone, the sync runs inline.
    pub fn with_sync_worker(
        relay: Relay,
        log: StudyLog,
        worker: tokio::sync::mpsc::Sender<SyncJob>,
    ) -> Self {
        let mut wrapped = Self::new(relay, log);
        wrapped.worker = Some(worker);
        wrapped
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

    /// Syncs handed to the worker and not yet reported done.
    pub fn syncs_in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Outputs waiting behind a sync.
    pub fn held_outputs(&self) -> usize {
        self.held.values().map(VecDeque::len).sum()
    }

    /// The sync worker finished job `ticket`: the outputs waiting for it are released (each
    /// `session.ended` replaced by an `error` if the sync failed). Drain outputs after it.
    pub fn sync_done(&mut self, ticket: u64, result: Result<(), String>) {
        let Some(session) = self.in_flight.remove(&ticket) else {
            return;
        };
        match &result {
            Ok(()) => self.ready.push_back(Output::Event(ServerEvent::Synced {
                session,
                off_task: true,
            })),
            Err(e) => {
                let path = self.log.path_of(session.as_str());
                let relay = self.relay_session_of(&session);
                self.note_failure(&relay, format!("sync {}: {e}", path.display()));
                self.ready.push_back(Output::Event(ServerEvent::LogFailed {
                    session,
                    record: None,
                    path,
                    op: LogOp::Sync,
                    error: e.clone(),
                }));
            }
        }
        self.done.insert(ticket, result);
        self.release();
    }

    fn note_failure(&mut self, session: &SessionId, text: String) {
        let f = self.failures.entry(session.clone()).or_insert(Failures {
            count: 0,
            last: String::new(),
        });
        f.count += 1;
        f.last = text;
    }

    /// The relay session whose records go to log session (file) `log_session`.
    fn relay_session_of(&self, log_session: &SessionId) -> SessionId {
        self.relay_of
            .get(log_session)
            .unwrap_or(log_session)
            .clone()
    }

    fn failed(&mut self, record: Option<&LogRecord>, e: LogError) -> Output<ServerEvent> {
        let relay = record.map_or_else(
            || self.relay_session_of(&e.session),
            |r| r.relay_session.clone(),
        );
        self.note_failure(&relay, e.to_string());
        if record.is_some() {
            *self.lost.entry(e.session.clone()).or_default() += 1;
        }
        Output::Event(ServerEvent::LogFailed {
            session: e.session,
            record: record.map(|r| (r.msg_type, r.direction)),
            path: e.path,
            op: e.op,
            error: e.error.to_string(),
        })
    }

    /// Writes `record`; the output that reports it.
    fn write(&mut self, record: LogRecord) -> Output<ServerEvent> {
        if record.session_id != record.relay_session
            && !self.relay_of.contains_key(&record.session_id)
        {
            self.relay_of
                .insert(record.session_id.clone(), record.relay_session.clone());
        }
        if record.msg_type == types::SESSION_ENDED && record.direction != Direction::Internal {
            self.ending = Some(record.session_id.clone());
        }
        if record.msg_type == types::SESSION_STARTED && record.direction == Direction::In {
            // A new study session: what was lost before it is not part of its log.
            self.lost.remove(&record.session_id);
        }
        match self.log.append(&record) {
            Ok(Appended {
                event_index,
                synced,
                sync_due,
                repaired,
            }) => {
                self.sync_wanted |= sync_due;
                let repaired = repaired.map(|repair| {
                    Output::Event(ServerEvent::LogRepaired {
                        session: record.session_id.clone(),
                        path: self.log.path_of(record.session_id.as_str()),
                        repair,
                    })
                });
                let logged = Output::Event(ServerEvent::Logged {
                    record,
                    event_index,
                    synced,
                    sync_due,
                });
                // The warning first, then the record written after the repair.
                match repaired {
                    Some(warning) => {
                        self.ready.push_front(logged);
                        warning
                    }
                    None => logged,
                }
            }
            Err(e) => self.failed(Some(&record), e),
        }
    }

    /// The records of the message being output are written: before its first send, decide
    /// what a `session.ended` waits for (a sync) or becomes (an error).
    fn settle(&mut self) {
        let Some(session) = self.ending.take() else {
            if std::mem::take(&mut self.sync_wanted) {
                // Not a session.ended (cannot happen with SyncPolicy as it is): sync inline.
                self.gate = None;
            }
            return;
        };
        let wanted = std::mem::take(&mut self.sync_wanted);
        let lost = self.lost.remove(&session).unwrap_or(0);
        if lost > 0 {
            self.gate = Some(Gate::Failed(format!(
                "{lost} record(s) of this study session could not be written"
            )));
            return;
        }
        if !wanted {
            self.gate = None;
            return;
        }
        let job = self
            .worker
            .is_some()
            .then(|| self.log.syncer(session.as_str()));
        if let (Some(Ok(run)), Some(worker)) = (job, &self.worker) {
            let ticket = self.next_ticket;
            let job = SyncJob {
                ticket,
                session: session.clone(),
                run,
            };
            if worker.try_send(job).is_ok() {
                self.next_ticket += 1;
                self.in_flight.insert(ticket, session);
                self.gate = Some(Gate::Ticket(ticket));
                return;
            }
        }
        // No worker, or it cannot take the job now: sync here.
        match self.log.sync(session.as_str()) {
            Ok(()) => {
                self.gate = None;
                self.ready.push_back(Output::Event(ServerEvent::Synced {
                    session,
                    off_task: false,
                }));
            }
            Err(e) => {
                let text = e.to_string();
                let out = self.failed(None, e);
                self.ready.push_back(out);
                self.gate = Some(Gate::Failed(text));
            }
        }
    }

    /// Queues `out` for `conn` behind what already waits there, or makes it ready.
    fn push(&mut self, conn: ConnId, ticket: Option<u64>, out: Output<ServerEvent>) {
        if self.overflowed.contains(&conn) {
            return;
        }
        match self.held.get_mut(&conn) {
            Some(q) if q.len() >= MAX_HELD_PER_CONN => {
                // The sync is stuck or slow: bound the memory, as for a slow reader.
                self.held.remove(&conn);
                self.overflowed.insert(conn);
                self.ready.push_back(Output::Close {
                    conn,
                    code: CloseCode::TRY_AGAIN_LATER,
                    reason: "log-sync-backlog".into(),
                });
            }
            Some(q) => q.push_back(Held { ticket, out }),
            None if ticket.is_some() => {
                self.held
                    .insert(conn, VecDeque::from([Held { ticket, out }]));
            }
            None => self.ready.push_back(out),
        }
    }

    /// The `error` that replaces a `session.ended` frame whose log was not saved.
    fn withheld(&mut self, conn: ConnId, frame: &FrameBuf, reason: &str) -> Output<ServerEvent> {
        let text = frame.as_text().unwrap_or_default();
        let route = Route::parse(text, VersionRule::MayBeMissing).ok();
        // The study session the session.ended is of (its log), else the relay session.
        let ended = route
            .as_ref()
            .and_then(|r| serde_json::from_str::<SessionEnded>(r.payload.get()).ok());
        let session = match ended {
            Some(e) => SessionId::new(e.session_id),
            None => self
                .relay
                .membership(conn)
                .map_or_else(SessionId::default_session, |(s, _)| s.clone()),
        };
        let message = format!(
            "The study log of session {:?} was not saved ({reason}); session.ended was \
             withheld.",
            session.as_str()
        );
        let error = ErrorPayload::new(ErrorCode::LOG_FLUSH_FAILED, message);
        let mut env = Envelope::new(RelayMessage::Error(error));
        env.reply_to = route.and_then(|r| r.reply_to.map(|r| r.into_owned()));
        self.ready
            .push_back(Output::Event(ServerEvent::SessionEndWithheld {
                session,
                agent: conn,
                reason: reason.to_owned(),
            }));
        Output::Send {
            conn,
            frame: env.to_frame(),
        }
    }

    /// Releases held outputs whose syncs are done, in order per connection.
    fn release(&mut self) {
        let conns: Vec<ConnId> = self.held.keys().copied().collect();
        for conn in conns {
            while let Some(front) = self.held.get(&conn).and_then(|q| q.front()) {
                let result = match front.ticket {
                    None => None,
                    Some(t) => match self.done.get(&t) {
                        None => break,
                        Some(r) => Some(r.clone()),
                    },
                };
                let Some(h) = self.held.get_mut(&conn).and_then(VecDeque::pop_front) else {
                    break;
                };
                let out = match (result, h.out) {
                    (Some(Err(e)), Output::Send { conn, frame }) => {
                        self.withheld(conn, &frame, &format!("sync failed: {e}"))
                    }
                    (_, out) => out,
                };
                self.ready.push_back(out);
            }
            if self.held.get(&conn).is_some_and(VecDeque::is_empty) {
                self.held.remove(&conn);
            }
        }
        let named: BTreeSet<u64> = self
            .held
            .values()
            .flatten()
            .filter_map(|h| h.ticket)
            .collect();
        self.done.retain(|t, _| named.contains(t));
    }

    /// The relay has nothing more for this step: close the files no record goes to any more
    /// (their relay session emptied, or their study session ended) and tell hosts about this
    /// step's failures.
    fn end_of_step(&mut self) {
        let ended: Vec<SessionId> = self
            .log
            .open_sessions()
            .filter(|file| {
                let relay = self.relay_session_of(file);
                let r = relay.as_str();
                let empty = self.relay.host_of(r).is_none() && self.relay.agents_of(r).is_empty();
                let current = self.relay.study_session_of(r).unwrap_or(&relay) == *file;
                (empty || !current) && !self.in_flight.values().any(|f| f == *file)
            })
            .cloned()
            .collect();
        for session in ended {
            if let Err(e) = self.log.close(session.as_str()) {
                let out = self.failed(None, e);
                self.ready.push_back(out);
            }
            self.relay_of.remove(&session);
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
            self.push(host, None, Output::Send { conn: host, frame });
            self.ready
                .push_back(Output::Event(ServerEvent::ReportedToHost {
                    session,
                    host,
                    failures: f.count,
                }));
        }
    }
}

impl Drop for LoggingRelay {
    /// Syncs and closes every study log still open (a session cut by a shutdown, or one
    /// whose sync was still queued), so a stopped relay leaves every file durable.
    fn drop(&mut self) {
        for e in self.log.close_all() {
            tracing::error!("study log not synced at shutdown: {e}");
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

    /// Drops what waited for `conn` and tells the relay.
    fn handle_disconnect(&mut self, conn: ConnId, now: Instant) {
        self.handle_disconnect_with(conn, &Disconnect::Ended, now);
    }

    fn handle_disconnect_with(&mut self, conn: ConnId, how: &Disconnect, now: Instant) {
        self.held.remove(&conn);
        self.overflowed.remove(&conn);
        self.relay.handle_disconnect_with(conn, how, now);
    }

    fn handle_pong(&mut self, conn: ConnId, now: Instant) {
        self.relay.handle_pong(conn, now);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.relay.handle_timeout(now);
    }

    /// Re-anchors the relay's study-log clock.
    fn handle_wall_clock(&mut self, now: Instant, unix_ms: u64) {
        self.relay.handle_wall_clock(now, unix_ms);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.relay.poll_timeout()
    }

    /// The relay's outputs in order, each `Log` record written before it is returned as
    /// [`ServerEvent::Logged`]; a `session.ended` once its file is synced (or as an `error`
    /// if its log was not saved), and what follows it on the same connections after it; then
    /// the wrapper's own (host `error`s, failed closes) once the relay has none left.
    fn poll_output(&mut self) -> Option<Output<ServerEvent>> {
        loop {
            if let Some(out) = self.ready.pop_front() {
                return Some(out);
            }
            match self.relay.poll_output() {
                Some(Output::Event(RelayEvent::Log(record))) => return Some(self.write(record)),
                Some(Output::Event(e)) => {
                    self.settle();
                    let ends = matches!(&e,
                        RelayEvent::Forwarded { msg_type, .. }
                        | RelayEvent::Undelivered { msg_type, .. }
                            if *msg_type == types::SESSION_ENDED);
                    if ends {
                        self.gate = None;
                    }
                    self.ready.push_back(Output::Event(ServerEvent::Relay(e)));
                }
                Some(Output::Send { conn, frame }) => {
                    self.settle();
                    match self.gate.clone() {
                        Some(Gate::Ticket(t)) => {
                            self.push(conn, Some(t), Output::Send { conn, frame });
                        }
                        Some(Gate::Failed(reason)) => {
                            let out = self.withheld(conn, &frame, &reason);
                            self.push(conn, None, out);
                        }
                        None => self.push(conn, None, Output::Send { conn, frame }),
                    }
                }
                Some(Output::Close { conn, code, reason }) => {
                    self.settle();
                    self.push(conn, None, Output::Close { conn, code, reason });
                }
                None => {
                    self.settle();
                    self.end_of_step();
                    return self.ready.pop_front();
                }
            }
        }
    }
}

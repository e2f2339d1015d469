//! The reference relay: a [`LoggingRelay`] served by agentwire-tokio at `/agent/ws`, with an
//! event log.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use agentwire::agent_relay::{accept_path, Relay, RelayConfig, RelayEvent, ENDPOINT_PATH};
use agentwire::core::{ConnId, UuidV4Ids};
use agentwire::tokio::{Accept, Handle, Reject, ServerConfig, UpgradeRequest};

use super::log_writer::{StudyLog, SyncPolicy};
use super::logging_relay::{LoggingRelay, ServerEvent, SyncJob};
use crate::endpoint::{Endpoint, Mount, Place};

/// A running relay.
pub struct RelayApp {
    /// Where the relay is served (its address and shutdown): a listener of its own
    /// ([`start`]) or a route of a shared one ([`mount`]).
    pub server: Endpoint<LoggingRelay>,
    /// Commands to the relay machine.
    pub handle: Handle<LoggingRelay>,
    /// The study-log directory.
    pub log_dir: PathBuf,
    /// The event task; ends when the server stops.
    pub events_task: tokio::task::JoinHandle<()>,
    /// The sync worker: runs each `fsync` before a `session.ended` off the task that owns
    /// the relay; ends when the server stops.
    pub sync_task: tokio::task::JoinHandle<()>,
}

/// Sync jobs queued for the worker at most; beyond, the relay syncs inline.
const SYNC_QUEUE: usize = 64;

/// The upgrade hook: only [`ENDPOINT_PATH`] is upgraded; any other path gets HTTP 404 before
/// the upgrade.
pub fn path_hook(req: &UpgradeRequest<'_>) -> Result<Accept, Reject> {
    if accept_path(req.path) {
        Ok(Accept::new())
    } else {
        Err(Reject::new(
            404,
            format!("no WebSocket endpoint here; use {ENDPOINT_PATH}"),
        ))
    }
}

/// The transport settings of the reference relay: [`path_hook`], message and frame caps
/// following the relay's `max_message_bytes` (plus
/// [`TRANSPORT_HEADROOM`](crate::common::TRANSPORT_HEADROOM)), and room for at least the
/// relay's `max_connections` (the relay itself answers the one too many with LIMIT_EXCEEDED
/// and close 1013).
pub fn server_config(relay: &RelayConfig) -> ServerConfig {
    let path = relay.path.as_deref().unwrap_or("/");
    route_config(relay, path).with_hook(path_hook)
}

/// Starts a relay on `addr` writing its study log into `log_dir` (created if missing);
/// `on_event` sees every event (in the event task: keep it quick).
pub async fn start(
    addr: &str,
    config: RelayConfig,
    log_dir: impl Into<PathBuf>,
    sync: SyncPolicy,
    on_event: impl FnMut(&ServerEvent) + Send + 'static,
) -> std::io::Result<RelayApp> {
    let transport = server_config(&config);
    start_with(addr, config, transport, log_dir, sync, on_event).await
}

/// [`start`] with explicit transport settings (e.g. a test's wall-clock source).
pub async fn start_with(
    addr: &str,
    config: RelayConfig,
    transport: ServerConfig,
    log_dir: impl Into<PathBuf>,
    sync: SyncPolicy,
    on_event: impl FnMut(&ServerEvent) + Send + 'static,
) -> std::io::Result<RelayApp> {
    let log_dir = log_dir.into();
    serve(
        Place::Bind(addr),
        config,
        transport,
        log_dir,
        sync,
        on_event,
    )
    .await
}

/// The transport settings of a relay mounted at `path` of a shared listener: as
/// [`server_config`], without [`path_hook`] (the listener routes by path; the relay's
/// `path` is set to the route's, so a connection on any other path never reaches it) and
/// with the plain-HTTP answer naming `path`.
pub fn route_config(relay: &RelayConfig, path: &str) -> ServerConfig {
    let config =
        crate::common::machine_sized(relay.limits.max_message_bytes, relay.limits.max_connections);
    // Over the per-address cap: close 1013 as at `max_connections` (the LIMIT_EXCEEDED
    // envelope before it needs a fresh id and timestamp, which a fixed frame cannot carry).
    let refusal = agentwire::tokio::Refusal::close(
        agentwire::core::CloseCode::TRY_AGAIN_LATER,
        "too-many-connections",
    );
    crate::common::protect(config, "agent-relay", path, refusal)
}

/// Serves a relay on the route `at` of a shared listener (its `path` set to the route's),
/// with [`route_config`], writing its study log into `log_dir` (created if missing);
/// otherwise as [`start`].
pub async fn mount(
    at: Mount<'_>,
    config: RelayConfig,
    log_dir: impl Into<PathBuf>,
    sync: SyncPolicy,
    on_event: impl FnMut(&ServerEvent) + Send + 'static,
) -> std::io::Result<RelayApp> {
    let transport = route_config(&config, at.path);
    mount_with(at, config, transport, log_dir, sync, on_event).await
}

/// [`mount`] with explicit transport settings.
pub async fn mount_with(
    at: Mount<'_>,
    mut config: RelayConfig,
    transport: ServerConfig,
    log_dir: impl Into<PathBuf>,
    sync: SyncPolicy,
    on_event: impl FnMut(&ServerEvent) + Send + 'static,
) -> std::io::Result<RelayApp> {
    config.path = Some(at.path.to_owned());
    let log_dir = log_dir.into();
    serve(Place::Route(at), config, transport, log_dir, sync, on_event).await
}

/// The one body of [`start_with`] and [`mount_with`]: the study log, the relay, its event
/// task and its sync worker, at `place`.
async fn serve(
    place: Place<'_>,
    config: RelayConfig,
    transport: ServerConfig,
    log_dir: PathBuf,
    sync: SyncPolicy,
    mut on_event: impl FnMut(&ServerEvent) + Send + 'static,
) -> std::io::Result<RelayApp> {
    let log = StudyLog::open(&log_dir, sync)?;
    let (now, unix_ms) = crate::common::clocks();
    let (sync_tx, mut sync_rx) = tokio::sync::mpsc::channel::<SyncJob>(SYNC_QUEUE);
    let relay = Relay::new(config, UuidV4Ids, now, unix_ms);
    let machine = LoggingRelay::with_sync_worker(relay, log, sync_tx);
    let (server, mut events) = place.serve(machine, transport).await?;
    let events_task = tokio::spawn(async move {
        while let Some(ev) = events.recv().await {
            on_event(&ev);
        }
    });
    let handle = server.handle();
    let worker = handle.clone();
    // One job at a time, in order, so a later session.ended never overtakes an earlier one.
    // Every queued job runs, even once the relay has stopped (its answer then goes
    // nowhere): the queue ends when the stopped relay is dropped, so a shutdown that waits
    // for this task knows every `fsync` has run.
    let sync_task = tokio::spawn(async move {
        while let Some(job) = sync_rx.recv().await {
            let Ok((ticket, result)) = tokio::task::spawn_blocking(move || job.run()).await else {
                continue;
            };
            let _ = worker
                .call(move |m, _now| m.sync_done(ticket, result))
                .await;
        }
    });
    Ok(RelayApp {
        server,
        handle,
        log_dir,
        events_task,
        sync_task,
    })
}

impl RelayApp {
    /// The address peers connect to.
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// `ws://<local_addr>/agent/ws` (the route's path when mounted; `wss://` over TLS).
    pub fn url(&self) -> String {
        self.server.url(ENDPOINT_PATH)
    }

    /// Stops the relay: every peer gets close 1001, every session ends, and its file is
    /// synced and closed; returns once every queued `fsync` has run and every study log
    /// still open is synced and closed (when the stopped relay is dropped).
    pub async fn shutdown(self) {
        self.server.shutdown().await;
        let _ = self.events_task.await;
        let _ = self.sync_task.await;
    }
}

/// Turns events into readable lines, naming connections by their role and session.
#[derive(Debug, Default)]
pub struct EventLog {
    names: BTreeMap<ConnId, String>,
}

impl EventLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// `conn 3 (agent "planner" in "default")`, or `conn 3` before its join.
    pub fn name(&self, conn: ConnId) -> String {
        match self.names.get(&conn) {
            Some(n) => format!("conn {} ({n})", conn.get()),
            None => format!("conn {}", conn.get()),
        }
    }

    /// Records what `ev` says about connections and describes it in one line.
    pub fn describe(&mut self, ev: &ServerEvent) -> String {
        match ev {
            ServerEvent::Relay(ev) => self.describe_relay(ev),
            ServerEvent::Logged {
                record,
                event_index,
                synced,
                sync_due,
            } => {
                let mut line = format!(
                    "log {:?} #{event_index}: {} {}",
                    record.session_id.as_str(),
                    record.direction.as_str(),
                    record.msg_type
                );
                if *synced {
                    line.push_str(" (synced)");
                }
                if *sync_due {
                    line.push_str(" (synced before it is sent)");
                }
                line
            }
            ServerEvent::Synced { session, off_task } => format!(
                "log {:?} synced{}",
                session.as_str(),
                if *off_task {
                    " (off the relay task)"
                } else {
                    ""
                }
            ),
            ServerEvent::LogRepaired {
                session,
                path,
                repair,
            } => format!(
                "study log of session {:?} ({}) had an unreadable end ({}): moved {} byte(s) \
                 aside to {}{}; its records continue after the last good one",
                session.as_str(),
                path.display(),
                repair.why,
                repair.bytes,
                repair.aside.display(),
                if repair.whole_file {
                    " (the whole file)"
                } else {
                    ""
                }
            ),
            ServerEvent::SessionEndWithheld {
                session,
                agent,
                reason,
            } => format!(
                "session.ended of {:?} withheld from {}: the study log was not saved ({reason}); \
                 sent LOG_FLUSH_FAILED instead",
                session.as_str(),
                self.name(*agent)
            ),
            ServerEvent::LogFailed {
                session,
                record,
                path,
                op,
                error,
            } => {
                let what = record.map_or_else(
                    || "closing the file".to_owned(),
                    |(t, d)| format!("record {} {t}", d.as_str()),
                );
                format!(
                    "STUDY LOG FAILED for session {:?}, {what}: {op} {}: {error}",
                    session.as_str(),
                    path.display()
                )
            }
            ServerEvent::ReportedToHost {
                session,
                host,
                failures,
            } => format!(
                "told {} that {failures} study-log operation(s) of session {:?} failed",
                self.name(*host),
                session.as_str()
            ),
        }
    }

    fn describe_relay(&mut self, ev: &RelayEvent) -> String {
        match ev {
            RelayEvent::Connected { conn, remote } => match remote {
                Some(addr) => format!("{} connected from {addr}", self.name(*conn)),
                None => format!("{} connected", self.name(*conn)),
            },
            RelayEvent::Joined {
                conn,
                session,
                role,
                client_name,
                ..
            } => {
                let who = match client_name {
                    Some(n) => format!("{role} {n:?} in {:?}", session.as_str()),
                    None => format!("{role} in {:?}", session.as_str()),
                };
                self.names.insert(*conn, who);
                format!("{} joined", self.name(*conn))
            }
            RelayEvent::HostReplaced { session, old, new } => format!(
                "{} replaced {} as the host of {:?}",
                self.name(*new),
                self.name(*old),
                session.as_str()
            ),
            RelayEvent::Left {
                conn,
                failed_requests,
                ..
            } => match failed_requests {
                0 => format!("{} left", self.name(*conn)),
                1 => format!("{} left (1 request failed)", self.name(*conn)),
                n => format!("{} left ({n} requests failed)", self.name(*conn)),
            },
            RelayEvent::Disconnected { conn } => {
                let line = format!("{} disconnected", self.name(*conn));
                self.names.remove(conn);
                line
            }
            RelayEvent::Forwarded {
                from,
                msg_type,
                recipients,
                ..
            } => format!(
                "{} -> {msg_type} -> {recipients} recipient(s)",
                self.name(*from)
            ),
            RelayEvent::Undelivered {
                from,
                msg_type,
                reason,
                ..
            } => format!(
                "{} -> {msg_type} reached nobody: {reason:?}",
                self.name(*from)
            ),
            RelayEvent::ProtocolViolation { conn, error } => {
                format!("{} broke the protocol: {error}", self.name(*conn))
            }
            other => format!("{other:?}"),
        }
    }

    /// Logs `ev` with `tracing`: joins, leaves and replacements at `info`, forwards and log
    /// lines at `debug`, protocol violations at `warn`, study-log failures at `error`.
    pub fn log(&mut self, ev: &ServerEvent) {
        // Per-message lines (forwards, log records, syncs) are not formatted when `debug` is
        // off; they name no connection, so nothing is lost.
        let per_message = matches!(
            ev,
            ServerEvent::Logged { .. }
                | ServerEvent::Synced { .. }
                | ServerEvent::Relay(RelayEvent::Forwarded { .. } | RelayEvent::Connected { .. })
        );
        if per_message && !tracing::enabled!(tracing::Level::DEBUG) {
            return;
        }
        let line = self.describe(ev);
        match ev {
            ServerEvent::Logged { .. }
            | ServerEvent::Synced { .. }
            | ServerEvent::Relay(RelayEvent::Forwarded { .. } | RelayEvent::Connected { .. }) => {
                tracing::debug!("{line}");
            }
            ServerEvent::LogRepaired { .. } => tracing::warn!("{line}"),
            ServerEvent::Relay(
                RelayEvent::ProtocolViolation { .. } | RelayEvent::Undelivered { .. },
            ) => tracing::warn!("{line}"),
            ServerEvent::LogFailed { .. }
            | ServerEvent::ReportedToHost { .. }
            | ServerEvent::SessionEndWithheld { .. } => {
                tracing::error!("{line}");
            }
            _ => tracing::info!("{line}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use agentwire::agent_relay::{Role, SessionId};

    use super::*;

    fn left(failed_requests: usize) -> ServerEvent {
        ServerEvent::Relay(RelayEvent::Left {
            conn: ConnId::new(3),
            session: SessionId::new("default"),
            role: Role::Agent,
            failed_requests,
        })
    }

    /// A member that leaves with nothing outstanding is not said to have failed requests.
    #[test]
    fn a_leave_mentions_failed_requests_only_when_some_failed() {
        let mut log = EventLog::new();
        assert_eq!(log.describe(&left(0)), "conn 3 left");
        assert_eq!(log.describe(&left(1)), "conn 3 left (1 request failed)");
        assert_eq!(log.describe(&left(4)), "conn 3 left (4 requests failed)");
    }
}

//! The reference orchestration server: the Orchestrator behind the upgrade policy, and a
//! plain-HTTP Prometheus endpoint.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use agentwire::core::{ConnId, Disconnect, Frame, Machine, Output, PeerInfo, UuidV4Ids};
use agentwire::mcpw::crdt::SyncOutcome;
use agentwire::mcpw::orchestrator::{
    Form, Orchestrator, OrchestratorConfig, OrchestratorEvent, Refusal, RemovalReason, TaskFailure,
    UpgradeConfig, UpgradePolicy,
};
use agentwire::mcpw::CompressPolicy;
use agentwire::tokio::{Accept, Handle, Reject, ServerConfig, UpgradeRequest};
use serde_json::Value;
use tokio::net::TcpListener;

use crate::endpoint::{Endpoint, Mount, Place};

/// The Orchestrator, timed: each `handle_frame` is measured with the transport's clock and
/// recorded in `websocket_message_latency_seconds` (the machine cannot time itself).
pub struct TimedOrchestrator {
    /// The machine.
    pub inner: Orchestrator,
}

fn clock() -> Instant {
    tokio::time::Instant::now().into_std()
}

impl Machine for TimedOrchestrator {
    type Event = OrchestratorEvent;
    fn handle_connect(&mut self, conn: ConnId, peer: &PeerInfo, now: Instant) {
        self.inner.handle_connect(conn, peer, now);
    }
    fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, now: Instant) {
        let start = clock();
        self.inner.handle_frame(conn, frame, now);
        if let Some(method) = self.inner.last_method() {
            let took = clock().saturating_duration_since(start);
            self.inner.metrics_mut().observe_latency(method, took);
        }
    }
    fn handle_disconnect(&mut self, conn: ConnId, now: Instant) {
        self.inner.handle_disconnect(conn, now);
    }
    fn handle_disconnect_with(&mut self, conn: ConnId, how: &Disconnect, now: Instant) {
        self.inner.handle_disconnect_with(conn, how, now);
    }
    fn handle_pong(&mut self, conn: ConnId, now: Instant) {
        self.inner.handle_pong(conn, now);
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.inner.handle_timeout(now);
    }
    fn handle_wall_clock(&mut self, now: Instant, unix_ms: u64) {
        self.inner.handle_wall_clock(now, unix_ms);
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.inner.poll_timeout()
    }
    fn poll_output(&mut self) -> Option<Output<OrchestratorEvent>> {
        self.inner.poll_output()
    }
}

/// A running server.
pub struct ServerApp {
    /// Where the orchestrator is served: a listener of its own ([`start`]) or a route of a
    /// shared one ([`mount`]).
    pub server: Endpoint<TimedOrchestrator>,
    /// Commands to the machine (`submit_task`, metrics).
    pub handle: Handle<TimedOrchestrator>,
    /// The upgrade policy the hook checks (API keys: rotate them through it, e.g. with
    /// [`security::keys::spawn`](crate::security::keys::spawn)).
    pub policy: Arc<Mutex<UpgradePolicy>>,
    /// The metrics endpoint's address, if one was asked for.
    pub metrics_addr: Option<SocketAddr>,
    events_task: tokio::task::JoinHandle<()>,
    metrics_task: Option<tokio::task::JoinHandle<()>>,
}

impl ServerApp {
    /// `ws://<addr>/` (the route's path when mounted; `wss://` over TLS).
    pub fn url(&self) -> String {
        self.server.url("/")
    }

    /// The address agents connect to.
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// Stops the server (peers get 1001) and the metrics endpoint.
    pub async fn shutdown(self) {
        self.server.shutdown().await;
        let _ = self.events_task.await;
        if let Some(t) = self.metrics_task {
            t.abort();
        }
    }
}

/// The upgrade hook: the [`UpgradePolicy`] with the open-connection count.
fn hook(
    policy: Arc<Mutex<UpgradePolicy>>,
    open: Arc<AtomicUsize>,
) -> impl Fn(&UpgradeRequest<'_>) -> Result<Accept, Reject> + Send + Sync + 'static {
    move |req: &UpgradeRequest<'_>| {
        let mut p = policy
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match p.check(
            req.headers,
            req.subprotocols,
            open.load(Ordering::Relaxed),
            clock(),
        ) {
            Ok(a) => Ok(match a.subprotocol {
                Some(s) => Accept::with_subprotocol(s),
                None => Accept::new(),
            }),
            Err(r) => {
                // The client sees only the status; the reason is for the operator.
                tracing::warn!("{}", describe_refusal(req.remote_addr, req.path, &r));
                Err(Reject::new(r.status(), r.body()))
            }
        }
    }
}

/// One log line for a refused upgrade: who, which status, and why.
pub fn describe_refusal(peer: SocketAddr, path: &str, refusal: &Refusal) -> String {
    format!(
        "refused the WebSocket upgrade from {peer} on {path} with HTTP {}: {refusal}",
        refusal.status()
    )
}

/// A list of names for a sentence: `a, b and c`, or `none`.
fn names<T: AsRef<str>>(list: &[T]) -> String {
    let list: Vec<&str> = list.iter().map(AsRef::as_ref).collect();
    match list.as_slice() {
        [] => "none".to_owned(),
        [one] => (*one).to_owned(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// A short account of a task result: its `summary` if it has one, else how many
/// `findings`, else its size.
fn summarize(result: &Value) -> String {
    if let Some(s) = result.get("summary").and_then(Value::as_str) {
        return format!("\"{s}\"");
    }
    if let Some(f) = result.get("findings").and_then(Value::as_array) {
        return format!("{} findings", f.len());
    }
    match result {
        Value::Null => "no result".to_owned(),
        other => format!("a result of {} bytes", other.to_string().len()),
    }
}

/// One log line (a sentence, no Rust `Debug` dump) for an orchestrator event.
pub fn describe(ev: &OrchestratorEvent) -> String {
    match ev {
        OrchestratorEvent::Connected {
            conn,
            agent_id,
            agent_type,
        } => {
            let who = match (agent_id, agent_type) {
                (Some(id), Some(t)) => format!(" announcing agent {id} ({t})"),
                (Some(id), None) => format!(" announcing agent {id}"),
                (None, Some(t)) => format!(" announcing an agent of type {t}"),
                (None, None) => String::new(),
            };
            format!("connection {} opened{who}", conn.get())
        }
        OrchestratorEvent::Registered {
            conn,
            agent_id,
            capabilities,
            form,
        } => format!(
            "agent {agent_id} registered on connection {} speaking {} with capabilities {}",
            conn.get(),
            match form {
                Form::Json => "JSON".to_owned(),
                Form::Binary => "binary frames".to_owned(),
                #[allow(unreachable_patterns)]
                other => format!("the {other:?} form").to_lowercase(),
            },
            names(capabilities)
        ),
        OrchestratorEvent::Unhealthy { agent_id } => {
            format!("agent {agent_id} missed its heartbeats and gets no new tasks")
        }
        OrchestratorEvent::Recovered { agent_id } => {
            format!("agent {agent_id} is heartbeating again")
        }
        OrchestratorEvent::AgentRemoved { agent_id, reason } => format!(
            "agent {agent_id} removed: {}",
            match reason {
                RemovalReason::Disconnected => "its connection ended",
                RemovalReason::HeartbeatTimeout => "no heartbeat for too long",
                RemovalReason::Shutdown => "it shut down",
                RemovalReason::Replaced => "it registered again on another connection",
                _ => "another reason",
            }
        ),
        OrchestratorEvent::CapabilityChanged {
            agent_id,
            operation,
            capability,
        } => format!(
            "agent {agent_id} capability update: {} {capability}",
            operation.as_str()
        ),
        OrchestratorEvent::TaskAssigned {
            task_id,
            agent_id,
            score,
            alternatives,
            attempt,
        } => {
            let retry = if *attempt > 1 {
                format!(" (attempt {attempt})")
            } else {
                String::new()
            };
            format!(
                "task {task_id} assigned to {agent_id} with score {score:.2}{retry}; runners-up: {}",
                names(alternatives)
            )
        }
        OrchestratorEvent::TaskQueued { task_id } => {
            format!("task {task_id} queued: no agent can take it now")
        }
        OrchestratorEvent::TaskProgress {
            task_id,
            agent_id,
            progress,
            status,
        } => {
            let status = status
                .as_deref()
                .map(|s| format!(" ({s})"))
                .unwrap_or_default();
            format!(
                "task {task_id} is {:.0}% done at {agent_id}{status}",
                progress * 100.0
            )
        }
        OrchestratorEvent::TaskCompleted {
            task_id,
            agent_id,
            status,
            result,
        } => format!(
            "task {task_id} finished by {agent_id} as {status}: {}",
            summarize(result)
        ),
        OrchestratorEvent::TaskFailed { task_id, reason } => format!(
            "task {task_id} failed: {}",
            match reason {
                TaskFailure::DeadlineExceeded => "its deadline passed",
                TaskFailure::AttemptsExhausted => "every agent it was given to went away",
                TaskFailure::Cancelled => "it was cancelled",
                _ => "another reason",
            }
        ),
        OrchestratorEvent::CollaborationStarted {
            task_id,
            requester,
            agents,
        } => format!(
            "{requester} asked {} to collaborate on task {task_id}",
            names(agents)
        ),
        OrchestratorEvent::CollaborationFinished {
            task_id,
            responded,
            missing,
        } => format!(
            "collaboration on task {task_id} finished: answered by {}, missing {}",
            names(responded),
            names(missing)
        ),
        OrchestratorEvent::StateSynced { agent_id, outcome } => match outcome {
            SyncOutcome::Applied { ops } => {
                format!("state sync from {agent_id} applied {ops} operations")
            }
            SyncOutcome::Duplicate => {
                format!("state sync from {agent_id} was a repeat; nothing changed")
            }
            #[allow(unreachable_patterns)]
            _ => format!("state sync from {agent_id} handled"),
        },
        OrchestratorEvent::ShutdownRequested {
            agent_id,
            transferred,
        } => format!("agent {agent_id} is shutting down; {transferred} tasks moved on"),
        OrchestratorEvent::ProtocolViolation { conn, error } => format!(
            "connection {} was answered with error {}: {error}",
            conn.get(),
            error.code()
        ),
        OrchestratorEvent::SequenceGap {
            conn,
            expected,
            received,
        } => format!(
            "connection {} skipped sequence ids {expected} to {}: messages were lost",
            conn.get(),
            received - 1
        ),
        OrchestratorEvent::SequenceDuplicate { conn, seq } => format!(
            "connection {} sent sequence id {seq} again: dropped as a duplicate",
            conn.get()
        ),
        OrchestratorEvent::Disconnected { conn, agent_id } => match agent_id {
            Some(a) => format!("connection {} (agent {a}) closed", conn.get()),
            None => format!("connection {} closed", conn.get()),
        },
        _ => "an orchestrator event".to_owned(),
    }
}

/// The environment variable the reference server and agent read their HMAC secret from
/// when no flag gives one.
pub const HMAC_SECRET_ENV: &str = "MCPW_HMAC_SECRET";

/// The compression policy a `--compression` value names: `if-smaller`, `entropy` (the
/// spec's adaptive rule) or `never`.
pub fn compress_policy(name: &str) -> Option<CompressPolicy> {
    match name {
        "if-smaller" => Some(CompressPolicy::IfSmaller),
        "entropy" => Some(CompressPolicy::SPEC_ENTROPY),
        "never" => Some(CompressPolicy::Never),
        _ => None,
    }
}

/// Starts the server on `addr` (and the metrics endpoint on `metrics`, if given);
/// `on_event` sees every event in the event task.
pub async fn start(
    addr: &str,
    metrics: Option<&str>,
    config: OrchestratorConfig,
    upgrade: UpgradeConfig,
    on_event: impl FnMut(&OrchestratorEvent) + Send + 'static,
) -> std::io::Result<ServerApp> {
    serve(
        Place::Bind(addr),
        metrics,
        config,
        upgrade,
        server_config(),
        on_event,
    )
    .await
}

/// The transport settings of the reference orchestrator (its upgrade hook aside, which
/// [`start`] and [`mount`] add): the installed per-address limits, over which a connection
/// gets HTTP 503 before the upgrade, as at the connection cap.
pub fn server_config() -> ServerConfig {
    let refusal = agentwire::tokio::Refusal::http(503, "too many connections from this address\n");
    crate::common::protect(ServerConfig::default(), "mcpw", "/", refusal)
}

/// Serves the orchestrator on the route `at` of a shared listener, behind the same upgrade
/// policy, with no metrics endpoint of its own (the orchestrator's counters stay readable
/// through [`ServerApp::handle`]); otherwise as [`start`].
pub async fn mount(
    at: Mount<'_>,
    config: OrchestratorConfig,
    upgrade: UpgradeConfig,
    on_event: impl FnMut(&OrchestratorEvent) + Send + 'static,
) -> std::io::Result<ServerApp> {
    let transport = server_config().with_endpoint("mcpw", at.path);
    mount_with(at, config, upgrade, transport, on_event).await
}

/// [`mount`] with explicit transport settings (the upgrade hook is added to them).
pub async fn mount_with(
    at: Mount<'_>,
    config: OrchestratorConfig,
    upgrade: UpgradeConfig,
    transport: ServerConfig,
    on_event: impl FnMut(&OrchestratorEvent) + Send + 'static,
) -> std::io::Result<ServerApp> {
    serve(Place::Route(at), None, config, upgrade, transport, on_event).await
}

/// The one body of [`start`] and [`mount_with`]: the orchestrator behind its upgrade
/// policy, its event task and, if asked, the metrics endpoint, at `place`.
async fn serve(
    place: Place<'_>,
    metrics: Option<&str>,
    config: OrchestratorConfig,
    upgrade: UpgradeConfig,
    transport: ServerConfig,
    mut on_event: impl FnMut(&OrchestratorEvent) + Send + 'static,
) -> std::io::Result<ServerApp> {
    let open = Arc::new(AtomicUsize::new(0));
    let policy = Arc::new(Mutex::new(UpgradePolicy::new(upgrade)));
    let (now, unix_ms) = crate::common::clocks();
    let machine = TimedOrchestrator {
        inner: Orchestrator::new(config, UuidV4Ids, now, unix_ms),
    };
    let transport = transport.with_hook(hook(Arc::clone(&policy), Arc::clone(&open)));
    let (server, mut events) = place.serve(machine, transport).await?;
    let counter = Arc::clone(&open);
    let events_task = tokio::spawn(async move {
        while let Some(ev) = events.recv().await {
            match &ev {
                OrchestratorEvent::Connected { .. } => {
                    counter.fetch_add(1, Ordering::Relaxed);
                }
                OrchestratorEvent::Disconnected { .. } => {
                    counter.fetch_sub(1, Ordering::Relaxed);
                }
                _ => {}
            }
            on_event(&ev);
        }
    });
    let handle = server.handle();
    let (metrics_addr, metrics_task) = match metrics {
        Some(a) => {
            let listener = TcpListener::bind(a).await?;
            let local = listener.local_addr()?;
            (
                Some(local),
                Some(tokio::spawn(serve_metrics(listener, handle.clone()))),
            )
        }
        None => (None, None),
    };
    Ok(ServerApp {
        server,
        handle,
        policy,
        metrics_addr,
        events_task,
        metrics_task,
    })
}

/// The `--metrics` endpoint: `GET /metrics` gets the orchestrator's Prometheus text
/// (its own families, rendered by the machine); any other path is 404 and any other method
/// 405, through the admin listener's bounded HTTP server ([`crate::admin::http`]).
async fn serve_metrics(listener: TcpListener, handle: Handle<TimedOrchestrator>) {
    use crate::admin::http::{self, HttpLimits, Reply, Response};
    let route = move |path: &str| -> Option<Reply> {
        if path != "/metrics" {
            return None;
        }
        let handle = handle.clone();
        Some(Box::pin(async move {
            match handle.call(|m, _| m.inner.metrics().render()).await {
                Ok(text) => Response::ok("text/plain; version=0.0.4; charset=utf-8", text),
                Err(_) => Response::text(503, "stopped\n"),
            }
        }))
    };
    http::serve(listener, HttpLimits::default(), route).await;
}

//! The reference orchestration server: the Orchestrator behind the upgrade policy, and a
//! plain-HTTP Prometheus endpoint.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use agentwire::core::{ConnId, Frame, Machine, Output, PeerInfo, UuidV4Ids};
use agentwire::mcpw::orchestrator::{
    Orchestrator, OrchestratorConfig, OrchestratorEvent, UpgradeConfig, UpgradePolicy,
};
use agentwire::tokio::{Accept, Handle, Reject, Server, ServerConfig, UpgradeRequest};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

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
    fn handle_timeout(&mut self, now: Instant) {
        self.inner.handle_timeout(now);
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
    /// The WebSocket server.
    pub server: Server<TimedOrchestrator>,
    /// Commands to the machine (`submit_task`, metrics).
    pub handle: Handle<TimedOrchestrator>,
    /// The metrics endpoint's address, if one was asked for.
    pub metrics_addr: Option<SocketAddr>,
    events_task: tokio::task::JoinHandle<()>,
    metrics_task: Option<tokio::task::JoinHandle<()>>,
}

impl ServerApp {
    /// `ws://<addr>/`.
    pub fn url(&self) -> String {
        format!("ws://{}/", self.server.local_addr())
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
            Err(r) => Err(Reject::new(r.status(), r.body())),
        }
    }
}

/// Starts the server on `addr` (and the metrics endpoint on `metrics`, if given);
/// `on_event` sees every event in the event task.
pub async fn start(
    addr: &str,
    metrics: Option<&str>,
    config: OrchestratorConfig,
    upgrade: UpgradeConfig,
    mut on_event: impl FnMut(&OrchestratorEvent) + Send + 'static,
) -> std::io::Result<ServerApp> {
    let open = Arc::new(AtomicUsize::new(0));
    let policy = Arc::new(Mutex::new(UpgradePolicy::new(upgrade)));
    let (now, unix_ms) = super::clocks();
    let machine = TimedOrchestrator {
        inner: Orchestrator::new(config, UuidV4Ids, now, unix_ms),
    };
    // Over the per-address cap: HTTP 503 before the upgrade, as at the connection cap.
    let refusal =
        agentwire::tokio::Refusal::http(503, "too many connections from this address\n");
    let transport = super::common::protect(
        ServerConfig::default().with_hook(hook(policy, Arc::clone(&open))),
        "mcpw",
        "/",
        refusal,
    );
    let (server, mut events) = Server::bind(addr, machine, transport).await?;
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
        metrics_addr,
        events_task,
        metrics_task,
    })
}

/// A tiny HTTP/1.1 handler: any `GET` gets the Prometheus text; the request is read up to
/// 8 KiB or its blank line, whichever comes first.
async fn serve_metrics(listener: TcpListener, handle: Handle<TimedOrchestrator>) {
    loop {
        let Ok((mut sock, _)) = listener.accept().await else {
            continue;
        };
        let handle = handle.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 8192];
            let mut len = 0;
            let read = async {
                while len < buf.len() {
                    match sock.read(&mut buf[len..]).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => len += n,
                    }
                    if buf[..len].windows(4).any(|w| w == b"\r\n\r\n") {
                        break;
                    }
                }
            };
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), read).await;
            let (status, body) = if buf[..len].starts_with(b"GET ") {
                match handle.call(|m, _| m.inner.metrics().render()).await {
                    Ok(text) => ("200 OK", text),
                    Err(_) => ("503 Service Unavailable", "stopped\n".to_owned()),
                }
            } else {
                ("405 Method Not Allowed", "GET only\n".to_owned())
            };
            let head = format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = sock.write_all(head.as_bytes()).await;
            let _ = sock.write_all(body.as_bytes()).await;
            let _ = sock.shutdown().await;
        });
    }
}

//! The reference bus: a `Bus` machine served by agentwire-tokio, with an event log and the
//! application's own publishes.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use agentwire::core::{CloseCode, ConnId, Observed, UuidV4Ids};
use agentwire::jsonrpc_bus::message::{RawJson, SendMessageResult};
use agentwire::jsonrpc_bus::{
    Bus, BusConfig, BusEvent, CommandError, DeliveryId, DropReason, HopOutcome,
};
use agentwire::tokio::{Handle, ServerConfig};
use serde_json::Value;
use tokio::sync::oneshot;

use crate::endpoint::{Endpoint, Mount, Place};

type Waiters = Arc<Mutex<BTreeMap<DeliveryId, oneshot::Sender<SendMessageResult>>>>;

/// A running bus.
pub struct BusApp {
    /// Where the bus is served (its address, URL and shutdown): a listener of its own
    /// ([`start`]) or a route of a shared one ([`mount`]).
    pub server: Endpoint<Observed<Bus>>,
    /// Commands to the bus machine (its observer wrapper derefs to the [`Bus`]).
    pub handle: Handle<Observed<Bus>>,
    waiters: Waiters,
    /// Ends when the server stops.
    pub events_task: tokio::task::JoinHandle<()>,
}

/// The transport settings of the reference bus: the transport's message and frame caps
/// follow the bus's `max_message_bytes` (plus
/// [`TRANSPORT_HEADROOM`](crate::common::TRANSPORT_HEADROOM)), WebSocket ping every 15 s,
/// and room for at least the bus's `max_connections` (the bus itself answers the one too
/// many with -32005 and close 1013).
pub fn server_config(bus: &BusConfig) -> ServerConfig {
    let config =
        crate::common::machine_sized(bus.limits.max_message_bytes, bus.limits.max_connections);
    crate::common::protect(config, "jsonrpc-bus", "/", address_refusal())
}

/// How the bus refuses a connection over the per-address cap: as it refuses one over its
/// `max_connections`, with a -32005 error (`data`: which limit) and close 1013.
pub fn address_refusal() -> agentwire::tokio::Refusal {
    use agentwire::jsonrpc_bus::{codec::write_error, ErrorCode, ErrorObject, Id};
    let mut out = Vec::with_capacity(128);
    let error = ErrorObject::with_data(ErrorCode::LIMIT_EXCEEDED, "max_connections_per_address");
    write_error(&mut out, &Id::Null, &error);
    let text = String::from_utf8(out).unwrap_or_default();
    agentwire::tokio::Refusal::close(CloseCode::TRY_AGAIN_LATER, "too-many-connections")
        .with_frame(agentwire::core::FrameBuf::text(text))
}

/// Starts a bus on `addr` with [`server_config`]; `on_event` sees every event as the driver
/// polls it out of the bus ([`Observed`]), in the bus's owner task: keep it quick, never
/// block in it, never wait on the bus from it.
pub async fn start(
    addr: &str,
    config: BusConfig,
    on_event: impl FnMut(&BusEvent) + Send + 'static,
) -> std::io::Result<BusApp> {
    let transport = server_config(&config);
    start_with(addr, config, transport, on_event).await
}

/// [`start`] with explicit transport settings.
pub async fn start_with(
    addr: &str,
    config: BusConfig,
    transport: ServerConfig,
    on_event: impl FnMut(&BusEvent) + Send + 'static,
) -> std::io::Result<BusApp> {
    serve(Place::Bind(addr), config, transport, on_event).await
}

/// Serves a bus on the route `at` of a shared listener, with [`server_config`] (its
/// plain-HTTP answer naming the route's path); otherwise as [`start`].
pub async fn mount(
    at: Mount<'_>,
    config: BusConfig,
    on_event: impl FnMut(&BusEvent) + Send + 'static,
) -> std::io::Result<BusApp> {
    let transport = server_config(&config).with_endpoint("jsonrpc-bus", at.path);
    mount_with(at, config, transport, on_event).await
}

/// [`mount`] with explicit transport settings.
pub async fn mount_with(
    at: Mount<'_>,
    config: BusConfig,
    transport: ServerConfig,
    on_event: impl FnMut(&BusEvent) + Send + 'static,
) -> std::io::Result<BusApp> {
    serve(Place::Route(at), config, transport, on_event).await
}

/// The one body of [`start_with`] and [`mount_with`]: the bus with its observer and its
/// transport, at `place`.
async fn serve(
    place: Place<'_>,
    config: BusConfig,
    transport: ServerConfig,
    mut on_event: impl FnMut(&BusEvent) + Send + 'static,
) -> std::io::Result<BusApp> {
    let (now, unix_ms) = crate::common::clocks();
    let waiters: Waiters = Arc::default();
    let w = waiters.clone();
    // Every event is handled where the driver polls the bus (a delivery's events are counted
    // and logged there, with no channel hand-off per hop); none is passed on.
    let bus = Observed::new(
        Bus::new(config, UuidV4Ids, now, unix_ms),
        move |ev: BusEvent| {
            on_event(&ev);
            if let BusEvent::Completed {
                delivery,
                publisher: None,
                result,
            } = ev
            {
                let tx = w.lock().ok().and_then(|mut m| m.remove(&delivery));
                if let Some(tx) = tx {
                    let _ = tx.send(result);
                }
            }
            None
        },
    );
    let (server, mut events) = place.serve(bus, transport).await?;
    // The observer keeps every event, so this only waits for the channel to close.
    let events_task = tokio::spawn(async move { while events.recv().await.is_some() {} });
    let handle = server.handle();
    Ok(BusApp {
        server,
        handle,
        waiters,
        events_task,
    })
}

impl BusApp {
    /// The address clients connect to.
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// `ws://<local_addr>` (with the route's path when mounted; `wss://` over TLS).
    pub fn url(&self) -> String {
        self.server.url("")
    }

    /// Publishes `payload` on `topic` from the bus itself and waits for the chain's result.
    pub async fn publish(&self, topic: &str, payload: &Value) -> Result<SendMessageResult, String> {
        let raw = RawJson::from_serialize(payload).map_err(|e| e.to_string())?;
        let (tx, rx) = oneshot::channel();
        let waiters = self.waiters.clone();
        let topic = topic.to_owned();
        // The waiter is registered in the owner task, before any event of this delivery is
        // drained, so even a chain with no subscribers (completed at once) finds it.
        let started = self
            .handle
            .call(move |bus, now| {
                let id = bus.publish_raw(&topic, raw.as_raw(), now)?;
                if let Ok(mut m) = waiters.lock() {
                    m.insert(id, tx);
                }
                Ok::<_, CommandError>(id)
            })
            .await;
        match started {
            Err(_) => Err("bus-stopped".into()),
            Ok(Err(e)) => Err(e.to_string()),
            Ok(Ok(_)) => rx.await.map_err(|_| "bus-stopped".to_owned()),
        }
    }

    /// Closes `conn` from the server side (its client sees `code` and `reason`).
    pub async fn close(&self, conn: ConnId, code: CloseCode, reason: &'static str) -> bool {
        matches!(
            self.handle
                .call(move |bus, _| bus.close(conn, code, reason))
                .await,
            Ok(Ok(()))
        )
    }

    /// Open connections.
    pub async fn connection_count(&self) -> usize {
        self.handle
            .call(|bus, _| bus.connection_count())
            .await
            .unwrap_or(0)
    }
}

/// What an operator can do about drops of `reason`.
fn drop_advice(reason: DropReason) -> &'static str {
    match reason {
        DropReason::SubscriberOverloaded => {
            "a subscriber's delivery queue was full; it is slow or silent (raise --max-pending-per-subscriber, or fix the subscriber)"
        }
        DropReason::PublisherOverloaded => {
            "a publisher had too many publishes in flight (raise --max-pending-per-publisher)"
        }
        _ => "see BusStats",
    }
}

/// Names of ended connections kept for the events that still mention them (a delivery's
/// turn is reported after its subscriber's disconnect).
const RECENTLY_GONE: usize = 64;

/// Turns events into readable lines, naming connections by their `clientId`.
#[derive(Debug, Default)]
pub struct EventLog {
    names: BTreeMap<ConnId, String>,
    gone: std::collections::VecDeque<(ConnId, String)>,
}

impl EventLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// `conn 3 (agent-1)`, or `conn 3` before its `initialize`.
    pub fn name(&self, conn: ConnId) -> String {
        match self.client_id(conn) {
            Some(id) => format!("conn {} ({id})", conn.get()),
            None => format!("conn {}", conn.get()),
        }
    }

    /// The `clientId` of `conn` (open or recently ended), if it sent one.
    pub fn client_id(&self, conn: ConnId) -> Option<&str> {
        self.names.get(&conn).map(String::as_str).or_else(|| {
            self.gone
                .iter()
                .find(|(c, _)| *c == conn)
                .map(|(_, id)| id.as_str())
        })
    }

    /// Records what `ev` says about connections and describes it in one line.
    pub fn describe(&mut self, ev: &BusEvent) -> String {
        match ev {
            BusEvent::Connected { conn, remote } => match remote {
                Some(addr) => format!("{} connected from {addr}", self.name(*conn)),
                None => format!("{} connected", self.name(*conn)),
            },
            BusEvent::Initialized {
                conn,
                client_id,
                client_info,
            } => {
                if let Some(id) = client_id {
                    self.names.insert(*conn, id.to_string());
                }
                let info = client_info.as_ref().map_or_else(
                    || "no clientInfo".to_owned(),
                    |i| {
                        format!(
                            "{} {}",
                            i.name.as_deref().unwrap_or("?"),
                            i.version.as_deref().unwrap_or("?")
                        )
                    },
                );
                format!("{} initialized ({info})", self.name(*conn))
            }
            BusEvent::Subscribed {
                conn,
                topic,
                subscription_id,
            } => format!(
                "{} subscribed to {topic:?} ({subscription_id})",
                self.name(*conn)
            ),
            BusEvent::Unsubscribed { conn, topic } => {
                format!("{} unsubscribed from {topic:?}", self.name(*conn))
            }
            BusEvent::Published {
                delivery,
                publisher,
                topic,
                subscribers,
            } => format!(
                "{delivery}: {} published on {topic:?} -> {subscribers} subscriber(s)",
                self.publisher(*publisher)
            ),
            BusEvent::Hop {
                delivery,
                subscriber,
                outcome,
            } => format!(
                "{delivery}: {} {}",
                self.name(*subscriber),
                hop_outcome(outcome)
            ),
            BusEvent::Completed {
                delivery,
                publisher,
                result,
            } => format!(
                "{delivery}: done, {} gets {}",
                self.publisher(*publisher),
                serde_json::to_string(result).unwrap_or_default()
            ),
            BusEvent::Disconnected {
                conn,
                subscriptions,
            } => {
                let line = format!(
                    "{} disconnected ({subscriptions} subscription(s) dropped)",
                    self.name(*conn)
                );
                if let Some(id) = self.names.remove(conn) {
                    if self.gone.len() == RECENTLY_GONE {
                        self.gone.pop_front();
                    }
                    self.gone.push_back((*conn, id));
                }
                line
            }
            BusEvent::ProtocolViolation { conn, error } => {
                format!("{} broke the protocol: {error}", self.name(*conn))
            }
            BusEvent::Dropped {
                reason,
                count,
                total,
            } => format!(
                "dropped {count} ({reason}; {total} since start): {}",
                drop_advice(*reason)
            ),
            other => format!("{other:?}"),
        }
    }

    /// Logs `ev` with `tracing`: connections, subscriptions, publishes and their results at
    /// `info`, each subscriber's turn at `debug`, protocol violations and drops at `warn`
    /// (drops come rate-limited from the bus: at most one line per reason per second).
    pub fn log(&mut self, ev: &BusEvent) {
        let enabled = match ev {
            BusEvent::Hop { .. } => tracing::enabled!(tracing::Level::DEBUG),
            BusEvent::ProtocolViolation { .. } | BusEvent::Dropped { .. } => {
                tracing::enabled!(tracing::Level::WARN)
            }
            _ => tracing::enabled!(tracing::Level::INFO),
        };
        // A line nobody reads is not formatted (a publish through a chain of ten makes
        // twelve events); the events that name connections are still recorded.
        if !enabled
            && !matches!(
                ev,
                BusEvent::Initialized { .. } | BusEvent::Disconnected { .. }
            )
        {
            return;
        }
        let line = self.describe(ev);
        match ev {
            BusEvent::Hop { .. } => tracing::debug!("{line}"),
            BusEvent::ProtocolViolation { .. } | BusEvent::Dropped { .. } => {
                tracing::warn!("{line}")
            }
            _ => tracing::info!("{line}"),
        }
    }

    fn publisher(&self, publisher: Option<ConnId>) -> String {
        publisher.map_or_else(|| "the bus".to_owned(), |c| self.name(c))
    }
}

/// `continued`, `stopped the chain`, `timed out`, ...
pub fn hop_outcome(outcome: &HopOutcome) -> String {
    match outcome {
        HopOutcome::Continued => "answered stopPropagation:false (continued)".into(),
        HopOutcome::Stopped => "answered stopPropagation:true (chain stopped)".into(),
        HopOutcome::Error(e) => format!("answered an error: {e} (skipped)"),
        HopOutcome::TimedOut => "did not answer in time (timed out, skipped)".into(),
        HopOutcome::Disconnected => "disconnected before answering (skipped)".into(),
        HopOutcome::Overloaded => "had a full delivery queue (overloaded, skipped)".into(),
        other => format!("{other:?}"),
    }
}

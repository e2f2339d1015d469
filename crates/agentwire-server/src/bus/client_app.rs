//! A bus client for applications: a `BusClient` machine driven by agentwire-tokio, with
//! async `subscribe`/`publish`/`ping` that return the bus's answer, and a channel of
//! deliveries that an interceptor answers one by one.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use agentwire::core::UuidV4Ids;
use agentwire::jsonrpc_bus::message::{RawJson, SendMessageResult};
use agentwire::jsonrpc_bus::{
    BusClient, ClientConfig, ClientEvent, CommandError, ErrorCode, ErrorObject, IncomingId,
    RequestError, RequestId,
};
use agentwire::tokio::{Client, ClientConfig as TransportClientConfig, ConfigError, Handle};
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};

/// Deliveries handed to the application at most this many at a time; beyond it a delivery
/// that awaits an answer is answered -32005 at once (the bus skips to the next subscriber),
/// and one the client already answered is dropped: either way it is counted
/// ([`BusClientApp::dropped_deliveries`]) and logged.
pub const DELIVERY_QUEUE: usize = 1024;

/// What a request got back from the bus.
#[derive(Debug, Clone, PartialEq)]
enum Reply {
    Subscribed(Option<String>),
    Unsubscribed,
    Published(SendMessageResult),
    Pong(String),
}

/// Why a command did not get a result.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// The client refused it at once (already subscribed, a limit, ...).
    Command(CommandError),
    /// The bus answered with an error, or it timed out, or the connection dropped.
    Request(RequestError),
    /// The client's driver has stopped.
    Stopped,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Command(e) => write!(f, "refused: {e}"),
            Self::Request(e) => write!(f, "{e}"),
            Self::Stopped => f.write_str("client stopped"),
        }
    }
}

impl std::error::Error for Failure {}

type Waiters = Arc<Mutex<BTreeMap<RequestId, oneshot::Sender<Result<Reply, RequestError>>>>>;

/// One message the bus delivered to this client.
///
/// In intercept mode ([`ClientConfig::intercepting`]) the bus waits for [`Delivery::answer`]
/// before it moves to the next subscriber; dropping the delivery unanswered lets the bus's
/// delivery timeout run out. Otherwise the client already answered `stopPropagation: false`.
#[derive(Debug)]
pub struct Delivery {
    /// The topic it was published on.
    pub topic: String,
    /// The payload, as sent.
    pub payload: RawJson,
    id: IncomingId,
    answered: bool,
    handle: Handle<BusClient>,
}

impl Delivery {
    /// The payload as a JSON value.
    pub fn payload_value(&self) -> Value {
        self.payload.parse().unwrap_or(Value::Null)
    }

    /// `{"topic":..,"payload":..}`.
    pub fn to_json(&self) -> Value {
        json!({"topic": self.topic, "payload": self.payload_value()})
    }

    /// `{"topic":..,"payload":..}` as one line, keys in that order and the payload's text
    /// exactly as the publisher sent it.
    pub fn to_json_line(&self) -> String {
        let topic = serde_json::to_string(&self.topic).unwrap_or_default();
        format!("{{\"topic\":{topic},\"payload\":{}}}", self.payload.get())
    }

    /// Whether the bus waits for [`answer`](Self::answer).
    pub fn needs_answer(&self) -> bool {
        !self.answered
    }

    /// Answers `stopPropagation: stop`. `false` when there was nothing to answer (already
    /// answered, or the connection it came on has ended).
    pub async fn answer(self, stop: bool) -> bool {
        if self.answered {
            return false;
        }
        let id = self.id;
        matches!(
            self.handle.call(move |c, _| c.answer(id, stop)).await,
            Ok(Ok(()))
        )
    }

    /// Answers with a JSON-RPC error: the bus counts it in `errors` and skips to the next
    /// subscriber.
    pub async fn answer_error(self, error: ErrorObject) -> bool {
        if self.answered {
            return false;
        }
        let id = self.id;
        matches!(
            self.handle
                .call(move |c, _| c.answer_error(id, error))
                .await,
            Ok(Ok(()))
        )
    }
}

/// A running bus client.
pub struct BusClientApp {
    /// Commands to the client machine.
    pub handle: Handle<BusClient>,
    waiters: Waiters,
    dropped: Arc<AtomicU64>,
    /// The event task; ends when the driver stops.
    pub task: tokio::task::JoinHandle<()>,
}

/// The transport settings of the example clients: the transport's defaults (reconnect with
/// backoff from 1 s doubling to 30 s, plus up to 500 ms jitter) and the installed client
/// TLS settings for `wss://` ([`crate::common::install_client_tls`]).
pub fn transport_config() -> TransportClientConfig {
    crate::common::client_transport(TransportClientConfig::default())
}

/// Connects a client to `url` (the driver keeps reconnecting per `transport`; the machine
/// re-initializes and re-subscribes on every connect). `on_event` sees every event first,
/// in the event task: keep it quick, never wait on the client from it.
///
/// Returns the client and its deliveries (at most [`DELIVERY_QUEUE`] waiting).
pub fn connect(
    url: &str,
    config: ClientConfig,
    transport: TransportClientConfig,
    mut on_event: impl FnMut(&ClientEvent) + Send + 'static,
) -> Result<(BusClientApp, mpsc::Receiver<Delivery>), ConfigError> {
    let (handle, mut events) = Client::connect(url, BusClient::new(config, UuidV4Ids), transport)?;
    let waiters: Waiters = Arc::default();
    let (deliveries_tx, deliveries) = mpsc::channel(DELIVERY_QUEUE);

    // Deliveries the application has no room for are refused from their own task: awaiting
    // `Handle::call` in the task that reads `Events` could deadlock once the event channel is
    // full (the driver waits for us while we wait for it).
    let (refuse_tx, mut refuse_rx) = mpsc::channel::<IncomingId>(DELIVERY_QUEUE);
    let h = handle.clone();
    tokio::spawn(async move {
        while let Some(id) = refuse_rx.recv().await {
            let error = ErrorObject::with_data(ErrorCode::LIMIT_EXCEEDED, "delivery-queue-full");
            if h.call(move |c, _| c.answer_error(id, error)).await.is_err() {
                break;
            }
        }
    });

    let w = waiters.clone();
    let h = handle.clone();
    let dropped: Arc<AtomicU64> = Arc::default();
    let d_count = dropped.clone();
    let task = tokio::spawn(async move {
        while let Some(ev) = events.recv().await {
            on_event(&ev);
            let done = match ev {
                ClientEvent::Subscribed {
                    request,
                    subscription_id,
                    ..
                } => Some((
                    request,
                    Ok(Reply::Subscribed(subscription_id.map(String::from))),
                )),
                ClientEvent::Unsubscribed { request, .. } => {
                    Some((request, Ok(Reply::Unsubscribed)))
                }
                ClientEvent::Published { request, result } => {
                    Some((request, Ok(Reply::Published(result))))
                }
                ClientEvent::Pong { request, timestamp } => {
                    Some((request, Ok(Reply::Pong(timestamp))))
                }
                ClientEvent::RequestFailed { request, error, .. } => Some((request, Err(error))),
                ClientEvent::Delivery {
                    id,
                    topic,
                    payload,
                    answered,
                } => {
                    let delivery = Delivery {
                        topic,
                        payload,
                        id,
                        answered,
                        handle: h.clone(),
                    };
                    if let Err(e) = deliveries_tx.try_send(delivery) {
                        let d = e.into_inner();
                        let total = d_count.fetch_add(1, Ordering::Relaxed) + 1;
                        // The first drop and then one line per DELIVERY_QUEUE of them.
                        if total % DELIVERY_QUEUE as u64 == 1 {
                            tracing::warn!(
                                "the application is not taking deliveries: {total} dropped so \
                                 far (the queue holds {DELIVERY_QUEUE}); the latest was on {}",
                                d.topic
                            );
                        }
                        if d.needs_answer() {
                            // Full as well: the bus's delivery timeout settles it.
                            let _ = refuse_tx.try_send(d.id);
                        }
                    }
                    None
                }
                _ => None,
            };
            if let Some((request, outcome)) = done {
                // Requests without a waiter (the automatic re-subscribes after a reconnect)
                // are only seen by `on_event`.
                let tx = w.lock().ok().and_then(|mut m| m.remove(&request));
                if let Some(tx) = tx {
                    let _ = tx.send(outcome);
                }
            }
        }
        // The driver has stopped (e.g. a client without reconnect could not connect):
        // requests still waiting will never be answered, so they fail now.
        if let Ok(mut m) = w.lock() {
            m.clear();
        }
    });
    Ok((
        BusClientApp {
            handle,
            waiters,
            dropped,
            task,
        },
        deliveries,
    ))
}

impl BusClientApp {
    /// Deliveries the application had no room for (its queue held [`DELIVERY_QUEUE`]): those
    /// awaiting an answer were refused with -32005, the others were dropped.
    pub fn dropped_deliveries(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Runs a command that sends a request and waits for its answer.
    async fn request(
        &self,
        command: impl FnOnce(&mut BusClient, Instant) -> Result<RequestId, CommandError>
            + Send
            + 'static,
    ) -> Result<Reply, Failure> {
        let (tx, rx) = oneshot::channel();
        let waiters = self.waiters.clone();
        // The waiter is registered in the owner task, before the request is even sent, so a
        // fast answer cannot beat it.
        let sent = self
            .handle
            .call(move |c, now| {
                let id = command(c, now)?;
                if let Ok(mut m) = waiters.lock() {
                    m.insert(id, tx);
                }
                Ok(id)
            })
            .await;
        match sent {
            Err(_) => Err(Failure::Stopped),
            Ok(Err(e)) => Err(Failure::Command(e)),
            Ok(Ok(_)) => match rx.await {
                Err(_) => Err(Failure::Stopped),
                Ok(outcome) => outcome.map_err(Failure::Request),
            },
        }
    }

    /// Subscribes to `pattern` and returns the bus's `subscriptionId`. The subscription is
    /// restored after every reconnect.
    pub async fn subscribe(&self, pattern: &str) -> Result<Option<String>, Failure> {
        let pattern = pattern.to_owned();
        match self
            .request(move |c, now| c.subscribe(&pattern, now))
            .await?
        {
            Reply::Subscribed(id) => Ok(id),
            _ => Err(Failure::Request(RequestError::Malformed)),
        }
    }

    /// Unsubscribes from `pattern` (the string passed to `subscribe`).
    pub async fn unsubscribe(&self, pattern: &str) -> Result<(), Failure> {
        let pattern = pattern.to_owned();
        match self
            .request(move |c, now| c.unsubscribe(&pattern, now))
            .await?
        {
            Reply::Unsubscribed => Ok(()),
            _ => Err(Failure::Request(RequestError::Malformed)),
        }
    }

    /// Publishes `payload` on `topic` and returns the chain's aggregated result.
    pub async fn publish(
        &self,
        topic: &str,
        payload: &Value,
    ) -> Result<SendMessageResult, Failure> {
        let raw = RawJson::from_serialize(payload)
            .map_err(|e| Failure::Command(CommandError::Payload(e.to_string())))?;
        let topic = topic.to_owned();
        match self
            .request(move |c, now| c.publish_raw(&topic, raw.as_raw(), now))
            .await?
        {
            Reply::Published(result) => Ok(result),
            _ => Err(Failure::Request(RequestError::Malformed)),
        }
    }

    /// Sends `ping` and returns the bus's timestamp.
    pub async fn ping(&self) -> Result<String, Failure> {
        match self.request(|c, now| c.ping(now)).await? {
            Reply::Pong(timestamp) => Ok(timestamp),
            _ => Err(Failure::Request(RequestError::Malformed)),
        }
    }

    /// Whether the current connection has completed `initialize`.
    pub async fn is_ready(&self) -> bool {
        self.handle.call(|c, _| c.is_ready()).await.unwrap_or(false)
    }

    /// Closes the connection (1001) and stops the driver.
    pub async fn shutdown(&self) {
        self.handle.shutdown().await;
    }
}

//! The JSON-RPC bus over real sockets, the worked example of a scenario:
//!
//! - `bus-chain`: `--chain K` interceptors subscribed to `inbound:*` answer every delivery;
//!   `--publishers P` each keep one `sendMessage` request in flight (the next once the result
//!   is back). A message is a publish, a delivery is one hop; latency is the publish's round
//!   trip (through all K hops).
//! - `bus-fanout`: `--subscribers N` subscribers; `--publishers P` each send `sendMessage`
//!   notifications, a window of 64 closed by a `ping` round trip (the same style as the NATS
//!   and Redis fan-outs). A delivery is one subscriber receiving one message; latency is
//!   publish to delivery (the bus calls subscribers one after another, so the last one waits
//!   for the others).
//! - `bus-idle`: `--connections C` initialized connections doing nothing; reports the
//!   server's resident memory per connection (the RSS growth over C).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use futures_util::{FutureExt, SinkExt, StreamExt};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;

use super::{Ctx, Outcome, Scenario};
use crate::drive::{collect, drained, stop_receivers, Sent, WINDOW};
use crate::error::LoadError;
use crate::latency::{stamp, Latency};
use crate::options::Budget;
use crate::payload::payload;
use crate::server::ServerKind;
use crate::ws::{self, stop_signal, StopRx, Ws};

const SERVER: ServerKind = ServerKind::Agentwire {
    protocol: "bus",
    settings: &[],
};

/// The bus scenarios.
pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "bus-chain",
            "sendMessage requests through --chain interceptors, --publishers each one in flight",
            SERVER,
            |ctx| chain(ctx).boxed(),
        ),
        Scenario::new(
            "bus-fanout",
            "sendMessage notifications to --subscribers, --publishers each a window of 64",
            SERVER,
            |ctx| fanout(ctx).boxed(),
        ),
        Scenario::new(
            "bus-idle",
            "--connections initialized idle connections: server RSS per connection",
            SERVER,
            |ctx| idle(ctx).boxed(),
        ),
    ]
}

/// An initialized bus connection.
pub async fn initialized(url: &str, client_id: &str) -> Result<Ws, LoadError> {
    let mut w = ws::connect(url).await?;
    let r = ws::round_trip(
        &mut w,
        format!(
            r#"{{"jsonrpc":"2.0","method":"initialize","params":{{"clientId":"{client_id}"}},"id":1}}"#
        ),
    )
    .await?;
    expect_result(&r, "initialize")?;
    Ok(w)
}

/// An initialized bus connection subscribed to `inbound:*`.
async fn subscribed(url: &str, client_id: &str) -> Result<Ws, LoadError> {
    let mut w = initialized(url, client_id).await?;
    let r = ws::round_trip(
        &mut w,
        r#"{"jsonrpc":"2.0","method":"subscribe","params":{"topic":"inbound:*"},"id":2}"#.into(),
    )
    .await?;
    expect_result(&r, "subscribe")?;
    Ok(w)
}

fn expect_result(answer: &str, what: &str) -> Result<(), LoadError> {
    if answer.contains("\"result\"") {
        Ok(())
    } else {
        Err(LoadError::Protocol(format!("{what}: {answer}")))
    }
}

/// The success answer to a delivery whose text is `delivery`, or `None` when it is not a
/// request. The id is copied as written (the bus's ids are strings without escapes).
fn answer_to(delivery: &str) -> Option<String> {
    let at = delivery.rfind(",\"id\":")? + 6;
    let id = delivery[at..].strip_suffix('}')?;
    Some(format!(
        r#"{{"jsonrpc":"2.0","result":{{"success":true,"stopPropagation":false}},"id":{id}}}"#
    ))
}

/// A subscriber: answers every delivery at once (every answer for the messages already
/// readable, then one flush), counts deliveries, and records publish-to-delivery latency when
/// `timed`. Ends on `stop` or when the connection ends.
fn subscriber(
    mut w: Ws,
    delivered: Arc<AtomicU64>,
    timed: bool,
    mut stop: StopRx,
) -> JoinHandle<Latency> {
    tokio::spawn(async move {
        let mut latency = Latency::new();
        loop {
            let first = tokio::select! {
                m = w.next() => m,
                () = stop.stopped() => break,
            };
            let Some(Ok(first)) = first else { break };
            let mut next = Some(first);
            while let Some(msg) = next.take() {
                if let Message::Text(t) = &msg {
                    if let Some(answer) = answer_to(t) {
                        delivered.fetch_add(1, Ordering::Relaxed);
                        if timed {
                            if let Some(s) = crate::payload::read_stamp(t.as_bytes()) {
                                latency.record_since(s);
                            }
                        }
                        if w.feed(Message::text(answer)).await.is_err() {
                            return latency;
                        }
                    }
                }
                if let Some(Some(Ok(m))) = w.next().now_or_never() {
                    next = Some(m);
                }
            }
            if w.flush().await.is_err() {
                break;
            }
        }
        latency
    })
}

fn publish_request(id: u64, size: usize) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","method":"sendMessage","params":{{"topic":"inbound:load","payload":{}}},"id":{id}}}"#,
        payload(size, stamp())
    )
}

fn publish_notification(size: usize) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","method":"sendMessage","params":{{"topic":"inbound:load","payload":{}}}}}"#,
        payload(size, stamp())
    )
}

async fn chain(ctx: Ctx) -> Result<Outcome, LoadError> {
    let o = ctx.options().clone();
    let url = ctx.address().to_owned();
    let delivered = Arc::new(AtomicU64::new(0));
    let (stop, stop_rx) = stop_signal();
    let mut subs = Vec::new();
    for i in 0..o.chain {
        let w = subscribed(&url, &format!("hop-{i}")).await?;
        subs.push(subscriber(w, delivered.clone(), false, stop_rx.clone()));
    }
    let mut pubs = Vec::new();
    for i in 0..o.publishers {
        pubs.push(initialized(&url, &format!("publisher-{i}")).await?);
    }
    let budget = ctx.start();
    let expect = format!("\"delivered\":{}", o.chain);
    let handles = pubs
        .into_iter()
        .map(|w| {
            tokio::spawn(request_loop(
                w,
                budget.clone(),
                o.payload_size(),
                expect.clone(),
            ))
        })
        .collect();
    let sent = collect(handles).await;
    if let Ok((messages, _, _)) = &sent {
        drained(&delivered, messages * o.chain).await;
    }
    ctx.stop();
    stop_receivers(stop, subs).await;
    let (messages, errors, latency) = sent?;
    Ok(Outcome {
        messages,
        deliveries: delivered.load(Ordering::Relaxed),
        expected_deliveries: Some(messages * o.chain),
        errors,
        latency,
        rss_per_connection: None,
    })
}

async fn request_loop(
    mut w: Ws,
    budget: Budget,
    size: usize,
    expect: String,
) -> Result<Sent, LoadError> {
    let (mut sent, mut errors, mut latency) = (0, 0, Latency::new());
    let mut id = 10;
    while budget.take() {
        id += 1;
        let t0 = Instant::now();
        let r = ws::round_trip(&mut w, publish_request(id, size)).await?;
        latency.record(t0.elapsed());
        sent += 1;
        if !r.contains(&expect) {
            errors += 1;
        }
    }
    Ok((sent, errors, latency))
}

async fn fanout(ctx: Ctx) -> Result<Outcome, LoadError> {
    let o = ctx.options().clone();
    let url = ctx.address().to_owned();
    let delivered = Arc::new(AtomicU64::new(0));
    let (stop, stop_rx) = stop_signal();
    let mut subs = Vec::new();
    for i in 0..o.subscribers {
        let w = subscribed(&url, &format!("subscriber-{i}")).await?;
        subs.push(subscriber(w, delivered.clone(), true, stop_rx.clone()));
    }
    let mut pubs = Vec::new();
    for i in 0..o.publishers {
        pubs.push(initialized(&url, &format!("publisher-{i}")).await?);
    }
    let budget = ctx.start();
    let handles = pubs
        .into_iter()
        .map(|w| tokio::spawn(notify_loop(w, budget.clone(), o.payload_size())))
        .collect();
    let sent = collect(handles).await;
    if let Ok((messages, _, _)) = &sent {
        drained(&delivered, messages * o.subscribers).await;
    }
    ctx.stop();
    let latency = stop_receivers(stop, subs).await;
    let (messages, errors, _) = sent?;
    Ok(Outcome {
        messages,
        deliveries: delivered.load(Ordering::Relaxed),
        expected_deliveries: Some(messages * o.subscribers),
        errors,
        latency,
        rss_per_connection: None,
    })
}

async fn notify_loop(mut w: Ws, budget: Budget, size: usize) -> Result<Sent, LoadError> {
    let (mut sent, mut errors) = (0, 0);
    let mut id = 10;
    loop {
        let mut in_window = 0;
        while in_window < WINDOW && budget.take() {
            w.feed(Message::text(publish_notification(size)))
                .await
                .map_err(|e| LoadError::ws("publishing", e))?;
            in_window += 1;
        }
        sent += in_window;
        // The window closes with a ping round trip: the bus has read every publish before it.
        id += 1;
        let r = ws::round_trip(
            &mut w,
            format!(r#"{{"jsonrpc":"2.0","method":"ping","params":{{}},"id":{id}}}"#),
        )
        .await?;
        if !r.contains("\"result\"") {
            errors += 1;
        }
        if in_window < WINDOW {
            return Ok((sent, errors, Latency::new()));
        }
    }
}

async fn idle(ctx: Ctx) -> Result<Outcome, LoadError> {
    let url = ctx.address().to_owned();
    crate::drive::idle_connections(&ctx, |i| {
        let url = url.clone();
        async move { initialized(&url, &format!("idle-{i}")).await }
    })
    .await
}

//! The `bus_demo` command: its flags and its `main`. `examples/bus_demo.rs` is the binary, and its
//! documentation says what the command does and how to run it. [`server`] and [`script`] are
//! its two halves, which `agentwire demo` runs on its shared listener.

use std::process::ExitCode;
use std::time::Duration;

use crate::bus;
use crate::endpoint::Place;
use agentwire::jsonrpc_bus::message::SendMessageResult;
use agentwire::jsonrpc_bus::{BusConfig, BusEvent, ClientConfig};
use bus::client_app::{BusClientApp, Delivery};
use bus::server_app::{BusApp, EventLog};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::script::{check, step, DemoError, STEP_TIMEOUT};

/// How long the demo's bus waits for one subscriber's answer: short, so the slow
/// subscriber's skip is seen at once.
pub const DELIVERY_TIMEOUT: Duration = Duration::from_millis(300);

/// Connects `id` and subscribes it to `patterns`, in order.
async fn client(
    url: &str,
    id: &str,
    intercept: bool,
    patterns: &[&str],
) -> Result<(BusClientApp, mpsc::Receiver<Delivery>), DemoError> {
    let mut cfg = ClientConfig::new(id);
    if intercept {
        cfg = cfg.intercepting();
    }
    let (app, deliveries) =
        bus::client_app::connect(url, cfg, bus::client_app::transport_config(), |_| {})?;
    for p in patterns {
        if let Err(e) = step("subscribe", app.subscribe(p)).await? {
            return Err(format!("{id} could not subscribe to {p}: {e}").into());
        }
    }
    Ok((app, deliveries))
}

async fn publish(
    gateway: &BusClientApp,
    topic: &str,
    payload: Value,
) -> Result<SendMessageResult, DemoError> {
    println!("> gateway publishes {topic} {payload}");
    let started = tokio::time::Instant::now();
    let result = step("publish", gateway.publish(topic, &payload))
        .await?
        .map_err(|e| format!("publish failed: {e}"))?;
    println!(
        "  gateway <- {} (after {} ms)",
        serde_json::to_string(&result).unwrap_or_default(),
        started.elapsed().as_millis()
    );
    Ok(result)
}

/// Runs the `bus_demo` command, as `cargo run --example bus_demo` does: the demo's bus on
/// 127.0.0.1 (a free port), then [`script`] against it.
pub async fn main() -> ExitCode {
    let outcome = async {
        let app = server(Place::Bind("127.0.0.1:0")).await?;
        let result = script(&app.url()).await;
        step("bus shutdown", app.server.shutdown()).await?;
        result
    };
    super::script::exit_code("bus_demo", outcome.await)
}

/// The demo's bus ([`DELIVERY_TIMEOUT`]) at `place`, printing what it does (`[bus] ...`).
pub async fn server(place: Place<'_>) -> std::io::Result<BusApp> {
    let cfg = BusConfig::default()
        .with_server_id("bus-demo")
        .with_delivery_timeout(DELIVERY_TIMEOUT);
    let mut log = EventLog::new();
    let on_event = move |ev: &BusEvent| {
        let line = log.describe(ev);
        if !matches!(ev, BusEvent::Connected { .. }) {
            println!("  [bus] {line}");
        }
    };
    match place {
        Place::Bind(addr) => bus::server_app::start(addr, cfg, on_event).await,
        Place::Route(at) => bus::server_app::mount(at, cfg, on_event).await,
    }
}

/// The interceptor chain against the demo's bus at `url`: five clients, four scripted
/// publishes, each outcome checked.
pub async fn script(url: &str) -> Result<(), DemoError> {
    println!("== bus demo: an interceptor chain ==");
    println!(
        "bus at {url} (delivery timeout {} ms)\n",
        DELIVERY_TIMEOUT.as_millis()
    );
    let url = url.to_owned();

    // The chain on inbound:* is auth, logger, handler: subscription order.
    let (auth, mut auth_rx) = client(&url, "auth", true, &["inbound:*"]).await?;
    tokio::spawn(async move {
        while let Some(d) = auth_rx.recv().await {
            let ok = d.payload_value()["token"] == "secret";
            if ok {
                println!("  [auth] {}: token ok, pass it on", d.topic);
            } else {
                println!("  [auth] {}: no valid token, stopPropagation", d.topic);
            }
            d.answer(!ok).await;
        }
    });
    let (slowpoke, mut slow_rx) = client(&url, "slowpoke", true, &["agent:*"]).await?;
    tokio::spawn(async move {
        let mut never_answered = Vec::new();
        while let Some(d) = slow_rx.recv().await {
            println!("  [slowpoke] {}: thinking... (never answers)", d.topic);
            never_answered.push(d);
        }
    });
    let (flaky, mut flaky_rx) = client(&url, "flaky", true, &["outbound:*"]).await?;
    let flaky_handle = flaky.handle.clone();
    tokio::spawn(async move {
        if let Some(d) = flaky_rx.recv().await {
            println!(
                "  [flaky] {}: got it, and vanishes before answering",
                d.topic
            );
            flaky_handle.shutdown().await;
        }
    });
    let (logger, mut logger_rx) = client(
        &url,
        "logger",
        false,
        &["inbound:*", "agent:*", "outbound:*"],
    )
    .await?;
    tokio::spawn(async move {
        while let Some(d) = logger_rx.recv().await {
            println!("  [logger] {} {}", d.topic, d.payload);
        }
    });
    let (handler, mut handler_rx) = client(&url, "handler", true, &["inbound:*"]).await?;
    let (handled_tx, mut handled) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(d) = handler_rx.recv().await {
            let text = d.payload_value()["text"].clone();
            println!("  [handler] {}: handling {text}", d.topic);
            let _ = handled_tx.send(text);
            d.answer(false).await;
        }
    });
    let (gateway, _) = client(&url, "gateway", false, &[]).await?;
    let ts = step("ping", gateway.ping())
        .await?
        .map_err(|e| format!("ping failed: {e}"))?;
    println!("> gateway pings\n  gateway <- timestamp {ts}");

    println!("\n-- 1. an authenticated message passes auth, logger and handler --");
    let r = publish(
        &gateway,
        "inbound:chat-1",
        json!({"token": "secret", "text": "hello"}),
    )
    .await?;
    check(
        !r.stop_propagation && r.delivered == Some(3),
        "stopPropagation false, delivered to 3",
    )?;
    let got = step("handler", handled.recv()).await?;
    check(got == Some(json!("hello")), "the handler handled \"hello\"")?;

    println!("\n-- 2. an unauthenticated message is stopped by auth --");
    let r = publish(
        &gateway,
        "inbound:chat-1",
        json!({"token": "guess", "text": "let me in"}),
    )
    .await?;
    check(
        r.stop_propagation && r.delivered == Some(1),
        "stopPropagation true, delivered to auth only",
    )?;
    check(
        handled.try_recv().is_err(),
        "the handler never saw \"let me in\"",
    )?;

    println!("\n-- 3. a slow subscriber times out; the chain goes on --");
    let started = tokio::time::Instant::now();
    let r = publish(&gateway, "agent:spawn", json!({"agent": "worker-7"})).await?;
    let waited = started.elapsed();
    check(
        r.timeouts == Some(1) && r.delivered == Some(1),
        "timeouts 1 (slowpoke), delivered 1 (logger)",
    )?;
    check(
        waited >= DELIVERY_TIMEOUT && waited < STEP_TIMEOUT,
        "the publisher waited one delivery timeout, not forever",
    )?;

    println!("\n-- 4. a subscriber vanishes mid-delivery; the chain goes on at once --");
    let r = publish(
        &gateway,
        "outbound:chat-1",
        json!({"chat_id": "chat-1", "text": "bye"}),
    )
    .await?;
    check(
        r.disconnected == Some(1) && r.timeouts == Some(0) && r.delivered == Some(1),
        "disconnected 1 (flaky), timeouts 0, delivered 1 (logger)",
    )?;

    println!("\nshutting down the clients");
    for c in [&gateway, &handler, &logger, &slowpoke, &flaky, &auth] {
        step("client shutdown", c.shutdown()).await?;
    }
    println!("bus demo finished: every outcome as expected");
    Ok(())
}

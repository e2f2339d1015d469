//! Embedding the JSON-RPC bus: the `Bus` machine of `jsonrpc-bus-proto` served by
//! `agentwire-tokio`'s `Server`, and two `BusClient` machines driven by its `Client`. An
//! interceptor subscribes to `greetings:*` and is asked about each message; a publisher
//! publishes once and gets the chain's result.
//!
//! ```text
//! cargo run --release --example embed_bus
//! ```

use std::time::{SystemTime, UNIX_EPOCH};

use agentwire_core::UuidV4Ids;
use agentwire_tokio::{Client, ClientConfig as Transport, Events, Server, ServerConfig};
use jsonrpc_bus_proto::{Bus, BusClient, BusConfig, ClientConfig, ClientEvent};
use serde_json::json;

type Error = Box<dyn std::error::Error>;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    // The machines read no clock: the bus is anchored to the transport's clock (tokio's) and
    // told the wall-clock time at that instant (for `ping`).
    let now = tokio::time::Instant::now().into_std();
    #[allow(clippy::disallowed_methods)]
    let unix_ms = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as u64;
    let bus = Bus::new(BusConfig::default(), UuidV4Ids, now, unix_ms);
    let (server, mut bus_events) =
        Server::bind("127.0.0.1:0", bus, ServerConfig::default()).await?;
    // The bus's events (connections, chains completed) are for logs and metrics.
    tokio::spawn(async move { while bus_events.recv().await.is_some() {} });
    let url = format!("ws://{}", server.local_addr());
    println!("bus on {url}");

    // The interceptor answers every delivery itself (`intercepting`).
    let config = ClientConfig::new("interceptor").intercepting();
    let (interceptor, mut intercepted) = Client::connect(
        &url,
        BusClient::new(config, UuidV4Ids),
        Transport::default(),
    )?;
    until(&mut intercepted, |e| {
        matches!(e, ClientEvent::Initialized(_))
    })
    .await?;
    interceptor
        .call(|c, now| c.subscribe("greetings:*", now))
        .await??;
    until(&mut intercepted, |e| {
        matches!(e, ClientEvent::Subscribed { .. })
    })
    .await?;
    println!("interceptor subscribed to greetings:*");

    let config = ClientConfig::new("publisher");
    let (publisher, mut published) = Client::connect(
        &url,
        BusClient::new(config, UuidV4Ids),
        Transport::default(),
    )?;
    until(&mut published, |e| matches!(e, ClientEvent::Initialized(_))).await?;
    let payload = json!({"text": "hello"});
    publisher
        .call(move |c, now| c.publish("greetings:world", &payload, now))
        .await??;

    // The delivery reaches the interceptor as a request: it lets the message go on.
    let delivery = until(&mut intercepted, |e| {
        matches!(e, ClientEvent::Delivery { .. })
    })
    .await?;
    if let ClientEvent::Delivery {
        id, topic, payload, ..
    } = delivery
    {
        println!("interceptor <- {topic} {payload}; answers stopPropagation: false");
        interceptor.call(move |c, _| c.answer(id, false)).await??;
    }
    // The publisher gets the chain's result once every subscriber has answered.
    if let ClientEvent::Published { result, .. } = until(&mut published, |e| {
        matches!(e, ClientEvent::Published { .. })
    })
    .await?
    {
        println!(
            "publisher <- stopPropagation {}, delivered to {:?}",
            result.stop_propagation, result.delivered
        );
    }

    publisher.shutdown().await;
    interceptor.shutdown().await;
    server.shutdown().await;
    Ok(())
}

/// The next event of `events` that `pick` wants (the others are skipped), within 10 s.
async fn until<E>(events: &mut Events<E>, pick: impl Fn(&E) -> bool) -> Result<E, Error> {
    let wait = async {
        while let Some(e) = events.recv().await {
            if pick(&e) {
                return Some(e);
            }
        }
        None
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), wait)
        .await?
        .ok_or_else(|| "the client stopped".into())
}

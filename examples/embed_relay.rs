//! Embedding the agent relay: the `Relay` machine of `agent-relay-proto` served by
//! `agentwire-tokio`'s `Server` at the spec's path, a UI host and an agent as two plain
//! WebSocket peers. The agent's `tool.call` reaches the host byte for byte, the host's
//! `tool.result` reaches only the agent, and every message becomes a study-log record (an
//! event of the machine: here printed as JSONL; the `agentwire` server writes them to disk).
//!
//! ```text
//! cargo run --release --example embed_relay
//! ```

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agent_relay_proto::{Relay, RelayConfig, RelayEvent, ENDPOINT_PATH};
use agentwire_core::UuidV4Ids;
use agentwire_tokio::{Server, ServerConfig};
use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;

type Error = Box<dyn std::error::Error>;
type Peer =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    // The relay is anchored to the transport's clock and told the wall-clock time at that
    // instant, for the log records' timestamps.
    let now = tokio::time::Instant::now().into_std();
    #[allow(clippy::disallowed_methods)]
    let unix_ms = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as u64;
    let relay = Relay::new(RelayConfig::default(), UuidV4Ids, now, unix_ms);
    let (server, mut events) = Server::bind("127.0.0.1:0", relay, ServerConfig::default()).await?;
    tokio::spawn(async move {
        let mut index = 0;
        while let Some(event) = events.recv().await {
            if let RelayEvent::Log(record) = event {
                let mut line = Vec::new();
                record.write_jsonl(index, &mut line);
                index += 1;
                println!("  log: {}", String::from_utf8_lossy(&line).trim_end());
            }
        }
    });
    let url = format!("ws://{}{ENDPOINT_PATH}", server.local_addr());
    println!("relay on {url}");

    let mut host = peer(&url).await?;
    send(
        &mut host,
        r#"{"v":"mvp-0.2","type":"relay.join","id":"h-1","payload":{"role":"host"}}"#,
    )
    .await?;
    until(&mut host, "relay.joined").await?;
    let mut agent = peer(&url).await?;
    send(
        &mut agent,
        r#"{"v":"mvp-0.2","type":"relay.join","id":"join-001","payload":{"role":"agent","sessionId":"default"}}"#,
    )
    .await?;
    until(&mut agent, "relay.joined").await?;

    send(
        &mut agent,
        r#"{"v":"mvp-0.2","type":"tool.call","id":"req-003","payload":{"toolName":"select","params":{"itemId":"m1"},"reason":"Pick the first movie."}}"#,
    )
    .await?;
    let call = until(&mut host, "tool.call").await?;
    println!("host  <- {call}");
    send(
        &mut host,
        r#"{"v":"mvp-0.2","type":"tool.result","replyTo":"req-003","payload":{"ok":true,"toolName":"select"}}"#,
    )
    .await?;
    let result = until(&mut agent, "tool.result").await?;
    println!("agent <- {result}");

    agent.close(None).await?;
    host.close(None).await?;
    server.shutdown().await;
    Ok(())
}

async fn peer(url: &str) -> Result<Peer, Error> {
    Ok(tokio_tungstenite::connect_async(url).await?.0)
}

async fn send(peer: &mut Peer, text: &str) -> Result<(), Error> {
    Ok(peer.send(Message::text(text)).await?)
}

/// The next text message of `peer` whose `type` is `ty` (others are skipped), within 10 s.
async fn until(peer: &mut Peer, ty: &str) -> Result<String, Error> {
    let wait = async {
        while let Some(Ok(msg)) = peer.next().await {
            if let Message::Text(text) = msg {
                let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
                if v["type"] == ty {
                    return Some(text.to_string());
                }
            }
        }
        None
    };
    tokio::time::timeout(Duration::from_secs(10), wait)
        .await?
        .ok_or_else(|| format!("no {ty}").into())
}

//! NATS core over its text protocol (`CONNECT`, `SUB`, `PUB`, `MSG`, `PING`/`PONG`):
//!
//! - `nats-chain`: request chains of `--chain K` request/reply hops: K responders (one per
//!   hop subject, as the bus has one interceptor per hop) answer every request; each of
//!   `--publishers P` sends a request to hop 1, waits for the reply, then hop 2, ... hop K (a
//!   message is a chain, a delivery is a hop; latency is the whole chain). `--chain 1` is
//!   plain request/reply.
//! - `nats-fanout`: `--subscribers N` on one subject; each of `--publishers P` sends windows
//!   of 64 `PUB`s closed by a `PING`/`PONG` round trip. Latency is publish to delivery.
//! - `nats-idle`: `--connections C` connected clients doing nothing: server RSS per
//!   connection.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use futures_util::FutureExt;
use tokio::task::JoinHandle;

use super::line::LineConn;
use crate::drive::{collect, drained, stop_receivers, Sent, WINDOW};
use crate::error::LoadError;
use crate::latency::{stamp, Latency};
use crate::options::Budget;
use crate::payload::{payload, read_stamp};
use crate::scenario::{Ctx, Outcome, Scenario};
use crate::server::ServerKind;
use crate::ws::{stop_signal, StopRx};

/// Largest message payload read (NATS's default `max_payload`).
const MAX_PAYLOAD: usize = 1024 * 1024;

/// What a responder answers (the size of a bus interceptor's answer).
const ANSWER: &[u8] = br#"{"success":true,"stopPropagation":false}"#;

/// The NATS scenarios.
pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "nats-chain",
            "request chains of --chain request/reply hops, --publishers each one in flight",
            ServerKind::Nats,
            |ctx| chain(ctx).boxed(),
        ),
        Scenario::new(
            "nats-fanout",
            "PUB to --subscribers, --publishers each a window of 64 closed by PING",
            ServerKind::Nats,
            |ctx| fanout(ctx).boxed(),
        ),
        Scenario::new(
            "nats-idle",
            "--connections connected idle clients: server RSS per connection",
            ServerKind::Nats,
            |ctx| idle(ctx).boxed(),
        ),
    ]
}

/// What the server sent.
enum Incoming {
    Msg {
        reply: Option<String>,
        payload: Vec<u8>,
    },
    Pong,
}

/// A NATS client connection.
struct Conn {
    io: LineConn,
}

impl Conn {
    /// Connects, reads `INFO`, sends `CONNECT` and waits for the `PONG` of a `PING`.
    async fn connect(addr: &str) -> Result<Self, LoadError> {
        let mut c = Self {
            io: LineConn::connect(addr, "nats-server").await?,
        };
        c.write(b"CONNECT {\"verbose\":false,\"pedantic\":false,\"echo\":false}\r\nPING\r\n")
            .await?;
        c.flush().await?;
        loop {
            if let Incoming::Pong = c.next().await? {
                return Ok(c);
            }
        }
    }

    async fn write(&mut self, b: &[u8]) -> Result<(), LoadError> {
        self.io.write(b).await
    }

    async fn flush(&mut self) -> Result<(), LoadError> {
        self.io.flush().await
    }

    async fn publish(
        &mut self,
        subject: &str,
        reply: Option<&str>,
        body: &[u8],
    ) -> Result<(), LoadError> {
        let head = match reply {
            Some(r) => format!("PUB {subject} {r} {}\r\n", body.len()),
            None => format!("PUB {subject} {}\r\n", body.len()),
        };
        self.write(head.as_bytes()).await?;
        self.write(body).await?;
        self.write(b"\r\n").await
    }

    /// Whether nothing read is waiting in the buffer (time to flush before reading).
    fn drained(&self) -> bool {
        self.io.drained()
    }

    /// The next `MSG` or `PONG`; answers the server's `PING`s.
    async fn next(&mut self) -> Result<Incoming, LoadError> {
        loop {
            let line = self.io.next_line().await?;
            if line == "PING" {
                self.write(b"PONG\r\n").await?;
                self.flush().await?;
            } else if line == "PONG" {
                return Ok(Incoming::Pong);
            } else if let Some(rest) = line.strip_prefix("MSG ") {
                // MSG <subject> <sid> [reply-to] <#bytes>
                let parts: Vec<&str> = rest.split(' ').collect();
                let (reply, len) = match parts.as_slice() {
                    [_, _, len] => (None, *len),
                    [_, _, reply, len] => (Some((*reply).to_owned()), *len),
                    _ => return Err(LoadError::Protocol(format!("nats: {line}"))),
                };
                let len: usize = len
                    .parse()
                    .ok()
                    .filter(|l| *l <= MAX_PAYLOAD)
                    .ok_or_else(|| LoadError::Protocol(format!("nats: {line}")))?;
                let payload = self.io.payload(len).await?;
                return Ok(Incoming::Msg { reply, payload });
            } else if line.starts_with("-ERR") {
                return Err(LoadError::Protocol(format!("nats-server: {line}")));
            }
            // INFO and +OK: nothing to do.
        }
    }
}

/// A subscriber (or, with `answer`, a responder): counts messages, records publish-to-
/// delivery latency when `timed`, flushes its answers once per batch read.
fn receiver(
    mut c: Conn,
    counter: Arc<AtomicU64>,
    answer: bool,
    timed: bool,
    mut stop: StopRx,
) -> JoinHandle<Latency> {
    tokio::spawn(async move {
        let mut latency = Latency::new();
        loop {
            if c.drained() && c.flush().await.is_err() {
                break;
            }
            let next = tokio::select! {
                n = c.next() => n,
                () = stop.stopped() => break,
            };
            let Ok(Incoming::Msg { reply, payload }) = next else {
                if next.is_err() {
                    break;
                }
                continue;
            };
            counter.fetch_add(1, Ordering::Relaxed);
            if timed {
                if let Some(s) = read_stamp(&payload) {
                    latency.record_since(s);
                }
            }
            if let (true, Some(r)) = (answer, reply) {
                if c.publish(&r, None, ANSWER).await.is_err() {
                    break;
                }
            }
        }
        latency
    })
}

async fn subscribed(addr: &str, subject: &str) -> Result<Conn, LoadError> {
    let mut c = Conn::connect(addr).await?;
    c.write(format!("SUB {subject} 1\r\nPING\r\n").as_bytes())
        .await?;
    c.flush().await?;
    loop {
        if let Incoming::Pong = c.next().await? {
            return Ok(c);
        }
    }
}

async fn chain(ctx: Ctx) -> Result<Outcome, LoadError> {
    let o = ctx.options().clone();
    let addr = ctx.address().to_owned();
    let hops = Arc::new(AtomicU64::new(0));
    let (stop, stop_rx) = stop_signal();
    let mut responders = Vec::new();
    for i in 0..o.chain {
        let c = subscribed(&addr, &format!("hop.{i}")).await?;
        responders.push(receiver(c, hops.clone(), true, false, stop_rx.clone()));
    }
    let mut pubs = Vec::new();
    for i in 0..o.publishers {
        let inbox = format!("inbox.{i}");
        pubs.push((subscribed(&addr, &inbox).await?, inbox));
    }
    let budget = ctx.start();
    let handles = pubs
        .into_iter()
        .map(|(c, inbox)| {
            tokio::spawn(chain_loop(
                c,
                inbox,
                budget.clone(),
                o.payload_size(),
                o.chain,
            ))
        })
        .collect();
    let sent = collect(handles).await;
    if let Ok((messages, _, _)) = &sent {
        drained(&hops, messages * o.chain).await;
    }
    ctx.stop();
    stop_receivers(stop, responders).await;
    let (messages, errors, latency) = sent?;
    Ok(Outcome {
        messages,
        deliveries: hops.load(Ordering::Relaxed),
        expected_deliveries: Some(messages * o.chain),
        errors,
        latency,
        rss_per_connection: None,
    })
}

async fn chain_loop(
    mut c: Conn,
    inbox: String,
    budget: Budget,
    size: usize,
    k: u64,
) -> Result<Sent, LoadError> {
    let (mut sent, mut errors, mut latency) = (0, 0, Latency::new());
    while budget.take() {
        let t0 = Instant::now();
        for hop in 0..k {
            c.publish(
                &format!("hop.{hop}"),
                Some(&inbox),
                payload(size, stamp()).as_bytes(),
            )
            .await?;
            c.flush().await?;
            loop {
                if let Incoming::Msg { payload, .. } = c.next().await? {
                    if payload != ANSWER {
                        errors += 1;
                    }
                    break;
                }
            }
        }
        latency.record(t0.elapsed());
        sent += 1;
    }
    Ok((sent, errors, latency))
}

async fn fanout(ctx: Ctx) -> Result<Outcome, LoadError> {
    let o = ctx.options().clone();
    let addr = ctx.address().to_owned();
    let delivered = Arc::new(AtomicU64::new(0));
    let (stop, stop_rx) = stop_signal();
    let mut subs = Vec::new();
    for _ in 0..o.subscribers {
        let c = subscribed(&addr, "inbound.load").await?;
        subs.push(receiver(c, delivered.clone(), false, true, stop_rx.clone()));
    }
    let mut pubs = Vec::new();
    for _ in 0..o.publishers {
        pubs.push(Conn::connect(&addr).await?);
    }
    let budget = ctx.start();
    let handles = pubs
        .into_iter()
        .map(|c| tokio::spawn(fanout_loop(c, budget.clone(), o.payload_size())))
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

async fn fanout_loop(mut c: Conn, budget: Budget, size: usize) -> Result<Sent, LoadError> {
    let mut sent = 0;
    loop {
        let mut in_window = 0;
        while in_window < WINDOW && budget.take() {
            c.publish("inbound.load", None, payload(size, stamp()).as_bytes())
                .await?;
            in_window += 1;
        }
        sent += in_window;
        c.write(b"PING\r\n").await?;
        c.flush().await?;
        while !matches!(c.next().await?, Incoming::Pong) {}
        if in_window < WINDOW {
            return Ok((sent, 0, Latency::new()));
        }
    }
}

async fn idle(ctx: Ctx) -> Result<Outcome, LoadError> {
    let addr = ctx.address().to_owned();
    crate::drive::idle_connections(&ctx, |_| Conn::connect(&addr)).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A connection to a fake server that sends `bytes` and then closes.
    async fn fed(bytes: Vec<u8>) -> Conn {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (s, _) = l.accept().await.unwrap();
            let (r, w) = s.into_split();
            let mut w = w;
            let _ = w.write_all(&bytes).await;
            let _ = w.shutdown().await;
            // Keep reading what the client writes until it goes away.
            let mut r = r;
            let mut sink = Vec::new();
            let _ = r.read_to_end(&mut sink).await;
        });
        Conn {
            io: LineConn::connect(&addr, "nats-server").await.unwrap(),
        }
    }

    #[tokio::test]
    async fn hostile_lines_are_errors_not_memory() {
        for bytes in [
            b"MSG a 1 99999999999\r\n".to_vec(),
            b"MSG a 1 x y z\r\n".to_vec(),
            b"-ERR 'nope'\r\n".to_vec(),
            [b"INFO ".to_vec(), vec![b'x'; 100_000], b"\r\n".to_vec()].concat(),
            b"".to_vec(),
        ] {
            let mut c = fed(bytes.clone()).await;
            assert!(
                c.next().await.is_err(),
                "{:?}",
                &bytes[..bytes.len().min(20)]
            );
        }
        let mut c =
            fed(b"INFO {}\r\n+OK\r\nPING\r\nMSG a 1 r.1 2\r\nhi\r\nPONG\r\n".to_vec()).await;
        match c.next().await.unwrap() {
            Incoming::Msg { reply, payload } => {
                assert_eq!(reply.as_deref(), Some("r.1"));
                assert_eq!(payload, b"hi");
            }
            Incoming::Pong => panic!("the MSG comes first"),
        }
        assert!(matches!(c.next().await.unwrap(), Incoming::Pong));
    }
}

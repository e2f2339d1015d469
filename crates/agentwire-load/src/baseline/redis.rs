//! Redis pub/sub over RESP:
//!
//! - `redis-fanout`: `--subscribers N` `SUBSCRIBE`d to one channel; each of `--publishers P`
//!   pipelines windows of 64 `PUBLISH`es and reads their 64 replies (each the number of
//!   receivers, which must be N). Latency is publish to delivery.
//! - `redis-idle`: `--connections C` connected clients (one `PING` each) doing nothing:
//!   server RSS per connection.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

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

/// Largest bulk string read.
const MAX_BULK: usize = 16 * 1024 * 1024;

/// Deepest array nesting read (pub/sub messages are flat arrays).
const MAX_DEPTH: u32 = 4;

/// The Redis scenarios.
pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario::new(
            "redis-fanout",
            "PUBLISH to --subscribers, --publishers each a pipelined window of 64",
            ServerKind::Redis,
            |ctx| fanout(ctx).boxed(),
        ),
        Scenario::new(
            "redis-idle",
            "--connections connected idle clients: server RSS per connection",
            ServerKind::Redis,
            |ctx| idle(ctx).boxed(),
        ),
    ]
}

/// A RESP value.
#[derive(Debug, PartialEq)]
enum Value {
    Simple(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Self>),
}

/// A Redis client connection.
struct Conn {
    io: LineConn,
}

impl Conn {
    async fn connect(addr: &str) -> Result<Self, LoadError> {
        Ok(Self {
            io: LineConn::connect(addr, "redis-server").await?,
        })
    }

    /// Writes one command (not flushed).
    async fn command(&mut self, args: &[&[u8]]) -> Result<(), LoadError> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        self.io.write(&out).await
    }

    async fn flush(&mut self) -> Result<(), LoadError> {
        self.io.flush().await
    }

    /// Reads one value.
    async fn read(&mut self) -> Result<Value, LoadError> {
        self.read_at(0).await
    }

    fn read_at(
        &mut self,
        depth: u32,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Value, LoadError>> + Send + '_>>
    {
        Box::pin(async move {
            let line = self.io.next_line().await?.to_owned();
            let bad = || LoadError::Protocol(format!("redis: {line}"));
            let (kind, rest) = line.split_at_checked(1).ok_or_else(bad)?;
            match kind {
                "+" => Ok(Value::Simple(rest.to_owned())),
                "-" => Err(LoadError::Protocol(format!("redis-server: {rest}"))),
                ":" => rest.parse().map(Value::Int).map_err(|_| bad()),
                "$" => {
                    let len: i64 = rest.parse().map_err(|_| bad())?;
                    if len < 0 {
                        return Ok(Value::Bulk(None));
                    }
                    let len = usize::try_from(len)
                        .ok()
                        .filter(|l| *l <= MAX_BULK)
                        .ok_or_else(bad)?;
                    Ok(Value::Bulk(Some(self.io.payload(len).await?)))
                }
                "*" if depth < MAX_DEPTH => {
                    let len: i64 = rest.parse().map_err(|_| bad())?;
                    // Pub/sub replies have 3 items; a longer array is not one this reads.
                    let len = usize::try_from(len).unwrap_or(0);
                    if len > 16 {
                        return Err(bad());
                    }
                    let mut items = Vec::with_capacity(len);
                    for _ in 0..len {
                        items.push(self.read_at(depth + 1).await?);
                    }
                    Ok(Value::Array(items))
                }
                _ => Err(bad()),
            }
        })
    }
}

/// A subscriber: counts messages and records publish-to-delivery latency.
fn subscriber(mut c: Conn, counter: Arc<AtomicU64>, mut stop: StopRx) -> JoinHandle<Latency> {
    tokio::spawn(async move {
        let mut latency = Latency::new();
        loop {
            let v = tokio::select! {
                v = c.read() => v,
                () = stop.stopped() => break,
            };
            let Ok(Value::Array(items)) = v else { break };
            if let [Value::Bulk(Some(kind)), _, Value::Bulk(Some(body))] = items.as_slice() {
                if kind == b"message" {
                    counter.fetch_add(1, Ordering::Relaxed);
                    if let Some(s) = read_stamp(body) {
                        latency.record_since(s);
                    }
                }
            }
        }
        latency
    })
}

async fn fanout(ctx: Ctx) -> Result<Outcome, LoadError> {
    let o = ctx.options().clone();
    let addr = ctx.address().to_owned();
    let delivered = Arc::new(AtomicU64::new(0));
    let (stop, stop_rx) = stop_signal();
    let mut subs = Vec::new();
    for _ in 0..o.subscribers {
        let mut c = Conn::connect(&addr).await?;
        c.command(&[b"SUBSCRIBE", b"inbound:load"]).await?;
        c.flush().await?;
        let confirm = c.read().await?;
        if !matches!(&confirm, Value::Array(v) if v.first() == Some(&Value::Bulk(Some(b"subscribe".to_vec()))))
        {
            return Err(LoadError::Protocol(format!("SUBSCRIBE: {confirm:?}")));
        }
        subs.push(subscriber(c, delivered.clone(), stop_rx.clone()));
    }
    let mut pubs = Vec::new();
    for _ in 0..o.publishers {
        pubs.push(Conn::connect(&addr).await?);
    }
    let budget = ctx.start();
    let receivers = i64::try_from(o.subscribers).unwrap_or(i64::MAX);
    let handles = pubs
        .into_iter()
        .map(|c| tokio::spawn(publish_loop(c, budget.clone(), o.payload_size(), receivers)))
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

async fn publish_loop(
    mut c: Conn,
    budget: Budget,
    size: usize,
    receivers: i64,
) -> Result<Sent, LoadError> {
    let (mut sent, mut errors) = (0, 0);
    loop {
        let mut in_window = 0;
        while in_window < WINDOW && budget.take() {
            c.command(&[
                b"PUBLISH",
                b"inbound:load",
                payload(size, stamp()).as_bytes(),
            ])
            .await?;
            in_window += 1;
        }
        c.flush().await?;
        for _ in 0..in_window {
            if c.read().await? != Value::Int(receivers) {
                errors += 1;
            }
        }
        sent += in_window;
        if in_window < WINDOW {
            return Ok((sent, errors, Latency::new()));
        }
    }
}

async fn idle(ctx: Ctx) -> Result<Outcome, LoadError> {
    let addr = ctx.address().to_owned();
    crate::drive::idle_connections(&ctx, |_| async {
        let mut c = Conn::connect(&addr).await?;
        c.command(&[b"PING"]).await?;
        c.flush().await?;
        match c.read().await? {
            Value::Simple(s) if s == "PONG" => Ok(c),
            other => Err(LoadError::Protocol(format!("PING: {other:?}"))),
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    /// A connection to a fake server that sends `bytes` and then closes.
    async fn fed(bytes: Vec<u8>) -> Conn {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let _ = s.write_all(&bytes).await;
        });
        Conn::connect(&addr).await.unwrap()
    }

    #[tokio::test]
    async fn hostile_replies_are_errors_not_memory() {
        for bytes in [
            b"$99999999999\r\n".to_vec(),
            b"*100000\r\n".to_vec(),
            b"*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n".to_vec(),
            b"?what\r\n".to_vec(),
            b":notanumber\r\n".to_vec(),
            [vec![b'+'; 100_000], b"\r\n".to_vec()].concat(),
            b"-ERR nope\r\n".to_vec(),
            b"".to_vec(),
        ] {
            let mut c = fed(bytes.clone()).await;
            assert!(
                c.read().await.is_err(),
                "{:?}",
                &bytes[..bytes.len().min(20)]
            );
        }
        let mut c = fed(b"*3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$2\r\nhi\r\n:3\r\n".to_vec()).await;
        assert_eq!(
            c.read().await.unwrap(),
            Value::Array(vec![
                Value::Bulk(Some(b"message".to_vec())),
                Value::Bulk(Some(b"c".to_vec())),
                Value::Bulk(Some(b"hi".to_vec())),
            ])
        );
        assert_eq!(c.read().await.unwrap(), Value::Int(3));
    }
}

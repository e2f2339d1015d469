//! What every scenario's load loops share: the fan-out window, the drain bound, collecting
//! the publishers' counts and stopping the receivers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use crate::error::LoadError;
use crate::latency::Latency;
use crate::ws::StopTx;

/// Publishes of a fan-out publisher between two synchronizing round trips (a bus `ping`, a
/// NATS `PING`, the Redis `PUBLISH` replies).
pub const WINDOW: u64 = 64;

/// How long a scenario waits after its publishers stop for the last deliveries to arrive.
pub const DRAIN: Duration = Duration::from_secs(10);

/// What one sending task counted: messages sent, errors, latencies.
pub type Sent = (u64, u64, Latency);

/// Sums what the sending tasks counted; the first error (or panic) wins.
pub async fn collect(handles: Vec<JoinHandle<Result<Sent, LoadError>>>) -> Result<Sent, LoadError> {
    let mut total = (0, 0, Latency::new());
    for h in handles {
        let (m, e, l) = h
            .await
            .map_err(|e| LoadError::Protocol(format!("a sending task failed: {e}")))??;
        total.0 += m;
        total.1 += e;
        total.2.merge(&l);
    }
    Ok(total)
}

/// The outcome of a request scenario from what its senders counted: every message a request
/// whose delivery is its one answer, an error answer being a delivery lost.
pub fn answered((messages, errors, latency): Sent) -> crate::scenario::Outcome {
    crate::scenario::Outcome {
        messages,
        deliveries: messages.saturating_sub(errors),
        expected_deliveries: Some(messages),
        errors,
        latency,
        ..Default::default()
    }
}

/// Stops the receiving tasks and merges their latencies.
pub async fn stop_receivers(stop: StopTx, receivers: Vec<JoinHandle<Latency>>) -> Latency {
    stop.stop();
    let mut latency = Latency::new();
    for r in receivers {
        if let Ok(l) = r.await {
            latency.merge(&l);
        }
    }
    latency
}

/// Waits (at most [`DRAIN`]) until `counter` reaches `expected`: a bounded poll, since the
/// receivers count on their own.
pub async fn drained(counter: &AtomicU64, expected: u64) {
    let deadline = Instant::now() + DRAIN;
    while counter.load(Ordering::Relaxed) < expected && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// The idle scenarios' body: opens one connection with `connect` (so what every connection
/// shares is already allocated), then `connections` more inside the measured window, and
/// reports the server's resident memory growth per connection. Every connection stays open
/// until the second reading.
pub async fn idle_connections<C, F, Fut>(
    ctx: &crate::scenario::Ctx,
    mut connect: F,
) -> Result<crate::scenario::Outcome, LoadError>
where
    F: FnMut(u64) -> Fut,
    Fut: std::future::Future<Output = Result<C, LoadError>>,
{
    let n = ctx.options().connections;
    let mut conns = vec![connect(0).await?];
    let before = ctx.server_rss();
    ctx.start();
    for i in 0..n {
        conns.push(connect(i + 1).await?);
    }
    let after = ctx.server_rss();
    ctx.stop();
    drop(conns);
    Ok(crate::scenario::Outcome {
        messages: n,
        rss_per_connection: before
            .zip(after)
            .map(|(b, a)| a.saturating_sub(b) as f64 / n as f64),
        ..crate::scenario::Outcome::default()
    })
}

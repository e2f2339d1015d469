//! The wall clock moved under a running server: the reference bus answers `ping`, and the
//! reference relay dates its study-log records, with the moved time at once (a suspend or an
//! NTP step), because the transport re-anchors each machine's wall clock from its
//! `WallSource` (agentwire-tokio decision 7) instead of adding monotonic time to the one
//! reading taken at start.

#[path = "support/temp_dir.rs"]
mod temp_dir;

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agentwire::agent_relay::RelayConfig;
use agentwire::jsonrpc_bus::BusConfig;
use agentwire::tokio::{WallClockSync, WallSource};
use agentwire_server::relay::log_writer::SyncPolicy;
use agentwire_server::{bus, relay};
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio_tungstenite::tungstenite::Message;

/// Every await in these tests is bounded.
async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), fut)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

/// The system clock plus a step the test sets, as a wall clock that a suspend or a
/// correction has moved.
fn stepped_clock() -> (Arc<AtomicU64>, WallSource) {
    let step = Arc::new(AtomicU64::new(0));
    let read = Arc::clone(&step);
    let source = WallSource::from_fn(move || {
        #[allow(clippy::disallowed_methods)] // the test's wall clock
        let now = SystemTime::now();
        let ms = now
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        ms + read.load(Ordering::Relaxed)
    });
    (step, source)
}

/// Seconds since the Unix epoch of an RFC 3339 UTC timestamp `YYYY-MM-DDTHH:MM:SS[.mmm]Z`
/// (milliseconds dropped).
fn unix_secs(ts: &str) -> i64 {
    let n = |r: std::ops::Range<usize>| -> i64 { ts[r].parse().expect("digits") };
    let (y, m, d) = (n(0..4), n(5..7), n(8..10));
    // Howard Hinnant's days_from_civil.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    days * 86_400 + n(11..13) * 3600 + n(14..16) * 60 + n(17..19)
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Sends a `ping` with `id` and returns its timestamp in Unix seconds.
async fn ping(ws: &mut Ws, id: u32) -> i64 {
    let req = format!(r#"{{"jsonrpc":"2.0","method":"ping","params":{{}},"id":{id}}}"#);
    within("send", ws.send(Message::text(req)))
        .await
        .expect("send");
    loop {
        match within("pong", ws.next()).await {
            Some(Ok(Message::Text(t))) => {
                let v: Value = serde_json::from_str(&t).expect("json");
                if v["id"] == id {
                    let ts = v["result"]["timestamp"]
                        .as_str()
                        .unwrap_or_else(|| panic!("{v}"));
                    return unix_secs(ts);
                }
            }
            Some(Ok(_)) => {}
            other => panic!("no pong: {other:?}"),
        }
    }
}

#[tokio::test]
async fn the_bus_ping_timestamp_follows_a_wall_clock_moved_under_the_running_server() {
    let (step, source) = stepped_clock();
    let config = BusConfig::default();
    let transport = bus::server_app::server_config(&config)
        .with_wall_clock(WallClockSync::default().with_source(source));
    let app = bus::server_app::start_with("127.0.0.1:0", config, transport, |_| {})
        .await
        .expect("bind");
    let (mut ws, _) = within("connect", tokio_tungstenite::connect_async(app.url()))
        .await
        .expect("connect");
    let init = r#"{"jsonrpc":"2.0","method":"initialize","params":{"clientId":"clock"},"id":0}"#;
    within("send", ws.send(Message::text(init)))
        .await
        .expect("initialize");
    let before = ping(&mut ws, 1).await;
    // A day passes on the wall clock while the monotonic clock does not move (a suspend).
    const DAY: i64 = 86_400;
    step.fetch_add(DAY as u64 * 1000, Ordering::Relaxed);
    let after = ping(&mut ws, 2).await;
    let moved = after - before;
    assert!(
        (DAY - 1..DAY + 3600).contains(&moved),
        "the ping after the jump is a day later, not {moved} s"
    );
    // A correction back by the same day: the next ping is back on the system clock.
    step.store(0, Ordering::Relaxed);
    let back = ping(&mut ws, 3).await;
    assert!(
        (-1..3600).contains(&(back - before)),
        "back by a day: {}",
        back - before
    );
    drop(ws);
    within("shutdown", app.server.shutdown()).await;
}

/// A raw relay peer: joins `default` as `role`, reading past the relay's chatter.
async fn relay_peer(url: &str, role: &str) -> Ws {
    let (mut ws, _) = within("connect", tokio_tungstenite::connect_async(url))
        .await
        .expect("upgrade");
    let join = format!(
        r#"{{"v":"mvp-0.2","type":"relay.join","id":"join-{role}","payload":{{"role":"{role}","sessionId":"default"}}}}"#
    );
    within("join", ws.send(Message::text(join)))
        .await
        .expect("join");
    next_of_type(&mut ws, "relay.joined").await;
    ws
}

/// The next message of type `t` (others skipped).
async fn next_of_type(ws: &mut Ws, t: &str) -> Value {
    loop {
        match within(t, ws.next()).await {
            Some(Ok(Message::Text(text))) => {
                let v: Value = serde_json::from_str(&text).expect("json");
                if v["type"] == t {
                    return v;
                }
            }
            Some(Ok(_)) => {}
            other => panic!("no {t}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn the_relay_dates_study_log_records_by_a_wall_clock_moved_under_the_running_server() {
    let dir = temp_dir::temp_dir("wall-clock");
    let (step, source) = stepped_clock();
    let config = RelayConfig::default();
    let transport = relay::server_app::server_config(&config)
        .with_wall_clock(WallClockSync::default().with_source(source));
    let app = relay::server_app::start_with(
        "127.0.0.1:0",
        config,
        transport,
        &*dir,
        SyncPolicy::SessionEnd,
        |_| {},
    )
    .await
    .expect("bind");
    let mut host = relay_peer(&app.url(), "host").await;
    let mut agent = relay_peer(&app.url(), "agent").await;
    let say = |n: u32| {
        Message::text(format!(
            r#"{{"v":"mvp-0.2","type":"agent.message","id":"say-{n}","payload":{{"text":"{n}"}}}}"#
        ))
    };
    within("say", agent.send(say(1))).await.expect("send");
    next_of_type(&mut host, "agent.message").await;
    // A day passes on the wall clock while the monotonic clock does not move (a suspend).
    const DAY: i64 = 86_400;
    step.fetch_add(DAY as u64 * 1000, Ordering::Relaxed);
    within("say", agent.send(say(2))).await.expect("send");
    next_of_type(&mut host, "agent.message").await;
    drop((host, agent));
    within("shutdown", app.shutdown()).await;

    let text = std::fs::read_to_string(dir.join("default.jsonl")).expect("log file");
    let said: Vec<i64> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("record"))
        .filter(|r| r["type"] == "agent.message" && r["direction"] == "in")
        .map(|r| unix_secs(r["timestamp"].as_str().expect("timestamp")))
        .collect();
    let [first, second] = said[..] else {
        panic!("two agent.message records: {text}");
    };
    let moved = second - first;
    assert!(
        (DAY - 1..DAY + 3600).contains(&moved),
        "the record after the jump is a day later, not {moved} s"
    );
}

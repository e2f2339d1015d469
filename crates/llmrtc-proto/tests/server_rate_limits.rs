//! Per-connection rates: a flood of messages or of bytes is dropped unread, the first drop
//! of each run answered `error RATE_LIMITED`, the rest counted; the budget refills with
//! time, and other connections never notice.
//!
//! The server driven directly with simulated time (harness in `common`).

mod common;

use common::*;

use std::time::Duration;

use agentwire_core::Rate;
use llmrtc_proto::{texts, Limits, ServerConfig};
use serde_json::json;

fn ping(n: u64) -> String {
    format!(r#"{{"type":"ping","timestamp":{n}}}"#)
}

#[test]
fn a_ping_flood_gets_its_burst_then_one_rate_limited_and_silent_drops() {
    let defaults = Limits::default();
    assert_eq!(defaults.message_rate, Rate::per_second(50, 100));
    let mut h = Harness::new(ServerConfig::default());
    let (c, _) = h.client();
    let (quiet_one, _) = h.client();
    for n in 0..150 {
        h.send_text(c, &ping(n));
    }
    let sent = h.take(c);
    assert_eq!(sent.len(), 101, "100 pongs and one error");
    assert!(sent[..100].iter().all(|v| v["type"] == "pong"));
    assert_eq!(
        sent[100],
        json!({"type":"error","code":"RATE_LIMITED","message":texts::RATE_LIMITED})
    );
    assert_eq!(h.server.dropped_messages(), 50);
    // Another connection is not touched by this one's budget.
    h.send_text(quiet_one, &ping(1));
    assert_eq!(h.types(quiet_one), ["pong"]);
    // 50 per second refill: after 100 ms, five more pass; the sixth starts a new run.
    h.advance(Duration::from_millis(100));
    for n in 0..8 {
        h.send_text(c, &ping(n));
    }
    assert_eq!(
        h.types(c),
        ["pong", "pong", "pong", "pong", "pong", "error"]
    );
    assert_eq!(h.server.dropped_messages(), 53);
}

#[test]
fn big_audio_messages_are_held_to_the_byte_rate() {
    let mut limits = Limits::default();
    // 8 KiB per second, bursts of 16 KiB; each message below is about 10 KiB.
    limits.byte_rate = Rate::per_second(8, 16);
    let mut h = Harness::new(
        ServerConfig::default()
            .with_limits(limits)
            .with_heartbeat_timeout(None),
    );
    let (c, _) = h.client();
    let silence = audio_text(16000, &quiet(16000, 240));
    assert!(
        (9 << 10..=11 << 10).contains(&silence.len()),
        "{}",
        silence.len()
    );
    // Silence is read and says nothing; the second message finds 5 KiB left: dropped.
    h.send_text(c, &silence);
    h.send_text(c, &silence);
    h.send_text(c, &silence);
    assert_eq!(codes(&h.take(c)), ["RATE_LIMITED"]);
    assert_eq!(h.server.dropped_messages(), 2);
    // A ping is small enough for what is left, and ends the run of drops.
    h.send_text(c, &ping(1));
    assert_eq!(h.types(c), ["pong"]);
    // 11 KiB per message at 8 KiB/s: after two seconds one passes (speech: it is heard).
    h.advance(Duration::from_secs(2));
    h.audio(c, 16000, &utterance(16000, 100));
    assert_eq!(h.types(c), ["speech-start", "speech-end"]);
}

#[test]
fn a_message_bigger_than_the_byte_burst_passes_a_full_bucket() {
    let mut limits = Limits::default();
    limits.byte_rate = Rate::per_second(1, 4);
    let mut h = Harness::new(
        ServerConfig::default()
            .with_limits(limits)
            .with_heartbeat_timeout(None),
    );
    let (c, _) = h.client();
    let silence = audio_text(16000, &quiet(16000, 240)); // ~10 KiB
    h.send_text(c, &silence);
    assert!(h.take(c).is_empty(), "read: silence, no reply");
    h.send_text(c, &silence);
    assert_eq!(codes(&h.take(c)), ["RATE_LIMITED"]);
    h.advance(Duration::from_secs(4));
    h.send_text(c, &silence);
    assert!(h.take(c).is_empty(), "a full bucket again");
    assert_eq!(h.server.dropped_messages(), 1);
}

#[test]
fn a_dropped_message_is_not_read_and_not_activity() {
    let mut limits = Limits::default();
    limits.message_rate = Rate::per_second(1, 1);
    let mut h = Harness::new(ServerConfig::default().with_limits(limits));
    let (c, sid) = h.client();
    h.send_text(c, &ping(1));
    // An attachments message over the rate is not queued.
    h.send(
        c,
        json!({"type":"attachments","attachments":[{"data":"https://x/y.png"}]}),
    );
    assert_eq!(h.types(c), ["pong", "error"]);
    assert_eq!(h.server.queued_attachments(&sid), 0);
    // Nor does a dropped ping keep the connection alive: 45 s after the last read ping it
    // closes, whatever was dropped meanwhile.
    h.advance(Duration::from_secs(44));
    h.send_text(c, &ping(2)); // read: a token came back long ago
    h.send_text(c, &ping(3)); // dropped
    h.advance(Duration::from_secs(44));
    assert!(h.closes.is_empty());
    h.advance(Duration::from_secs(1));
    assert_eq!(h.closes.len(), 1);
}

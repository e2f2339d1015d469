//! Unit tests of the `Bus` that read its sub-states.

use super::*;
use agentwire_core::SequentialIds;
use std::time::Duration;

fn call(method: &str, params: &str, id: u32) -> String {
    format!(r#"{{"jsonrpc":"2.0","method":"{method}","params":{params},"id":{id}}}"#)
}

/// Hop requests sent to `conn` since the last call, as their ids.
fn hop_ids(bus: &mut Bus, conn: ConnId) -> Vec<String> {
    let mut ids = Vec::new();
    while let Some(out) = bus.poll_output() {
        if let Output::Send { conn: c, frame } = out {
            let text = frame.as_text().unwrap_or_default().to_owned();
            if c == conn && text.contains("\"method\":\"sendMessage\"") {
                let v: serde_json::Value = serde_json::from_str(&text).unwrap();
                ids.push(v["id"].as_str().unwrap().to_owned());
            }
        }
    }
    ids
}

/// A hop stuck on a silent subscriber keeps its timeout at the front of the queue while
/// thousands of other hops finish behind it: the queue stays bounded by the deliveries in
/// flight, `poll_timeout` stays the stuck hop's deadline, and it still fires on time.
#[test]
fn hop_timers_stay_bounded_behind_a_stuck_hop() {
    #[allow(clippy::disallowed_methods)] // the one base time of a test
    let t0 = Instant::now();
    let timeout = Duration::from_secs(30);
    let config = BusConfig {
        delivery_timeout: timeout,
        initialize_timeout: None,
        ..BusConfig::default()
    };
    let mut bus = Bus::new(config, SequentialIds::new(1), t0, 0);
    let peer = PeerInfo::new(None);
    let (publisher, slow, fast) = (ConnId::new(1), ConnId::new(2), ConnId::new(3));
    for (conn, topic) in [
        (publisher, None),
        (slow, Some("slow")),
        (fast, Some("fast")),
    ] {
        bus.handle_connect(conn, &peer, t0);
        let init = call("initialize", r#"{"clientId":"c"}"#, 1);
        bus.handle_frame(conn, Frame::Text(&init), t0);
        if let Some(topic) = topic {
            let sub = call("subscribe", &format!(r#"{{"topic":"{topic}"}}"#), 2);
            bus.handle_frame(conn, Frame::Text(&sub), t0);
        }
    }
    while bus.poll_output().is_some() {}
    let stuck = call("sendMessage", r#"{"topic":"slow","payload":{}}"#, 3);
    bus.handle_frame(publisher, Frame::Text(&stuck), t0);
    assert_eq!(hop_ids(&mut bus, slow).len(), 1);
    assert_eq!(bus.poll_timeout(), Some(t0 + timeout));

    let mut most = 0;
    for i in 0..5_000u32 {
        let now = t0 + Duration::from_millis(u64::from(i));
        let msg = call(
            "sendMessage",
            r#"{"topic":"fast","payload":{"n":1}}"#,
            10 + i,
        );
        bus.handle_frame(publisher, Frame::Text(&msg), now);
        for id in hop_ids(&mut bus, fast) {
            let reply = format!(
                r#"{{"jsonrpc":"2.0","result":{{"success":true,"stopPropagation":false}},"id":"{id}"}}"#
            );
            bus.handle_frame(fast, Frame::Text(&reply), now);
        }
        most = most.max(bus.deliveries.hop_timer_count());
        assert_eq!(bus.poll_timeout(), Some(t0 + timeout), "round {i}");
    }
    assert!(most <= 2 * 2 + 64 + 1, "hop timers grew to {most}");
    assert_eq!(bus.deliveries_in_flight(), 1);

    bus.handle_timeout(t0 + timeout - Duration::from_millis(1));
    assert_eq!(bus.deliveries_in_flight(), 1);
    bus.handle_timeout(t0 + timeout);
    assert_eq!(bus.deliveries_in_flight(), 0);
    assert_eq!(bus.deliveries.hop_timer_count(), 0);
    assert_eq!(bus.poll_timeout(), None);
    assert_eq!(bus.stats().completed, 5_001);
}

/// A delivery's slot is reused once it ends, but a hop timer of the delivery that held it
/// before stays that delivery's: the later delivery in the same slot times out one timeout
/// after its own hop began, not at the earlier delivery's deadline (which stays queued
/// behind a stuck hop's).
#[test]
fn a_reused_slot_does_not_inherit_the_earlier_deliverys_hop_timer() {
    #[allow(clippy::disallowed_methods)] // the one base time of a test
    let t0 = Instant::now();
    let s = Duration::from_secs;
    let timeout = s(30);
    let config = BusConfig {
        delivery_timeout: timeout,
        initialize_timeout: None,
        ..BusConfig::default()
    };
    let mut bus = Bus::new(config, SequentialIds::new(1), t0, 0);
    let peer = PeerInfo::new(None);
    let (publisher, silent, quick) = (ConnId::new(1), ConnId::new(2), ConnId::new(3));
    for (conn, topic) in [
        (publisher, None),
        (silent, Some("stuck")),
        (quick, Some("t")),
    ] {
        bus.handle_connect(conn, &peer, t0);
        let init = call("initialize", r#"{"clientId":"c"}"#, 1);
        bus.handle_frame(conn, Frame::Text(&init), t0);
        if let Some(topic) = topic {
            let sub = call("subscribe", &format!(r#"{{"topic":"{topic}"}}"#), 2);
            bus.handle_frame(conn, Frame::Text(&sub), t0);
        }
    }
    while bus.poll_output().is_some() {}

    // A hop that is never answered holds the front of the timer queue until t0 + 30 s.
    let stuck = call("sendMessage", r#"{"topic":"stuck","payload":{}}"#, 3);
    bus.handle_frame(publisher, Frame::Text(&stuck), t0);
    assert_eq!(hop_ids(&mut bus, silent).len(), 1);

    // A delivery answered at once leaves its timer (due t0 + 31 s) queued behind it.
    let first = call("sendMessage", r#"{"topic":"t","payload":{}}"#, 4);
    bus.handle_frame(publisher, Frame::Text(&first), t0 + s(1));
    let ids = hop_ids(&mut bus, quick);
    let [id] = &ids[..] else {
        panic!("one hop request, got {ids:?}");
    };
    let reply = format!(
        r#"{{"jsonrpc":"2.0","result":{{"success":true,"stopPropagation":false}},"id":"{id}"}}"#
    );
    bus.handle_frame(quick, Frame::Text(&reply), t0 + s(1));
    assert_eq!(bus.deliveries_in_flight(), 1);

    // The next delivery takes the freed slot at t0 + 10 s and is never answered.
    let second = call("sendMessage", r#"{"topic":"t","payload":{}}"#, 5);
    bus.handle_frame(publisher, Frame::Text(&second), t0 + s(10));
    assert_eq!(hop_ids(&mut bus, quick).len(), 1);

    bus.handle_timeout(t0 + timeout);
    assert_eq!(bus.deliveries_in_flight(), 1, "the stuck hop timed out");
    assert_eq!(bus.poll_timeout(), Some(t0 + s(10) + timeout));
    bus.handle_timeout(t0 + s(31));
    assert_eq!(
        bus.deliveries_in_flight(),
        1,
        "not at the earlier delivery's deadline"
    );
    bus.handle_timeout(t0 + s(10) + timeout);
    assert_eq!(bus.deliveries_in_flight(), 0);
    assert_eq!(bus.stats().completed, 3);
}

/// The one-pass read of a call's params and the general way (the raw params, then each
/// method's reader) give the same answer for every params shape; what the one pass does
/// not read (arrays, duplicates of the members it reads, non-objects) it leaves to the
/// general way.
#[test]
fn params_read_in_one_pass_agree_with_the_general_way() {
    let params = [
        r#"{"topic":"inbound:chat-1","payload":{"text":"hi"}}"#,
        r#"{"payload":{"a":[1,2]},"topic":"t","extra":{"x":null}}"#,
        r#"{"topic":"in\u0062ound:\"x\"","payload":null}"#,
        r#"{"to\u0070ic":"t","payload":[]}"#,
        r#"{"topic":null}"#,
        r#"{"topic":""}"#,
        r#"{"topic":7,"payload":{}}"#,
        r#"{}"#,
        r#"{"topic":"a","topic":"b"}"#,
        r#"{"topic":"a","payload":{},"payload":1}"#,
        r#"{"topic":"a","clientId":"x","clientId":"y"}"#,
        r#"["t",{"a":1}]"#,
        r#"["t",{"a":1},3]"#,
        r#"[null]"#,
        r#"[]"#,
        r#"{"clientId":"c-1","clientInfo":{"name":"n","version":"1"}}"#,
        r#"{"clientId":null,"clientInfo":null}"#,
        r#"{"clientId":5}"#,
        r#"{"clientInfo":{"name":1}}"#,
        r#"{"client\u0049d":"c"}"#,
        r#"{"clientId":"a","clientId":"b"}"#,
    ];
    for p in params {
        let text = call("sendMessage", p, 1);
        let raw = match classify(&text) {
            Ok(Incoming::Call(call)) => call.params,
            other => panic!("{p}: {other:?}"),
        };
        let Ok(Incoming::Call(call)) = read(&text) else {
            panic!("{p}: not a call");
        };
        let one_pass = || call.params.clone().unwrap_or(Params::Raw(None));
        let general = || Params::Raw(raw);
        assert_eq!(
            format!("{:?}", topic_params(one_pass())),
            format!("{:?}", topic_params(general())),
            "topic of {p}"
        );
        assert_eq!(
            format!("{:?}", initialize_params(one_pass())),
            format!("{:?}", initialize_params(general())),
            "initialize params of {p}"
        );
    }
    // Objects without duplicates are read in the one pass.
    let text = call("sendMessage", params[1], 1);
    assert!(matches!(
        read(&text),
        Ok(Incoming::Call(Call {
            params: Some(Params::Read(_)),
            ..
        }))
    ));
}

/// Answers every hop request queued for `conn` with success (no stop), in order.
fn answer_all(bus: &mut Bus, conn: ConnId, now: Instant) -> usize {
    let ids = hop_ids(bus, conn);
    for id in &ids {
        let answer = format!(
            r#"{{"jsonrpc":"2.0","result":{{"success":true,"stopPropagation":false}},"id":"{id}"}}"#
        );
        bus.handle_frame(conn, Frame::Text(&answer), now);
    }
    ids.len()
}

/// An inbox counts the publishers of the deliveries it holds (what lets a pump stop once
/// every one of them is blocked): the counts follow the queue as deliveries arrive and
/// leave, down to nothing once every chain has ended.
#[test]
fn an_inbox_counts_its_publishers_as_deliveries_come_and_go() {
    #[allow(clippy::disallowed_methods)] // the one base time of a test
    let t0 = Instant::now();
    let config = BusConfig {
        initialize_timeout: None,
        ..BusConfig::default()
    };
    let mut bus = Bus::new(config, SequentialIds::new(1), t0, 0);
    let peer = PeerInfo::new(None);
    let (a, b, first, second) = (
        ConnId::new(1),
        ConnId::new(2),
        ConnId::new(3),
        ConnId::new(4),
    );
    for conn in [a, b, first, second] {
        bus.handle_connect(conn, &peer, t0);
        let init = call("initialize", r#"{"clientId":"c"}"#, 1);
        bus.handle_frame(conn, Frame::Text(&init), t0);
        if conn == first || conn == second {
            let sub = call("subscribe", r#"{"topic":"t"}"#, 2);
            bus.handle_frame(conn, Frame::Text(&sub), t0);
        }
    }
    while bus.poll_output().is_some() {}
    let note = r#"{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"t","payload":{}}}"#;
    for publisher in [a, a, a, b, b] {
        bus.handle_frame(publisher, Frame::Text(note), t0);
    }
    // Every delivery is reserved in both inboxes, from two publishers; the first subscriber
    // has been sent all five (its window is 8), the second none yet.
    assert_eq!(bus.deliveries.inbox_publishers(first), (5, 2, 0));
    assert_eq!(bus.deliveries.inbox_publishers(second), (5, 2, 2));
    // The first subscriber answers: its inbox empties and the second one is sent all five.
    assert_eq!(answer_all(&mut bus, first, t0), 5);
    assert_eq!(bus.deliveries.inbox_publishers(first), (0, 0, 0));
    assert_eq!(bus.deliveries.inbox_publishers(second), (5, 2, 0));
    assert_eq!(answer_all(&mut bus, second, t0), 5);
    assert_eq!(bus.deliveries.inbox_publishers(second), (0, 0, 0));
    assert_eq!(bus.deliveries_in_flight(), 0);
}

//! A publish to K subscribers encodes its params once: the K requests the bus sends are one
//! params blob with K different ids around it.

use std::time::Instant;

use agentwire_core::{ConnId, Frame, Id128, Machine, Output, PeerInfo, SequentialIds};
use jsonrpc_bus_proto::{Bus, BusConfig};

const PUBLISH: &str = r#"{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"inbound:chat-1","payload":{"chat_id":"chat-1","text":"hello","from":"user-1"}},"id":4}"#;

#[allow(clippy::disallowed_methods)] // the one base time of the test
fn t0() -> Instant {
    Instant::now()
}

/// Splits a bus request into the text around its id, and the id.
fn split_id(frame: &str) -> (String, String) {
    let at = frame.rfind(r#","id":""#).expect("an id") + 7;
    let end = at + frame[at..].find('"').expect("a closed id");
    (
        format!("{}{}", &frame[..at], &frame[end..]),
        frame[at..end].to_owned(),
    )
}

#[test]
fn ten_subscribers_get_one_params_blob_with_different_ids() {
    const K: u64 = 10;
    let now = t0();
    let mut bus = Bus::new(BusConfig::default(), SequentialIds::new(1), now, 0);
    let peer = PeerInfo::new(None);
    let init = r#"{"jsonrpc":"2.0","method":"initialize","params":{"clientId":"a"},"id":1}"#;
    let sub = r#"{"jsonrpc":"2.0","method":"subscribe","params":{"topic":"inbound:*"},"id":2}"#;
    let publisher = ConnId::new(100);
    bus.handle_connect(publisher, &peer, now);
    bus.handle_frame(publisher, Frame::Text(init), now);
    for i in 1..=K {
        let conn = ConnId::new(i);
        bus.handle_connect(conn, &peer, now);
        bus.handle_frame(conn, Frame::Text(init), now);
        bus.handle_frame(conn, Frame::Text(sub), now);
    }
    while bus.poll_output().is_some() {}
    let before = bus.stats();

    bus.handle_frame(publisher, Frame::Text(PUBLISH), now);
    let mut requests: Vec<(ConnId, String)> = Vec::new();
    let mut result = None;
    while result.is_none() {
        let mut next = None;
        while let Some(out) = bus.poll_output() {
            if let Output::Send { conn, frame } = out {
                let text = frame.as_text().expect("text").to_owned();
                if conn == publisher {
                    result = Some(text);
                } else {
                    next = Some((conn, text));
                }
            }
        }
        if let Some((conn, text)) = next {
            let (_, id) = split_id(&text);
            let reply = format!(
                r#"{{"jsonrpc":"2.0","result":{{"success":true,"stopPropagation":false}},"id":"{id}"}}"#
            );
            bus.handle_frame(conn, Frame::Text(&reply), now);
            requests.push((conn, text));
        } else if result.is_none() {
            panic!("chain stalled after {} requests", requests.len());
        }
    }

    let after = bus.stats();
    assert_eq!(after.publishes - before.publishes, 1);
    assert_eq!(
        after.params_encoded - before.params_encoded,
        1,
        "K requests from one encoded params blob"
    );
    assert_eq!(after.hops_sent - before.hops_sent, K);
    assert_eq!(requests.len(), K as usize);
    let order: Vec<ConnId> = requests.iter().map(|(c, _)| *c).collect();
    assert_eq!(
        order,
        (1..=K).map(ConnId::new).collect::<Vec<_>>(),
        "subscription order"
    );

    // The K frames differ only in their id.
    let (first, _) = split_id(&requests[0].1);
    assert_eq!(
        first,
        r#"{"jsonrpc":"2.0","method":"sendMessage","params":{"topic":"inbound:chat-1","payload":{"chat_id":"chat-1","text":"hello","from":"user-1"}},"id":""}"#
    );
    let mut ids = Vec::new();
    for (_, text) in &requests {
        let (rest, id) = split_id(text);
        assert_eq!(rest, first, "frames differ outside their id");
        assert!(Id128::parse(&id).is_some(), "id {id} is a UUID");
        ids.push(id);
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), K as usize, "every request has its own id");

    let result: serde_json::Value = serde_json::from_str(&result.expect("result")).expect("json");
    assert_eq!(result["id"], 4);
    assert_eq!(result["result"]["delivered"], K);
    assert_eq!(bus.deliveries_in_flight(), 0);
}

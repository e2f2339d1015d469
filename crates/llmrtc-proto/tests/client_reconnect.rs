//! Session resumption: `reconnect` goes first on a new connection, the session follows the
//! ack, a persisted session is resumed, and a requested drop reconnects with the session.
//!
//! `LlmrtcClient` driven directly in simulated time; the server is scripted JSON (harness in
//! `common::client`).

mod common;

use common::client::*;

use agentwire_core::{CloseCode, Machine};
use llmrtc_proto::{ClientConfig, ClientEvent, ConnectionState, LossReason, VisionAttachment};
use serde_json::json;

#[test]
fn reconnect_is_sent_before_anything_else_and_the_session_follows_the_ack() {
    let mut h = H::default_started();
    let c1 = h.connected("first");
    h.c.handle_disconnect(c1, h.now);
    h.drain();
    assert_eq!(h.c.state(), ConnectionState::Reconnecting);
    // Commands while reconnecting are queued.
    h.c.send_attachments(
        vec![VisionAttachment::new("data:image/png;base64,AA==")],
        h.now,
    )
    .expect("queued");
    h.c.send_audio(b"RIFFwav", &[], h.now).expect("queued");
    assert_eq!(h.c.queued(), 2);
    h.advance(S);
    assert_eq!(h.states().last(), Some(&ConnectionState::Connecting));
    let c2 = h.connect();
    assert!(h.sent.is_empty());
    h.ready(c2, "second");
    assert_eq!(
        h.sent[0],
        (c2, json!({"type":"reconnect","sessionId":"first"}))
    );
    assert_eq!(h.types(), ["reconnect", "attachments", "audio"]);
    assert!(h.events.contains(&ClientEvent::ResumeRequested {
        previous: "first".into()
    }));
    h.recv(
        c2,
        json!({"type":"reconnect-ack","success":true,"sessionId":"first","historyRecovered":true}),
    );
    assert_eq!(h.c.session_id(), Some("first"));
    assert_eq!(h.c.ready_id(), Some("second"));
    // Next time the server has lost it: the client moves to the new session.
    h.c.handle_disconnect(c2, h.now);
    h.drain();
    h.advance(S);
    let c3 = h.connect();
    h.ready(c3, "third");
    assert_eq!(h.sent[0].1["sessionId"], "first");
    h.recv(
        c3,
        json!({"type":"reconnect-ack","success":false,"sessionId":"third","historyRecovered":false}),
    );
    assert_eq!(h.c.session_id(), Some("third"));
    assert!(h.events.contains(&ClientEvent::Resumed {
        success: false,
        session_id: "third".into(),
        history_recovered: false
    }));
}

#[test]
fn a_persisted_session_is_resumed_on_the_first_connection() {
    let mut h = H::new(ClientConfig::default().with_resume_session("saved"));
    h.c.start(h.now).expect("start");
    let c = h.connect();
    h.ready(c, "fresh");
    assert_eq!(
        h.sent,
        [(c, json!({"type":"reconnect","sessionId":"saved"}))]
    );
}

#[test]
fn drop_connection_reconnects_with_the_session() {
    let mut h = H::default_started();
    let c = h.connected("s");
    assert!(h.c.drop_connection(h.now));
    h.drain();
    assert_eq!(
        h.closes,
        [(c, CloseCode::NORMAL, "client-reconnect".to_owned())]
    );
    assert!(h.events.contains(&ClientEvent::ConnectionLost {
        reason: LossReason::Requested
    }));
    assert!(!h.c.drop_connection(h.now), "nothing left to drop");
    h.advance(S);
    let c2 = h.connect();
    h.ready(c2, "t");
    assert_eq!(h.sent, [(c2, json!({"type":"reconnect","sessionId":"s"}))]);
}

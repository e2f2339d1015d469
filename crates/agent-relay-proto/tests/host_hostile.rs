//! Hostile input to the Host: undecodable frames and types a host never receives are
//! reported and dropped, never answered (an `error` without `replyTo` would reach every
//! agent).

mod common;

use agent_relay_proto::{DecodeError, HostConfig, HostEvent, HostLimits};
use agentwire_core::{Frame, FrameError, Machine};
use serde_json::json;

use common::error_of;
use common::host::*;

#[test]
fn garbage_from_the_relay_is_reported_and_never_answered() {
    let mut limits = HostLimits::default();
    limits.max_message_bytes = 256;
    let mut h = H::with(HostConfig::default().with_limits(limits), Booking::new());
    h.join();
    h.start();
    let big = format!(
        r#"{{"v":"mvp-0.2","type":"snapshot.get","id":"big","payload":{{"x":"{}"}}}}"#,
        "a".repeat(300)
    );
    for text in [
        "",
        "nope",
        "[1,2]",
        r#"{"v":"mvp-0.1","type":"snapshot.get","id":"v","payload":{}}"#,
        r#"{"type":"snapshot.get","id":"v","payload":{}}"#,
        r#"{"v":"mvp-0.2","type":"state.updated","payload":{}}"#,
        r#"{"v":"mvp-0.2","type":"relay.presence","payload":{"agents":5}}"#,
        r#"{"v":"mvp-0.2","type":"error","payload":{}}"#,
        big.as_str(),
    ] {
        h.feed_text(text);
        assert!(h.sent().is_empty(), "{text}");
        let events = h.events();
        assert!(
            matches!(&events[..], [HostEvent::ProtocolViolation { .. }]),
            "{text}: {events:?}"
        );
    }
    h.host
        .handle_frame(h.conn, Frame::Binary(&[0xff, 0xfe]), h.now);
    h.drain();
    assert!(matches!(
        &h.events()[..],
        [HostEvent::ProtocolViolation {
            error: DecodeError::Frame(FrameError::NotUtf8)
        }]
    ));
    // Deep params are refused, not a stack overflow.
    let nested = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let deep = format!(
        r#"{{"v":"mvp-0.2","type":"tool.call","id":"d","payload":{{"toolName":"select","params":{{"itemId":{nested}}},"reason":"r"}}}}"#
    );
    let mut h2 = H::in_session();
    h2.feed_text(&deep);
    let (code, _, reply_to) = error_of(&h2.one());
    assert_eq!(
        (code.as_str(), reply_to.as_deref()),
        ("INVALID_PARAMS", Some("d"))
    );
    // The host still works.
    h.req("snapshot.get", "ok", json!({}));
    assert_eq!(h.one()["type"], "snapshot.state");
}

//! The client's WebRTC hooks: `offer` after `ready`, `signal` back from the WebSocket,
//! `attachments` on the open data channel, and no payload handled twice when the data
//! channel takes over from the WebSocket.
//!
//! `LlmrtcClient` driven directly in simulated time; the server is scripted JSON (harness
//! in `common::client`), and, last, our `LlmrtcServer` in the `agentwire_core::sim` pair.

mod common;

use std::time::Duration;

use agentwire_core::sim::{Sim, SimConfig};
use agentwire_core::{Machine, SequentialIds};
use common::client::*;
use llmrtc_proto::{
    ClientCommandError, ClientConfig, ClientEvent, ConnectionState, ErrorCode, FixedJitter,
    IgnoreReason, LlmrtcClient, LlmrtcServer, RawJson, ServerConfig, ServerEvent, ServerMessage,
    VisionAttachment,
};
use serde_json::{json, Value};

fn sdp_offer() -> RawJson {
    RawJson::from_value(&json!({"type":"offer","sdp":"v=0\r\n"}))
}

/// The frames the client asked to send on the data channel (taken).
fn dc_sent(h: &mut H) -> Vec<Value> {
    let mut out = Vec::new();
    h.events.retain(|e| match e {
        ClientEvent::DataChannelSend { frame } => {
            out.push(serde_json::from_slice(frame.as_bytes()).expect("json"));
            false
        }
        _ => true,
    });
    out
}

#[test]
fn offer_needs_ready_and_goes_on_the_websocket_and_signal_comes_back_from_it() {
    let mut h = H::default_started();
    let now = h.now;
    assert_eq!(
        h.c.offer(sdp_offer(), now),
        Err(ClientCommandError::NotReady(ConnectionState::Connecting))
    );
    let c = h.connect();
    assert_eq!(
        h.c.offer(sdp_offer(), now),
        Err(ClientCommandError::NotReady(ConnectionState::Connecting)),
        "the WebSocket is open but ready has not come"
    );
    h.ready(c, "s1");
    h.sent.clear();
    h.c.offer(sdp_offer(), now).expect("offer");
    h.drain();
    assert_eq!(
        h.sent,
        [(
            c,
            json!({"type":"offer","signal":{"type":"offer","sdp":"v=0\r\n"}})
        )]
    );
    // The answer: from the WebSocket, surfaced once; a data-channel copy is not taken.
    h.c.set_data_channel_open(true, now);
    let signal = json!({"type":"signal","signal":{"type":"answer","sdp":"v=0\r\n"}});
    h.recv_dc(signal.clone());
    h.recv(c, signal);
    let answers: Vec<_> = h
        .events
        .iter()
        .filter(|e| matches!(e, ClientEvent::Message(ServerMessage::Signal(_))))
        .collect();
    assert_eq!(answers.len(), 1);
    // After the connection is lost, nothing is queued for the next one.
    h.c.handle_disconnect(c, now);
    h.drain();
    assert_eq!(
        h.c.offer(sdp_offer(), now),
        Err(ClientCommandError::NotReady(ConnectionState::Reconnecting))
    );
    assert_eq!(h.c.queued(), 0);
    h.c.close(now);
    assert_eq!(
        h.c.send_offer(sdp_offer(), now),
        Err(ClientCommandError::NotReady(ConnectionState::Closed))
    );
}

#[test]
fn attachments_go_on_the_data_channel_while_it_is_open_and_the_rest_on_the_websocket() {
    let mut h = H::default_started();
    h.connected("s");
    h.sent.clear();
    let now = h.now;
    let pic = || {
        vec![VisionAttachment {
            data: "data:image/png;base64,AA==".into(),
            mime_type: None,
            alt: None,
        }]
    };
    h.c.send_attachments(pic(), now).expect("ws");
    h.drain();
    assert_eq!(h.types(), ["attachments"]);
    assert!(dc_sent(&mut h).is_empty());
    h.c.set_data_channel_open(true, now);
    h.c.send_attachments(pic(), now).expect("dc");
    h.c.send_audio(
        &llmrtc_proto::wav::wav_from_samples(16_000, &[0; 160]),
        &[],
        now,
    )
    .expect("audio");
    h.c.offer(sdp_offer(), now).expect("offer");
    h.drain();
    assert_eq!(
        h.types(),
        ["audio", "offer"],
        "audio and signalling stay on the WebSocket"
    );
    let dc = dc_sent(&mut h);
    assert_eq!(dc.len(), 1);
    assert_eq!(dc[0]["type"], "attachments");
    assert_eq!(
        dc[0]["attachments"][0]["data"],
        "data:image/png;base64,AA=="
    );
    // The channel closed: back to the WebSocket.
    h.c.set_data_channel_open(false, now);
    h.c.send_attachments(pic(), now).expect("ws again");
    h.drain();
    assert_eq!(h.types(), ["attachments"]);
}

#[test]
fn the_data_channel_repeating_what_the_websocket_gave_before_it_opened_is_dropped() {
    let mut h = H::default_started();
    let c = h.connected("s");
    h.c.offer(sdp_offer(), h.now).expect("offer");
    let start = json!({"type":"speech-start"});
    let end = json!({"type":"speech-end"});
    let text = json!({"type":"transcript","text":"Hello","isFinal":true});
    // The server's side of the channel opened first: these reach the client on the
    // WebSocket while its channel is still closed...
    h.recv(c, start.clone());
    h.recv(c, end.clone());
    h.recv(c, text.clone());
    h.advance(Duration::from_millis(50));
    h.c.set_data_channel_open(true, h.now);
    // ...and their copies follow on the channel, then new messages.
    h.recv_dc(end.clone());
    h.recv_dc(text.clone());
    h.recv_dc(json!({"type":"llm-chunk","content":"Hi","done":true}));
    h.recv_dc(start.clone());
    assert_eq!(
        h.messages(),
        [
            "speech-start",
            "speech-end",
            "transcript",
            "llm-chunk",
            "speech-start"
        ],
        "each once"
    );
    let dups = h
        .events
        .iter()
        .filter(|e| {
            matches!(
                e,
                ClientEvent::Ignored {
                    reason: IgnoreReason::Duplicate,
                    ..
                }
            )
        })
        .count();
    assert_eq!(dups, 2);
}

#[test]
fn after_the_overlap_window_or_a_new_message_the_channel_is_taken_as_it_comes() {
    let mut h = H::default_started();
    let c = h.connected("s");
    h.c.offer(sdp_offer(), h.now).expect("offer");
    let start = json!({"type":"speech-start"});
    h.recv(c, start.clone());
    // Opened long after: a speech-start on the channel is a new one.
    h.advance(Duration::from_secs(3));
    h.c.set_data_channel_open(true, h.now);
    h.recv_dc(start.clone());
    assert_eq!(h.messages(), ["speech-start", "speech-start"]);
    // Opened at once, but the channel's first frame is new: the hand-over ends there.
    h.c.set_data_channel_open(false, h.now);
    h.events.clear();
    h.recv(c, start.clone());
    h.c.set_data_channel_open(true, h.now);
    h.recv_dc(json!({"type":"speech-end"}));
    h.recv_dc(start);
    assert_eq!(h.messages(), ["speech-start", "speech-end", "speech-start"]);
    // Zero turns the check off.
    let mut config = ClientConfig::default();
    config.data_channel_overlap = Duration::ZERO;
    let mut h = H::new(config);
    h.c.start(h.now).expect("start");
    let c = h.connected("s");
    h.c.offer(sdp_offer(), h.now).expect("offer");
    h.recv(c, json!({"type":"speech-end"}));
    h.c.set_data_channel_open(true, h.now);
    h.recv_dc(json!({"type":"speech-end"}));
    assert_eq!(h.messages(), ["speech-end", "speech-end"]);
}

/// Against our server in the sim pair: `offer` reaches it as `ServerEvent::Offer`, the
/// answer comes back as the client's `signal` event; with both sides' data channel open,
/// the server's copy, carried to the client's channel, is the one handled.
#[test]
fn offer_and_signal_round_trip_with_our_server_and_each_payload_arrives_once() {
    let server = LlmrtcServer::new(
        ServerConfig::default().with_webrtc(true),
        SequentialIds::new(0),
    )
    .expect("server");
    let mut sim = Sim::new(server, t0(), SimConfig::default());
    sim.add_client(LlmrtcClient::new(ClientConfig::default(), FixedJitter(0)));
    sim.call_client(0, |c, now| c.start(now)).expect("start");
    sim.connect(0);
    sim.run_for(S);
    sim.call_client(0, |c, now| c.offer(sdp_offer(), now))
        .expect("offer");
    sim.run_for(S);
    let offers: Vec<_> = sim
        .take_server_events()
        .into_iter()
        .filter_map(|e| match e {
            ServerEvent::Offer { conn, signal, .. } => Some((conn, signal)),
            _ => None,
        })
        .collect();
    assert_eq!(offers.len(), 1);
    let (conn, signal) = offers.into_iter().next().expect("offer");
    assert_eq!(
        serde_json::from_str::<Value>(signal.get()).expect("json"),
        json!({"type":"offer","sdp":"v=0\r\n"})
    );
    let answer = RawJson::from_value(&json!({"type":"answer","sdp":"v=0\r\n"}));
    sim.call_server(|s, _| s.signal(conn, answer))
        .expect("signal");
    sim.run_for(S);
    let signals = sim
        .take_client_events(0)
        .into_iter()
        .filter(|e| matches!(e, ClientEvent::Message(ServerMessage::Signal(_))))
        .count();
    assert_eq!(signals, 1);
    // Both sides report the data channel open; the server's copies go to the client's
    // channel, as the WebRTC layer carries them.
    sim.call_server(|s, _| s.set_data_channel_open(conn, true))
        .expect("dc");
    sim.call_client(0, |c, now| c.set_data_channel_open(true, now));
    sim.call_server(|s, _| s.send_error(conn, ErrorCode::LLM_ERROR, "boom"))
        .expect("error");
    sim.run_for(S);
    for e in sim.take_server_events() {
        if let ServerEvent::DataChannel { frame, .. } = e {
            sim.call_client(0, |c, now| {
                c.handle_data_channel_frame(frame.as_frame(), now)
            });
        }
    }
    sim.run_for(S);
    let errors = sim
        .take_client_events(0)
        .into_iter()
        .filter(|e| matches!(e, ClientEvent::Message(ServerMessage::Error(_))))
        .count();
    assert_eq!(
        errors, 1,
        "the WebSocket copy was ignored, the channel's handled"
    );
}

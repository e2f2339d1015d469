//! The server and client machines over the in-memory network: offer/answer, the data
//! channel, payloads once, reconnects, failures.

mod common;

use std::time::Duration;

use agentwire_core::FrameBuf;
use common::Net;
use llmrtc_proto::ClientEvent;
use llmrtc_webrtc::{AudioOffer, WebrtcClientEvent, WebrtcServerEvent};

fn connected_pair() -> Net {
    let mut net = Net::new();
    let c = net.add_client(50000);
    net.run_for(Duration::from_millis(50));
    assert!(net.clients[c].m.llmrtc_ref().ready_id().is_some(), "ready");
    let now = net.now;
    net.clients[c].m.offer(AudioOffer::None, now).unwrap();
    let open = net.run_until(Duration::from_secs(2), |n| {
        n.clients[0].m.is_channel_open()
            && n.server.is_channel_open(n.clients[0].server_conn.unwrap())
    });
    assert!(open, "data channel opens within 2 s of simulated time");
    net
}

#[test]
fn an_offer_is_answered_and_the_data_channel_opens() {
    let mut net = connected_pair();
    let ev = net.take_server_events();
    assert!(ev.iter().any(|e| matches!(
        e,
        WebrtcServerEvent::PeerAnswered {
            renegotiated: false,
            ..
        }
    )));
    assert!(ev
        .iter()
        .any(|e| matches!(e, WebrtcServerEvent::PeerConnected { .. })));
    assert!(net.clients[0]
        .events
        .iter()
        .any(|e| matches!(e, WebrtcClientEvent::ChannelOpen)));
    assert_eq!(net.server.peers(), 1);
}

fn bad_audio() -> FrameBuf {
    FrameBuf::text(r#"{"type":"audio","data":"%%%"}"#)
}

#[test]
fn a_payload_message_reaches_the_client_once() {
    let mut net = connected_pair();
    let before = net.server.dropped_channel_messages();
    net.client_ws_send(0, bad_audio());
    net.run_for(Duration::from_millis(100));
    // The `error` went on both channels; the client took the data channel's copy only.
    assert_eq!(
        net.errors_seen(0),
        vec!["AUDIO_PROCESSING_ERROR".to_owned()]
    );
    assert_eq!(net.server.dropped_channel_messages(), before);
}

#[test]
fn the_payload_is_carried_by_the_data_channel() {
    let mut net = connected_pair();
    // The client's WebSocket copy is ignored while the channel is open, so a payload the
    // client sees came over the data channel: drop the data channel's datagrams and the
    // client sees nothing.
    net.clients[0].udp_blocked = true;
    net.client_ws_send(0, bad_audio());
    net.run_for(Duration::from_millis(100));
    assert!(net.errors_seen(0).is_empty());
    net.clients[0].udp_blocked = false;
    net.run_for(Duration::from_secs(2));
    assert_eq!(net.errors_seen(0).len(), 1, "retransmitted over SCTP");
}

#[test]
fn a_client_message_on_the_data_channel_is_handled_once() {
    let mut net = connected_pair();
    let conn = net.clients[0].server_conn.unwrap();
    let now = net.now;
    net.clients[0]
        .m
        .send_channel(FrameBuf::text(r#"{"type":"audio","data":"%%%"}"#), now)
        .unwrap();
    net.run_for(Duration::from_millis(100));
    assert_eq!(
        net.errors_seen(0),
        vec!["AUDIO_PROCESSING_ERROR".to_owned()]
    );
    // Signalling on the data channel is not taken.
    let now = net.now;
    net.clients[0]
        .m
        .send_channel(FrameBuf::text(r#"{"type":"ping","timestamp":1}"#), now)
        .unwrap();
    net.run_for(Duration::from_millis(100));
    assert_eq!(net.server.dropped_channel_messages(), 1);
    assert!(net.server.is_channel_open(conn));
}

#[test]
fn a_reconnected_session_gets_a_new_peer() {
    let mut net = connected_pair();
    net.clients[0].m.set_auto_offer(Some(AudioOffer::None));
    let old = net.clients[0].server_conn.unwrap();
    let now = net.now;
    assert!(net.clients[0].m.llmrtc().drop_connection(now));
    net.take_server_events();
    let reopened = net.run_until(Duration::from_secs(10), |n| {
        n.clients[0]
            .server_conn
            .is_some_and(|c| c != old && n.server.is_channel_open(c))
    });
    assert!(reopened, "the reconnected client's new peer connects");
    let new = net.clients[0].server_conn.unwrap();
    let ev = net.take_server_events();
    assert!(ev
        .iter()
        .any(|e| matches!(e, WebrtcServerEvent::PeerClosed { conn } if *conn == old)));
    assert!(ev.iter().any(|e| matches!(e, WebrtcServerEvent::PeerAnswered { conn, renegotiated: false } if *conn == new)));
    assert_eq!(net.server.peers(), 1);
    assert!(!net.server.is_channel_open(old));
}

#[test]
fn an_offer_from_the_same_peer_connection_renegotiates() {
    let mut net = connected_pair();
    let conn = net.clients[0].server_conn.unwrap();
    net.take_server_events();
    let now = net.now;
    net.clients[0].m.share_audio(now).unwrap();
    net.run_for(Duration::from_millis(200));
    let ev = net.take_server_events();
    assert!(ev.iter().any(|e| matches!(
        e,
        WebrtcServerEvent::PeerAnswered {
            renegotiated: true,
            ..
        }
    )));
    assert!(!ev
        .iter()
        .any(|e| matches!(e, WebrtcServerEvent::PeerClosed { .. })));
    assert!(net.server.is_channel_open(conn));
    assert_eq!(net.server.peers(), 1);
}

#[test]
fn ice_that_never_completes_fails_after_the_timeout_and_the_session_goes_on() {
    let mut net = Net::new();
    net.add_client(50000);
    net.run_for(Duration::from_millis(50));
    net.clients[0].udp_blocked = true;
    let now = net.now;
    net.clients[0].m.offer(AudioOffer::None, now).unwrap();
    net.run_for(Duration::from_millis(9_900));
    assert!(net.errors_seen(0).is_empty(), "not before the timeout");
    assert_eq!(net.server.peers(), 1);
    net.run_for(Duration::from_millis(200));
    assert_eq!(net.errors_seen(0), vec!["CONNECTION_FAILED".to_owned()]);
    assert_eq!(net.server.peers(), 0);
    assert!(net
        .take_server_events()
        .iter()
        .any(|e| matches!(e, WebrtcServerEvent::PeerFailed { .. })));
    // The session goes on over the WebSocket.
    net.client_ws_send(0, bad_audio());
    net.run_for(Duration::from_millis(100));
    assert_eq!(net.errors_seen(0).len(), 2);
    assert!(net.clients[0].m.llmrtc_ref().ready_id().is_some());
}

#[test]
fn a_payload_too_large_for_the_data_channel_does_not_block_the_next_ones() {
    let llmrtc = llmrtc_proto::ServerConfig::default().with_streaming_tts(false);
    let mut net = Net::with(llmrtc, llmrtc_webrtc::WebrtcConfig::new(common::SERVER_UDP));
    net.add_client(50000);
    net.run_for(Duration::from_millis(50));
    let now = net.now;
    net.clients[0].m.offer(AudioOffer::None, now).unwrap();
    assert!(net.run_until(Duration::from_secs(2), |n| n.clients[0].m.is_channel_open()));
    // An utterance as an `audio` message: silence, "speech", silence at 16 kHz.
    let mut samples = vec![0i16; 3200];
    samples.extend((0..8000).map(|i| if i % 16 < 8 { 3000 } else { -3000 }));
    samples.extend(vec![0i16; 11200]);
    let wav = llmrtc_proto::wav::wav_from_samples(16000, &samples);
    let now = net.now;
    net.clients[0]
        .m
        .llmrtc()
        .send_audio(&wav, &[], now)
        .unwrap();
    net.run_for(Duration::from_millis(100));
    let tts = net.answer_up_to_tts("Hi", "Hello!");
    let now = net.now;
    // 8 s of 24 kHz PCM: its whole `tts` message is over 256 KiB.
    let pcm = vec![1u8; 384_000];
    net.server
        .llmrtc()
        .tts_chunk(tts, "pcm", 24_000, &pcm, now)
        .unwrap();
    net.server.llmrtc().tts_done(tts, now).unwrap();
    net.run_for(Duration::from_millis(500));
    let types: Vec<String> = net
        .client_messages(0)
        .into_iter()
        .filter_map(|e| match e {
            ClientEvent::Message(m) => Some(m.type_name().to_owned()),
            _ => None,
        })
        .collect();
    assert!(!types.contains(&"tts".to_owned()), "{types:?}");
    assert_eq!(net.server.dropped_channel_messages(), 1);
    // What came after it still arrives over the channel.
    net.client_ws_send(0, bad_audio());
    net.run_for(Duration::from_millis(100));
    assert_eq!(
        net.errors_seen(0),
        vec!["AUDIO_PROCESSING_ERROR".to_owned()]
    );
}

#[test]
fn without_audio_the_answer_rejects_the_audio_m_line() {
    use agentwire_core::{Frame, Machine, Output, PeerInfo};
    let webrtc = llmrtc_webrtc::WebrtcConfig::new(common::SERVER_UDP).with_audio(false);
    let mut net = Net::with(Default::default(), webrtc);
    let now = net.now;
    let mut rtc = str0m::Rtc::builder().build(now);
    let addr = "127.0.0.1:50000".parse().unwrap();
    rtc.add_local_candidate(str0m::Candidate::host(addr, "udp").unwrap());
    let mut api = rtc.sdp_api();
    api.add_channel("data".into());
    api.add_media(
        str0m::media::MediaKind::Audio,
        str0m::media::Direction::SendRecv,
        None,
        None,
        None,
    );
    let (offer, _) = api.apply().unwrap();
    let c = agentwire_core::ConnId::new(9);
    net.server.handle_connect(c, &PeerInfo::new(None), now);
    let msg = serde_json::json!({"type": "offer", "signal": {"type": "offer", "sdp": offer.to_sdp_string()}});
    net.server
        .handle_frame(c, Frame::Text(&msg.to_string()), now);
    let mut answer = None;
    while let Some(o) = net.server.poll_output() {
        if let Output::Send { frame, .. } = o {
            let v: serde_json::Value = serde_json::from_slice(frame.as_bytes()).unwrap();
            if v["type"] == "signal" {
                answer = v["signal"]["sdp"].as_str().map(str::to_owned);
            }
        }
    }
    let answer = answer.expect("answered");
    assert!(answer.contains("\r\nm=application 9 "), "{answer}");
    assert!(
        answer.contains("\r\nm=audio 0 "),
        "the audio m-line is rejected: {answer}"
    );
}

#[test]
fn the_server_takes_the_first_data_channel_whatever_its_label() {
    use agentwire_core::{DatagramMachine, Frame, Machine, Output, PeerInfo};
    use str0m::net::{Protocol, Receive};
    use str0m::{Candidate, Event, Input, Output as RtcOutput, Rtc};

    let mut net = Net::new();
    let mut now = net.now;
    let client_udp = "127.0.0.1:50000".parse().unwrap();
    let mut rtc = Rtc::builder().build(now);
    rtc.add_local_candidate(Candidate::host(client_udp, "udp").unwrap());
    let mut api = rtc.sdp_api();
    api.add_channel("chat".into());
    let (offer, pending) = api.apply().unwrap();
    let conn = agentwire_core::ConnId::new(5);
    net.server.handle_connect(conn, &PeerInfo::new(None), now);
    let msg = serde_json::json!({"type": "offer", "signal": {"type": "offer", "sdp": offer.to_sdp_string()}});
    net.server
        .handle_frame(conn, Frame::Text(&msg.to_string()), now);
    let mut answer = None;
    while let Some(o) = net.server.poll_output() {
        if let Output::Send { frame, .. } = o {
            let v: serde_json::Value = serde_json::from_slice(frame.as_bytes()).unwrap();
            if v["type"] == "signal" {
                answer = v["signal"]["sdp"].as_str().map(str::to_owned);
            }
        }
    }
    let answer = str0m::change::SdpAnswer::from_sdp_string(&answer.expect("answered")).unwrap();
    rtc.sdp_api().accept_answer(pending, answer).unwrap();
    let mut client_open = false;
    for _ in 0..2000 {
        let mut timeout = now + Duration::from_millis(100);
        loop {
            match rtc.poll_output().unwrap() {
                RtcOutput::Timeout(t) => {
                    timeout = timeout.min(t);
                    break;
                }
                RtcOutput::Transmit(t) => {
                    net.server
                        .handle_datagram(client_udp, common::SERVER_UDP, &t.contents, now)
                }
                RtcOutput::Event(Event::ChannelOpen(..)) => client_open = true,
                RtcOutput::Event(_) => {}
            }
        }
        while let Some(t) = net.server.poll_transmit() {
            let r =
                Receive::new(Protocol::Udp, common::SERVER_UDP, client_udp, &t.contents).unwrap();
            rtc.handle_input(Input::Receive(now, r)).unwrap();
        }
        while net.server.poll_output().is_some() {}
        if client_open && net.server.is_channel_open(conn) {
            break;
        }
        if let Some(t) = net.server.poll_timeout() {
            timeout = timeout.min(t);
        }
        now = timeout.max(now);
        rtc.handle_input(Input::Timeout(now)).unwrap();
        net.server.handle_timeout(now);
    }
    assert!(client_open, "the client's channel opened");
    assert!(
        net.server.is_channel_open(conn),
        "the server took the channel labelled chat"
    );
}

#[test]
fn a_connected_peer_that_goes_silent_is_dropped_quietly() {
    let mut net = connected_pair();
    let conn = net.clients[0].server_conn.unwrap();
    net.take_server_events();
    // The client's network goes away; its WebSocket stays (it keeps pinging).
    net.clients[0].udp_blocked = true;
    let gone = net.run_until(Duration::from_secs(40), |n| n.server.peers() == 0);
    assert!(gone, "ICE consent ran out and the peer was dropped");
    let ev = net.take_server_events();
    assert!(ev
        .iter()
        .any(|e| matches!(e, WebrtcServerEvent::PeerClosed { conn: c } if *c == conn)));
    assert!(!ev
        .iter()
        .any(|e| matches!(e, WebrtcServerEvent::PeerFailed { .. })));
    assert!(!net.server.is_channel_open(conn));
    assert!(
        net.errors_seen(0).is_empty(),
        "no CONNECTION_FAILED for a peer that was up"
    );
}

#[test]
fn attachments_go_on_the_open_data_channel() {
    let mut net = connected_pair();
    let session = net.clients[0].m.llmrtc_ref().ready_id().unwrap().to_owned();
    let attachment: llmrtc_proto::VisionAttachment =
        serde_json::from_str(r#"{"data":"data:image/jpeg;base64,AAAA"}"#).unwrap();
    // With the client's UDP cut, an attachment on the WebSocket would still arrive.
    net.clients[0].udp_blocked = true;
    let now = net.now;
    net.clients[0]
        .m
        .llmrtc()
        .send_attachments(vec![attachment], now)
        .unwrap();
    net.run_for(Duration::from_millis(100));
    assert_eq!(net.server.llmrtc_ref().queued_attachments(&session), 0);
    net.clients[0].udp_blocked = false;
    net.run_for(Duration::from_secs(2));
    assert_eq!(
        net.server.llmrtc_ref().queued_attachments(&session),
        1,
        "it came on the channel, once"
    );
}

#[test]
fn payloads_sent_in_one_step_share_datagrams() {
    let mut net = connected_pair();
    let conn = net.clients[0].server_conn.unwrap();
    let before = net.server_sent.len();
    for _ in 0..50 {
        net.server
            .llmrtc()
            .send_error(conn, llmrtc_proto::ErrorCode::INTERNAL_ERROR, "burst")
            .unwrap();
    }
    net.run_for(Duration::from_secs(1));
    assert_eq!(net.errors_seen(0).len(), 50, "every message arrives once");
    // One datagram per message would be 50: SCTP bundles the step's messages (about 110
    // bytes each) into packets of up to its MTU.
    let sent = net.server_sent.len() - before;
    assert!(
        sent <= 10,
        "{sent} datagrams for 50 messages sent in one step"
    );
}

#[test]
fn payloads_written_in_the_step_that_closes_the_session_still_leave() {
    let mut net = connected_pair();
    let conn = net.clients[0].server_conn.unwrap();
    let before = net.server_sent.len();
    for _ in 0..3 {
        net.server
            .llmrtc()
            .send_error(conn, llmrtc_proto::ErrorCode::INTERNAL_ERROR, "last")
            .unwrap();
    }
    net.server.llmrtc().close(conn).unwrap();
    net.run_for(Duration::from_millis(100));
    // The three messages (about 60 bytes each) go out before the peer's close alert.
    let carried: usize = net.server_sent[before..]
        .iter()
        .map(|(_, d)| d.len())
        .filter(|n| *n > 100)
        .sum();
    assert!(
        carried >= 200,
        "{carried} bytes of channel data before the close"
    );
}

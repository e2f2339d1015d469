//! Hostile input to the WebRTC server: garbage, replayed and oversized datagrams, bad SDP,
//! floods of offers. Nothing panics and no other session is hurt.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use agentwire_core::{DatagramMachine, FrameBuf};
use common::{Net, SERVER_UDP};
use llmrtc_webrtc::{AudioOffer, Limits, WebrtcConfig, WebrtcServerEvent};

fn open_all(net: &mut Net) {
    let now = net.now;
    for c in &mut net.clients {
        c.m.offer(AudioOffer::None, now).unwrap();
    }
    let open = net.run_until(Duration::from_secs(2), |n| {
        n.clients
            .iter()
            .all(|c| c.m.is_channel_open() && n.server.is_channel_open(c.server_conn.unwrap()))
    });
    assert!(open);
}

/// Each client gets one payload (an `error` for bad audio) and sees it once.
fn payload_reaches_everyone(net: &mut Net) {
    let before: Vec<usize> = (0..net.clients.len())
        .map(|i| net.errors_seen(i).len())
        .collect();
    for i in 0..net.clients.len() {
        net.client_ws_send(i, FrameBuf::text(r#"{"type":"audio","data":"%%%"}"#));
    }
    net.run_for(Duration::from_millis(200));
    for (i, b) in before.iter().enumerate() {
        assert_eq!(net.errors_seen(i).len(), b + 1, "client {i}");
    }
}

fn two_clients() -> Net {
    let mut net = Net::new();
    net.add_client(50000);
    net.add_client(50001);
    net.run_for(Duration::from_millis(50));
    open_all(&mut net);
    net
}

#[test]
fn garbage_replayed_and_oversized_datagrams_hurt_no_session() {
    let mut net = two_clients();
    let a = net.clients[0].addr;
    let stranger: SocketAddr = "127.0.0.1:6666".parse().unwrap();
    let dropped = net.server.dropped_datagrams();
    let now = net.now;
    // Garbage of every first byte (STUN, DTLS, RTP/RTCP ranges and none), from a known
    // peer's address and from a stranger.
    for first in 0..=255u8 {
        for len in [1usize, 2, 13, 20, 28, 100, 1200] {
            let mut d = vec![first; len];
            if len >= 8 {
                d[4..8].copy_from_slice(&[0x21, 0x12, 0xA4, 0x42]); // STUN cookie
            }
            net.server.handle_datagram(a, SERVER_UDP, &d, now);
            net.server.handle_datagram(stranger, SERVER_UDP, &d, now);
        }
    }
    // Oversized.
    net.server
        .handle_datagram(a, SERVER_UDP, &vec![0x16; 70_000], now);
    // Every datagram the clients ever sent, replayed from their own address and from a
    // stranger's (STUN, DTLS handshake, SCTP in DTLS).
    let sent = net.client_sent.clone();
    for (from, d) in &sent {
        net.server.handle_datagram(*from, SERVER_UDP, d, now);
        net.server.handle_datagram(stranger, SERVER_UDP, d, now);
    }
    assert!(net.server.dropped_datagrams() > dropped);
    net.settle();
    assert_eq!(net.server.peers(), 2);
    payload_reaches_everyone(&mut net);
}

#[test]
fn hostile_offers_get_connection_failed_and_the_session_stays_usable() {
    let mut limits = Limits::default();
    limits.max_sdp_bytes = 8 * 1024;
    limits.offer_rate = agentwire_core::Rate::per_second(1000, 1000);
    let webrtc = WebrtcConfig::new(SERVER_UDP).with_limits(limits);
    let mut net = Net::with(Default::default(), webrtc);
    net.add_client(50000);
    net.run_for(Duration::from_millis(50));
    let huge = format!("v=0\\r\\n{}", "a=x\\r\\n".repeat(3000));
    let no_channel = "v=0\\r\\no=- 1 2 IN IP4 127.0.0.1\\r\\ns=-\\r\\nt=0 0\\r\\nm=audio 9 UDP/TLS/RTP/SAVPF 111\\r\\nc=IN IP4 0.0.0.0\\r\\na=mid:0\\r\\na=ice-ufrag:abcd\\r\\na=ice-pwd:abcdefghijklmnopqrstuv\\r\\na=fingerprint:sha-256 00:11\\r\\na=setup:actpass\\r\\na=sendrecv\\r\\na=rtpmap:111 opus/48000/2\\r\\n";
    let hostile = [
        r#"null"#.to_owned(),
        r#"42"#.to_owned(),
        r#""v=0""#.to_owned(),
        r#"[]"#.to_owned(),
        r#"{}"#.to_owned(),
        r#"{"type":"answer","sdp":"v=0"}"#.to_owned(),
        r#"{"type":"offer","sdp":null}"#.to_owned(),
        r#"{"type":"offer","sdp":""}"#.to_owned(),
        r#"{"type":"offer","sdp":"garbage"}"#.to_owned(),
        r#"{"type":"offer","sdp":"v=0\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\n"}"#
            .to_owned(),
        format!(r#"{{"type":"offer","sdp":"{huge}"}}"#),
        format!(r#"{{"type":"offer","sdp":"{no_channel}"}}"#),
    ];
    for (k, signal) in hostile.iter().enumerate() {
        net.client_ws_send(
            0,
            FrameBuf::text(format!(r#"{{"type":"offer","signal":{signal}}}"#)),
        );
        net.run_for(Duration::from_millis(10));
        assert_eq!(net.errors_seen(0).len(), k + 1, "offer {k}: {signal:.80}");
        assert_eq!(net.errors_seen(0)[k], "CONNECTION_FAILED");
    }
    assert_eq!(net.server.peers(), 0);
    let refused = net
        .take_server_events()
        .into_iter()
        .filter(|e| matches!(e, WebrtcServerEvent::OfferRefused { .. }))
        .count();
    assert_eq!(refused, hostile.len());
    // The session is usable: a good offer connects.
    open_all(&mut net);
}

#[test]
fn a_flood_of_offers_is_bounded() {
    let mut net = Net::new();
    net.add_client(50000);
    net.add_client(50001);
    net.run_for(Duration::from_millis(50));
    // Client 1 connects normally; client 0 floods offers.
    let now = net.now;
    net.clients[1].m.offer(AudioOffer::None, now).unwrap();
    let offer = r#"{"type":"offer","signal":{"type":"offer","sdp":"garbage"}}"#;
    for _ in 0..60 {
        net.client_ws_send(0, FrameBuf::text(offer));
    }
    net.run_for(Duration::from_millis(500));
    let errs = net.errors_seen(0);
    // Four offers within the burst are read (and refused); the fifth gets RATE_LIMITED;
    // the rest of the run are dropped without a reply.
    let limit = Limits::default().offer_rate.burst() as usize;
    assert_eq!(
        errs.iter().filter(|c| *c == "CONNECTION_FAILED").count(),
        limit
    );
    assert_eq!(errs.iter().filter(|c| *c == "RATE_LIMITED").count(), 1);
    assert_eq!(net.server.dropped_offers(), 60 - limit as u64 - 1);
    assert!(net
        .server
        .is_channel_open(net.clients[1].server_conn.unwrap()));
    // A minute later the budget is back.
    net.run_for(Duration::from_secs(60));
    let now = net.now;
    net.clients[0].m.offer(AudioOffer::None, now).unwrap();
    let open = net.run_until(Duration::from_secs(2), |n| n.clients[0].m.is_channel_open());
    assert!(open);
}

#[test]
fn peers_are_bounded() {
    let mut limits = Limits::default();
    limits.max_peers = 1;
    let webrtc = WebrtcConfig::new(SERVER_UDP).with_limits(limits);
    let mut net = Net::with(Default::default(), webrtc);
    net.add_client(50000);
    net.add_client(50001);
    net.run_for(Duration::from_millis(50));
    let now = net.now;
    net.clients[0].m.offer(AudioOffer::None, now).unwrap();
    net.run_for(Duration::from_millis(500));
    net.clients[1].m.offer(AudioOffer::None, now).unwrap();
    net.run_for(Duration::from_millis(500));
    assert_eq!(net.errors_seen(1), vec!["CONNECTION_FAILED".to_owned()]);
    assert!(net.clients[0].m.is_channel_open());
    assert_eq!(net.server.peers(), 1);
}

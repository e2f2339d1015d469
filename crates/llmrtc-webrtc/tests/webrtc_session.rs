//! The server and client machines over the in-memory network: offer/answer, the data
//! channel, payloads once, reconnects, failures.

mod common;

use std::time::Duration;

use common::Net;
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

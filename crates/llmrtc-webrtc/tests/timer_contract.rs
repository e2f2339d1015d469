//! The server and the client keep the timer rules of the `Machine` contract under arbitrary input,
//! offers (good and bad) included: peers' timers move forward, and an early or repeated
//! `handle_timeout` does nothing.

use std::net::SocketAddr;
use std::time::Duration;

use agentwire_core::sim::{check_timer_contract, TimerInput};
use agentwire_core::{FrameBuf, SequentialIds};
use agentwire_testkit::timer::{t0, timer_inputs, TimerMix};
use llmrtc_proto::{ClientConfig, FixedJitter, ServerConfig};
use llmrtc_webrtc::{AudioOffer, WebrtcClient, WebrtcConfig, WebrtcServer};
use proptest::prelude::*;

/// A browser-like offer (a data channel) made by str0m.
fn good_offer() -> String {
    let mut rtc = str0m::Rtc::builder().build(t0());
    let addr: SocketAddr = "127.0.0.1:50000".parse().unwrap();
    rtc.add_local_candidate(str0m::Candidate::host(addr, "udp").unwrap());
    let mut api = rtc.sdp_api();
    api.add_channel("data".into());
    let (offer, _) = api.apply().unwrap();
    serde_json::json!({"type": "offer", "signal": {"type": "offer", "sdp": offer.to_sdp_string()}})
        .to_string()
}

fn frames() -> Vec<FrameBuf> {
    vec![
        FrameBuf::text(good_offer()),
        FrameBuf::text(r#"{"type":"offer","signal":{"type":"offer","sdp":"garbage"}}"#),
        FrameBuf::text(r#"{"type":"ping","timestamp":1}"#),
        FrameBuf::text("garbage"),
    ]
}

/// Runs of inputs over `frames`: advances below 15 s (past the 10 s ICE setup timeout),
/// rewinds below 5 s.
fn inputs(frames: Vec<FrameBuf>) -> impl Strategy<Value = Vec<TimerInput>> {
    let mix = TimerMix {
        max_advance: Duration::from_secs(15),
        max_rewind: Duration::from_secs(5),
        ..TimerMix::default()
    };
    timer_inputs(proptest::sample::select(frames), mix)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    #[test]
    fn timers_move_forward_and_handle_timeout_is_idempotent(inputs in inputs(frames())) {
        let udp: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        let mut server = WebrtcServer::new(ServerConfig::default(), WebrtcConfig::new(udp), SequentialIds::new(0))
            .expect("config");
        if let Err(e) = check_timer_contract(&mut server, t0(), &inputs) {
            panic!("{e}");
        }
    }
}

fn client_frames() -> Vec<FrameBuf> {
    vec![
        FrameBuf::text(
            r#"{"type":"ready","id":"00000000-0000-4000-8000-000000000001","protocolVersion":1}"#,
        ),
        FrameBuf::text(r#"{"type":"signal","signal":{"type":"answer","sdp":"garbage"}}"#),
        FrameBuf::text(r#"{"type":"pong","timestamp":1}"#),
        FrameBuf::text("garbage"),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    /// The client, set to offer after every `ready` (a peer with its own timers).
    #[test]
    fn the_client_keeps_the_timer_rules(inputs in inputs(client_frames())) {
        let udp: SocketAddr = "127.0.0.1:50000".parse().unwrap();
        let mut client = WebrtcClient::new(ClientConfig::default(), FixedJitter(0), WebrtcConfig::new(udp))
            .expect("config");
        client.set_auto_offer(Some(AudioOffer::SendRecv));
        client.llmrtc().start(t0()).expect("start");
        if let Err(e) = check_timer_contract(&mut client, t0(), &inputs) {
            panic!("{e}");
        }
    }
}

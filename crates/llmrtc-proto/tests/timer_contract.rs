//! The server keeps the timer rules of the `Machine` contract under arbitrary input.

mod common;

use std::time::Duration;

use agentwire_core::sim::{check_timer_contract, TimerInput};
use agentwire_core::{FrameBuf, Machine, SequentialIds};
use common::*;
use llmrtc_proto::{LlmrtcServer, ServerConfig};
use proptest::prelude::*;

fn frames() -> Vec<FrameBuf> {
    vec![
        FrameBuf::text(r#"{"type":"ping","timestamp":1}"#),
        FrameBuf::text(audio_text(16000, &utterance(16000, 300))),
        FrameBuf::text(
            r#"{"type":"reconnect","sessionId":"00000000-0000-4000-8000-000000000001"}"#,
        ),
        FrameBuf::text(r#"{"type":"reconnect","sessionId":"nope"}"#),
        FrameBuf::text(r#"{"type":"attachments","attachments":[{"data":"x"}]}"#),
        FrameBuf::text("garbage"),
    ]
}

fn input() -> impl Strategy<Value = TimerInput> {
    let f = frames();
    prop_oneof![
        Just(TimerInput::Connect),
        (any::<usize>(), 0..f.len()).prop_map(move |(n, i)| TimerInput::Frame(n, f[i].clone())),
        any::<usize>().prop_map(TimerInput::Disconnect),
        (0u64..4000).prop_map(|s| TimerInput::Advance(Duration::from_secs(s))),
        (0u64..100).prop_map(|s| TimerInput::Rewind(Duration::from_secs(s))),
        Just(TimerInput::Timeout),
        Just(TimerInput::FireDue),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn timers_move_forward_and_handle_timeout_is_idempotent(inputs in prop::collection::vec(input(), 0..60)) {
        let mut server = LlmrtcServer::new(ServerConfig::default(), SequentialIds::new(0)).expect("config");
        if let Err(e) = check_timer_contract(&mut server, t0(), &inputs) {
            panic!("{e}");
        }
    }
}

#[test]
fn every_deadline_fires_and_then_nothing_is_left() {
    let mut h = Harness::default_config();
    let (c, _) = h.client();
    h.audio(c, 16000, &utterance(16000, 300)); // an STT request is pending
    h.disconnect(c);
    h.advance(Duration::from_secs(31 * 60));
    assert_eq!(h.server.poll_timeout(), None);
    assert_eq!(h.server.sessions(), 0);
    assert_eq!(h.server.pending_requests(), 0);
}

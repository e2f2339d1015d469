//! Binary peers of the Orchestrator: binary replies with the same sequence id, the codec's
//! method codes, and large payloads gzipped both ways.

mod common;

use agentwire_core::{ConnId, Frame, Machine, Output};
use common::*;
use mcpw_codec::orchestrator::{Orchestrator, OrchestratorConfig, TaskSpec};
use serde_json::json;

#[test]
fn binary_peers_get_binary_replies() {
    let mut e = Env::new(OrchestratorConfig::default());
    let c = e.connect(1);
    let payload = json!({"method": "agent.register", "params": {"agent_id": "bin"}}).to_string();
    let mut frame = b"MCPW\x01\x00\x00\x00".to_vec();
    frame.extend_from_slice(&77u64.to_be_bytes());
    frame.extend_from_slice(&[0, 0, 0, 0]);
    frame.extend_from_slice(&u32::try_from(payload.len()).unwrap().to_be_bytes());
    frame.extend_from_slice(payload.as_bytes());
    e.o.handle_frame(c, Frame::Binary(&frame), e.now);
    let mut got = None;
    while let Some(out) = e.o.poll_output() {
        if let Output::Send { frame, .. } = out {
            got = Some(frame);
        }
    }
    let f = got.unwrap();
    assert!(f.as_text().is_none());
    let b = f.as_bytes();
    assert_eq!(&b[0..5], b"MCPW\x01");
    assert_eq!(b[5], 1, "a response");
    assert_eq!(
        u64::from_be_bytes(b[8..16].try_into().unwrap()),
        77,
        "same sequence id"
    );
    assert!(e.o.metrics().render().contains("protocol=\"binary\"} 1"));
}

/// Binary frames sent to `c`, as raw bytes.
fn binary_frames_to(o: &mut Orchestrator, c: ConnId) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    while let Some(out) = o.poll_output() {
        if let Output::Send { conn, frame } = out {
            if conn == c {
                assert!(
                    frame.as_text().is_none(),
                    "a binary peer gets binary frames"
                );
                v.push(frame.as_bytes().to_vec());
            }
        }
    }
    v
}

#[test]
fn binary_frames_carry_the_codecs_method_codes_and_large_payloads_travel_gzipped() {
    use mcpw_codec::{
        AgentRegister, Body, Capability, Codec, Flags, Header, Limits, Message, MessageType, Method,
    };
    let mut e = Env::new(OrchestratorConfig::default());
    let c = e.connect(1);
    let mut agent = Codec::default();
    // A register request whose params are well over 1024 bytes: the codec gzips it.
    let params = AgentRegister {
        agent_id: "big-bin".into(),
        agent_type: Some("tester".into()),
        capabilities: vec![Capability::new("code_review", 0.9)],
        model: None,
        resources: None,
        metadata: Some(json!({"notes": "compressible ".repeat(200)})),
    };
    let register = Message::new(MessageType::REQUEST, Body::AgentRegister(params)).with_seq(5);
    let mut frame = Vec::new();
    let sent = agent.encode(&register, &mut frame).unwrap();
    assert_eq!(sent.method, Method::AGENT_REGISTER);
    assert!(sent.flags.contains(Flags::COMPRESSED), "{sent:?}");
    assert!(sent.size < 1024, "compressed to {} bytes", sent.size);
    e.o.handle_frame(c, Frame::Binary(&frame), e.now);
    let replies = binary_frames_to(&mut e.o, c);
    assert_eq!(replies.len(), 1);
    let h = Header::parse_slice(&replies[0], &Limits::default()).unwrap();
    assert_eq!(
        (h.kind, h.method, h.seq),
        (MessageType::RESPONSE, Method::REGISTRATION_CONFIRMED, 5)
    );
    let Body::RegistrationConfirmed(ok) = agent.decode(&replies[0]).unwrap().body else {
        panic!("registration.confirmed decodes as the codec's type");
    };
    assert_eq!(ok.agent_id, "big-bin");
    assert_eq!(
        ok.accepted_capabilities,
        Some(vec!["code_review".to_owned()])
    );
    assert!(e.o.agent("big-bin").is_some());

    // The server's large task.assigned is gzipped too, and decodes to the typed params.
    let context = json!({"diff": "+ fn main() {}\n".repeat(300)});
    e.o.submit_task(
        TaskSpec::new("code_review")
            .with_id("big")
            .with_context(context.clone()),
        e.now,
    )
    .unwrap();
    let frames = binary_frames_to(&mut e.o, c);
    assert_eq!(frames.len(), 1);
    let h = Header::parse_slice(&frames[0], &Limits::default()).unwrap();
    assert_eq!(
        (h.kind, h.method),
        (MessageType::NOTIFICATION, Method::TASK_ASSIGNED)
    );
    assert!(h.flags.contains(Flags::COMPRESSED), "{h:?}");
    let Body::TaskAssigned(t) = agent.decode(&frames[0]).unwrap().body else {
        panic!("task.assigned decodes as the codec's type");
    };
    assert_eq!((t.task_id.as_str(), t.context), ("big", Some(context)));
    assert_eq!(t.task_type.as_deref(), Some("code_review"));
}

//! Requests: ids, timeouts, who may answer, failure when the agent goes.

mod common;

use std::time::Duration;

use agentwire_core::Id128;
use chopsticks_proto::{CommandError, ControllerConfig, ControllerEvent, Limits, ProtocolError};
use common::*;
use serde_json::{json, Value};

fn last_req(sim: &mut CtlSim, r: usize) -> Value {
    received(sim, r)
        .into_iter()
        .rev()
        .find(|m| m["type"] == "req")
        .expect("a req")
}

#[test]
fn request_sends_req_with_a_uuid_id_and_resp_completes_it() {
    let mut sim = sim(ControllerConfig::default());
    let r = registered(&mut sim, "a1", &["g1"]);
    sim.take_server_events();
    let id = sim
        .call_server(|c, now| c.request("a1", "play", json!({"guildId":"g1","query":"x"}), now))
        .expect("sent");
    sim.settle();
    let req = last_req(&mut sim, r);
    assert_eq!(req["op"], "play");
    assert_eq!(req["agentId"], "a1");
    assert_eq!(req["data"], json!({"guildId":"g1","query":"x"}));
    let id_text = req["id"].as_str().expect("string id");
    assert_eq!(Id128::parse(id_text), Some(id));
    assert_eq!(id_text.len(), 36);
    assert_eq!(&id_text[14..15], "4", "UUID v4 shape");
    send(
        &mut sim,
        r,
        &json!({"type":"resp","id":id_text,"ok":true,"data":{"action":"playing"}}),
    );
    let done = events(&mut sim, |e| match e {
        ControllerEvent::RequestCompleted {
            id: i,
            agent_id,
            op,
            resp,
        } => {
            let result = resp.result().map(str::to_owned).map_err(str::to_owned);
            Some((*i, agent_id.to_string(), op.clone(), result))
        }
        _ => None,
    });
    let expected: Result<String, String> = Ok(r#"{"action":"playing"}"#.into());
    assert_eq!(done, [(id, "a1".to_string(), "play".to_string(), expected)]);
    assert_eq!(sim.server().pending_requests(), 0);
}

#[test]
fn an_error_resp_completes_with_the_error_text() {
    let mut sim = sim(ControllerConfig::default());
    let r = registered(&mut sim, "a1", &["g1"]);
    sim.call_server(|c, now| c.request("a1", "skip", json!({}), now))
        .expect("sent");
    sim.settle();
    let req = last_req(&mut sim, r);
    send(
        &mut sim,
        r,
        &json!({"type":"resp","id":req["id"],"ok":false,"error":"no-session"}),
    );
    let errs = events(&mut sim, |e| match e {
        ControllerEvent::RequestCompleted { resp, .. } => resp.result().err().map(str::to_owned),
        _ => None,
    });
    assert_eq!(errs, ["no-session"]);
}

#[test]
fn a_request_times_out_after_30s_by_default() {
    let mut sim = sim(ControllerConfig::default());
    let r = registered(&mut sim, "a1", &["g1"]);
    let id = sim
        .call_server(|c, now| c.request("a1", "status", json!(null), now))
        .expect("sent");
    sim.run_for(Duration::from_millis(29_999));
    // heartbeat so the agent is not stale-dropped meanwhile
    assert_eq!(sim.server().pending_requests(), 1);
    sim.run_for(Duration::from_millis(1));
    let timed_out = events(&mut sim, |e| match e {
        ControllerEvent::RequestTimedOut { id, .. } => Some(*id),
        _ => None,
    });
    assert_eq!(timed_out, [id]);
    // A late resp is dropped silently.
    let req_id = id.to_string();
    send(&mut sim, r, &json!({"type":"resp","id":req_id,"ok":true}));
    assert!(events(&mut sim, |e| matches!(
        e,
        ControllerEvent::RequestCompleted { .. }
    )
    .then_some(()))
    .is_empty());
    assert!(received(&mut sim, r).iter().all(|m| m["type"] == "req"));
}

#[test]
fn the_request_timeout_is_configurable() {
    let mut sim = sim(ControllerConfig::default().with_request_timeout(secs(5)));
    registered(&mut sim, "a1", &["g1"]);
    sim.call_server(|c, now| c.request("a1", "status", json!(null), now))
        .expect("sent");
    sim.run_for(secs(5));
    assert_eq!(
        events(&mut sim, |e| matches!(
            e,
            ControllerEvent::RequestTimedOut { .. }
        )
        .then_some(()))
        .len(),
        1
    );
}

#[test]
fn a_resp_from_another_agent_does_not_resolve_the_request() {
    let mut sim = sim(ControllerConfig::default());
    let a = registered(&mut sim, "a1", &["g1"]);
    let b = registered(&mut sim, "b1", &["g1"]);
    sim.call_server(|c, now| c.request("a1", "status", json!(null), now))
        .expect("sent");
    sim.settle();
    let req = last_req(&mut sim, a);
    sim.take_server_events();
    send(
        &mut sim,
        b,
        &json!({"type":"resp","id":req["id"],"ok":true,"data":"forged"}),
    );
    let ev = sim.take_server_events();
    assert!(!ev
        .iter()
        .any(|e| matches!(e, ControllerEvent::RequestCompleted { .. })));
    assert!(ev.iter().any(|e| matches!(
        e,
        ControllerEvent::ProtocolViolation {
            error: ProtocolError::WrongResponder { .. },
            ..
        }
    )));
    assert_eq!(
        sim.server().pending_requests(),
        1,
        "still waiting for the right agent"
    );
    send(
        &mut sim,
        a,
        &json!({"type":"resp","id":req["id"],"ok":true,"data":"real"}),
    );
    let data = events(&mut sim, |e| match e {
        ControllerEvent::RequestCompleted { resp, .. } => resp.result().ok().map(str::to_owned),
        _ => None,
    });
    assert_eq!(data, [r#""real""#]);
}

#[test]
fn unknown_resp_ids_are_dropped_silently() {
    let mut sim = sim(ControllerConfig::default());
    let r = registered(&mut sim, "a1", &["g1"]);
    sim.take_server_events();
    for id in ["a1b2c3d4-e5f6-7890-abcd-ef1234567890", "not-a-uuid", ""] {
        send(&mut sim, r, &json!({"type":"resp","id":id,"ok":true}));
    }
    assert!(received(&mut sim, r).is_empty());
    assert!(sim.take_server_events().is_empty());
    assert!(sim.raw_is_open(r));
}

#[test]
fn pending_requests_fail_at_once_when_their_agent_goes() {
    let mut sim = sim(ControllerConfig::default());
    let r = registered(&mut sim, "a1", &["g1"]);
    let ids: Vec<Id128> = (0..3)
        .map(|_| {
            sim.call_server(|c, now| c.request("a1", "queue", json!(null), now))
                .expect("sent")
        })
        .collect();
    sim.take_server_events();
    sim.raw_disconnect(r);
    let failed = events(&mut sim, |e| match e {
        ControllerEvent::RequestFailed { id, error, .. } => Some((*id, *error)),
        _ => None,
    });
    assert_eq!(
        failed,
        ids.iter()
            .map(|i| (*i, "agent-offline"))
            .collect::<Vec<_>>()
    );
    assert_eq!(sim.server().pending_requests(), 0);
    sim.run_for(secs(60));
    assert!(events(&mut sim, |e| matches!(
        e,
        ControllerEvent::RequestTimedOut { .. }
    )
    .then_some(()))
    .is_empty());
}

#[test]
fn a_request_to_a_missing_agent_is_refused_at_once() {
    let mut sim = sim(ControllerConfig::default());
    let err = sim.call_server(|c, now| c.request("ghost", "play", json!(null), now));
    assert_eq!(err, Err(CommandError::AgentOffline));
    assert_eq!(CommandError::AgentOffline.as_str(), "agent-offline");
}

#[test]
fn pending_requests_per_agent_are_bounded() {
    let mut limits = Limits::default();
    limits.max_pending_per_agent = 2;
    let mut sim = sim(ControllerConfig::default().with_limits(limits));
    registered(&mut sim, "a1", &["g1"]);
    for _ in 0..2 {
        sim.call_server(|c, now| c.request("a1", "status", json!(null), now))
            .expect("sent");
    }
    let third = sim.call_server(|c, now| c.request("a1", "status", json!(null), now));
    assert_eq!(third, Err(CommandError::TooManyPending));
    sim.run_for(secs(31));
    assert!(
        sim.call_server(|c, now| c.request("a1", "status", json!(null), now))
            .is_ok(),
        "freed by timeouts"
    );
}

#[test]
fn request_ids_are_deterministic_with_a_sequential_generator() {
    let ids = |_: ()| {
        let mut sim = sim(ControllerConfig::default());
        registered(&mut sim, "a1", &["g1"]);
        (0..3)
            .map(|_| {
                sim.call_server(|c, now| c.request("a1", "x", json!(null), now))
                    .expect("sent")
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(()), ids(()));
}

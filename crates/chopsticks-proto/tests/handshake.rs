//! Version negotiation, runner secret, hello deadline and connection caps.

mod common;

use chopsticks_proto::{ControllerConfig, ControllerEvent, Limits, ProtocolError};
use common::*;
use serde_json::json;

#[test]
fn hello_registers_the_agent_with_every_field() {
    let mut sim = sim(ControllerConfig::default());
    let r = raw(&mut sim);
    let mut h = hello("a1", "1.0.0");
    h["runnerId"] = json!("runner-7");
    send(&mut sim, r, &h);
    let a = sim.server().agent("a1").expect("registered").clone();
    assert_eq!(a.bot_user_id.as_deref(), Some("bot-a1"));
    assert_eq!(a.tag.as_deref(), Some("a1#0001"));
    assert!(a.ready);
    assert_eq!(a.guild_ids.iter().collect::<Vec<_>>(), ["g1"]);
    assert_eq!(a.pool_id, "pool_a");
    assert_eq!(a.protocol_version, "1.0.0");
    assert_eq!(a.runner_id.as_deref(), Some("runner-7"));
    assert_eq!(sim.server().last_seen("a1"), Some(sim.now()));
    assert!(received(&mut sim, r).is_empty(), "success sends nothing");
    let regs = events(&mut sim, |e| match e {
        ControllerEvent::AgentRegistered {
            agent_id, replaced, ..
        } => Some((agent_id.to_string(), *replaced)),
        _ => None,
    });
    assert_eq!(regs, [("a1".to_string(), None)]);
}

#[test]
fn version_aliases_are_accepted() {
    for key in ["protocol_version", "protocolversion", "version"] {
        let mut sim = sim(ControllerConfig::default());
        let r = raw(&mut sim);
        let mut h = hello("a1", "1.0.0");
        let v = h
            .as_object_mut()
            .expect("object")
            .remove("protocolVersion")
            .expect("v");
        h[key] = v;
        send(&mut sim, r, &h);
        assert!(sim.server().agent("a1").is_some(), "alias {key}");
    }
}

#[test]
fn missing_version_gets_the_upgrade_error_and_close_1008() {
    let mut sim = sim(ControllerConfig::default());
    let r = raw(&mut sim);
    let mut h = hello("a1", "1.0.0");
    h.as_object_mut().expect("object").remove("protocolVersion");
    send(&mut sim, r, &h);
    assert_eq!(
        received(&mut sim, r),
        [json!({"type":"error","error":"Protocol version required. Please upgrade agent."})]
    );
    assert_eq!(
        closed(&sim, r),
        Some((1008, "Missing protocol version".into()))
    );
    assert!(sim.server().agent("a1").is_none());
}

#[test]
fn incompatible_version_gets_the_exact_error_and_close_1008() {
    let mut sim = sim(ControllerConfig::default());
    let r = raw(&mut sim);
    send(&mut sim, r, &hello("a1", "0.9.0"));
    assert_eq!(
        received(&mut sim, r),
        [
            json!({"type":"error","error":"Incompatible protocol version 0.9.0. Controller expects 1.0.0."})
        ]
    );
    assert_eq!(
        closed(&sim, r),
        Some((1008, "Incompatible protocol version".into()))
    );
    assert!(sim.server().agent("a1").is_none());
}

#[test]
fn supported_versions_are_configurable() {
    let cfg = ControllerConfig::default().with_supported_versions(["1.0.0", "0.9.0"]);
    let mut sim = sim(cfg);
    let r = raw(&mut sim);
    send(&mut sim, r, &hello("old", "0.9.0"));
    assert_eq!(
        sim.server()
            .agent("old")
            .map(|a| a.protocol_version.as_str()),
        Some("0.9.0")
    );
    let r2 = raw(&mut sim);
    send(&mut sim, r2, &hello("new", "2.0.0"));
    assert_eq!(closed(&sim, r2).map(|c| c.0), Some(1008));
}

#[test]
fn the_version_error_names_the_versions_this_controller_accepts() {
    let cases: [(&[&str], &str, &str); 3] = [
        (&["2.0.0"], "1.0.0", "Controller expects 2.0.0."),
        (
            &["1.0.0", "2.0.0"],
            "0.9.0",
            "Controller expects 1.0.0 or 2.0.0.",
        ),
        (
            &["2.0.0", "0.9.0", "1.0.0"],
            "3.0.0",
            "Controller expects 0.9.0, 1.0.0 or 2.0.0.",
        ),
    ];
    for (supported, sent, expects) in cases {
        let cfg = ControllerConfig::default().with_supported_versions(supported.iter().copied());
        let mut sim = sim(cfg);
        let r = raw(&mut sim);
        send(&mut sim, r, &hello("a1", sent));
        assert_eq!(
            received(&mut sim, r),
            [
                json!({"type":"error","error":format!("Incompatible protocol version {sent}. {expects}")})
            ],
            "{supported:?}"
        );
        assert_eq!(
            closed(&sim, r),
            Some((1008, "Incompatible protocol version".into()))
        );
    }
}

#[test]
fn wrong_or_missing_runner_secret_is_unauthorized() {
    for secret in [None, Some("nope"), Some("")] {
        let mut sim = sim(ControllerConfig::default().with_runner_secret("s3cret"));
        let r = raw(&mut sim);
        let mut h = hello("a1", "1.0.0");
        if let Some(s) = secret {
            h["runnerSecret"] = json!(s);
        }
        send(&mut sim, r, &h);
        assert_eq!(
            received(&mut sim, r),
            [json!({"type":"error","error":"Unauthorized runner secret."})],
            "{secret:?}"
        );
        assert_eq!(closed(&sim, r), Some((1008, "Unauthorized".into())));
        assert!(sim.server().agent("a1").is_none());
    }
}

#[test]
fn right_runner_secret_registers() {
    let mut sim = sim(ControllerConfig::default().with_runner_secret("s3cret"));
    let r = raw(&mut sim);
    let mut h = hello("a1", "1.0.0");
    h["runnerSecret"] = json!("s3cret");
    send(&mut sim, r, &h);
    assert!(sim.server().agent("a1").is_some());
}

#[test]
fn a_rotated_secret_is_accepted_and_the_retired_one_refused_after_the_overlap() {
    let overlap = std::time::Duration::from_secs(10);
    let mut sim = sim(ControllerConfig::default().with_runner_secret("old"));
    let with = |id: &str, secret: &str| {
        let mut h = hello(id, "1.0.0");
        h["runnerSecret"] = json!(secret);
        h
    };
    let early = raw(&mut sim);
    send(&mut sim, early, &with("a1", "old"));
    assert!(sim.server().agent("a1").is_some());
    sim.call_server(|c, now| c.rotate_runner_secrets(["new"], overlap, now));
    // During the overlap both are accepted.
    let (during_old, during_new) = (raw(&mut sim), raw(&mut sim));
    send(&mut sim, during_old, &with("a2", "old"));
    send(&mut sim, during_new, &with("a3", "new"));
    assert!(sim.server().agent("a2").is_some() && sim.server().agent("a3").is_some());
    sim.run_for(overlap);
    // After it, the retired secret is refused, for a new agent and at the heartbeat
    // `hello` of one that registered with it; the new secret keeps working.
    let late = raw(&mut sim);
    send(&mut sim, late, &with("a4", "old"));
    assert_eq!(closed(&sim, late), Some((1008, "Unauthorized".into())));
    send(&mut sim, early, &with("a1", "old"));
    assert_eq!(closed(&sim, early), Some((1008, "Unauthorized".into())));
    send(&mut sim, during_new, &with("a3", "new"));
    assert!(sim.raw_is_open(during_new));
    assert!(sim.server().agent("a3").is_some());
    assert_eq!(
        sim.server().runner_secrets().current().collect::<Vec<_>>(),
        ["new"]
    );
}

#[test]
fn an_empty_configured_secret_never_matches() {
    let mut sim = sim(ControllerConfig::default().with_runner_secret(""));
    let r = raw(&mut sim);
    let mut h = hello("a1", "1.0.0");
    h["runnerSecret"] = json!("");
    send(&mut sim, r, &h);
    assert_eq!(closed(&sim, r), Some((1008, "Unauthorized".into())));
}

#[test]
fn version_is_checked_before_the_secret() {
    let mut sim = sim(ControllerConfig::default().with_runner_secret("s3cret"));
    let r = raw(&mut sim);
    send(&mut sim, r, &hello("a1", "0.9.0"));
    assert_eq!(
        closed(&sim, r),
        Some((1008, "Incompatible protocol version".into()))
    );
}

#[test]
fn hello_without_agent_id_is_ignored_without_reply() {
    let mut sim = sim(ControllerConfig::default());
    let r = raw(&mut sim);
    let mut h = hello("a1", "1.0.0");
    h.as_object_mut().expect("object").remove("agentId");
    send(&mut sim, r, &h);
    assert!(received(&mut sim, r).is_empty());
    assert!(sim.raw_is_open(r));
    assert_eq!(sim.server().agents().count(), 0);
    let v = events(&mut sim, |e| match e {
        ControllerEvent::ProtocolViolation {
            error: ProtocolError::MissingAgentId,
            ..
        } => Some(()),
        _ => None,
    });
    assert_eq!(v.len(), 1);
}

#[test]
fn a_hello_without_agent_id_is_ignored_before_the_version_is_checked() {
    // The real controller's order: no agentId, no checks at all (not even the version).
    let no_version = {
        let mut h = hello("a1", "1.0.0");
        h.as_object_mut().expect("object").remove("protocolVersion");
        h
    };
    for mut h in [hello("a1", "0.9.0"), no_version, hello("a1", "1.0.0")] {
        let mut sim = sim(ControllerConfig::default().with_runner_secret("s3cret"));
        let r = raw(&mut sim);
        h.as_object_mut().expect("object").remove("agentId");
        send(&mut sim, r, &h);
        assert!(received(&mut sim, r).is_empty(), "no reply to {h}");
        assert!(sim.raw_is_open(r), "not closed for {h}");
        let v = events(&mut sim, |e| match e {
            ControllerEvent::ProtocolViolation { error, .. } => Some(error.to_string()),
            _ => None,
        });
        assert_eq!(v, [ProtocolError::MissingAgentId.to_string()], "{h}");
        // The agent may still say hello properly.
        let mut ok = hello("a1", "1.0.0");
        ok["runnerSecret"] = json!("s3cret");
        send(&mut sim, r, &ok);
        assert!(sim.server().agent("a1").is_some());
    }
}

#[test]
fn no_hello_within_8s_closes_with_hello_required() {
    let mut sim = sim(ControllerConfig::default());
    let r = raw(&mut sim);
    sim.run_for(std::time::Duration::from_millis(7_999));
    assert!(sim.raw_is_open(r));
    sim.run_for(std::time::Duration::from_millis(1));
    sim.settle();
    assert_eq!(closed(&sim, r), Some((1008, "hello-required".into())));
    assert!(
        received(&mut sim, r).is_empty(),
        "no error message, just the close"
    );
}

#[test]
fn a_valid_hello_cancels_the_hello_deadline() {
    let mut sim = sim(ControllerConfig::default());
    let r = registered(&mut sim, "a1", &["g1"]);
    sim.run_for(secs(20));
    assert!(sim.raw_is_open(r));
}

#[test]
fn an_ignored_hello_does_not_cancel_the_deadline() {
    let mut sim = sim(ControllerConfig::default());
    let r = raw(&mut sim);
    let mut h = hello("a1", "1.0.0");
    h.as_object_mut().expect("object").remove("agentId");
    send(&mut sim, r, &h);
    sim.run_for(secs(9));
    assert_eq!(closed(&sim, r), Some((1008, "hello-required".into())));
}

#[test]
fn every_hello_rechecks_the_version_and_drops_the_agent() {
    let mut sim = sim(ControllerConfig::default());
    let r = registered(&mut sim, "a1", &["g1"]);
    sim.take_server_events();
    send(&mut sim, r, &hello("a1", "0.9.0"));
    assert_eq!(closed(&sim, r).map(|c| c.0), Some(1008));
    assert!(sim.server().agent("a1").is_none(), "dropped at once");
}

#[test]
fn the_21st_connection_from_one_ip_is_closed_too_many_connections() {
    let mut sim = sim(ControllerConfig::default());
    let peers: Vec<usize> = (0..21)
        .map(|i| sim.connect_raw(peer([10, 0, 0, 1], 1000 + i)))
        .collect();
    sim.settle();
    for r in &peers[..20] {
        assert!(sim.raw_is_open(*r));
    }
    assert_eq!(
        closed(&sim, peers[20]),
        Some((1008, "too-many-connections".into()))
    );
    // Another address is still welcome, and a freed slot can be reused.
    let other = sim.connect_raw(peer([10, 0, 0, 2], 1));
    assert!(sim.raw_is_open(other));
    sim.raw_disconnect(peers[0]);
    let again = sim.connect_raw(peer([10, 0, 0, 1], 5000));
    assert!(sim.raw_is_open(again));
}

#[test]
fn the_201st_connection_is_closed_server_full() {
    let mut sim = sim(ControllerConfig::default());
    let peers: Vec<usize> = (0..201u32)
        .map(|i| sim.connect_raw(peer([10, 1, (i / 200) as u8, (i % 200) as u8], 1)))
        .collect();
    sim.settle();
    assert!(sim.raw_is_open(peers[199]));
    assert_eq!(closed(&sim, peers[200]), Some((1008, "server-full".into())));
    assert_eq!(sim.server().connection_count(), 200);
}

#[test]
fn connection_caps_are_configurable() {
    let mut limits = Limits::default();
    limits.max_connections_per_ip = 1;
    let mut sim = sim(ControllerConfig::default().with_limits(limits));
    let a = sim.connect_raw(peer([10, 0, 0, 1], 1));
    let b = sim.connect_raw(peer([10, 0, 0, 1], 2));
    sim.settle();
    assert!(sim.raw_is_open(a));
    assert_eq!(
        closed(&sim, b).map(|c| c.1),
        Some("too-many-connections".into())
    );
}

/// One hello with `key` set to `value`, from a fresh raw peer: what it received and how it
/// was closed, checked at once (no time passes).
fn answer_to(
    key: &str,
    value: serde_json::Value,
) -> (Vec<serde_json::Value>, Option<(u16, String)>) {
    let mut sim = sim(ControllerConfig::default());
    let r = raw(&mut sim);
    let mut h = hello("a1", "1.0.0");
    h[key] = value;
    send(&mut sim, r, &h);
    assert!(sim.server().agent("a1").is_none(), "{key} not registered");
    (received(&mut sim, r), closed(&sim, r))
}

#[test]
fn a_version_that_is_not_a_string_is_an_incompatible_version_at_once() {
    for key in [
        "protocolVersion",
        "protocol_version",
        "protocolversion",
        "version",
    ] {
        for (value, shown) in [
            (json!(1), "1"),
            (json!(1.5), "1.5"),
            (json!(true), "true"),
            (json!(["1.0.0"]), r#"["1.0.0"]"#),
            (json!({"major": 1}), r#"{"major":1}"#),
        ] {
            let mut sim = sim(ControllerConfig::default());
            let r = raw(&mut sim);
            let mut h = hello("a1", "1.0.0");
            h.as_object_mut().expect("object").remove("protocolVersion");
            h[key] = value.clone();
            send(&mut sim, r, &h);
            let text = format!("Incompatible protocol version {shown}. Controller expects 1.0.0.");
            assert_eq!(
                received(&mut sim, r),
                [json!({"type":"error","error":text})],
                "{key}: {value}"
            );
            assert_eq!(
                closed(&sim, r),
                Some((1008, "Incompatible protocol version".into())),
                "{key}: {value}"
            );
            let v = events(&mut sim, |e| match e {
                ControllerEvent::ProtocolViolation {
                    error: ProtocolError::IncompatibleVersion(v),
                    ..
                } => Some(v.clone()),
                _ => None,
            });
            assert_eq!(v, [shown.to_owned()]);
        }
    }
    // The first version key present decides, wrong type or not (`null` counts as absent).
    let mut sim = sim(ControllerConfig::default());
    let r = raw(&mut sim);
    let mut h = hello("a1", "1.0.0");
    h["protocolVersion"] = json!(null);
    h["version"] = json!("1.0.0");
    send(&mut sim, r, &h);
    assert!(sim.server().agent("a1").is_some(), "null version skipped");
    let (_, close) = {
        let r = raw(&mut sim);
        let mut h = hello("a2", "1.0.0");
        h["protocolVersion"] = json!(1);
        h["version"] = json!("1.0.0");
        send(&mut sim, r, &h);
        (received(&mut sim, r), closed(&sim, r))
    };
    assert_eq!(close, Some((1008, "Incompatible protocol version".into())));
}

#[test]
fn a_hello_with_a_wrongly_typed_field_gets_invalid_hello_and_close_1008() {
    for (key, value, expected) in [
        ("agentId", json!(7), "a string"),
        ("agentId", json!(["a1"]), "a string"),
        ("botUserId", json!(42), "a string or null"),
        ("tag", json!({"name": "x"}), "a string or null"),
        ("ready", json!("yes"), "a boolean"),
        ("ready", json!(1), "a boolean"),
        ("guildIds", json!("g1"), "an array of strings"),
        ("guildIds", json!(["g1", 2]), "an array of strings"),
        ("poolId", json!(5), "a string"),
        ("runnerSecret", json!(false), "a string"),
    ] {
        let (got, close) = answer_to(key, value.clone());
        let text = format!("Invalid hello: {key} must be {expected}.");
        assert_eq!(
            got,
            [json!({"type":"error","error":text})],
            "{key}: {value}"
        );
        assert_eq!(
            close,
            Some((1008, "Invalid hello".into())),
            "{key}: {value}"
        );
    }
}

#[test]
fn a_wrongly_typed_hello_is_rejected_at_once_not_by_the_hello_deadline() {
    let mut sim = sim(ControllerConfig::default());
    let r = raw(&mut sim);
    let mut h = hello("a1", "1.0.0");
    h["ready"] = json!("true");
    send(&mut sim, r, &h);
    // Closed at the instant it arrived, with the hello deadline (8 s) far away.
    assert_eq!(closed(&sim, r), Some((1008, "Invalid hello".into())));
    let v = events(&mut sim, |e| match e {
        ControllerEvent::ProtocolViolation {
            error: ProtocolError::InvalidHello { field, expected },
            ..
        } => Some((*field, *expected)),
        _ => None,
    });
    assert_eq!(v, [("ready", "a boolean")]);
}

#[test]
fn wrongly_typed_hellos_keep_the_check_order() {
    // No agentId: ignored, whatever else is wrong (the real controller checks nothing else).
    let mut s = sim(ControllerConfig::default());
    let r = raw(&mut s);
    let mut h = hello("a1", "1.0.0");
    h.as_object_mut().expect("object").remove("agentId");
    h["ready"] = json!("yes");
    h["protocolVersion"] = json!(1);
    send(&mut s, r, &h);
    assert!(received(&mut s, r).is_empty());
    assert!(s.raw_is_open(r));
    // A version problem is reported before another field's type.
    for (version, text, reason) in [
        (
            json!(null),
            "Protocol version required. Please upgrade agent.",
            "Missing protocol version",
        ),
        (
            json!("0.9.0"),
            "Incompatible protocol version 0.9.0. Controller expects 1.0.0.",
            "Incompatible protocol version",
        ),
    ] {
        let mut sim = sim(ControllerConfig::default());
        let r = raw(&mut sim);
        let mut h = hello("a1", "1.0.0");
        h["protocolVersion"] = version;
        h["guildIds"] = json!(3);
        send(&mut sim, r, &h);
        assert_eq!(
            received(&mut sim, r),
            [json!({"type":"error","error":text})]
        );
        assert_eq!(closed(&sim, r), Some((1008, reason.into())));
    }
    // The first wrong field in the spec's order is the one named; the secret comes last.
    let mut sim = sim(ControllerConfig::default().with_runner_secret("s3cret"));
    let r = raw(&mut sim);
    let mut h = hello("a1", "1.0.0");
    h["poolId"] = json!(1);
    h["ready"] = json!(1);
    send(&mut sim, r, &h);
    assert_eq!(
        received(&mut sim, r),
        [json!({"type":"error","error":"Invalid hello: ready must be a boolean."})]
    );
}

#[test]
fn a_registered_agent_whose_heartbeat_hello_is_wrongly_typed_is_dropped() {
    let mut sim = sim(ControllerConfig::default());
    let r = registered(&mut sim, "a1", &["g1"]);
    let mut h = hello("a1", "1.0.0");
    h["guildIds"] = json!({"g1": true});
    send(&mut sim, r, &h);
    assert_eq!(closed(&sim, r), Some((1008, "Invalid hello".into())));
    assert!(sim.server().agent("a1").is_none(), "dropped at once");
}

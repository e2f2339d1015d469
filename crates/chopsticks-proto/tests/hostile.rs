//! Hostile input through the public API: the spec's reply, no panic, other agents unaffected.

mod common;

use agentwire_core::FrameBuf;
use chopsticks_proto::{ControllerConfig, ControllerEvent, Limits};
use common::*;
use serde_json::{json, Value};

/// Registers a bystander agent, runs `attack` with a fresh raw peer, then checks that the
/// bystander still completes a request/response cycle.
fn with_bystander(cfg: ControllerConfig, attack: impl FnOnce(&mut CtlSim, usize)) {
    let mut sim = sim(cfg);
    let good = registered(&mut sim, "good", &["g1"]);
    let bad = raw(&mut sim);
    attack(&mut sim, bad);
    sim.take_server_events();
    received(&mut sim, good);
    let id = sim
        .call_server(|c, now| c.request("good", "status", json!(null), now))
        .expect("good is live");
    sim.settle();
    let req = received(&mut sim, good)
        .into_iter()
        .find(|m| m["type"] == "req")
        .expect("req reached good");
    send(
        &mut sim,
        good,
        &json!({"type":"resp","id":req["id"],"ok":true,"data":{"fine":true}}),
    );
    let done = events(&mut sim, |e| match e {
        ControllerEvent::RequestCompleted { id, .. } => Some(*id),
        _ => None,
    });
    assert_eq!(done, [id], "the bystander is unaffected");
}

fn errors(sim: &mut CtlSim, r: usize) -> Vec<Value> {
    received(sim, r)
}

#[test]
fn truncated_json_gets_invalid_json_and_stays_open() {
    with_bystander(ControllerConfig::default(), |sim, r| {
        let full = hello("bad", "1.0.0").to_string();
        for cut in [1, full.len() / 2, full.len() - 1] {
            send_text(sim, r, &full[..cut]);
            assert_eq!(
                errors(sim, r),
                [json!({"type":"error","error":"Invalid JSON"})],
                "cut {cut}"
            );
        }
        assert!(sim.raw_is_open(r));
    });
}

#[test]
fn oversize_frames_at_the_limit_and_one_byte_over() {
    with_bystander(ControllerConfig::default(), |sim, r| {
        let limit = 64 * 1024;
        let mut exact = hello("bad", "1.0.0");
        let base = exact.to_string().len() + r#","pad":"""#.len();
        exact["pad"] = json!("p".repeat(limit - base));
        let exact = exact.to_string();
        assert_eq!(exact.len(), limit);
        send_text(sim, r, &exact);
        assert!(errors(sim, r).is_empty(), "exactly the limit registers");
        assert!(sim.server().agent("bad").is_some());
        let over = format!(" {exact}");
        send_text(sim, r, &over);
        assert_eq!(
            errors(sim, r),
            [json!({"type":"error","error":"Frame too large"})]
        );
        // A huge frame costs no parse: still just the one error.
        send_text(sim, r, &"x".repeat(10 * limit));
        assert_eq!(
            errors(sim, r),
            [json!({"type":"error","error":"Frame too large"})]
        );
        assert!(sim.raw_is_open(r));
    });
}

#[test]
fn non_json_text_gets_invalid_json() {
    with_bystander(ControllerConfig::default(), |sim, r| {
        for junk in [
            "hello",
            "",
            " ",
            "{}}",
            "nul",
            "\u{0}\u{1}",
            "{\"type\":\"hello\",}",
        ] {
            send_text(sim, r, junk);
            assert_eq!(
                errors(sim, r),
                [json!({"type":"error","error":"Invalid JSON"})],
                "{junk:?}"
            );
        }
        assert!(sim.raw_is_open(r));
    });
}

#[test]
fn binary_frames_carry_json_and_binary_garbage_is_invalid_json() {
    with_bystander(ControllerConfig::default(), |sim, r| {
        sim.raw_send(
            r,
            FrameBuf::binary(hello("bin", "1.0.0").to_string().into_bytes()),
        );
        sim.settle();
        assert!(
            sim.server().agent("bin").is_some(),
            "JSON in a binary frame is accepted"
        );
        sim.raw_send(
            r,
            FrameBuf::binary(vec![0x4d, 0x43, 0x50, 0x57, 0, 1, 2, 3]),
        );
        sim.settle();
        assert_eq!(
            errors(sim, r),
            [json!({"type":"error","error":"Invalid JSON"})]
        );
    });
}

#[test]
fn non_utf8_bytes_get_invalid_json() {
    with_bystander(ControllerConfig::default(), |sim, r| {
        let mut body = br#"{"type":"hello","agentId":""#.to_vec();
        body.extend_from_slice(&[0xff, 0xfe, 0xc3]);
        body.extend_from_slice(br#""}"#);
        sim.raw_send(r, FrameBuf::binary(body));
        sim.settle();
        assert_eq!(
            errors(sim, r),
            [json!({"type":"error","error":"Invalid JSON"})]
        );
        assert!(sim.raw_is_open(r));
    });
}

#[test]
fn wrong_typed_fields_are_ignored_except_in_hello() {
    with_bystander(ControllerConfig::default(), |sim, r| {
        send(
            sim,
            r,
            &json!({"type":"hello","agentId":"bad","protocolVersion":"1.0.0"}),
        );
        for v in [
            json!({"type":"resp","id":7,"ok":true}),
            json!({"type":"event","event":"add","ok":"true"}),
            json!({"type":"event","event":"teleport"}),
        ] {
            send(sim, r, &v);
            assert!(errors(sim, r).is_empty(), "{v}");
        }
        assert!(sim.raw_is_open(r));
        assert!(sim.server().agent("bad").is_some());
    });
    // A wrong-typed hello field is answered and closed; the bystander is unaffected.
    for v in [
        json!({"type":"hello","protocolVersion":1,"agentId":"bad"}),
        json!({"type":"hello","protocolVersion":"1.0.0","agentId":"bad","ready":"yes"}),
        json!({"type":"hello","protocolVersion":"1.0.0","agentId":["bad"]}),
    ] {
        with_bystander(ControllerConfig::default(), |sim, r| {
            send(sim, r, &v);
            assert_eq!(errors(sim, r).len(), 1, "{v}");
            assert_eq!(closed(sim, r).map(|c| c.0), Some(1008), "{v}");
            assert!(sim.server().agent("bad").is_none());
        });
    }
}

#[test]
fn unknown_types_close_before_hello_and_are_ignored_after() {
    with_bystander(ControllerConfig::default(), |sim, r| {
        send(sim, r, &json!({"type":"req","id":"x","op":"play"}));
        assert_eq!(
            errors(sim, r),
            [json!({"type":"error","error":"Unknown message type"})]
        );
        assert_eq!(closed(sim, r), Some((1008, "protocol-error".into())));
    });
    with_bystander(ControllerConfig::default(), |sim, r| {
        send(sim, r, &hello("bad", "1.0.0"));
        for v in [
            json!({"type":"req"}),
            json!({"type":null}),
            json!({"no":"type"}),
            json!([1, 2]),
            json!(42),
        ] {
            send(sim, r, &v);
            assert!(errors(sim, r).is_empty(), "{v}");
        }
        assert!(sim.raw_is_open(r));
    });
}

#[test]
fn a_nesting_bomb_is_rejected_without_harm() {
    // 100,000 deep is over the 64 KiB frame limit: refused before parsing.
    with_bystander(ControllerConfig::default(), |sim, r| {
        send_text(sim, r, &"[".repeat(100_000));
        assert_eq!(
            errors(sim, r),
            [json!({"type":"error","error":"Frame too large"})]
        );
    });
    // With a 1 MiB limit the parser sees it, and its depth limit ends it.
    let mut limits = Limits::default();
    limits.max_frame_bytes = 1 << 20;
    with_bystander(ControllerConfig::default().with_limits(limits), |sim, r| {
        for bomb in [
            "[".repeat(100_000),
            format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000)),
            format!("{{\"type\":\"hello\",\"x\":{}", "{\"a\":".repeat(100_000)),
            format!(
                "{{\"type\":\"hello\",\"x\":{}1{}}}",
                "[".repeat(100_000),
                "]".repeat(100_000)
            ),
        ] {
            send_text(sim, r, &bomb);
            let e = errors(sim, r);
            assert!(e.len() <= 1, "at most one reply");
            if sim.raw_is_open(r) {
                assert!(e.iter().all(|m| m["type"] == "error"));
            }
        }
    });
}

#[test]
fn a_flood_is_rate_limited_and_does_not_starve_others() {
    with_bystander(ControllerConfig::default(), |sim, r| {
        send(sim, r, &hello("flooder", "1.0.0"));
        for i in 0..10_000 {
            sim.raw_send(
                r,
                FrameBuf::text(format!(r#"{{"type":"guilds","guildIds":["f{i}"]}}"#)),
            );
        }
        sim.settle();
        let a = sim.server().agent("flooder").expect("still registered");
        assert_eq!(a.guild_ids.len(), 1);
        assert!(
            a.guild_ids.contains("f98"),
            "99 guild updates fit the 100/s window after the hello"
        );
        assert!(errors(sim, r).is_empty(), "excess dropped silently");
    });
}

#[test]
fn garbage_from_many_connections_never_panics() {
    let mut sim = sim(ControllerConfig::default());
    let good = registered(&mut sim, "good", &["g1"]);
    let samples: [&[u8]; 8] = [
        b"",
        b"\x00",
        b"{",
        b"}",
        br#"{"type":""}"#,
        br#"{"type":"hello","guildIds":[null]}"#,
        br#"{"type":"resp","id":"00000000-0000-4000-8000-000000000001","ok":true}"#,
        &[0xc0, 0x80],
    ];
    for (i, s) in samples.iter().cycle().take(400).enumerate() {
        let r = sim.connect_raw(peer([10, 2, (i / 20) as u8, (i % 20) as u8], 1));
        sim.raw_send(r, FrameBuf::binary(s.to_vec()));
        if i % 3 == 0 {
            sim.raw_disconnect(r);
        }
    }
    sim.run_for(secs(10));
    assert!(sim.server().agent("good").is_none() || sim.raw_is_open(good));
    assert!(sim.server().connection_count() <= 200);
}

//! End to end over 127.0.0.1: the reference controller and mock agents (the examples' library
//! code) with real sockets, a raw tokio-tungstenite peer speaking 0.9.0, a slow reader, wss,
//! and the `chopsticks_agent` program stopped by SIGTERM.

#[path = "support/example_bin.rs"]
#[allow(dead_code)]
// `interrupt` is for programs stopped by Ctrl-C (this file sends SIGTERM), `lines_of` for reading their output
mod example_bin;

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use agentwire::chopsticks::{
    Agent, AgentConfig, AgentEvent, AgentId, Controller, ControllerConfig, ControllerEvent,
    Limits as CtlLimits, RawJson,
};
use agentwire::core::{CloseCode, UuidV4Ids};
use agentwire::tokio::{tls, Client, ClientConfig, Limits, Server, ServerConfig};
use agentwire_server::chopsticks;
use chopsticks::controller_app::Outcome;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

/// Every await in these tests is bounded.
async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), fut)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

fn hello(agent_id: &str, version: &str) -> String {
    json!({"type":"hello","protocolVersion":version,"agentId":agent_id,"botUserId":null,"tag":null,
           "ready":true,"guildIds":["g1"],"poolId":"p"})
    .to_string()
}

/// Starts the reference controller; returns it and a channel of registered agent ids.
async fn controller(
    cfg: ControllerConfig,
) -> (
    chopsticks::controller_app::ControllerApp,
    mpsc::UnboundedReceiver<AgentId>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let app = chopsticks::controller_app::start("127.0.0.1:0", cfg, move |ev| {
        if let ControllerEvent::AgentRegistered { agent_id, .. } = ev {
            let _ = tx.send(agent_id.clone());
        }
    })
    .await
    .expect("bind");
    (app, rx)
}

/// Sends `status` to `agent` and waits for its completion event.
async fn round_trip(
    handle: &agentwire::tokio::Handle<Controller>,
    events: &mut agentwire::tokio::Events<ControllerEvent>,
    agent: &'static str,
) -> agentwire::chopsticks::Resp {
    let id = within(
        "req",
        handle.call(move |c, now| c.request(agent, "status", json!(null), now)),
    )
    .await
    .expect("live")
    .expect("sent");
    loop {
        if let ControllerEvent::RequestCompleted { id: done, resp, .. } =
            within("resp", events.recv()).await.expect("event")
        {
            if done == id {
                return resp;
            }
        }
    }
}

#[tokio::test]
async fn reference_controller_and_mock_agents_play_through_the_selection_rules() {
    let (app, mut registered) = controller(ControllerConfig::default()).await;
    let url = format!("ws://{}", app.local_addr());
    let a = chopsticks::agent_app::start(
        &url,
        AgentConfig::new("alpha").with_guilds(["g1"]),
        true,
        |_, _| {},
    )
    .expect("agent");
    let b = chopsticks::agent_app::start(
        &url,
        AgentConfig::new("bravo").with_guilds(["g1", "g2"]),
        true,
        |_, _| {},
    )
    .expect("agent");
    let mut ids = vec![
        within("reg", registered.recv()).await.expect("id"),
        within("reg", registered.recv()).await.expect("id"),
    ];
    ids.sort();
    assert_eq!(ids, ["alpha", "bravo"]);

    let agents = within("agents", app.agents_json()).await;
    assert_eq!(agents.as_array().map(Vec::len), Some(2));

    let (who, out) = within("play", app.play("g1", "vc1", "never gonna give you up")).await;
    assert_eq!(
        who.as_deref(),
        Some("alpha"),
        "round-robin starts at the lowest id"
    );
    let j = out.to_json();
    assert_eq!(j["data"]["action"], "playing");
    assert_eq!(j["data"]["track"]["author"], "Rick Astley");
    let (who, out) = within("play", app.play("g1", "vc1", "take on me")).await;
    assert_eq!(who.as_deref(), Some("alpha"), "existing binding wins");
    assert_eq!(out.to_json()["data"]["action"], "queued");
    let (who, _) = within("play", app.play("g1", "vc2", "africa")).await;
    assert_eq!(who.as_deref(), Some("bravo"), "alpha is busy in g1");

    let q = within(
        "queue",
        app.request("alpha", "queue", json!({"guildId":"g1"})),
    )
    .await
    .to_json();
    assert_eq!(q["data"]["length"], 1);
    let bad = within(
        "volume",
        app.request("alpha", "volume", json!({"guildId":"g1","volume":999})),
    )
    .await;
    assert_eq!(bad.to_json()["error"], "bad-volume");
    assert_eq!(
        within("ghost", app.request("ghost", "status", Value::Null)).await,
        Outcome::Failed("agent-offline".into())
    );
    assert_eq!(
        within("unknown", app.request("alpha", "teleport", json!({})))
            .await
            .to_json()["error"],
        "unknown-op"
    );

    // stop → released frees the session.
    within(
        "stop",
        app.request("alpha", "stop", json!({"guildId":"g1"})),
    )
    .await;
    let sessions = within("sessions", app.handle.call(|c, _| c.sessions().count()))
        .await
        .expect("live");
    assert_eq!(sessions, 1, "only bravo's session is left");

    // The command language of the controller example.
    let out = within(
        "execute",
        app.execute(r#"req bravo status {"guildId":"g1"}"#),
    )
    .await;
    assert_eq!(out["ok"], true);
    assert_eq!(out["data"]["voiceChannelId"], "vc2");
    assert!(within("execute", app.execute("nonsense")).await["error"].is_string());

    a.handle.shutdown().await;
    b.handle.shutdown().await;
    within("shutdown", app.server.shutdown()).await;
}

#[tokio::test]
async fn a_raw_peer_speaking_0_9_0_gets_the_error_and_close_1008() {
    let (app, _registered) = controller(ControllerConfig::default()).await;
    let url = format!("ws://{}", app.local_addr());
    let (mut ws, _) = within("connect", tokio_tungstenite::connect_async(url.as_str()))
        .await
        .expect("upgrade");
    ws.send(Message::text(hello("legacy", "0.9.0")))
        .await
        .expect("send");
    let mut texts = Vec::new();
    let mut close = None;
    while let Some(msg) = within("read", ws.next()).await {
        match msg.expect("ws") {
            Message::Text(t) => texts.push(serde_json::from_str::<Value>(&t).expect("json")),
            Message::Close(f) => close = f.map(|f| (u16::from(f.code), f.reason.to_string())),
            _ => {}
        }
    }
    assert_eq!(
        texts,
        [
            json!({"type":"error","error":"Incompatible protocol version 0.9.0. Controller expects 1.0.0."})
        ]
    );
    assert_eq!(
        close,
        Some((1008, "Incompatible protocol version".to_string()))
    );
    within("shutdown", app.server.shutdown()).await;
}

#[tokio::test]
async fn an_agent_that_stops_reading_is_closed_and_others_keep_working() {
    let mut limits = CtlLimits::default();
    limits.max_pending_per_agent = 10_000;
    let ctl = Controller::new(ControllerConfig::default().with_limits(limits), UuidV4Ids);
    let transport = Limits::default()
        .with_send_queue_frames(32)
        .with_send_queue_bytes(512 * 1024);
    let (server, mut events) = Server::bind(
        "127.0.0.1:0",
        ctl,
        ServerConfig::default().with_limits(transport),
    )
    .await
    .expect("bind");
    let url = format!("ws://{}", server.local_addr());
    let handle = server.handle();

    // A healthy agent (real Agent machine through the transport) that answers requests.
    let (good, mut good_events) = Client::connect(
        &url,
        Agent::new(AgentConfig::new("good").with_guilds(["g1"])),
        ClientConfig::default(),
    )
    .expect("client");
    let g = good.clone();
    tokio::spawn(async move {
        while let Some(ev) = good_events.recv().await {
            if let AgentEvent::Request(req) = ev {
                let _ = g
                    .call(move |a, now| a.respond_ok(req.id, json!("pong"), now))
                    .await;
            }
        }
    });
    // A raw agent that registers, then never reads again.
    let (mut slow, _) = within("connect", tokio_tungstenite::connect_async(url.as_str()))
        .await
        .expect("upgrade");
    slow.send(Message::text(hello("slow", "1.0.0")))
        .await
        .expect("send");

    let mut live = Vec::new();
    while live.len() < 2 {
        if let ControllerEvent::AgentRegistered { agent_id, .. } =
            within("reg", events.recv()).await.expect("event")
        {
            live.push(agent_id);
        }
    }
    // Flood the slow agent with 64 KiB requests (bounded: at most 2,000 of them, ~128 MiB
    // offered in total, far beyond the socket buffers and the 512 KiB queue).
    let big = RawJson::from_value(&json!({"blob": "x".repeat(64 * 1024)}));
    let mut dropped = false;
    for _ in 0..2_000 {
        let data = big.clone();
        let sent = within(
            "flood",
            handle.call(move |c, now| c.request("slow", "status", data, now)),
        )
        .await
        .expect("live");
        if sent.is_err() {
            break; // the agent is gone
        }
        while let Some(ev) = events.try_recv() {
            if matches!(ev, ControllerEvent::AgentDropped { ref agent_id, .. } if agent_id == "slow")
            {
                dropped = true;
            }
        }
        if dropped {
            break;
        }
    }
    while !dropped {
        if let ControllerEvent::AgentDropped { agent_id, .. } =
            within("drop", events.recv()).await.expect("event")
        {
            dropped = agent_id == "slow";
        }
    }
    // Its pending requests failed at once, and its queued memory is gone with it.
    let (gone, pending) = within(
        "pending",
        handle.call(|c, _| (c.agent("slow").is_none(), c.pending_requests())),
    )
    .await
    .expect("live");
    assert!(gone);
    assert_eq!(pending, 0, "every request to the slow agent failed at once");

    // The healthy agent is unaffected.
    let resp = round_trip(&handle, &mut events, "good").await;
    assert_eq!(resp.result(), Ok(r#""pong""#));
    // The slow peer, once it reads again, finds a close frame (1013 by default) or a reset.
    let mut saw_close = None;
    while let Ok(Some(msg)) = tokio::time::timeout(Duration::from_secs(5), slow.next()).await {
        match msg {
            Ok(Message::Close(f)) => {
                saw_close = f.map(|f| u16::from(f.code));
                break;
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    if let Some(code) = saw_close {
        assert_eq!(code, CloseCode::TRY_AGAIN_LATER.0);
    }
    good.shutdown().await;
    within("shutdown", server.shutdown()).await;
}

#[tokio::test]
async fn agents_register_and_answer_over_wss() {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("cert");
    let cert_pem = ck.cert.pem();
    let key_pem = ck.signing_key.serialize_pem();
    let server_tls =
        tls::server_config(cert_pem.as_bytes(), key_pem.as_bytes()).expect("server tls");
    let client_tls: Arc<_> = tls::client_config_trusting(cert_pem.as_bytes()).expect("client tls");

    let ctl = Controller::new(ControllerConfig::default(), UuidV4Ids);
    let (server, mut events) = Server::bind(
        "127.0.0.1:0",
        ctl,
        ServerConfig::default().with_tls(server_tls),
    )
    .await
    .expect("bind");
    let url = format!("wss://localhost:{}/", server.local_addr().port());
    let (agent, mut agent_events) = Client::connect(
        &url,
        Agent::new(AgentConfig::new("secure").with_guilds(["g1"])),
        ClientConfig::default().with_tls(client_tls),
    )
    .expect("client");
    let a = agent.clone();
    tokio::spawn(async move {
        while let Some(ev) = agent_events.recv().await {
            if let AgentEvent::Request(req) = ev {
                let _ = a
                    .call(move |m, now| m.respond_ok(req.id, json!({"tls": true}), now))
                    .await;
            }
        }
    });
    loop {
        if let ControllerEvent::AgentRegistered { agent_id, .. } =
            within("reg", events.recv()).await.expect("event")
        {
            assert_eq!(agent_id, "secure");
            break;
        }
    }
    let resp = round_trip(&server.handle(), &mut events, "secure").await;
    assert_eq!(resp.result(), Ok(r#"{"tls":true}"#));
    agent.shutdown().await;
    within("shutdown", server.shutdown()).await;
}

#[tokio::test]
async fn a_plain_ws_client_cannot_talk_to_the_wss_controller() {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("cert");
    let server_tls = tls::server_config(
        ck.cert.pem().as_bytes(),
        ck.signing_key.serialize_pem().as_bytes(),
    )
    .expect("tls");
    let ctl = Controller::new(ControllerConfig::default(), UuidV4Ids);
    let (server, _events) = Server::bind(
        "127.0.0.1:0",
        ctl,
        ServerConfig::default().with_tls(server_tls),
    )
    .await
    .expect("bind");
    let url = format!("ws://127.0.0.1:{}/", server.local_addr().port());
    let res = within("connect", tokio_tungstenite::connect_async(url.as_str())).await;
    assert!(res.is_err(), "no plaintext upgrade on a TLS port");
    within("shutdown", server.shutdown()).await;
}

#[tokio::test]
async fn a_burst_of_requests_never_wedges_the_mock_agent() {
    // The controller side is made roomy (send queue, inbound rate) so that only the agent's
    // own event handling is under test.
    let mut limits = CtlLimits::default();
    limits.max_pending_per_agent = 10_000;
    limits.max_messages_per_second = 1_000_000;
    let cfg = ControllerConfig::default()
        .with_limits(limits)
        .with_request_timeout(Duration::from_secs(3));
    let transport =
        ServerConfig::default().with_limits(Limits::default().with_send_queue_frames(10_000));
    let (tx, mut registered) = mpsc::unbounded_channel();
    // Every request that ends (answered, failed or timed out) is reported here.
    let (ended_tx, mut ended) = mpsc::unbounded_channel();
    let app =
        chopsticks::controller_app::start_with("127.0.0.1:0", cfg, transport, move |ev| match ev {
            ControllerEvent::AgentRegistered { agent_id, .. } => {
                let _ = tx.send(agent_id.clone());
            }
            ControllerEvent::RequestCompleted { id, .. }
            | ControllerEvent::RequestFailed { id, .. }
            | ControllerEvent::RequestTimedOut { id, .. } => {
                let _ = ended_tx.send(*id);
            }
            _ => {}
        })
        .await
        .expect("bind");
    let url = format!("ws://{}", app.local_addr());
    let agent = chopsticks::agent_app::start(&url, AgentConfig::new("busy"), true, |_, _| {})
        .expect("agent");
    within("reg", registered.recv()).await;
    // 3,000 requests at once: more than the agent's event channel and reply queue hold.
    let ids = within(
        "burst",
        app.handle.call(|c, now| {
            (0..3_000)
                .filter_map(|_| {
                    c.request("busy", "search", json!({"query": "africa"}), now)
                        .ok()
                })
                .collect::<BTreeSet<_>>()
        }),
    )
    .await
    .expect("live");
    assert_eq!(ids.len(), 3_000);
    // Every request ends (answered, or dropped by the agent and timed out after 3 s), and
    // afterwards the agent still answers: nothing is wedged.
    let mut open = ids;
    let all_end = async {
        while !open.is_empty() {
            let id = ended.recv().await.expect("controller events");
            open.remove(&id);
        }
    };
    tokio::time::timeout(Duration::from_secs(8), all_end)
        .await
        .unwrap_or_else(|_| panic!("{} requests never ended", open.len()));
    let pending = within("pending", app.handle.call(|c, _| c.pending_requests()))
        .await
        .expect("live");
    assert_eq!(pending, 0);
    let out = within(
        "after",
        app.request("busy", "status", json!({"guildId": "g"})),
    )
    .await;
    assert_eq!(out.to_json()["ok"], true);
    agent.handle.shutdown().await;
    within("shutdown", app.server.shutdown()).await;
}

/// A scripted stand-in for the real Node agent (`agentRunner.js`, INTEROP.md), over a real
/// socket: `hello` and `guilds` on open with `agentId` and `runnerId` on every message, never
/// an `add`, `missing-actor` for any op (but `discordSend`) without an acting user,
/// `released` with the lower-case reason `stop` before it answers `stop`. Every `req` it
/// gets is reported on the returned channel.
async fn real_agent(
    url: &str,
    agent_id: &'static str,
    guild: &str,
) -> mpsc::UnboundedReceiver<Value> {
    let (mut ws, _) = within("connect", tokio_tungstenite::connect_async(url))
        .await
        .expect("upgrade");
    let runner = "5b0c2f9e-3d41-4b8a-9c7e-2f1d6a8e4b10";
    let stamp = move |mut v: Value| {
        v["agentId"] = json!(agent_id);
        v["runnerId"] = json!(runner);
        Message::text(v.to_string())
    };
    let hello = json!({"type":"hello","protocolVersion":"1.0.0","agentId":agent_id,
        "botUserId":"1468195142467981395","tag":"MusicBot#1234","ready":true,
        "guildIds":[guild],"poolId":"pool_goot27"});
    ws.send(stamp(hello)).await.expect("hello");
    ws.send(stamp(json!({"type":"guilds","guildIds":[guild]})))
        .await
        .expect("guilds");
    let (seen, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(Ok(msg)) = ws.next().await {
            let Message::Text(text) = msg else { continue };
            let Ok(req) = serde_json::from_str::<Value>(&text) else {
                continue;
            };
            if req["type"] != "req" {
                continue;
            }
            let (op, data) = (req["op"].as_str().unwrap_or("").to_owned(), &req["data"]);
            let actor = ["actorUserId", "ownerUserId", "adminUserId"]
                .iter()
                .any(|k| data[*k].is_string());
            let answer = if data["guildId"].is_null() || data["voiceChannelId"].is_null() {
                Err("missing-session")
            } else if !actor {
                Err("missing-actor")
            } else {
                match op.as_str() {
                    "play" => Ok(json!({"track":{"title":"Never Gonna Give You Up",
                        "uri":null,"author":"Rick Astley","length":213000,"sourceName":"youtube"},
                        "action":"playing","mode":"open","ownerId":data["actorUserId"]})),
                    "stop" => {
                        let released = json!({"type":"event","event":"released",
                            "agentId":agent_id,"guildId":data["guildId"],
                            "voiceChannelId":data["voiceChannelId"],"reason":"stop","kind":"music"});
                        if ws.send(stamp(released)).await.is_err() {
                            break;
                        }
                        Ok(json!({"action":"stopped"}))
                    }
                    "status" => Ok(json!({"playing":true,"paused":false,"mode":"open"})),
                    _ => Err("unknown-op"),
                }
            };
            let resp = match answer {
                Ok(d) => json!({"type":"resp","id":req["id"],"ok":true,"data":d}),
                Err(e) => json!({"type":"resp","id":req["id"],"ok":false,"error":e}),
            };
            let _ = seen.send(req.clone());
            if ws.send(stamp(resp)).await.is_err() {
                break;
            }
        }
    });
    rx
}

#[tokio::test]
async fn the_reference_controller_drives_scripted_real_agents() {
    let (app, mut registered) = controller(ControllerConfig::default()).await;
    let url = format!("ws://{}", app.local_addr());
    let mut seen_a = real_agent(&url, "agent-a", "g1").await;
    let mut seen_b = real_agent(&url, "agent-b", "g1").await;
    for _ in 0..2 {
        within("reg", registered.recv()).await.expect("id");
    }

    // Three plays for one channel: the agent selected first every time, although a real
    // agent never sends `add`; each carries the acting user, so none is refused.
    for _ in 0..3 {
        let out = within("play", app.execute("play g1 vc1 never gonna give you up")).await;
        assert_eq!(out["agentId"], "agent-a", "{out}");
        assert_eq!(out["ok"], true, "{out}");
        assert_eq!(out["data"]["action"], "playing");
        let req = within("seen", seen_a.recv()).await.expect("req");
        assert_eq!(req["data"]["actorUserId"], "chopsticks-controller");
        assert_eq!(req["data"]["voiceChannelId"], "vc1");
    }
    // Any other op goes to the bound agent, with the acting user too.
    let out = within("status", app.execute("op g1 vc1 status")).await;
    assert_eq!(
        (out["agentId"].as_str(), out["ok"].as_bool()),
        (Some("agent-a"), Some(true))
    );
    within("seen", seen_a.recv()).await.expect("req");
    let out = within(
        "req",
        app.execute("req agent-b status {\"guildId\":\"g1\",\"voiceChannelId\":\"vc9\"}"),
    )
    .await;
    assert_eq!(out["ok"], true, "req also sends the acting user: {out}");
    assert_eq!(
        within("seen", seen_b.recv()).await.expect("req")["data"]["actorUserId"],
        "chopsticks-controller"
    );

    // `stop`: the agent releases with reason `stop`, the channel is free, and the next play
    // may go to the other agent.
    let out = within("stop", app.execute("op g1 vc1 stop")).await;
    assert_eq!(
        (out["agentId"].as_str(), out["ok"].as_bool()),
        (Some("agent-a"), Some(true))
    );
    within("seen", seen_a.recv()).await.expect("req");
    let out = within("play", app.execute("play g1 vc1 take on me")).await;
    assert_eq!(out["agentId"], "agent-b", "{out}");
    within("seen", seen_b.recv()).await.expect("req");

    // Without an acting user the real agent refuses, and the agent is not left bound.
    let bare = app.handle.call(|c, now| {
        c.request_for_session(
            "g1",
            "vc2",
            "play",
            json!({"guildId":"g1","voiceChannelId":"vc2","query":"q"}),
            now,
        )
    });
    let (agent, _) = within("bare", bare).await.expect("live").expect("sent");
    assert_eq!(agent, "agent-a");
    let req = within("seen", seen_a.recv()).await.expect("req");
    assert!(req["data"]["actorUserId"].is_null());
    // The refusal frees the binding: a later `play` with an actor goes to agent-a again.
    let out = within("play", app.execute("play g1 vc2 africa")).await;
    assert_eq!(out["agentId"], "agent-a", "{out}");
    assert_eq!(out["ok"], true, "{out}");

    within("shutdown", app.server.shutdown()).await;
}

#[tokio::test]
async fn the_controller_names_its_configured_versions_in_the_mismatch_error() {
    let cfg = ControllerConfig::default().with_supported_versions(["2.0.0"]);
    let (app, _registered) = controller(cfg).await;
    let url = format!("ws://{}", app.local_addr());
    let (mut ws, _) = within("connect", tokio_tungstenite::connect_async(url.as_str()))
        .await
        .expect("upgrade");
    // A hello without agentId is ignored whatever its version (the real order)...
    let anonymous = json!({"type":"hello","protocolVersion":"0.1.0","ready":true});
    ws.send(Message::text(anonymous.to_string()))
        .await
        .expect("send");
    // ...and the one with an agentId gets the error naming what this controller accepts.
    ws.send(Message::text(hello("a1", "1.0.0")))
        .await
        .expect("send");
    let mut texts = Vec::new();
    while let Some(msg) = within("read", ws.next()).await {
        if let Message::Text(t) = msg.expect("ws") {
            texts.push(serde_json::from_str::<Value>(&t).expect("json"));
        }
    }
    assert_eq!(
        texts,
        [
            json!({"type":"error","error":"Incompatible protocol version 1.0.0. Controller expects 2.0.0."})
        ]
    );
    within("shutdown", app.server.shutdown()).await;
}

#[test]
fn the_command_reader_lets_the_program_end_while_a_read_is_blocked() {
    use std::io::Write;
    // A pipe whose writer stays open: a read on it blocks until the test ends, as stdin does
    // while nobody types.
    let (reader, mut writer) = std::io::pipe().expect("pipe");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let first = rt.block_on(async {
        let mut lines =
            agentwire_server::common::spawn_line_reader(std::io::BufReader::new(reader));
        writer.write_all(b"agents\n").expect("write");
        let first = within("line", lines.recv()).await;
        // The reader is now blocked on the next line, which never comes.
        (first, lines)
    });
    assert_eq!(first.0.as_deref(), Some("agents"));
    // Ctrl-C makes `main` return, which drops the runtime: that must not wait for the read
    // (with tokio's stdin it waits until Enter is pressed).
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(rt);
        let _ = done.send(());
    });
    finished
        .recv_timeout(Duration::from_secs(10))
        .expect("the runtime shut down although a line read is still blocked");
    drop(writer);
}

/// The reference controller, reporting registrations, releases, frees and drops as lines.
async fn controller_reporting_sessions() -> (
    chopsticks::controller_app::ControllerApp,
    mpsc::UnboundedReceiver<String>,
) {
    let (tx, seen) = mpsc::unbounded_channel();
    let app = chopsticks::controller_app::start("127.0.0.1:0", ControllerConfig::default(), {
        move |ev| {
            let line = match ev {
                ControllerEvent::AgentRegistered { agent_id, .. } => {
                    format!("registered {agent_id}")
                }
                ControllerEvent::SessionReleased {
                    agent_id,
                    voice_channel_id,
                    reason,
                    ..
                } => format!("released {agent_id} {voice_channel_id} {reason}"),
                ControllerEvent::SessionFreed {
                    agent_id, reason, ..
                } => format!("freed {agent_id} {reason:?}"),
                ControllerEvent::AgentDropped { agent_id, .. } => format!("dropped {agent_id}"),
                _ => return,
            };
            let _ = tx.send(line);
        }
    })
    .await
    .expect("bind");
    (app, seen)
}

#[tokio::test]
async fn a_gracefully_stopped_agent_releases_its_sessions_so_a_new_agent_gets_the_guilds_next_request(
) {
    let (app, mut seen) = controller_reporting_sessions().await;
    let url = format!("ws://{}", app.local_addr());
    let mut next = async || {
        within("controller event", seen.recv())
            .await
            .expect("event")
    };

    let alpha = chopsticks::agent_app::start(
        &url,
        AgentConfig::new("alpha").with_guilds(["g1"]),
        true,
        |_, _| {},
    )
    .expect("agent");
    assert_eq!(next().await, "registered alpha");
    let (who, out) = within("play", app.play("g1", "vc1", "africa")).await;
    assert_eq!(who.as_deref(), Some("alpha"));
    assert_eq!(out.to_json()["ok"], true);
    // Alpha is busy in g1: no agent is free for another channel of the guild.
    let (_, busy) = within("play", app.play("g1", "vc2", "take on me")).await;
    assert_eq!(busy, Outcome::Failed("no-free-agents".into()));

    // Ctrl-C / SIGTERM: released for its session, then the close.
    assert_eq!(within("stop", alpha.stop("shutdown")).await, 1);
    assert_eq!(next().await, "released alpha vc1 shutdown");
    assert_eq!(
        next().await,
        "dropped alpha",
        "no session left to free on the drop"
    );

    // A new agent gets the guild's next request, for the channel alpha had.
    let bravo = chopsticks::agent_app::start(
        &url,
        AgentConfig::new("bravo").with_guilds(["g1"]),
        true,
        |_, _| {},
    )
    .expect("agent");
    assert_eq!(next().await, "registered bravo");
    let (who, out) = within("play", app.play("g1", "vc1", "never gonna give you up")).await;
    assert_eq!(who.as_deref(), Some("bravo"));
    assert_eq!(out.to_json()["data"]["action"], "playing");
    within("stop", bravo.stop("shutdown")).await;
    within("shutdown", app.server.shutdown()).await;
}

/// SIGTERM, as a service manager stops it: the `chopsticks_agent` program releases the
/// channel it plays in, closes, and exits cleanly.
#[cfg(unix)]
#[tokio::test]
async fn sigterm_makes_the_reference_agent_release_its_channel_and_exit() {
    use std::process::{Command, Stdio};
    let (app, mut seen) = controller_reporting_sessions().await;
    let url = format!("ws://{}", app.local_addr());
    let bin = tokio::task::spawn_blocking(|| example_bin::example("chopsticks_agent"))
        .await
        .expect("build");
    let mut child = Command::new(bin)
        .args(["--url", &url, "--agent-id", "alpha", "--guild", "g1"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn chopsticks_agent");
    assert_eq!(
        within("registration", seen.recv()).await.as_deref(),
        Some("registered alpha")
    );
    let (who, _) = within("play", app.play("g1", "vc1", "africa")).await;
    assert_eq!(who.as_deref(), Some("alpha"));
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    assert_eq!(
        within("release", seen.recv()).await.as_deref(),
        Some("released alpha vc1 shutdown")
    );
    assert_eq!(
        within("drop", seen.recv()).await.as_deref(),
        Some("dropped alpha")
    );
    let exit = within(
        "chopsticks_agent to exit after SIGTERM",
        tokio::task::spawn_blocking(move || child.wait()),
    )
    .await
    .expect("join")
    .expect("wait");
    assert!(
        exit.success(),
        "a clean exit, not death by the signal: {exit:?}"
    );
    within("shutdown", app.server.shutdown()).await;
}

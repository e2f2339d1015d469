//! End to end over 127.0.0.1: the llmrtc reference server and client (the examples' library
//! code) with real sockets; a raw tokio-tungstenite peer speaking the spec's messages
//! verbatim; the client's try limit and session fallback against a server that goes away;
//! and a Node `ws` client (tests/interop/llmrtc_client.js).

#[path = "support/interop.rs"]
mod interop;

use std::future::Future;
use std::time::Duration;

use agentwire::llmrtc::{
    ClientConfig, ClientEvent, ConnectionState, Reconnection, ServerConfig, ServerEvent,
    ServerMessage,
};
use agentwire_apps::llmrtc;
use clap::Parser as _;
use futures_util::{SinkExt, StreamExt};
use llmrtc::audio::utterance_wav;
use llmrtc::client_app::{LlmrtcClientApp, Transcript};
use llmrtc::providers::{example_playbook, load_playbook, Providers, ScriptedStt};
use llmrtc::server_app::{self, LlmrtcApp, Pacing};
use llmrtc::server_cli::ServerArgs;
use llmrtc::server_log;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

const PATIENCE: Duration = Duration::from_secs(10);

/// Every await in these tests is bounded.
async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, fut)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

fn data(file: &str) -> std::path::PathBuf {
    format!(
        "{}/crates/agentwire-apps/src/llmrtc/data/{file}",
        env!("CARGO_MANIFEST_DIR")
    )
    .into()
}

/// The reference server on `addr` with the example transcript (and playbook, if asked).
async fn server_on(
    addr: &str,
    playbook: bool,
) -> (LlmrtcApp, mpsc::UnboundedReceiver<ServerEvent>) {
    let mut config = ServerConfig::default();
    if playbook {
        config = config.with_playbook(load_playbook(&data("playbook.json")).expect("playbook"));
    }
    let stt = ScriptedStt::from_file(&data("transcript.txt")).expect("transcript");
    let (tx, rx) = mpsc::unbounded_channel();
    let app = server_app::start(
        addr,
        config,
        Providers::stand_ins(stt),
        Pacing::fast(),
        move |e| {
            let _ = tx.send(e.clone());
        },
    )
    .await
    .expect("bind");
    (app, rx)
}

/// Reconnects within milliseconds, so reconnect tests stay fast.
fn fast_client() -> ClientConfig {
    let mut r = Reconnection::default();
    r.base_delay = Duration::from_millis(20);
    r.max_delay = Duration::from_millis(200);
    ClientConfig::default().with_reconnection(r)
}

fn is_message(e: &ClientEvent, ty: &str) -> bool {
    matches!(e, ClientEvent::Message(m) if m.type_name() == ty)
}

async fn connected(c: &mut LlmrtcClientApp) {
    c.wait_for(
        "connected",
        PATIENCE,
        |_| {},
        |e| {
            matches!(
                e,
                ClientEvent::StateChanged {
                    to: ConnectionState::Connected,
                    ..
                }
            )
        },
    )
    .await
    .expect("connected");
}

/// Sends one utterance and collects the client's events up to the reply's audio.
async fn turn(c: &mut LlmrtcClientApp) -> Vec<ClientEvent> {
    c.send_audio(utterance_wav(600)).await.expect("send");
    let mut seen = Vec::new();
    c.wait_for(
        "the reply's audio",
        PATIENCE,
        |e| seen.push(e.clone()),
        |e| matches!(e, ClientEvent::TtsAudio { .. }),
    )
    .await
    .expect("reply");
    seen
}

fn message_types(events: &[ClientEvent]) -> Vec<&'static str> {
    events
        .iter()
        .filter_map(|e| match e {
            ClientEvent::Message(m) => Some(m.type_name()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_turn_a_barge_in_a_tool_call_and_a_reconnect_with_the_examples_code() {
    let (app, mut events) = server_on("127.0.0.1:0", true).await;
    let mut c = LlmrtcClientApp::start(&app.url(), fast_client(), 1)
        .await
        .expect("client");
    connected(&mut c).await;
    let session = c.session_id().await.expect("call").expect("session");

    // Every client event of the session, for the transcript check at the end.
    let mut all = Vec::new();

    // A full turn, in the spec's order.
    let seen = turn(&mut c).await;
    all.extend(seen.iter().cloned());
    let types = message_types(&seen);
    let first_chunk = types
        .iter()
        .position(|t| *t == "llm-chunk")
        .expect("chunks");
    assert_eq!(
        &types[..first_chunk],
        ["speech-start", "speech-end", "transcript"]
    );
    assert_eq!(
        &types[types.len() - 3..],
        ["llm", "tts-start", "tts-complete"]
    );
    let reply = seen
        .iter()
        .find_map(|e| match e {
            ClientEvent::LlmReply { text, streamed } => Some((text.clone(), streamed.clone())),
            _ => None,
        })
        .expect("llm reply");
    assert_eq!(reply.0, reply.1, "the chunks add up to the llm text");
    assert!(reply.0.starts_with("You said: Hello there"), "{}", reply.0);
    let audio = seen
        .iter()
        .find_map(|e| match e {
            ClientEvent::TtsAudio {
                audio, sample_rate, ..
            } => Some((audio.len(), *sample_rate)),
            _ => None,
        })
        .expect("audio");
    assert_eq!(audio.1, Some(24_000));
    assert!(audio.0 > 24_000, "at least half a second of speech");

    // Barge-in: talk over the long reply: tts-cancelled, then speech-start.
    c.send_audio(utterance_wav(600)).await.expect("send");
    c.wait_for(
        "tts-start",
        PATIENCE,
        |_| {},
        |e| is_message(e, "tts-start"),
    )
    .await
    .expect("tts-start");
    c.send_audio(utterance_wav(500)).await.expect("barge in");
    let mut after = Vec::new();
    c.wait_for(
        "the interrupting turn's audio",
        PATIENCE,
        |e| after.push(e.clone()),
        |e| matches!(e, ClientEvent::TtsAudio { .. }),
    )
    .await
    .expect("reply");
    all.extend(after.iter().cloned());
    let types = message_types(&after);
    let cancel = types
        .iter()
        .position(|t| *t == "tts-cancelled")
        .expect("cancelled");
    assert_eq!(types[cancel + 1], "speech-start", "{types:?}");
    assert!(
        !types[..cancel].contains(&"tts-complete"),
        "the cut reply never completes: {types:?}"
    );

    // A playbook tool call moves the stage.
    let seen = turn(&mut c).await;
    all.extend(seen.iter().cloned());
    // The reply streamed before the call and the one after it join with their space.
    let reply = seen
        .iter()
        .find_map(|e| match e {
            ClientEvent::LlmReply { text, streamed } => Some((text.clone(), streamed.clone())),
            _ => None,
        })
        .expect("llm reply");
    assert_eq!(
        reply.0,
        "I'll take care of that. Done! bookTable confirmed, reference AW-0001."
    );
    assert_eq!(reply.1, reply.0, "the chunks add up to the llm text");
    let types = message_types(&seen);
    let start = types
        .iter()
        .position(|t| *t == "tool-call-start")
        .expect("start");
    let end = types
        .iter()
        .position(|t| *t == "tool-call-end")
        .expect("end");
    let stage = types
        .iter()
        .position(|t| *t == "stage-change")
        .expect("stage");
    assert!(start < end && end < stage, "{types:?}");
    let change = seen
        .iter()
        .find_map(|e| match e {
            ClientEvent::Message(ServerMessage::StageChange(s)) => Some(s.clone()),
            _ => None,
        })
        .expect("stage-change");
    assert_eq!(
        (
            change.from.as_str(),
            change.to.as_str(),
            change.reason.as_str()
        ),
        ("greeting", "confirmation", "tool_result")
    );

    // Reconnect: the session and its history come back.
    assert!(c.drop_connection().await.expect("call"));
    let ack = c
        .wait_for(
            "reconnect-ack",
            PATIENCE,
            |e| all.push(e.clone()),
            |e| matches!(e, ClientEvent::Resumed { .. }),
        )
        .await
        .expect("ack");
    assert_eq!(
        ack,
        ClientEvent::Resumed {
            success: true,
            session_id: session.clone().into(),
            history_recovered: true
        }
    );
    let s = session.clone();
    let history = app
        .handle
        .call(move |m, _| m.history(&s).map_or(0, Iterator::count))
        .await
        .expect("call");
    assert_eq!(history, 8, "four turns, user and assistant each");
    // The conversation continues in the recovered session.
    turn(&mut c).await;
    let s = session.clone();
    let history = app
        .handle
        .call(move |m, _| m.history(&s).map_or(0, Iterator::count))
        .await
        .expect("call");
    assert_eq!(history, 10);
    within("client close", c.close()).await;
    within("shutdown", app.shutdown()).await;

    // What the client prints: sentences, one line per reply's speech (not per chunk).
    let mut t = Transcript::new("");
    let printed: String = all.iter().map(|e| t.render(e)).collect();
    assert_no_debug_dumps(&printed);
    let speeches = all
        .iter()
        .filter(|e| matches!(e, ClientEvent::TtsAudio { .. }))
        .count();
    let chunks = all
        .iter()
        .filter(|e| matches!(e, ClientEvent::TtsChunk { .. }))
        .count();
    assert!(chunks > 2 * speeches, "{chunks} chunks, {speeches} replies");
    assert_eq!(
        printed
            .lines()
            .filter(|l| l.starts_with("[speech] "))
            .count(),
        speeches,
        "{printed}"
    );
    assert!(
        printed.contains("[speech] 1.50 s of pcm audio at 24000 Hz (72000 bytes) in 10 chunks"),
        "{printed}"
    );
    assert!(!printed.contains("tts-chunk"), "{printed}");
    assert!(
        printed.contains("[llm] \"I'll take care of that. Done! bookTable confirmed"),
        "{printed}"
    );
    assert!(
        printed.contains("[ready] session ") && printed.contains(", pipeline mode, no ICE servers"),
        "{printed}"
    );

    // What the server logs: a sentence per event.
    let mut logged = String::new();
    let mut kinds = std::collections::BTreeSet::new();
    while let Ok(e) = events.try_recv() {
        kinds.insert(format!("{:?}", std::mem::discriminant(&e)));
        if let Some(line) = server_log::describe(&e) {
            logged.push_str(&line);
            logged.push('\n');
        }
    }
    assert!(
        kinds.len() >= 8,
        "the session's events are varied: {logged}"
    );
    assert_no_debug_dumps(&logged);
    assert!(
        logged.contains("running tool bookTable (call_")
            && logged.contains(") with {\"request\":\"Please book a table for two at seven.\"}"),
        "{logged}"
    );
    assert!(logged.contains("in stage greeting"), "{logged}");
    assert!(
        logged.contains("turn interrupted by the user (barge-in)"),
        "{logged}"
    );
}

/// Fails on text that shows a Rust `Debug` rendering instead of a sentence.
fn assert_no_debug_dumps(text: &str) {
    for dump in [
        "Some(", "None", "Object {", "Array [", "String(", "Number(", "Bool(", "conn#", "req#",
        "TtsChunk", "Message(", "{ ", "Duration",
    ] {
        assert!(!text.contains(dump), "{dump:?} in:\n{text}");
    }
}

type RawWs =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn next_json(ws: &mut RawWs) -> Value {
    within("message", async {
        loop {
            match ws.next().await {
                Some(Ok(Message::Text(t))) => return serde_json::from_str(&t).expect("json"),
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                other => panic!("unexpected {other:?}"),
            }
        }
    })
    .await
}

#[tokio::test]
async fn a_raw_websocket_peer_speaking_the_spec_verbatim() {
    let (app, _events) = server_on("127.0.0.1:0", false).await;
    let (mut ws, _) = within("connect", tokio_tungstenite::connect_async(app.url()))
        .await
        .expect("connect");
    let ready = next_json(&mut ws).await;
    assert_eq!(ready["type"], "ready");
    assert_eq!(ready["protocolVersion"], json!(1));
    assert_eq!(ready["mode"], "pipeline", "core 1.3.0's ready.mode");
    assert!(ready["id"].as_str().is_some_and(|s| !s.is_empty()));
    // The spec's ping, verbatim; a fractional timestamp is echoed exactly.
    ws.send(Message::text(
        r#"{"type":"ping","timestamp":1700000000123.5}"#,
    ))
    .await
    .expect("send");
    assert_eq!(
        next_json(&mut ws).await,
        json!({"type":"pong","timestamp":1700000000123.5})
    );
    // Unknown types are ignored (no reply); a known one still works after it.
    ws.send(Message::text(r#"{"type":"future-feature","x":1}"#))
        .await
        .expect("send");
    ws.send(Message::text(r#"{"type":"ping","timestamp":2}"#))
        .await
        .expect("send");
    assert_eq!(
        next_json(&mut ws).await,
        json!({"type":"pong","timestamp":2})
    );
    within("shutdown", app.shutdown()).await;
}

#[test]
fn the_server_defaults_need_no_files_and_no_build_time_paths() {
    // No default of any flag is a path (absolute or into the checkout): an installed binary
    // runs from anywhere.
    use clap::CommandFactory as _;
    let manifest = env!("CARGO_MANIFEST_DIR");
    for arg in ServerArgs::command().get_arguments() {
        for d in arg.get_default_values() {
            let d = d.to_string_lossy();
            assert!(
                !d.contains(manifest) && !d.starts_with('/') && !d.contains("examples/"),
                "--{}: default {d}",
                arg.get_id()
            );
        }
    }
    // With no flags: plain conversation with the built-in example script, which is the file.
    let args = ServerArgs::try_parse_from(["llmrtc_server"]).expect("no flags");
    assert!(args.transcript.is_none());
    let stt = args.stt().expect("built-in script");
    let file = ScriptedStt::from_file(&data("transcript.txt")).expect("file");
    assert_eq!(format!("{stt:?}"), format!("{file:?}"));
    assert!(args.config().expect("config").playbook.is_none());
    // `--example-playbook` is the built-in copy of the example file.
    let args = ServerArgs::try_parse_from(["llmrtc_server", "--example-playbook"]).expect("flag");
    assert_eq!(
        args.config().expect("config").playbook,
        Some(load_playbook(&data("playbook.json")).expect("file"))
    );
    assert_eq!(
        example_playbook().expect("built in"),
        load_playbook(&data("playbook.json")).expect("file")
    );
    // A script given on the command line is read from there.
    let args =
        ServerArgs::try_parse_from(["llmrtc_server", "--transcript", "/nonexistent/script.txt"])
            .expect("flag");
    assert!(args.stt().is_err());
}

#[tokio::test]
async fn an_unreachable_server_costs_five_tries_then_failed() {
    // A port with nothing listening.
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr")
    };
    let mut c = LlmrtcClientApp::start(&format!("ws://{addr}/"), fast_client(), 3)
        .await
        .expect("client");
    let mut tries = 0;
    c.wait_for(
        "failed",
        PATIENCE,
        |e| {
            if matches!(e, ClientEvent::Reconnecting { .. }) {
                tries += 1;
            }
        },
        |e| {
            matches!(
                e,
                ClientEvent::StateChanged {
                    to: ConnectionState::Failed,
                    ..
                }
            )
        },
    )
    .await
    .expect("failed");
    assert_eq!(tries, 5);
    assert_eq!(c.state().await.expect("call"), ConnectionState::Failed);
    within("close", c.close()).await;
}

#[tokio::test]
async fn after_a_server_restart_the_client_moves_to_a_new_session() {
    let (app, _events) = server_on("127.0.0.1:0", false).await;
    let addr = app.local_addr();
    let mut c = LlmrtcClientApp::start(&app.url(), fast_client(), 4)
        .await
        .expect("client");
    connected(&mut c).await;
    let first = c.session_id().await.expect("call").expect("session");
    within("shutdown", app.shutdown()).await;
    // A new server on the same port knows nothing of the old session.
    let (app, _events) = server_on(&addr.to_string(), false).await;
    let ack = c
        .wait_for(
            "reconnect-ack",
            PATIENCE,
            |_| {},
            |e| matches!(e, ClientEvent::Resumed { .. }),
        )
        .await
        .expect("ack");
    let ClientEvent::Resumed {
        success,
        session_id,
        history_recovered,
    } = ack
    else {
        unreachable!()
    };
    assert!(!success && !history_recovered);
    assert_ne!(session_id, first);
    assert_eq!(
        c.session_id().await.expect("call").as_deref(),
        Some(session_id.as_str())
    );
    let err = c
        .wait_for(
            "SESSION_NOT_FOUND",
            PATIENCE,
            |_| {},
            |e| is_message(e, "error"),
        )
        .await
        .expect("error");
    let ClientEvent::Message(ServerMessage::Error(err)) = err else {
        unreachable!()
    };
    assert_eq!(err.code.as_str(), "SESSION_NOT_FOUND");
    // The conversation goes on in the new session.
    turn(&mut c).await;
    within("close", c.close()).await;
    within("shutdown", app.shutdown()).await;
}

#[tokio::test]
async fn node_ws_client_interop() {
    let Some(dir) = interop::peer_from_env("AGENTWIRE_NODE_WS_DIR", "node_ws_client_interop")
    else {
        return;
    };
    let node = std::env::var_os("AGENTWIRE_NODE").unwrap_or_else(|| "node".into());
    let (app, _events) = server_on("127.0.0.1:0", false).await;
    let url = app.url();
    interop::run_peer(
        "node client",
        node,
        "llmrtc_client.js",
        url,
        vec![("AGENTWIRE_NODE_WS_DIR", dir)],
        "node interop ok",
    )
    .await;
    within("shutdown", app.shutdown()).await;
}

//! End to end over 127.0.0.1: the llmrtc reference server and client (the examples' library
//! code) with real sockets (streamed and whole `tts` replies, partial transcripts,
//! attachments, `VAD_ERROR` and `INTERNAL_ERROR`); a raw tokio-tungstenite peer speaking the
//! spec's messages verbatim and flooding the server into `RATE_LIMITED`; the client's try limit and session fallback against a server that goes away;
//! and a Node `ws` client (tests/interop/llmrtc_client.js).

#[path = "support/interop.rs"]
mod interop;

use std::future::Future;
use std::time::Duration;

use agentwire::llmrtc::{
    ClientConfig, ClientEvent, ConnectionState, Reconnection, ServerConfig, ServerEvent,
    ServerMessage,
};
use agentwire_server::llmrtc;
use clap::Parser as _;
use futures_util::{SinkExt, StreamExt};
use llmrtc::audio::utterance_wav;
use llmrtc::client_app::{attachment_from_arg, LlmrtcClientApp, Transcript};
use llmrtc::providers::{
    example_playbook, load_playbook, Providers, ScriptedStt, SpeechToText, Transcription,
};
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
        "{}/crates/agentwire-server/src/llmrtc/data/{file}",
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
    server_with(addr, config, Providers::stand_ins(stt)).await
}

/// The reference server on `addr` with `config` and `providers`; every machine event is
/// copied to the receiver.
async fn server_with(
    addr: &str,
    config: ServerConfig,
    providers: Providers,
) -> (LlmrtcApp, mpsc::UnboundedReceiver<ServerEvent>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let app = server_app::start(addr, config, providers, Pacing::fast(), move |e| {
        let _ = tx.send(e.clone());
    })
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
    assert_eq!(&types[..2], ["speech-start", "speech-end"]);
    assert!(
        types[2..first_chunk].iter().all(|t| *t == "transcript"),
        "{types:?}"
    );
    // The stand-in STT reports what it heard word by word, then the final text.
    let transcripts: Vec<(String, bool)> = seen
        .iter()
        .filter_map(|e| match e {
            ClientEvent::Message(ServerMessage::Transcript(t)) => {
                Some((t.text.clone(), t.is_final))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        transcripts,
        [
            ("Hello".to_owned(), false),
            ("Hello there".to_owned(), false),
            ("Hello there, who".to_owned(), false),
            ("Hello there, who am".to_owned(), false),
            ("Hello there, who am I".to_owned(), false),
            ("Hello there, who am I talking".to_owned(), false),
            ("Hello there, who am I talking to?".to_owned(), true),
        ]
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
        printed.contains("[transcript] \"Hello there\" (partial)\n"),
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

/// Raw frames until one of type `ty` (included).
async fn frames_until(ws: &mut RawWs, ty: &str) -> Vec<Value> {
    let mut seen = Vec::new();
    loop {
        let v = next_json(ws).await;
        let done = v["type"] == ty;
        seen.push(v);
        if done {
            return seen;
        }
    }
}

#[tokio::test]
async fn whole_tts_replies_partial_transcripts_and_attachments_with_the_examples_code() {
    // `llmrtc_server --no-streaming-tts`: each reply's audio in one `tts` message.
    let args = ServerArgs::try_parse_from(["llmrtc_server", "--no-streaming-tts"]).expect("flags");
    let config = args.config().expect("config");
    assert!(!config.streaming_tts);
    let stt = ScriptedStt::from_file(&data("transcript.txt")).expect("transcript");
    let (app, mut events) = server_with("127.0.0.1:0", config, Providers::stand_ins(stt)).await;
    let mut c = LlmrtcClientApp::start(&app.url(), fast_client(), 5)
        .await
        .expect("client");
    connected(&mut c).await;

    // Two images for the first turn, as `llmrtc_client --attach` sends them: a file and a
    // data URI.
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("llmrtc_e2e");
    std::fs::create_dir_all(&dir).expect("dir");
    let png = dir.join(format!("menu-{}.png", std::process::id()));
    std::fs::write(&png, b"\x89PNG\r\n\x1a\nfake").expect("png");
    let attachments = vec![
        attachment_from_arg(png.to_str().expect("utf8 path")).expect("file"),
        attachment_from_arg("data:image/jpeg;base64,/9j/4AAQ").expect("data uri"),
    ];
    c.send_attachments(attachments).await.expect("attachments");
    c.send_audio(utterance_wav(600)).await.expect("send");
    let mut seen = Vec::new();
    c.wait_for(
        "tts-complete",
        PATIENCE,
        |e| seen.push(e.clone()),
        |e| is_message(e, "tts-complete"),
    )
    .await
    .expect("reply");

    // The whole audio arrives between tts-start and tts-complete, in no tts-chunk.
    let types = message_types(&seen);
    assert_eq!(
        &types[types.len() - 3..],
        ["llm", "tts-start", "tts-complete"],
        "{types:?}"
    );
    let start = seen
        .iter()
        .position(|e| is_message(e, "tts-start"))
        .expect("tts-start");
    let audio_at = seen
        .iter()
        .position(|e| matches!(e, ClientEvent::TtsAudio { .. }))
        .expect("audio");
    assert!(start < audio_at && audio_at < seen.len() - 1, "{seen:?}");
    assert!(
        !seen
            .iter()
            .any(|e| matches!(e, ClientEvent::TtsChunk { .. })),
        "{types:?}"
    );
    assert!(!types.contains(&"tts-chunk"), "{types:?}");
    assert!(
        seen.iter().any(|e| matches!(
            e,
            ClientEvent::Message(ServerMessage::Transcript(t)) if !t.is_final
        )),
        "partial transcripts: {types:?}"
    );
    let (format, rate, wav) = seen
        .iter()
        .find_map(|e| match e {
            ClientEvent::TtsAudio {
                format,
                sample_rate,
                audio,
            } => Some((format.clone(), *sample_rate, audio.clone())),
            _ => None,
        })
        .expect("audio");
    assert_eq!((format.as_str(), rate), ("wav", Some(24_000)));
    let parsed = agentwire::llmrtc::parse_wav(&wav).expect("a WAV file");
    assert!(
        parsed.pcm.len() > 24_000,
        "at least half a second of speech"
    );
    let reply = seen
        .iter()
        .find_map(|e| match e {
            ClientEvent::LlmReply { text, .. } => Some(text.clone()),
            _ => None,
        })
        .expect("reply");
    assert!(
        reply.ends_with("That was turn 1. I see 2 images."),
        "{reply}"
    );
    let mut t = Transcript::new("");
    let printed: String = seen.iter().map(|e| t.render(e)).collect();
    assert!(
        printed.contains(&format!(
            "[speech] {} bytes of wav audio in one tts message",
            wav.len()
        )),
        "{printed}"
    );
    // The LLM got both images, the file as a data URI of its type.
    within("client close", c.close()).await;
    within("shutdown", app.shutdown()).await;
    let mut llm_attachments = None;
    while let Ok(e) = events.try_recv() {
        if let ServerEvent::Llm(r) = e {
            llm_attachments = Some(r.attachments);
        }
    }
    let got = llm_attachments.expect("an llm request");
    assert_eq!(got.len(), 2);
    assert!(got[0]
        .data
        .starts_with("data:image/png;base64,iVBORw0KGgpmYWtl"));
    assert_eq!(got[0].mime_type.as_deref(), Some("image/png"));
    assert_eq!(got[1].mime_type.as_deref(), Some("image/jpeg"));
    let _ = std::fs::remove_file(png);
}

#[test]
fn attach_arguments_are_files_data_uris_or_urls() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("llmrtc_e2e");
    std::fs::create_dir_all(&dir).expect("dir");
    let jpg = dir.join(format!("photo-{}.JPG", std::process::id()));
    std::fs::write(&jpg, [0xff, 0xd8, 0xff]).expect("jpg");
    let a = attachment_from_arg(jpg.to_str().expect("utf8")).expect("file");
    assert_eq!(a.data, "data:image/jpeg;base64,/9j/");
    assert_eq!(a.mime_type.as_deref(), Some("image/jpeg"));
    assert_eq!(a.alt.as_deref(), jpg.file_name().and_then(|n| n.to_str()));
    let url = attachment_from_arg("https://example.org/menu.webp").expect("url");
    assert_eq!(
        (url.data.as_str(), url.mime_type),
        ("https://example.org/menu.webp", None)
    );
    let uri = attachment_from_arg("data:image/gif;base64,R0lG").expect("uri");
    assert_eq!(uri.mime_type.as_deref(), Some("image/gif"));
    for bad in [
        "notes.txt",
        "data:image/png;base64",
        "/nonexistent/picture.png",
    ] {
        assert!(attachment_from_arg(bad).is_err(), "{bad}");
    }
    let _ = std::fs::remove_file(jpg);
}

#[tokio::test]
async fn floods_of_messages_or_bytes_get_rate_limited_over_a_real_socket() {
    // Messages: 150 pings at once against the default 50/s with bursts of 100.
    let (app, _events) = server_on("127.0.0.1:0", false).await;
    let (mut ws, _) = within("connect", tokio_tungstenite::connect_async(app.url()))
        .await
        .expect("connect");
    assert_eq!(next_json(&mut ws).await["type"], "ready");
    for n in 0..150 {
        ws.feed(Message::text(format!(
            r#"{{"type":"ping","timestamp":{n}}}"#
        )))
        .await
        .expect("feed");
    }
    ws.flush().await.expect("flush");
    let frames = frames_until(&mut ws, "error").await;
    let (error, pongs) = frames.split_last().expect("frames");
    assert_eq!(error["code"], "RATE_LIMITED", "{error}");
    assert!(pongs.iter().all(|v| v["type"] == "pong"));
    // The burst, and at most what refilled (one per 20 ms) while the flood was read.
    assert!((100..150).contains(&pongs.len()), "{} pongs", pongs.len());
    // Another connection has its own budget.
    let (mut other, _) = within("connect", tokio_tungstenite::connect_async(app.url()))
        .await
        .expect("connect");
    assert_eq!(next_json(&mut other).await["type"], "ready");
    other
        .send(Message::text(r#"{"type":"ping","timestamp":1}"#))
        .await
        .expect("send");
    assert_eq!(next_json(&mut other).await["type"], "pong");
    let dropped = app
        .handle
        .call(|m, _| m.dropped_messages())
        .await
        .expect("call");
    assert!(dropped >= 1, "{dropped}");
    within("shutdown", app.shutdown()).await;

    // Bytes: about 100 KiB audio messages against 64 KiB/s with bursts of 128 KiB.
    let mut limits = agentwire::llmrtc::Limits::default();
    limits.byte_rate = agentwire::core::Rate::per_second(64, 128);
    let stt = ScriptedStt::example();
    let config = ServerConfig::default().with_limits(limits);
    let (app, _events) = server_with("127.0.0.1:0", config, Providers::stand_ins(stt)).await;
    let (mut ws, _) = within("connect", tokio_tungstenite::connect_async(app.url()))
        .await
        .expect("connect");
    assert_eq!(next_json(&mut ws).await["type"], "ready");
    let silence = agentwire::llmrtc::wav::wav_from_samples(16_000, &vec![0i16; 38_000]);
    let mut body = Vec::new();
    agentwire::llmrtc::encode_audio(&mut body, &silence, &[]);
    let body = String::from_utf8(body).expect("utf8");
    assert!(
        (95 << 10..110 << 10).contains(&body.len()),
        "{}",
        body.len()
    );
    // The first is read (silence: no reply), the next two find too little left and are
    // dropped, one error for the run; a small ping fits what is left and is answered.
    for _ in 0..3 {
        ws.feed(Message::text(body.clone())).await.expect("feed");
    }
    ws.feed(Message::text(r#"{"type":"ping","timestamp":7}"#))
        .await
        .expect("feed");
    ws.flush().await.expect("flush");
    let error = next_json(&mut ws).await;
    assert_eq!(error["code"], "RATE_LIMITED", "{error}");
    assert_eq!(
        next_json(&mut ws).await,
        json!({"type":"pong","timestamp":7})
    );
    let dropped = app
        .handle
        .call(|m, _| m.dropped_messages())
        .await
        .expect("call");
    assert_eq!(dropped, 2);
    within("shutdown", app.shutdown()).await;
}

/// Stand-in STT whose first call panics (a provider with a bug), then the example script.
struct PanicsOnce {
    panicked: bool,
    then: ScriptedStt,
}

impl SpeechToText for PanicsOnce {
    fn transcribe(
        &mut self,
        segment: &agentwire::llmrtc::SpeechSegment,
    ) -> Result<Transcription, String> {
        if !std::mem::replace(&mut self.panicked, true) {
            panic!("index out of bounds in the recognizer");
        }
        self.then.transcribe(segment)
    }
}

#[tokio::test]
async fn vad_error_and_internal_error_reach_the_client_and_the_session_goes_on() {
    let mut providers = Providers::stand_ins(ScriptedStt::example());
    providers.stt = Box::new(PanicsOnce {
        panicked: false,
        then: ScriptedStt::example(),
    });
    let (app, _events) = server_with("127.0.0.1:0", ServerConfig::default(), providers).await;
    let mut c = LlmrtcClientApp::start(&app.url(), fast_client(), 6)
        .await
        .expect("client");
    connected(&mut c).await;
    let error = |e: &ClientEvent| match e {
        ClientEvent::Message(ServerMessage::Error(err)) => {
            Some((err.code.as_str().to_owned(), err.message.clone()))
        }
        _ => None,
    };
    // 4 kHz audio: a well-formed WAV the VAD does not run at.
    let low = agentwire::llmrtc::wav::wav_from_samples(4_000, &vec![3000i16; 4_000]);
    c.send_audio(low).await.expect("send");
    let e = c
        .wait_for("VAD_ERROR", PATIENCE, |_| {}, |e| error(e).is_some())
        .await
        .expect("error");
    let (code, message) = error(&e).expect("error");
    assert_eq!(code, "VAD_ERROR");
    assert!(message.contains("4000 Hz"), "{message}");
    // The STT provider panics: INTERNAL_ERROR, and the server keeps serving.
    c.send_audio(utterance_wav(600)).await.expect("send");
    let e = c
        .wait_for("INTERNAL_ERROR", PATIENCE, |_| {}, |e| error(e).is_some())
        .await
        .expect("error");
    let (code, message) = error(&e).expect("error");
    assert_eq!(code, "INTERNAL_ERROR");
    assert!(
        message.contains("speech-to-text") && message.contains("index out of bounds"),
        "{message}"
    );
    let seen = turn(&mut c).await;
    assert!(message_types(&seen).contains(&"tts-complete"));
    within("client close", c.close()).await;
    within("shutdown", app.shutdown()).await;
}

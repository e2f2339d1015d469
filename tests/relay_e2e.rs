//! End to end over 127.0.0.1: the reference relay (the examples' library code) with real
//! sockets and raw tokio-tungstenite peers playing host and agent with the spec's example
//! messages verbatim; and the study log's guarantees as a user of the files sees them.

#[path = "support/example_bin.rs"]
mod example_bin;
#[path = "support/temp_dir.rs"]
mod temp_dir;

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use agentwire::agent_relay::{Direction, RelayConfig, RelayEvent, Role};
use agentwire_server::relay;
use example_bin::example;
use futures_util::{SinkExt, StreamExt};
use relay::log_check;
use relay::log_name::file_name;
use relay::log_writer::SyncPolicy;
use relay::logging_relay::{ServerEvent, LOG_WRITE_FAILED};
use relay::server_app::RelayApp;
use serde_json::{json, Value};
use temp_dir::temp_dir;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// Every await in these tests is bounded.
async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), fut)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

/// Starts the reference relay writing into `dir`; returns it and a copy of every event.
async fn relay_in(dir: &Path) -> (RelayApp, mpsc::UnboundedReceiver<ServerEvent>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let app = relay::server_app::start(
        "127.0.0.1:0",
        RelayConfig::default(),
        dir,
        SyncPolicy::SessionEnd,
        move |ev| {
            let _ = tx.send(ev.clone());
        },
    )
    .await
    .expect("bind");
    (app, rx)
}

/// The next event matching `pick`.
async fn next_event<T>(
    events: &mut mpsc::UnboundedReceiver<ServerEvent>,
    mut pick: impl FnMut(ServerEvent) -> Option<T>,
) -> T {
    loop {
        let ev = within("relay event", events.recv())
            .await
            .expect("relay running");
        if let Some(t) = pick(ev) {
            return t;
        }
    }
}

/// Waits until a member of `role` has left `session`.
async fn left(events: &mut mpsc::UnboundedReceiver<ServerEvent>, session: &str, role: Role) {
    next_event(events, |ev| match ev {
        ServerEvent::Relay(RelayEvent::Left {
            session: s,
            role: r,
            ..
        }) if s.as_str() == session && r == role => Some(()),
        _ => None,
    })
    .await;
}

fn log_text(dir: &Path, session: &str) -> String {
    std::fs::read_to_string(dir.join(file_name(session))).expect("log file")
}

fn records(dir: &Path, session: &str) -> Vec<Value> {
    log_text(dir, session)
        .lines()
        .map(|l| serde_json::from_str(l).expect("record"))
        .collect()
}

/// Shuts `app` down while `peers` read (so each answers the relay's close 1001 at once),
/// then waits for every socket to end. Returns once the relay has stopped and synced its logs.
async fn stop(app: RelayApp, peers: Vec<Peer>) {
    let readers: Vec<_> = peers
        .into_iter()
        .map(|mut p| tokio::spawn(async move { while let Some(Ok(_)) = p.ws.next().await {} }))
        .collect();
    within("shutdown", app.shutdown()).await;
    for r in readers {
        let _ = within("peer end", r).await;
    }
}

// ---- a raw peer ----------------------------------------------------------------------------

/// A plain tokio-tungstenite peer speaking the protocol's JSON text.
struct Peer {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
}

impl Peer {
    async fn connect(url: &str) -> Self {
        let (ws, _) = within("connect", tokio_tungstenite::connect_async(url))
            .await
            .expect("upgrade");
        Self { ws }
    }

    /// Connects and joins `session` as `role`; returns the peer and its `relay.joined`.
    async fn join(url: &str, role: &str, session: &str) -> (Self, Value) {
        let mut p = Self::connect(url).await;
        let id = format!("join-{role}-{session}");
        p.send_value(&json!({"v": "mvp-0.2", "type": "relay.join", "id": id,
            "payload": {"role": role, "sessionId": session}}))
            .await;
        let joined = p.recv_type("relay.joined").await;
        assert_eq!(joined["replyTo"], id);
        (p, joined)
    }

    async fn send(&mut self, text: &str) {
        within("send", self.ws.send(Message::text(text.to_owned())))
            .await
            .expect("send");
    }

    async fn send_value(&mut self, v: &Value) {
        self.send(&v.to_string()).await;
    }

    /// The next text message, raw.
    async fn recv_text(&mut self) -> String {
        loop {
            match within("recv", self.ws.next()).await {
                Some(Ok(Message::Text(t))) => return t.as_str().to_owned(),
                Some(Ok(Message::Close(f))) => panic!("closed: {f:?}"),
                Some(Ok(_)) => {}
                Some(Err(e)) => panic!("ws error: {e}"),
                None => panic!("stream ended"),
            }
        }
    }

    /// The next message that is not `relay.hello` or `relay.presence` (the relay's chatter),
    /// as text.
    async fn recv_raw(&mut self) -> String {
        loop {
            let t = self.recv_text().await;
            let v: Value = serde_json::from_str(&t).expect("json");
            if v["type"] != "relay.hello" && v["type"] != "relay.presence" {
                return t;
            }
        }
    }

    /// [`recv_raw`](Self::recv_raw), parsed.
    async fn recv(&mut self) -> Value {
        serde_json::from_str(&self.recv_raw().await).expect("json")
    }

    /// The next message, which must be of type `t`.
    async fn recv_type(&mut self, t: &str) -> Value {
        let v = self.recv().await;
        assert_eq!(v["type"], t, "{v}");
        v
    }

    /// Reads until the relay's close frame; returns its code and reason.
    async fn closed(&mut self) -> (u16, String) {
        loop {
            match within("close", self.ws.next()).await {
                Some(Ok(Message::Close(Some(f)))) => {
                    return (u16::from(f.code), f.reason.as_str().to_owned())
                }
                Some(Ok(Message::Close(None))) => return (1005, String::new()),
                Some(Ok(_)) => {}
                other => panic!("no close frame: {other:?}"),
            }
        }
    }

    /// Closes the socket and waits for the relay's answer.
    async fn close(mut self) {
        let _ = within("close", self.ws.close(None)).await;
        while let Some(Ok(_)) = within("closing", self.ws.next()).await {}
    }
}

// The spec's example messages, verbatim.
const JOIN: &str = r#"{"v":"mvp-0.2","type":"relay.join","id":"join-001","payload":{"role":"agent","sessionId":"default"}}"#;
const SESSION_START: &str = r#"{"v":"mvp-0.2","type":"session.start","id":"req-001","payload":{"studyId":"pilot-01","participantId":"P07"}}"#;
const SNAPSHOT_GET: &str = r#"{"v":"mvp-0.2","type":"snapshot.get","id":"req-002","payload":{}}"#;
const TOOL_CALL: &str = r#"{"v":"mvp-0.2","type":"tool.call","id":"req-003","payload":{"toolName":"select","params":{"itemId":"m1"},"reason":"Pick the first available movie option to continue the flow."}}"#;
const AGENT_MESSAGE: &str = r#"{"v":"mvp-0.2","type":"agent.message","id":"req-004","payload":{"text":"I will choose a date next to narrow available showtimes."}}"#;
const SESSION_END: &str =
    r#"{"v":"mvp-0.2","type":"session.end","id":"req-999","payload":{"reason":"study-complete"}}"#;
const SESSION_STARTED: &str = r#"{"v":"mvp-0.2","type":"session.started","replyTo":"req-001","payload":{"sessionId":"s-20260213-001"}}"#;
const SNAPSHOT_STATE: &str = r#"{"v":"mvp-0.2","type":"snapshot.state","replyTo":"req-002","payload":{"sessionId":"s-20260213-001","uiSpec":{},"messageHistory":[],"toolSchema":[]}}"#;
const TOOL_RESULT: &str = r#"{"v":"mvp-0.2","type":"tool.result","replyTo":"req-003","payload":{"ok":true,"toolName":"select","uiSpec":{},"messageHistory":[]}}"#;
const STATE_UPDATED: &str = r#"{"v":"mvp-0.2","type":"state.updated","payload":{"source":"user","uiSpec":{},"messageHistory":[]}}"#;
const USER_MESSAGE: &str = r#"{"v":"mvp-0.2","type":"user.message","payload":{"text":"I prefer evening showtimes.","stage":"time"}}"#;
const SESSION_ENDED: &str = r#"{"v":"mvp-0.2","type":"session.ended","replyTo":"req-999","payload":{"sessionId":"s-20260213-001","logFile":"logs/study/s-20260213-001.jsonl","stateReset":true}}"#;

// ---- the protocol --------------------------------------------------------------------------

#[tokio::test]
async fn the_spec_examples_join_and_are_forwarded_both_ways_byte_for_byte() {
    let dir = temp_dir("forward");
    let (app, _events) = relay_in(&dir).await;
    let url = app.url();
    let (mut host, _) = Peer::join(&url, "host", "default").await;

    let mut agent = Peer::connect(&url).await;
    let hello: Value = serde_json::from_str(&agent.recv_text().await).expect("json");
    assert_eq!(hello["type"], "relay.hello");
    agent.send(JOIN).await;
    let joined = agent.recv_type("relay.joined").await;
    assert_eq!(joined["v"], "mvp-0.2");
    assert_eq!(joined["replyTo"], "join-001");
    assert_eq!(joined["payload"]["role"], "agent");
    assert_eq!(joined["payload"]["sessionId"], "default");

    // Agent -> host, each answered by the host -> agent example with its replyTo.
    for (request, reply) in [
        (SESSION_START, SESSION_STARTED),
        (SNAPSHOT_GET, SNAPSHOT_STATE),
        (TOOL_CALL, TOOL_RESULT),
        (SESSION_END, SESSION_ENDED),
    ] {
        agent.send(request).await;
        assert_eq!(host.recv_raw().await, request);
        host.send(reply).await;
        assert_eq!(agent.recv_raw().await, reply);
    }
    // agent.message has no reply; pushes have no replyTo.
    agent.send(AGENT_MESSAGE).await;
    assert_eq!(host.recv_raw().await, AGENT_MESSAGE);
    for push in [STATE_UPDATED, USER_MESSAGE] {
        host.send(push).await;
        assert_eq!(agent.recv_raw().await, push);
    }
    stop(app, vec![host, agent]).await;

    // The study session's records, from session.started to session.ended, carry its id and
    // are in the file session.ended names (spec §6); the rest are the relay session's.
    let study = log_check::check_file(&dir.join("s-20260213-001.jsonl")).expect("study log");
    assert!(study.is_consistent(), "{}", study.render());
    assert_eq!(study.session_id.as_deref(), Some("s-20260213-001"));
    assert_eq!(study.by_type.get("tool.call"), Some(&2), "in and out");
    assert_eq!(study.by_type.get("session.started"), Some(&2));
    assert_eq!(study.by_type.get("session.ended"), Some(&2));
    let relay = log_check::check_file(&dir.join("default.jsonl")).expect("log");
    assert!(relay.is_consistent(), "{}", relay.render());
    assert_eq!(relay.by_type.get("session.start"), Some(&2));
    assert_eq!(
        relay.by_type.get("agent.message"),
        Some(&2),
        "after the end"
    );
    assert_eq!(relay.by_type.get("tool.call"), None);
}

#[tokio::test]
async fn a_reply_reaches_only_the_asking_agent_and_pushes_reach_every_agent() {
    let dir = temp_dir("routing");
    let (app, _events) = relay_in(&dir).await;
    let url = app.url();
    let (mut host, _) = Peer::join(&url, "host", "default").await;
    let (mut asker, _) = Peer::join(&url, "agent", "default").await;
    let (mut other, _) = Peer::join(&url, "agent", "default").await;
    let (mut elsewhere, _) = Peer::join(&url, "agent", "another-session").await;

    asker.send(TOOL_CALL).await;
    assert_eq!(host.recv_raw().await, TOOL_CALL);
    host.send(TOOL_RESULT).await;
    assert_eq!(asker.recv_raw().await, TOOL_RESULT);

    // The push is the next thing both agents of the session get: `other` never saw the
    // reply, and the agent of another session gets nothing (its next message is its own
    // SESSION_NOT_ACTIVE, as that session has no host).
    host.send(STATE_UPDATED).await;
    assert_eq!(asker.recv_raw().await, STATE_UPDATED);
    assert_eq!(other.recv_raw().await, STATE_UPDATED);
    elsewhere.send(SNAPSHOT_GET).await;
    let err = elsewhere.recv_type("error").await;
    assert_eq!(err["payload"]["code"], "SESSION_NOT_ACTIVE");
    stop(app, vec![host, asker, other, elsewhere]).await;
}

#[tokio::test]
async fn a_request_without_id_is_answered_to_its_sender_only() {
    let dir = temp_dir("no-id");
    let (app, _events) = relay_in(&dir).await;
    let url = app.url();
    let (mut host, _) = Peer::join(&url, "host", "default").await;
    let (mut asker, _) = Peer::join(&url, "agent", "default").await;
    let (mut other, _) = Peer::join(&url, "agent", "default").await;

    asker
        .send(r#"{"v":"mvp-0.2","type":"snapshot.get","payload":{}}"#)
        .await;
    let got = host.recv_type("snapshot.get").await;
    let id = got["id"].as_str().expect("the relay's id").to_owned();
    host.send_value(
        &json!({"v": "mvp-0.2", "type": "snapshot.state", "replyTo": id,
        "payload": {"sessionId": "default", "uiSpec": {}, "messageHistory": [], "toolSchema": []}}),
    )
    .await;
    let answer = asker.recv_type("snapshot.state").await;
    assert!(answer.get("replyTo").is_none(), "{answer}");
    // The next thing the other agent gets is the push, not the answer.
    host.send(STATE_UPDATED).await;
    assert_eq!(other.recv_raw().await, STATE_UPDATED);
    assert_eq!(asker.recv_raw().await, STATE_UPDATED);
    stop(app, vec![host, asker, other]).await;
}

#[tokio::test]
async fn a_newer_host_replaces_the_old_one_which_gets_the_error_then_close_1000() {
    let dir = temp_dir("replace");
    let (app, _events) = relay_in(&dir).await;
    let url = app.url();
    let (mut old, _) = Peer::join(&url, "host", "default").await;
    let (mut agent, _) = Peer::join(&url, "agent", "default").await;
    let (mut new, _) = Peer::join(&url, "host", "default").await;

    let err = old.recv_type("error").await;
    assert_eq!(err["payload"]["code"], "SESSION_NOT_ACTIVE");
    assert_eq!(
        err["payload"]["message"],
        "Host connection replaced by a newer host."
    );
    assert_eq!(old.closed().await, (1000, "host-replaced".to_owned()));

    agent.send(SNAPSHOT_GET).await;
    assert_eq!(new.recv_raw().await, SNAPSHOT_GET);
    new.send(SNAPSHOT_STATE).await;
    assert_eq!(agent.recv_raw().await, SNAPSHOT_STATE);
    stop(app, vec![old, new, agent]).await;
}

#[tokio::test]
async fn without_a_host_an_agent_request_gets_session_not_active_with_reply_to() {
    let dir = temp_dir("nohost");
    let (app, _events) = relay_in(&dir).await;
    let (mut agent, _) = Peer::join(&app.url(), "agent", "default").await;
    agent.send(TOOL_CALL).await;
    let err = agent.recv_type("error").await;
    assert_eq!(
        err,
        json!({"v": "mvp-0.2", "type": "error", "replyTo": "req-003", "payload": {
            "code": "SESSION_NOT_ACTIVE",
            "message": "No active host connection for this session."}})
    );
    stop(app, vec![agent]).await;
}

#[tokio::test]
async fn a_wrong_path_is_refused_with_404_before_the_upgrade() {
    let dir = temp_dir("path");
    let (app, _events) = relay_in(&dir).await;
    let addr = app.local_addr();
    for path in ["/", "/agent", "/agent/ws/", "/ws"] {
        let url = format!("ws://{addr}{path}");
        match within("connect", tokio_tungstenite::connect_async(url)).await {
            Err(tungstenite::Error::Http(resp)) => assert_eq!(resp.status(), 404, "{path}"),
            other => panic!("{path}: expected HTTP 404, got {:?}", other.map(|_| ())),
        }
    }
    // The endpoint itself still upgrades (with a query, too).
    let mut p = Peer::connect(&format!("ws://{addr}/agent/ws?x=1")).await;
    let hello: Value = serde_json::from_str(&p.recv_text().await).expect("json");
    assert_eq!(hello["type"], "relay.hello");
    stop(app, vec![p]).await;
}

// ---- the study log -------------------------------------------------------------------------

/// Whether the log of `session` has an `out` record of `msg_type` with `payload`.
fn has_out_record(dir: &Path, session: &str, msg_type: &str, payload: &Value) -> bool {
    records(dir, session)
        .iter()
        .any(|r| r["direction"] == "out" && r["type"] == msg_type && r["payload"] == *payload)
}

// Two workers, so the socket writers run in parallel with the task that owns the relay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_line_is_in_the_file_before_its_message_is_forwarded() {
    let dir = temp_dir("order");
    let (app, _events) = relay_in(&dir).await;
    let url = app.url();
    let (mut host, _) = Peer::join(&url, "host", "order").await;
    let (mut agent, _) = Peer::join(&url, "agent", "order").await;
    for i in 0..25 {
        let call = json!({"v": "mvp-0.2", "type": "tool.call", "id": format!("req-{i}"),
            "payload": {"toolName": "select", "params": {"itemId": format!("m{i}")},
                        "reason": format!("step {i}")}});
        agent.send_value(&call).await;
        let got = host.recv().await;
        assert_eq!(got, call);
        // Read the file the moment the message arrives: its line is already there.
        assert!(
            has_out_record(&dir, "order", "tool.call", &call["payload"]),
            "tool.call {i} arrived before its log line"
        );

        let result = json!({"v": "mvp-0.2", "type": "tool.result", "replyTo": format!("req-{i}"),
            "payload": {"ok": true, "toolName": "select", "n": i}});
        host.send_value(&result).await;
        assert_eq!(agent.recv().await, result);
        assert!(
            has_out_record(&dir, "order", "tool.result", &result["payload"]),
            "tool.result {i} arrived before its log line"
        );
    }
    stop(app, vec![host, agent]).await;
}

#[tokio::test]
async fn session_ended_is_synced_before_it_is_forwarded() {
    let dir = temp_dir("sync");
    let (app, mut events) = relay_in(&dir).await;
    let url = app.url();
    let (mut host, _) = Peer::join(&url, "host", "default").await;
    let (mut agent, _) = Peer::join(&url, "agent", "default").await;
    agent.send(SESSION_END).await;
    assert_eq!(host.recv_raw().await, SESSION_END);
    host.send(SESSION_ENDED).await;
    assert_eq!(agent.recv_raw().await, SESSION_ENDED);
    assert!(has_out_record(
        &dir,
        "default",
        "session.ended",
        &serde_json::from_str::<Value>(SESSION_ENDED).expect("json")["payload"]
    ));
    // The out record asked for a sync, which ran on the sync worker (off the task that owns
    // the relay) before session.ended was released to the agent.
    let sync_due = next_event(&mut events, |ev| match ev {
        ServerEvent::Logged {
            record, sync_due, ..
        } if record.msg_type == "session.ended" && record.direction == Direction::Out => {
            Some(sync_due)
        }
        _ => None,
    })
    .await;
    assert!(sync_due);
    let off_task = next_event(&mut events, |ev| match ev {
        ServerEvent::Synced { off_task, .. } => Some(off_task),
        _ => None,
    })
    .await;
    assert!(off_task);
    stop(app, vec![host, agent]).await;
}

#[tokio::test]
async fn event_indexes_never_repeat_across_host_reconnects_refills_and_restarts() {
    let dir = temp_dir("indexes");
    let session = "s-20260213-001";
    let (app, mut events) = relay_in(&dir).await;
    let url = app.url();

    // A host, an agent, an exchange; the host drops and a new one takes over.
    let (mut host, _) = Peer::join(&url, "host", session).await;
    let (mut agent, _) = Peer::join(&url, "agent", session).await;
    agent.send(SNAPSHOT_GET).await;
    assert_eq!(host.recv_raw().await, SNAPSHOT_GET);
    host.send(SNAPSHOT_STATE).await;
    assert_eq!(agent.recv_raw().await, SNAPSHOT_STATE);
    host.close().await;
    left(&mut events, session, Role::Host).await;
    let (mut host, _) = Peer::join(&url, "host", session).await;
    agent.send(AGENT_MESSAGE).await;
    assert_eq!(host.recv_raw().await, AGENT_MESSAGE);

    // Everyone leaves: the session empties (the reference restarts its count here).
    agent.close().await;
    left(&mut events, session, Role::Agent).await;
    host.close().await;
    left(&mut events, session, Role::Host).await;

    // It fills again.
    let (mut host, _) = Peer::join(&url, "host", session).await;
    let (mut agent, _) = Peer::join(&url, "agent", session).await;
    agent.send(TOOL_CALL).await;
    assert_eq!(host.recv_raw().await, TOOL_CALL);
    host.send(TOOL_RESULT).await;
    assert_eq!(agent.recv_raw().await, TOOL_RESULT);
    stop(app, vec![host, agent]).await;
    let before_restart = records(&dir, session).len();

    // A new relay process on the same directory continues the file.
    let (app, _events) = relay_in(&dir).await;
    let url = app.url();
    let (mut host, _) = Peer::join(&url, "host", session).await;
    let (mut agent, _) = Peer::join(&url, "agent", session).await;
    host.send(USER_MESSAGE).await;
    assert_eq!(agent.recv_raw().await, USER_MESSAGE);
    stop(app, vec![host, agent]).await;

    let all = records(&dir, session);
    assert!(all.len() > before_restart);
    let indexes: Vec<u64> = all
        .iter()
        .map(|r| r["eventIndex"].as_u64().expect("index"))
        .collect();
    assert_eq!(indexes, (0..all.len() as u64).collect::<Vec<_>>());
    let joins = all.iter().filter(|r| r["type"] == "relay.join").count();
    assert_eq!(joins, 7, "every join of every host and agent was recorded");
    let report = log_check::check_file(&dir.join(file_name(session))).expect("log");
    assert!(report.is_consistent(), "{}", report.render());
    assert!(report.warnings.is_empty(), "{}", report.render());
}

#[tokio::test]
async fn a_log_write_failure_reaches_the_host_and_the_events_and_forwarding_goes_on() {
    let dir = temp_dir("failure");
    // A directory where the session's file should be (works as root too, unlike chmod).
    std::fs::create_dir(dir.join(file_name("broken"))).expect("collision");
    let (app, mut events) = relay_in(&dir).await;
    let url = app.url();

    let (mut host, _) = Peer::join(&url, "host", "broken").await;
    let err = host.recv_type("error").await;
    assert_eq!(err["payload"]["code"], LOG_WRITE_FAILED);
    assert!(err.get("replyTo").is_none());
    let text = err["payload"]["message"].as_str().expect("message");
    assert!(text.contains("broken") && text.contains("open"), "{text}");
    let (op, record) = next_event(&mut events, |ev| match ev {
        ServerEvent::LogFailed {
            session,
            op,
            record,
            ..
        } if session.as_str() == "broken" => Some((op, record)),
        _ => None,
    })
    .await;
    assert_eq!(op, relay::log_writer::LogOp::Open);
    assert_eq!(record, Some(("relay.join", Direction::Internal)));

    // The study goes on: messages are forwarded, and each step's failures are reported.
    let (mut agent, _) = Peer::join(&url, "agent", "broken").await;
    assert_eq!(
        host.recv_type("error").await["payload"]["code"],
        LOG_WRITE_FAILED
    );
    agent.send(TOOL_CALL).await;
    assert_eq!(host.recv_raw().await, TOOL_CALL);
    assert_eq!(
        host.recv_type("error").await["payload"]["code"],
        LOG_WRITE_FAILED
    );

    // The study session cannot end cleanly: its log was not saved, so the agent gets
    // LOG_FLUSH_FAILED with its request's replyTo, never a session.ended.
    agent.send(SESSION_END).await;
    assert_eq!(host.recv_raw().await, SESSION_END);
    host.send(SESSION_ENDED).await;
    let err = agent.recv_type("error").await;
    assert_eq!(err["payload"]["code"], "LOG_FLUSH_FAILED");
    assert_eq!(err["replyTo"], "req-999");
    assert!(err["payload"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("not saved")));

    // Other sessions are unaffected.
    let (mut ok_host, _) = Peer::join(&url, "host", "fine").await;
    let (mut ok_agent, _) = Peer::join(&url, "agent", "fine").await;
    ok_agent.send(SNAPSHOT_GET).await;
    assert_eq!(ok_host.recv_raw().await, SNAPSHOT_GET);
    stop(app, vec![host, agent, ok_host, ok_agent]).await;
    let report = log_check::check_file(&dir.join("fine.jsonl")).expect("log");
    assert!(report.is_consistent(), "{}", report.render());
}

#[tokio::test]
async fn a_torn_last_line_is_a_warning_and_is_moved_aside_when_the_relay_reopens_the_file() {
    let dir = temp_dir("torn");
    let (app, _events) = relay_in(&dir).await;
    let (mut host, _) = Peer::join(&app.url(), "host", "default").await;
    let (mut agent, _) = Peer::join(&app.url(), "agent", "default").await;
    agent.send(SNAPSHOT_GET).await;
    assert_eq!(host.recv_raw().await, SNAPSHOT_GET);
    stop(app, vec![host, agent]).await;

    // A crash in the middle of a write leaves a line without its end.
    let path = dir.join("default.jsonl");
    let whole = records(&dir, "default").len();
    let mut bytes = std::fs::read(&path).expect("log");
    bytes.extend_from_slice(br#"{"sessionId":"default","eventIndex":99,"timest"#);
    std::fs::write(&path, &bytes).expect("tear");
    let report = log_check::check_file(&path).expect("log");
    assert!(report.is_consistent(), "{}", report.render());
    assert_eq!(report.lines, whole as u64);
    assert!(report.torn_tail.is_some());
    assert!(report.warnings.iter().any(|w| w.contains("torn")));

    // The next relay moves it aside (a warning event) and continues the indexes after the
    // last whole line.
    let (app, mut events) = relay_in(&dir).await;
    let (host, _) = Peer::join(&app.url(), "host", "default").await;
    let repair = next_event(&mut events, |ev| match ev {
        ServerEvent::LogRepaired { repair, .. } => Some(repair),
        _ => None,
    })
    .await;
    assert_eq!(repair.bytes, 46);
    assert!(repair.why.contains("torn"), "{}", repair.why);
    assert_eq!(
        std::fs::read(&repair.aside).expect("aside"),
        br#"{"sessionId":"default","eventIndex":99,"timest"#
    );
    let index = next_event(&mut events, |ev| match ev {
        ServerEvent::Logged { event_index, .. } => Some(event_index),
        _ => None,
    })
    .await;
    assert_eq!(index, whole as u64);
    stop(app, vec![host]).await;
    let report = log_check::check_file(&path).expect("log");
    assert!(report.is_consistent(), "{}", report.render());
    assert!(report.warnings.is_empty(), "{}", report.render());
}

// ---- the programs as a user runs them ------------------------------------------------------

#[cfg(unix)]
#[tokio::test]
async fn movie_host_stops_at_once_on_ctrl_c_while_stdin_stays_open() {
    use std::process::{Command, Stdio};
    let dir = temp_dir("movie-host");
    let (app, mut events) = relay_in(&dir).await;
    let bin = tokio::task::spawn_blocking(|| example("movie_host"))
        .await
        .expect("build");
    let child = Command::new(bin)
        .arg("--url")
        .arg(app.url())
        .arg("--log-dir")
        .arg(&*dir)
        .stdin(Stdio::piped()) // kept open, as a user's terminal
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn movie_host");
    // It is serving: the relay saw it join as host.
    next_event(&mut events, |ev| match ev {
        ServerEvent::Relay(RelayEvent::Joined {
            role: Role::Host, ..
        }) => Some(()),
        _ => None,
    })
    .await;
    example_bin::interrupt(child, "movie_host").await;
    // The relay saw the host leave.
    left(&mut events, "default", Role::Host).await;
    within("relay shutdown", app.shutdown()).await;
}

#[cfg(unix)]
#[tokio::test]
async fn movie_host_stdin_commands_reach_agents_as_state_updated_from_user() {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    let dir = temp_dir("movie-host-stdin");
    let bin = tokio::task::spawn_blocking(|| example("movie_host"))
        .await
        .expect("build");
    let (app, mut events) = relay_in(&dir).await;
    let (mut agent, _) = Peer::join(&app.url(), "agent", "default").await;
    let mut child = Command::new(bin)
        .arg("--url")
        .arg(app.url())
        .arg("--log-dir")
        .arg(&*dir)
        .env("RUST_LOG", "info")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn movie_host");
    // Typing starts once the host itself has seen the relay accept its join: actions taken
    // before that are applied at once and pushed as one state.updated when it joins (the
    // relay's own Joined event comes earlier, while the acceptance is still on its way).
    let mut log = example_bin::lines_of(child.stderr.take().expect("stderr"));
    within("movie_host joined", async {
        while let Some(line) = log.recv().await {
            if line.contains("joined relay session") {
                return;
            }
        }
        panic!("movie_host's log ended before it joined");
    })
    .await;
    // A participant types: help, a chat line, a mistake, then two UI actions.
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(b"help\nI like dramas\n/select\n/select m1\n/next\n")
        .expect("type");
    stdin.flush().expect("flush");
    let chat = agent.recv_type("user.message").await;
    assert_eq!(chat["payload"]["text"], "I like dramas");
    // The chat line also changes the visible chat: state.updated from the user.
    let pushed = agent.recv_type("state.updated").await;
    assert_eq!(pushed["payload"]["source"], "user");
    let selected = agent.recv_type("state.updated").await;
    assert_eq!(selected["payload"]["source"], "user");
    assert_eq!(
        selected["payload"]["uiSpec"]["booking"]["movie"]["id"],
        "m1"
    );
    let next = agent.recv_type("state.updated").await;
    assert_eq!(next["payload"]["source"], "user");
    assert_eq!(next["payload"]["uiSpec"]["stage"], "theater");
    child.stdin = Some(stdin);
    example_bin::interrupt(child, "movie_host").await;
    left(&mut events, "default", Role::Host).await;
    stop(app, vec![agent]).await;
}

#[tokio::test]
async fn relay_demo_exits_0_and_leaves_no_temp_folder_behind() {
    let tmp = temp_dir("demo-tmp");
    let bin = tokio::task::spawn_blocking(|| example("relay_demo"))
        .await
        .expect("build");
    let tmpdir = tmp.to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(bin)
            .env("TMPDIR", &tmpdir)
            .output()
            .expect("run relay_demo")
    });
    let out = tokio::time::timeout(Duration::from_secs(120), out)
        .await
        .expect("relay_demo finished")
        .expect("join");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("demo finished"), "{stdout}");
    assert!(stdout.contains("removed at exit"), "{stdout}");
    let left: Vec<_> = std::fs::read_dir(&*tmp)
        .expect("tmp")
        .map(|e| e.expect("entry").path())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// Captures what `tracing` logs on this thread (the test's current-thread runtime runs the
/// relay's tasks here too).
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("lock")).into_owned()
    }
}

#[tokio::test]
async fn a_host_that_does_not_read_is_closed_and_logged_as_a_slow_consumer() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::WARN)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let dir = temp_dir("slow");
    let (app, mut events) = relay_in(&dir).await;
    let url = app.url();
    let (host, _) = Peer::join(&url, "host", "default").await;
    let host_conn = next_event(&mut events, |ev| match ev {
        ServerEvent::Relay(RelayEvent::Joined {
            conn,
            role: Role::Host,
            ..
        }) => Some(conn),
        _ => None,
    })
    .await;
    let (mut agent, _) = Peer::join(&url, "agent", "default").await;
    // The host never reads: the agent's messages pile up in its send queue (8 MiB) and the
    // socket buffers until the relay gives up on it.
    let text = "z".repeat(200 << 10);
    let msg =
        json!({"v": "mvp-0.2", "type": "agent.message", "payload": {"text": text}}).to_string();
    let mut sent = 0;
    let closed = loop {
        agent.send(&msg).await;
        sent += 1;
        let gone = events.try_recv().ok().is_some_and(|ev| {
            matches!(ev, ServerEvent::Relay(RelayEvent::Left { conn, role: Role::Host, .. })
                if conn == host_conn)
        });
        if gone {
            break true;
        }
        if sent >= 190 {
            break false; // within the rate limit's burst; wait for the event below
        }
    };
    if !closed {
        left(&mut events, "default", Role::Host).await;
    }
    let logged = captured.text();
    let line = logged
        .lines()
        .find(|l| l.contains("slow consumer"))
        .unwrap_or_else(|| panic!("no slow-consumer line in:\n{logged}"));
    assert!(line.contains("WARN"), "{line}");
    assert!(
        line.contains(&format!("conn={}", host_conn.get())),
        "{line}"
    );
    assert!(line.contains("not reading"), "{line}");
    drop(host);
    stop(app, vec![agent]).await;
}

#[tokio::test]
async fn refused_messages_barely_grow_the_study_log_and_every_line_reads_back() {
    let dir = temp_dir("refused");
    let (app, _events) = relay_in(&dir).await;
    let url = app.url();
    // An agent that needs no credentials, and no host: 150 messages of 512 KiB.
    let (mut agent, _) = Peer::join(&url, "agent", "default").await;
    let big = json!({"v": "mvp-0.2", "type": "agent.message", "id": "big",
        "payload": {"text": "x".repeat(512 << 10)}})
    .to_string();
    for _ in 0..150 {
        agent.send(&big).await;
        let err = agent.recv_type("error").await;
        assert_eq!(err["payload"]["code"], "SESSION_NOT_ACTIVE");
    }
    // A message nested 100,000 deep, refused too (now with a host, so only depth refuses it).
    let (mut host, _) = Peer::join(&url, "host", "default").await;
    let deep = format!(
        r#"{{"v":"mvp-0.2","type":"agent.message","id":"deep","payload":{{"x":{}{}}}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    agent.send(&deep).await;
    let err = agent.recv_type("error").await;
    assert_eq!(
        (err["payload"]["code"].as_str(), err["replyTo"].as_str()),
        (Some("INVALID_MESSAGE"), Some("deep"))
    );
    // The relay still works, and the host never saw either.
    agent.send(SNAPSHOT_GET).await;
    assert_eq!(host.recv_raw().await, SNAPSHOT_GET);
    stop(app, vec![host, agent]).await;

    let path = dir.join("default.jsonl");
    let size = std::fs::metadata(&path).expect("log").len();
    assert!(size < 150 * 400 + 20_000, "{size} bytes of log");
    let report = log_check::check_file(&path).expect("log");
    assert!(report.is_consistent(), "{}", report.render());
    assert!(!log_text(&dir, "default").contains("xxxxxxxx"));
    assert_eq!(
        report.by_type.get("agent.message"),
        None,
        "never a study event"
    );
}

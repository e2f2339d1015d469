//! The agent relay under load (`relay-tools`): `--connections` external agents doing
//! `tool.call`s through `agentwire serve`'s relay to UI hosts that answer each with a
//! `tool.result`, the relay writing every message to its study log (in a folder of the
//! system's temporary directory, removed at the end of the run).
//!
//! The agents are spread over relay sessions of at most [`AGENTS_PER_SESSION`] (the relay's
//! default cap per session), one host in each. Every agent keeps one call in flight (the next
//! once its result is back). One message is one tool call; its deliveries are the call reaching
//! the host and the result reaching the agent (two per call); the latency is the call's round
//! trip as the agent sees it. The relay's message rate limit (100/s per connection) is off,
//! since the run measures the cost per message, not the limiter.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use futures_util::FutureExt;
use serde_json::{json, Value};

use super::{Ctx, Outcome, Scenario};
use crate::drive::{self, Sent};
use crate::error::LoadError;
use crate::latency::{stamp, Latency};
use crate::options::Budget;
use crate::server::ServerKind;
use crate::ws::{self, stop_signal, StopRx, Ws};

/// Agents per relay session (the relay's default `max_agents_per_session`).
pub const AGENTS_PER_SESSION: u64 = 64;

/// Longest wait for one answer (a join, a tool result) before the run fails.
const ANSWER_BOUND: Duration = Duration::from_secs(30);

/// The relay scenario.
pub fn scenarios() -> Vec<Scenario> {
    vec![Scenario::new(
        "relay-tools",
        "--connections agents doing tool.call through the relay to hosts (64 agents per \
         session), each one call in flight; a delivery is the call at the host or the \
         result at the agent",
        ServerKind::Agentwire {
            protocol: "relay",
            settings: settings(),
        },
        |ctx| run(ctx).boxed(),
    )]
}

/// The study-log folder of this process's relay runs.
fn log_dir() -> PathBuf {
    std::env::temp_dir().join(format!("agentwire-load-relay-{}", std::process::id()))
}

/// The relay's settings: its study log in [`log_dir`], no message rate limit, room for every
/// agent and session. Built once per process (the folder's name carries the process id).
fn settings() -> &'static [&'static str] {
    static SETTINGS: OnceLock<Vec<&'static str>> = OnceLock::new();
    SETTINGS.get_or_init(|| {
        let dir: &'static str =
            Box::leak(format!("relay.log_dir={}", log_dir().display()).into_boxed_str());
        vec![
            dir,
            "relay.rate_per_second=0",
            "relay.max_connections=200000",
            "relay.max_sessions=100000",
        ]
    })
}

async fn run(ctx: Ctx) -> Result<Outcome, LoadError> {
    let outcome = drive(&ctx).await;
    // The study log is the relay's cost, not a product of the run: it goes with the run.
    let _ = std::fs::remove_dir_all(log_dir());
    outcome
}

async fn drive(ctx: &Ctx) -> Result<Outcome, LoadError> {
    let agents = ctx.options().connections;
    let sessions = agents.div_ceil(AGENTS_PER_SESSION);
    let run_id = format!("load-{}-{}", std::process::id(), stamp());
    let url = ctx.address().to_owned();

    let (stop, stop_rx) = stop_signal();
    let mut hosts = Vec::new();
    for s in 0..sessions {
        let session = format!("{run_id}-{s}");
        let ws = join(&url, "host", &session, "h").await?;
        hosts.push(tokio::spawn(host(ws, stop_rx.clone())));
    }
    let mut peers = Vec::new();
    for a in 0..agents {
        let session = format!("{run_id}-{}", a / AGENTS_PER_SESSION);
        peers.push(join(&url, "agent", &session, &format!("a{a}")).await?);
    }

    let budget = ctx.start();
    let tasks: Vec<_> = peers
        .into_iter()
        .enumerate()
        .map(|(i, ws)| tokio::spawn(agent(ws, i, budget.clone())))
        .collect();
    let (calls, errors, latency) = drive::collect(tasks).await?;
    ctx.stop();
    stop.stop();
    let mut answered = 0;
    for h in hosts {
        answered += h
            .await
            .map_err(|e| LoadError::Protocol(format!("a host task failed: {e}")))??;
    }
    Ok(Outcome {
        messages: calls,
        deliveries: answered + calls.saturating_sub(errors),
        expected_deliveries: Some(2 * calls),
        errors,
        latency,
        ..Outcome::default()
    })
}

/// Connects and joins `session` as `role`, waiting for `relay.joined`.
async fn join(url: &str, role: &str, session: &str, id: &str) -> Result<Ws, LoadError> {
    let mut w = ws::connect(url).await?;
    let join = json!({"v": "mvp-0.2", "type": "relay.join", "id": format!("join-{id}"),
        "payload": {"role": role, "sessionId": session}});
    ws::send(&mut w, join.to_string()).await?;
    let joined = tokio::time::timeout(ANSWER_BOUND, until_type(&mut w, &["relay.joined"]))
        .await
        .map_err(|_| LoadError::Protocol(format!("{role} {id}: no relay.joined in 30 s")))??;
    if joined["type"] != "relay.joined" {
        return Err(LoadError::Protocol(format!(
            "{role} {id} not joined: {joined}"
        )));
    }
    Ok(w)
}

/// The next message whose `type` is one of `types` or `error` (others, such as
/// `relay.hello` and `relay.presence`, are skipped).
async fn until_type(w: &mut Ws, types: &[&str]) -> Result<Value, LoadError> {
    loop {
        let text = ws::next_text(w).await?;
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| LoadError::Protocol(format!("not JSON from the relay: {e}")))?;
        let ty = v["type"].as_str().unwrap_or_default();
        if ty == "error" || types.contains(&ty) {
            return Ok(v);
        }
    }
}

/// One agent: a `tool.call` at a time while the budget lasts.
async fn agent(mut w: Ws, index: usize, budget: Budget) -> Result<Sent, LoadError> {
    let (mut calls, mut errors, mut latency) = (0, 0, Latency::new());
    let mut k = 0u64;
    while budget.take() {
        k += 1;
        let id = format!("a{index}-{k}");
        let call = json!({"v": "mvp-0.2", "type": "tool.call", "id": id,
            "payload": {"toolName": "select", "params": {"itemId": format!("m{k}")},
                        "reason": "load"}});
        let sent = stamp();
        ws::send(&mut w, call.to_string()).await?;
        calls += 1;
        let answer = tokio::time::timeout(ANSWER_BOUND, until_type(&mut w, &["tool.result"]))
            .await
            .map_err(|_| LoadError::Protocol(format!("no tool.result for {id} in 30 s")))??;
        if answer["type"] == "tool.result" && answer["replyTo"] == id.as_str() {
            latency.record_since(sent);
        } else {
            errors += 1;
        }
    }
    let _ = w.close(None).await;
    Ok((calls, errors, latency))
}

/// One host: answers every `tool.call` with an ok `tool.result` until stopped; returns how
/// many calls it answered.
async fn host(mut w: Ws, mut stop: StopRx) -> Result<u64, LoadError> {
    let mut answered = 0;
    loop {
        let next = tokio::select! {
            next = until_type(&mut w, &["tool.call"]) => next?,
            () = stop.stopped() => break,
        };
        if next["type"] != "tool.call" {
            return Err(LoadError::Protocol(format!("the host got {next}")));
        }
        let result = json!({"v": "mvp-0.2", "type": "tool.result", "replyTo": next["id"],
            "payload": {"ok": true, "toolName": next["payload"]["toolName"]}});
        ws::send(&mut w, result.to_string()).await?;
        answered += 1;
    }
    let _ = w.close(None).await;
    Ok(answered)
}

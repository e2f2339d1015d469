//! The `chopsticks_demo` command: its flags and its `main`. `examples/chopsticks_demo.rs` is the
//! binary, and its documentation says what the command does and how to run it.

use std::time::Duration;

use crate::chopsticks;
use agentwire::chopsticks::{AgentConfig, BindSource, ControllerConfig, ControllerEvent};
use chopsticks::controller_app::{ControllerApp, Outcome};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

const STEP_TIMEOUT: Duration = Duration::from_secs(10);

fn describe_track(t: &Value) -> String {
    let ms = t["duration"].as_u64().unwrap_or(0);
    format!(
        "\"{}\" by {} ({}:{:02})",
        t["title"].as_str().unwrap_or("?"),
        t["author"].as_str().unwrap_or("?"),
        ms / 60_000,
        (ms / 1000) % 60
    )
}

fn show(outcome: &Outcome) -> String {
    let j = outcome.to_json();
    if j["ok"] == true {
        format!("ok {}", j["data"])
    } else {
        format!("error {}", j["error"])
    }
}

async fn step<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(STEP_TIMEOUT, fut).await {
        Ok(v) => v,
        Err(_) => {
            eprintln!("demo: step '{what}' did not finish within {STEP_TIMEOUT:?}");
            std::process::exit(1);
        }
    }
}

async fn play(app: &ControllerApp, guild: &str, vc: &str, query: &str) -> Value {
    println!("\n> play {guild} {vc} {query:?}");
    let (agent, outcome) = step("play", app.play(guild, vc, query)).await;
    let j = outcome.to_json();
    match agent {
        Some(a) if j["ok"] == true => println!(
            "  selected {a}; it is {} {}",
            j["data"]["action"].as_str().unwrap_or("?"),
            describe_track(&j["data"]["track"])
        ),
        Some(a) => println!("  selected {a}; it answered {}", show(&outcome)),
        None => println!("  no agent: {}", j["error"]),
    }
    j
}

async fn req(app: &ControllerApp, agent: &str, op: &str, data: Value) -> Outcome {
    println!("\n> req {agent} {op} {data}");
    let out = step(op, app.request(agent, op, data)).await;
    println!("  {}", show(&out));
    out
}

/// Runs the `chopsticks_demo` command, as `cargo run --example chopsticks_demo` does.
pub async fn main() {
    println!("== chopsticks demo: one controller, two mock agents, all on 127.0.0.1 ==");
    let (registered_tx, mut registered) = mpsc::unbounded_channel();
    let app = chopsticks::controller_app::start("127.0.0.1:0", ControllerConfig::default(), move |ev| {
        match ev {
            ControllerEvent::AgentRegistered { agent_id, protocol_version, .. } => {
                println!("  [controller] agent registered: {agent_id} (protocol {protocol_version})");
                let _ = registered_tx.send(agent_id.clone());
            }
            ControllerEvent::SessionBound { agent_id, guild_id, voice_channel_id, source, .. } => {
                match source {
                    BindSource::Add => println!("  [controller] session {guild_id}:{voice_channel_id} confirmed by {agent_id} (add)"),
                    _ => println!("  [controller] session {guild_id}:{voice_channel_id} bound to {agent_id} (selected)"),
                }
            }
            ControllerEvent::SessionFreed { agent_id, guild_id, voice_channel_id, reason, .. } => {
                println!("  [controller] session {guild_id}:{voice_channel_id} of {agent_id} freed ({reason:?})")
            }
            ControllerEvent::SessionReleased { agent_id, guild_id, voice_channel_id, reason, .. } => {
                println!("  [controller] session {guild_id}:{voice_channel_id} released by {agent_id} ({reason})")
            }
            ControllerEvent::AgentDropped { agent_id, reason } => {
                println!("  [controller] agent dropped: {agent_id} ({reason:?})")
            }
            ControllerEvent::ProtocolViolation { conn, error } => {
                println!("  [controller] connection {conn} broke the protocol: {error}")
            }
            _ => {}
        }
    })
    .await
    .unwrap_or_else(|e| {
        eprintln!("demo: cannot bind: {e}");
        std::process::exit(1);
    });
    let url = format!("ws://{}", app.local_addr());
    println!("controller listening on {url}");

    let mut agents = Vec::new();
    for (id, guilds) in [
        ("agent-alpha", vec!["guild-1"]),
        ("agent-bravo", vec!["guild-1", "guild-2"]),
    ] {
        let cfg = AgentConfig::new(id)
            .with_guilds(guilds.clone())
            .with_bot(format!("bot-{id}"), format!("{id}#0001"));
        println!("starting {id} in {guilds:?}");
        let a = chopsticks::agent_app::start(&url, cfg, true, |_, _| {}).unwrap_or_else(|e| {
            eprintln!("demo: {e}");
            std::process::exit(1);
        });
        agents.push((id, a));
    }
    for _ in 0..2 {
        step("registration", registered.recv()).await;
    }

    println!("\n> agents");
    for a in step("agents", app.agents_json())
        .await
        .as_array()
        .into_iter()
        .flatten()
    {
        println!(
            "  {} guilds={} ready={} protocol={}",
            a["agentId"].as_str().unwrap_or("?"),
            a["guildIds"],
            a["ready"],
            a["protocolVersion"].as_str().unwrap_or("?")
        );
    }

    play(&app, "guild-1", "vc-lounge", "never gonna give you up").await;
    let first = app
        .handle
        .call(|c, _| c.select_agent("guild-1", "vc-lounge"))
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    play(&app, "guild-1", "vc-lounge", "take on me").await;
    play(&app, "guild-1", "vc-lounge", "bohemian rhapsody").await;
    req(&app, &first, "queue", json!({"guildId": "guild-1"})).await;
    req(&app, &first, "skip", json!({"guildId": "guild-1"})).await;
    req(&app, &first, "status", json!({"guildId": "guild-1"})).await;
    req(
        &app,
        &first,
        "volume",
        json!({"guildId": "guild-1", "volume": 250}),
    )
    .await;

    println!("\n-- another voice channel in the same guild needs another agent (the first is busy there) --");
    play(&app, "guild-1", "vc-gaming", "africa").await;
    println!("\n-- nobody is in guild-9 --");
    play(&app, "guild-9", "vc-x", "dancing queen").await;

    println!("\n-- a request to an agent that is not connected --");
    req(&app, "agent-ghost", "status", json!({"guildId": "guild-1"})).await;
    println!("\n-- an op the agent does not know --");
    req(&app, &first, "teleport", json!({"guildId": "guild-1"})).await;

    req(&app, &first, "stop", json!({"guildId": "guild-1"})).await;

    println!("\n-- the agent in vc-gaming stops (Ctrl-C): released for its channel, then close --");
    let gaming = app
        .handle
        .call(|c, _| c.select_agent("guild-1", "vc-gaming"))
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    if let Some(i) = agents.iter().position(|(id, _)| gaming == *id) {
        let (id, a) = agents.remove(i);
        let released = step("graceful stop", a.stop("shutdown")).await;
        println!("  {id} released {released} session(s) and closed");
    }
    play(&app, "guild-1", "vc-gaming", "africa").await;

    println!("\n-- an agent speaking protocol 0.9.0 --");
    let (mut ws, _) = step("connect", tokio_tungstenite::connect_async(url.as_str()))
        .await
        .unwrap_or_else(|e| {
            eprintln!("demo: {e}");
            std::process::exit(1);
        });
    let hello = json!({"type":"hello","protocolVersion":"0.9.0","agentId":"agent-legacy","botUserId":null,"tag":null,"ready":true,"guildIds":["guild-1"],"poolId":"default"});
    println!("  agent-legacy -> {hello}");
    let _ = ws.send(Message::text(hello.to_string())).await;
    let mut code = None;
    while let Some(Ok(msg)) = step("legacy reply", ws.next()).await {
        match msg {
            Message::Text(t) => println!("  agent-legacy <- {t}"),
            Message::Close(Some(f)) => {
                println!(
                    "  agent-legacy <- close {} \"{}\"",
                    u16::from(f.code),
                    f.reason
                );
                code = Some(u16::from(f.code));
            }
            _ => {}
        }
    }
    if code != Some(1008) {
        eprintln!("demo: expected close 1008, got {code:?}");
        std::process::exit(1);
    }

    println!("\nshutting down the controller (agents see close 1001), then the agents");
    step("shutdown", app.server.shutdown()).await;
    for (_, a) in &agents {
        step("agent shutdown", a.handle.shutdown()).await;
    }
    println!("demo finished");
}

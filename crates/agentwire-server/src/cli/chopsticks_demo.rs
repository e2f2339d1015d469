//! The `chopsticks_demo` command: its flags and its `main`. `examples/chopsticks_demo.rs` is the
//! binary, and its documentation says what the command does and how to run it. [`server`]
//! and [`script`] are its two halves, which `agentwire demo` runs on its shared listener.

use std::process::ExitCode;

use crate::chopsticks;
use crate::endpoint::Place;
use agentwire::chopsticks::{AgentConfig, BindSource, ControllerConfig, ControllerEvent};
use chopsticks::controller_app::{ControllerApp, Outcome};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

use super::script::{step, DemoError};

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

async fn play(app: &ControllerApp, guild: &str, vc: &str, query: &str) -> Result<Value, DemoError> {
    println!("\n> play {guild} {vc} {query:?}");
    let (agent, outcome) = step("play", app.play(guild, vc, query)).await?;
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
    Ok(j)
}

async fn req(
    app: &ControllerApp,
    agent: &str,
    op: &str,
    data: Value,
) -> Result<Outcome, DemoError> {
    println!("\n> req {agent} {op} {data}");
    let out = step(op, app.request(agent, op, data)).await?;
    println!("  {}", show(&out));
    Ok(out)
}

/// Runs the `chopsticks_demo` command, as `cargo run --example chopsticks_demo` does: the
/// demo's controller on 127.0.0.1 (a free port), then [`script`] against it.
pub async fn main() -> ExitCode {
    let outcome = async {
        let mut demo = server(Place::Bind("127.0.0.1:0")).await?;
        let result = script(&mut demo).await;
        println!("\nshutting down the controller");
        step("shutdown", demo.app.server.shutdown()).await?;
        result
    };
    super::script::exit_code("chopsticks_demo", outcome.await)
}

/// The demo's controller and what its script waits for.
pub struct Controller {
    /// The running controller.
    pub app: ControllerApp,
    /// The id of every agent that registers, as it does.
    registered: mpsc::UnboundedReceiver<String>,
}

/// The demo's controller at `place`, printing what it does (`[controller] ...`).
pub async fn server(place: Place<'_>) -> std::io::Result<Controller> {
    let (registered_tx, registered) = mpsc::unbounded_channel();
    let on_event = move |ev: &ControllerEvent| {
        match ev {
            ControllerEvent::AgentRegistered { agent_id, protocol_version, .. } => {
                println!("  [controller] agent registered: {agent_id} (protocol {protocol_version})");
                let _ = registered_tx.send(agent_id.to_string());
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
    };
    let config = ControllerConfig::default();
    let app = match place {
        Place::Bind(addr) => chopsticks::controller_app::start(addr, config, on_event).await?,
        Place::Route(at) => chopsticks::controller_app::mount(at, config, on_event).await?,
    };
    Ok(Controller { app, registered })
}

/// Two mock agents against the demo's controller and a scripted session: selection, the
/// agents' answers and errors, a graceful stop, a protocol-version rejection.
pub async fn script(demo: &mut Controller) -> Result<(), DemoError> {
    println!("== chopsticks demo: one controller, two mock agents ==");
    let app = &demo.app;
    let url = app.url();
    println!("controller at {url}");

    let mut agents = Vec::new();
    for (id, guilds) in [
        ("agent-alpha", vec!["guild-1"]),
        ("agent-bravo", vec!["guild-1", "guild-2"]),
    ] {
        let cfg = AgentConfig::new(id)
            .with_guilds(guilds.clone())
            .with_bot(format!("bot-{id}"), format!("{id}#0001"));
        println!("starting {id} in {guilds:?}");
        let a = chopsticks::agent_app::start(&url, cfg, true, |_, _| {})?;
        agents.push((id, a));
    }
    for _ in 0..2 {
        step("registration", demo.registered.recv()).await?;
    }

    println!("\n> agents");
    for a in step("agents", app.agents_json())
        .await?
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

    play(app, "guild-1", "vc-lounge", "never gonna give you up").await?;
    let first = app
        .handle
        .call(|c, _| c.select_agent("guild-1", "vc-lounge"))
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    play(app, "guild-1", "vc-lounge", "take on me").await?;
    play(app, "guild-1", "vc-lounge", "bohemian rhapsody").await?;
    req(app, &first, "queue", json!({"guildId": "guild-1"})).await?;
    req(app, &first, "skip", json!({"guildId": "guild-1"})).await?;
    req(app, &first, "status", json!({"guildId": "guild-1"})).await?;
    req(
        app,
        &first,
        "volume",
        json!({"guildId": "guild-1", "volume": 250}),
    )
    .await?;

    println!("\n-- another voice channel in the same guild needs another agent (the first is busy there) --");
    play(app, "guild-1", "vc-gaming", "africa").await?;
    println!("\n-- nobody is in guild-9 --");
    play(app, "guild-9", "vc-x", "dancing queen").await?;

    println!("\n-- a request to an agent that is not connected --");
    req(app, "agent-ghost", "status", json!({"guildId": "guild-1"})).await?;
    println!("\n-- an op the agent does not know --");
    req(app, &first, "teleport", json!({"guildId": "guild-1"})).await?;

    req(app, &first, "stop", json!({"guildId": "guild-1"})).await?;

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
        let released = step("graceful stop", a.stop("shutdown")).await?;
        println!("  {id} released {released} session(s) and closed");
    }
    play(app, "guild-1", "vc-gaming", "africa").await?;

    println!("\n-- an agent speaking protocol 0.9.0 --");
    let (mut ws, _) = step("connect", tokio_tungstenite::connect_async(url.as_str())).await??;
    let hello = json!({"type":"hello","protocolVersion":"0.9.0","agentId":"agent-legacy","botUserId":null,"tag":null,"ready":true,"guildIds":["guild-1"],"poolId":"default"});
    println!("  agent-legacy -> {hello}");
    let _ = ws.send(Message::text(hello.to_string())).await;
    let mut code = None;
    while let Some(Ok(msg)) = step("legacy reply", ws.next()).await? {
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
        return Err(format!("expected close 1008, got {code:?}").into());
    }

    println!("\nshutting down the agents");
    for (_, a) in &agents {
        step("agent shutdown", a.handle.shutdown()).await?;
    }
    println!("chopsticks demo finished");
    Ok(())
}

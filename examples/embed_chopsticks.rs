//! Embedding Chopsticks: the `Controller` machine of `chopsticks-proto` served by
//! `agentwire-tokio`'s `Server`, and an `Agent` machine driven by its `Client`. The agent
//! registers, the controller picks it for a voice channel and asks it to `play`, the
//! application behind the agent answers, and the controller gets the answer.
//!
//! ```text
//! cargo run --release --example embed_chopsticks
//! ```

use std::time::Duration;

use agentwire_core::UuidV4Ids;
use agentwire_tokio::{Client, ClientConfig, Events, Server, ServerConfig};
use chopsticks_proto::{
    Agent, AgentConfig, AgentEvent, Controller, ControllerConfig, ControllerEvent,
};
use serde_json::json;

type Error = Box<dyn std::error::Error>;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let controller = Controller::new(ControllerConfig::default(), UuidV4Ids);
    let (server, mut controller_events) =
        Server::bind("127.0.0.1:0", controller, ServerConfig::default()).await?;
    let url = format!("ws://{}", server.local_addr());
    println!("controller on {url}");

    // The agent says hello (with its guilds) on every connect and keeps its heartbeat.
    let config = AgentConfig::new("agent-1").with_guilds(["guild-1"]);
    let (agent, mut agent_events) =
        Client::connect(&url, Agent::new(config), ClientConfig::default())?;
    if let ControllerEvent::AgentRegistered { agent_id, .. } = until(&mut controller_events, |e| {
        matches!(e, ControllerEvent::AgentRegistered { .. })
    })
    .await?
    {
        println!("controller: {agent_id} registered");
    }

    // Commands run in the task that owns the machine: pick an agent for the voice channel
    // (binding it to that session) and send it `play`. Real agents want an acting user.
    let data = json!({"guildId": "guild-1", "voiceChannelId": "voice-1",
                      "query": "never gonna give you up", "actorUserId": "user-1"});
    let (chosen, request) = server
        .handle()
        .call(move |c, now| c.request_for_session("guild-1", "voice-1", "play", data, now))
        .await??;
    println!("controller -> {chosen}: play ({request})");

    // The application behind the agent does the work and answers through the machine.
    if let AgentEvent::Request(req) =
        until(&mut agent_events, |e| matches!(e, AgentEvent::Request(_))).await?
    {
        println!("agent <- {} {}", req.op, req.data);
        let answer = json!({"track": {"title": "Never Gonna Give You Up"}, "action": "playing"});
        agent
            .call(move |a, now| a.respond_ok(req.id.clone(), answer, now))
            .await??;
    }
    if let ControllerEvent::RequestCompleted { resp, .. } = until(&mut controller_events, |e| {
        matches!(e, ControllerEvent::RequestCompleted { .. })
    })
    .await?
    {
        println!("controller <- {:?}", resp.result());
    }

    agent.shutdown().await;
    server.shutdown().await;
    Ok(())
}

/// The next event of `events` that `pick` wants (the others are skipped), within 10 s.
async fn until<E>(events: &mut Events<E>, pick: impl Fn(&E) -> bool) -> Result<E, Error> {
    let wait = async {
        while let Some(e) = events.recv().await {
            if pick(&e) {
                return Some(e);
            }
        }
        None
    };
    tokio::time::timeout(Duration::from_secs(10), wait)
        .await?
        .ok_or_else(|| "the driver stopped".into())
}

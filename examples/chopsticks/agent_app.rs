//! The mock music agent: an `Agent` machine driven by agentwire-tokio, answering requests
//! with a [`MockPlayer`](super::player::MockPlayer).

use std::time::Duration;

use agentwire::chopsticks::{Add, Agent, AgentConfig, AgentEvent, Released, SessionKind};
use agentwire::tokio::{Backoff, Client, ClientConfig, ConfigError, Handle};

use super::player::{MockPlayer, SideEffect};

/// A running mock agent.
pub struct RunningAgent {
    /// Commands to the agent machine.
    pub handle: Handle<Agent>,
    /// The task answering requests; ends when the driver stops.
    pub task: tokio::task::JoinHandle<()>,
}

/// What the agent saw, for programs that print a log.
#[derive(Debug, Clone)]
pub enum AgentLog {
    /// Connected and announced.
    Connected,
    /// Disconnected (the driver reconnects with backoff).
    Disconnected,
    /// Answered a request.
    Answered {
        /// The op.
        op: String,
        /// `Ok(data)` or `Err(error)` as sent.
        result: Result<serde_json::Value, String>,
    },
    /// The controller sent an `error` message.
    ControllerError(String),
}

/// Starts agent `config` against `url`, reconnecting with the transport's backoff
/// (1 s doubling to 30 s). `log` sees what happens.
pub fn start(
    url: &str,
    config: AgentConfig,
    reconnect: bool,
    log: impl Fn(&str, AgentLog) + Send + 'static,
) -> Result<RunningAgent, ConfigError> {
    let agent_id = config.agent_id.clone();
    let client_cfg = ClientConfig::default()
        .with_reconnect(reconnect)
        .with_backoff(
            Backoff::new(Duration::from_secs(1), Duration::from_secs(30))
                .with_jitter(Duration::from_millis(500)),
        );
    let (handle, mut events) = Client::connect(url, Agent::new(config), client_cfg)?;
    let h = handle.clone();
    let task = tokio::spawn(async move {
        let mut player = MockPlayer::new();
        while let Some(ev) = events.recv().await {
            match ev {
                AgentEvent::Connected { .. } => log(&agent_id, AgentLog::Connected),
                AgentEvent::Disconnected { .. } => log(&agent_id, AgentLog::Disconnected),
                AgentEvent::ControllerError { error } => {
                    log(&agent_id, AgentLog::ControllerError(error))
                }
                AgentEvent::Request(req) => {
                    let data = req.data.to_value();
                    let (result, effect) = player.handle(&req.op, &data);
                    let (id, me) = (req.id.clone(), agent_id.clone());
                    let reply = result.clone();
                    let sent = h
                        .call(move |a, now| {
                            // Events first, so the controller binds the session before the reply.
                            match effect {
                                Some(SideEffect::Joined {
                                    guild_id,
                                    voice_channel_id,
                                    text_channel_id,
                                    owner_user_id,
                                }) => {
                                    let add = Add {
                                        agent_id: me,
                                        guild_id,
                                        channel_id: voice_channel_id.clone(),
                                        voice_channel_id,
                                        text_channel_id,
                                        kind: SessionKind::Music,
                                        owner_user_id,
                                        ok: true,
                                        error: None,
                                        runner_id: None,
                                    };
                                    let _ = a.send_add(add, now);
                                }
                                Some(SideEffect::Left {
                                    guild_id,
                                    voice_channel_id,
                                    reason,
                                }) => {
                                    let rel = Released {
                                        agent_id: me,
                                        guild_id,
                                        voice_channel_id,
                                        reason,
                                        kind: SessionKind::Music,
                                        runner_id: None,
                                    };
                                    let _ = a.send_released(rel, now);
                                }
                                None => {}
                            }
                            match reply {
                                Ok(v) => a.respond_ok(id, v, now),
                                Err(e) => a.respond_err(id, e, now),
                            }
                        })
                        .await;
                    if sent.is_err() {
                        break;
                    }
                    log(&agent_id, AgentLog::Answered { op: req.op, result });
                }
                AgentEvent::Malformed { .. } => {}
                _ => {}
            }
        }
    });
    Ok(RunningAgent { handle, task })
}

//! The mock music agent: an `Agent` machine driven by agentwire-tokio, answering requests
//! with a [`MockPlayer`].

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

impl RunningAgent {
    /// Stops the agent gracefully, as the spec's lifecycle describes: `released` for every
    /// voice session it is in (with `reason`), then close ([`Agent::leave`]), then the
    /// driver stops without reconnecting. Returns how many sessions were released (0 when
    /// it was not connected: the controller has freed them already).
    pub async fn stop(self, reason: &str) -> usize {
        let reason = reason.to_owned();
        let released = self
            .handle
            .call(move |a, now| a.leave(reason, now))
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or(0);
        // The releases and the close are queued before anything of the shutdown.
        self.handle.shutdown().await;
        let _ = self.task.await;
        released
    }
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
    let client_cfg = crate::common::client_transport(ClientConfig::default())
        .with_reconnect(reconnect)
        .with_backoff(
            Backoff::new(Duration::from_secs(1), Duration::from_secs(30))
                .with_jitter(Duration::from_millis(500)),
        );
    let (handle, mut events) = Client::connect(url, Agent::new(config), client_cfg)?;

    // Replies go through their own task and a bounded queue: awaiting `Handle::call` in the
    // task that reads `Events` could deadlock once the event channel is full (the driver
    // waits for us while we wait for it). Order is kept; a full queue drops the request
    // (the controller times it out) instead of growing without bound.
    let (replies, mut reply_rx) = tokio::sync::mpsc::channel::<Reply>(1024);
    let h = handle.clone();
    let me = agent_id.clone();
    tokio::spawn(async move {
        while let Some(reply) = reply_rx.recv().await {
            let me = me.clone();
            if h.call(move |a, now| reply.apply(a, &me, now))
                .await
                .is_err()
            {
                break;
            }
        }
    });

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
                    let (result, effect) = player.handle(&req.op, &req.data.to_value());
                    let reply = Reply {
                        id: req.id,
                        result: result.clone(),
                        effect,
                    };
                    if replies.try_send(reply).is_err() {
                        continue; // overloaded or stopping: let the controller time it out
                    }
                    log(&agent_id, AgentLog::Answered { op: req.op, result });
                }
                _ => {}
            }
        }
    });
    Ok(RunningAgent { handle, task })
}

/// One answer to send: the side effect's event first, so the controller binds (or frees) the
/// session before it sees the reply.
struct Reply {
    id: String,
    result: Result<serde_json::Value, String>,
    effect: Option<SideEffect>,
}

impl Reply {
    fn apply(self, a: &mut Agent, me: &str, now: std::time::Instant) {
        match self.effect {
            Some(SideEffect::Joined {
                guild_id,
                voice_channel_id,
                text_channel_id,
                owner_user_id,
            }) => {
                let add = Add {
                    agent_id: me.to_owned(),
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
                    agent_id: me.to_owned(),
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
        // Err = disconnected meanwhile: the controller has already failed the request.
        let _ = match self.result {
            Ok(v) => a.respond_ok(self.id, v, now),
            Err(e) => a.respond_err(self.id, e, now),
        };
    }
}

//! The reference controller: a `Controller` machine served by agentwire-tokio, with a
//! line-based command language and one JSON line per event.
//!
//! Every op it sends names an acting user (`actorUserId`, and `adminToken` when set): the
//! real agent refuses ops without one (`missing-actor`). What real agents require in `data`
//! per op is listed in `agentwire::chopsticks::ops`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentwire::chopsticks::{
    BindSource, Controller, ControllerConfig, ControllerEvent, DropReason, FreeReason, RawJson,
    Resp, AGENT_OFFLINE, AGENT_TIMEOUT,
};
use agentwire::core::{Id128, Observed, UuidV4Ids};
use agentwire::tokio::{Handle, Limits, ServerConfig};
use serde_json::{json, Value};
use tokio::sync::oneshot;

use crate::endpoint::{Endpoint, Mount, Place};

/// The acting user sent when none is configured: a placeholder that real agents answer with
/// `not-in-guild` (a user they cannot find) instead of `missing-actor`. Pass a Discord user
/// who is in the voice channel (`--actor-user-id`), or the agent's admin token.
pub const DEFAULT_ACTOR_USER_ID: &str = "chopsticks-controller";

/// The fields in which the real agent looks for the acting user, in its order.
const ACTOR_FIELDS: [&str; 3] = ["actorUserId", "ownerUserId", "adminUserId"];

/// Who the controller acts as in the ops it sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    /// Sent as `actorUserId` unless `data` names an acting user already.
    pub user_id: String,
    /// Sent as `adminToken` (the real agent's admin override) unless `data` has one.
    pub admin_token: Option<String>,
}

impl Default for Actor {
    fn default() -> Self {
        Self {
            user_id: DEFAULT_ACTOR_USER_ID.to_owned(),
            admin_token: None,
        }
    }
}

impl Actor {
    /// `data` with the acting user added: `null` becomes an object; an object keeps an
    /// acting user it already names; other JSON values are sent as they are.
    pub fn apply(&self, data: Value) -> Value {
        let mut data = if data.is_null() { json!({}) } else { data };
        if let Some(obj) = data.as_object_mut() {
            if !ACTOR_FIELDS.iter().any(|k| obj.contains_key(*k)) {
                obj.insert("actorUserId".into(), json!(self.user_id));
            }
            if let Some(token) = &self.admin_token {
                obj.entry("adminToken").or_insert_with(|| json!(token));
            }
        }
        data
    }
}

/// How a request ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The agent answered.
    Answered(Resp),
    /// It failed without an answer (`agent-offline`, `agent-timeout`, a selection error).
    Failed(String),
}

impl Outcome {
    /// `{"ok":true,"data":...}` or `{"ok":false,"error":...}`.
    pub fn to_json(&self) -> Value {
        match self {
            Self::Answered(resp) => match resp.result() {
                Ok(data) => {
                    json!({"ok": true, "data": serde_json::from_str::<Value>(data).unwrap_or(Value::Null)})
                }
                Err(e) => json!({"ok": false, "error": e}),
            },
            Self::Failed(e) => json!({"ok": false, "error": e}),
        }
    }
}

type Waiters = Arc<Mutex<BTreeMap<Id128, oneshot::Sender<Outcome>>>>;

/// A running controller.
pub struct ControllerApp {
    /// Where the controller is served (its address and shutdown): a listener of its own
    /// ([`start`]) or a route of a shared one ([`mount`]).
    pub server: Endpoint<Observed<Controller>>,
    /// Commands to the controller machine.
    pub handle: Handle<Observed<Controller>>,
    waiters: Waiters,
    /// Ends when the server stops.
    pub events_task: tokio::task::JoinHandle<()>,
    /// Who the ops are sent as.
    pub actor: Actor,
}

/// The transport settings of the reference controller: WebSocket ping every 15 s (as the
/// real controller), 1 MiB transport message cap (the machine answers 64 KiB..1 MiB frames
/// with "Frame too large"; bigger ones are closed with 1009 by the transport).
pub fn server_config() -> ServerConfig {
    let config = ServerConfig::default()
        .with_limits(Limits::default().with_ping_interval(Some(Duration::from_secs(15))));
    // Over the per-address cap: the controller's own per-IP refusal (1008
    // `too-many-connections`, as the real controller closes the 21st connection of an IP).
    let refusal = agentwire::tokio::Refusal::close(
        agentwire::core::CloseCode::POLICY,
        "too-many-connections",
    );
    crate::common::protect(config, "chopsticks controller", "/", refusal)
}

/// Starts a controller on `addr` with [`server_config`]; `on_event` sees every event first.
pub async fn start(
    addr: &str,
    config: ControllerConfig,
    on_event: impl Fn(&ControllerEvent) + Send + 'static,
) -> std::io::Result<ControllerApp> {
    start_with(addr, config, server_config(), on_event).await
}

/// [`start`] with explicit transport settings.
pub async fn start_with(
    addr: &str,
    config: ControllerConfig,
    transport: ServerConfig,
    on_event: impl Fn(&ControllerEvent) + Send + 'static,
) -> std::io::Result<ControllerApp> {
    serve(Place::Bind(addr), config, transport, on_event).await
}

/// Serves a controller on the route `at` of a shared listener, with [`server_config`] (its
/// plain-HTTP answer naming the route's path); otherwise as [`start`].
pub async fn mount(
    at: Mount<'_>,
    config: ControllerConfig,
    on_event: impl Fn(&ControllerEvent) + Send + 'static,
) -> std::io::Result<ControllerApp> {
    let transport = server_config().with_endpoint("chopsticks controller", at.path);
    mount_with(at, config, transport, on_event).await
}

/// [`mount`] with explicit transport settings.
pub async fn mount_with(
    at: Mount<'_>,
    config: ControllerConfig,
    transport: ServerConfig,
    on_event: impl Fn(&ControllerEvent) + Send + 'static,
) -> std::io::Result<ControllerApp> {
    serve(Place::Route(at), config, transport, on_event).await
}

/// The one body of [`start_with`] and [`mount_with`]: the controller with its observer and
/// its transport, at `place`.
async fn serve(
    place: Place<'_>,
    config: ControllerConfig,
    transport: ServerConfig,
    on_event: impl Fn(&ControllerEvent) + Send + 'static,
) -> std::io::Result<ControllerApp> {
    let waiters: Waiters = Arc::default();
    let w = waiters.clone();
    // Every event is handled where the driver polls the controller (a request's answer
    // reaches its waiter there, with no channel hand-off); none is passed on.
    let controller = Observed::new(
        Controller::new(config, UuidV4Ids),
        move |ev: ControllerEvent| {
            on_event(&ev);
            if let ControllerEvent::ReleaseIgnored {
                agent_id,
                kind,
                guild_id,
                voice_channel_id,
                reason,
            } = &ev
            {
                tracing::debug!(
                    "ignored a released ({reason}) from {agent_id} for the {} session of \
                     {guild_id}:{voice_channel_id}, which it is not bound to",
                    kind.as_str()
                );
            }
            let done = match ev {
                ControllerEvent::RequestCompleted { id, resp, .. } => {
                    Some((id, Outcome::Answered(resp)))
                }
                ControllerEvent::RequestFailed { id, error, .. } => {
                    Some((id, Outcome::Failed(error.into())))
                }
                ControllerEvent::RequestTimedOut { id, .. } => {
                    Some((id, Outcome::Failed(AGENT_TIMEOUT.into())))
                }
                _ => None,
            };
            if let Some((id, outcome)) = done {
                let tx = w.lock().ok().and_then(|mut m| m.remove(&id));
                if let Some(tx) = tx {
                    let _ = tx.send(outcome);
                }
            }
            None
        },
    );
    let (server, mut events) = place.serve(controller, transport).await?;
    // The observer keeps every event, so this only waits for the channel to close.
    let events_task = tokio::spawn(async move { while events.recv().await.is_some() {} });
    let handle = server.handle();
    Ok(ControllerApp {
        server,
        handle,
        waiters,
        events_task,
        actor: Actor::default(),
    })
}

impl ControllerApp {
    /// The address agents connect to.
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// `ws://<local_addr>/` (the route's path when mounted; `wss://` over TLS).
    pub fn url(&self) -> String {
        self.server.url("/")
    }

    /// Sets who the ops are sent as.
    pub fn with_actor(mut self, actor: Actor) -> Self {
        self.actor = actor;
        self
    }

    /// Sends `op` to `agent_id` (with the acting user added to `data`) and waits for the
    /// outcome.
    pub async fn request(&self, agent_id: &str, op: &str, data: Value) -> Outcome {
        let data = self.actor.apply(data);
        let (tx, rx) = oneshot::channel();
        let waiters = self.waiters.clone();
        let (agent, op_owned) = (agent_id.to_owned(), op.to_owned());
        // The waiter is registered inside the owner task, before the req is even sent, so a
        // fast reply cannot beat it.
        let sent = self
            .handle
            .call(move |c, now| {
                let id = c.request(&agent, &op_owned, RawJson::from_value(&data), now)?;
                if let Ok(mut m) = waiters.lock() {
                    m.insert(id, tx);
                }
                Ok::<_, agentwire::chopsticks::CommandError>(id)
            })
            .await;
        match sent {
            Err(_) => Outcome::Failed("controller-stopped".into()),
            Ok(Err(e)) => Outcome::Failed(e.as_str().into()),
            Ok(Ok(_)) => rx.await.unwrap_or(Outcome::Failed(AGENT_OFFLINE.into())),
        }
    }

    /// Sends `op` for the session of (`guild`, `vc`) and waits for the outcome: an op that
    /// starts a session (`play`, `search`, `assistantJoin`, ...) goes to the agent the
    /// selection rules pick, which is bound to the session from then on; any other op goes
    /// to the agent already bound (else `no-session`). `guildId`, `voiceChannelId` and the
    /// acting user are added to `data`. Returns the agent and the outcome.
    pub async fn session_op(
        &self,
        guild: &str,
        vc: &str,
        op: &str,
        data: Value,
    ) -> (Option<String>, Outcome) {
        let mut data = self.actor.apply(data);
        if let Some(obj) = data.as_object_mut() {
            obj.insert("guildId".into(), json!(guild));
            obj.insert("voiceChannelId".into(), json!(vc));
        }
        let (tx, rx) = oneshot::channel();
        let waiters = self.waiters.clone();
        let (g, v, o) = (guild.to_owned(), vc.to_owned(), op.to_owned());
        // As in `request`: the waiter is registered in the owner task, before the req leaves.
        let sent = self
            .handle
            .call(move |c, now| {
                let (agent, id) =
                    c.request_for_session(&g, &v, &o, RawJson::from_value(&data), now)?;
                if let Ok(mut m) = waiters.lock() {
                    m.insert(id, tx);
                }
                Ok::<_, agentwire::chopsticks::CommandError>(agent)
            })
            .await;
        match sent {
            Err(_) => (None, Outcome::Failed("controller-stopped".into())),
            Ok(Err(e)) => (None, Outcome::Failed(e.as_str().into())),
            Ok(Ok(agent)) => {
                let out = rx.await.unwrap_or(Outcome::Failed(AGENT_OFFLINE.into()));
                (Some(agent.into_string()), out)
            }
        }
    }

    /// `play` of `query` for (`guild`, `vc`): see [`session_op`](Self::session_op).
    pub async fn play(&self, guild: &str, vc: &str, query: &str) -> (Option<String>, Outcome) {
        self.session_op(guild, vc, "play", json!({"query": query}))
            .await
    }

    /// The live agents as a JSON array.
    pub async fn agents_json(&self) -> Value {
        self.handle
            .call(|c, now| {
                c.agents()
                    .map(|a| {
                        json!({
                            "agentId": a.agent_id,
                            "botUserId": a.bot_user_id,
                            "tag": a.tag,
                            "ready": a.ready,
                            "guildIds": a.guild_ids,
                            "poolId": a.pool_id,
                            "protocolVersion": a.protocol_version,
                            "lastSeenMsAgo": c.last_seen(&a.agent_id).map(|t| now.saturating_duration_since(t).as_millis() as u64),
                            "pending": c.pending_for(&a.agent_id),
                        })
                    })
                    .collect::<Vec<_>>()
            })
            .await
            .map(Value::from)
            .unwrap_or(Value::Null)
    }

    /// Runs one command line: `agents`, `req AGENT_ID OP [JSON_DATA]`,
    /// `play GUILD VOICE_CHANNEL QUERY`, `op GUILD VOICE_CHANNEL OP [JSON_DATA]`.
    pub async fn execute(&self, line: &str) -> Value {
        let line = line.trim();
        let (cmd, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let rest = rest.trim();
        match cmd {
            "agents" => self.agents_json().await,
            "req" => {
                let mut parts = rest.splitn(3, char::is_whitespace);
                let (Some(agent), Some(op)) = (parts.next(), parts.next()) else {
                    return json!({"error": "usage: req AGENT_ID OP JSON_DATA"});
                };
                let data = match parts.next().map(str::trim).filter(|s| !s.is_empty()) {
                    None => Value::Null,
                    Some(text) => match serde_json::from_str(text) {
                        Ok(v) => v,
                        Err(e) => return json!({"error": format!("bad JSON_DATA: {e}")}),
                    },
                };
                let mut out = self.request(agent, op, data).await.to_json();
                out["agentId"] = json!(agent);
                out["op"] = json!(op);
                out
            }
            "play" => {
                let mut parts = rest.splitn(3, char::is_whitespace);
                let (Some(guild), Some(vc), Some(query)) =
                    (parts.next(), parts.next(), parts.next())
                else {
                    return json!({"error": "usage: play GUILD VOICE_CHANNEL QUERY"});
                };
                let (agent, outcome) = self.play(guild, vc, query.trim()).await;
                let mut out = outcome.to_json();
                out["agentId"] = json!(agent);
                out["op"] = json!("play");
                out
            }
            "op" => {
                let mut parts = rest.splitn(4, char::is_whitespace);
                let (Some(guild), Some(vc), Some(op)) = (parts.next(), parts.next(), parts.next())
                else {
                    return json!({"error": "usage: op GUILD VOICE_CHANNEL OP [JSON_DATA]"});
                };
                let data = match parts.next().map(str::trim).filter(|s| !s.is_empty()) {
                    None => json!({}),
                    Some(text) => match serde_json::from_str(text) {
                        Ok(v) => v,
                        Err(e) => return json!({"error": format!("bad JSON_DATA: {e}")}),
                    },
                };
                let (agent, outcome) = self.session_op(guild, vc, op, data).await;
                let mut out = outcome.to_json();
                out["agentId"] = json!(agent);
                out["op"] = json!(op);
                out
            }
            "" => Value::Null,
            other => {
                json!({"error": format!("unknown command {other:?}; try: {COMMANDS}")})
            }
        }
    }
}

/// The command language, as the usage line names it.
pub const COMMANDS: &str = "agents | req AGENT_ID OP [JSON_DATA] | play GUILD VOICE_CHANNEL QUERY | op GUILD VOICE_CHANNEL OP [JSON_DATA]";

/// One JSON line for an event, or `None` for events the controller example does not print.
pub fn event_json(ev: &ControllerEvent) -> Option<Value> {
    Some(match ev {
        ControllerEvent::AgentRegistered {
            agent_id,
            conn,
            replaced,
            protocol_version,
        } => json!({
            "event": "agent_registered", "agentId": agent_id, "conn": conn.get(),
            "replacedConn": replaced.map(|c| c.get()), "protocolVersion": protocol_version,
        }),
        ControllerEvent::AgentUpdated { agent_id } => {
            json!({"event": "agent_updated", "agentId": agent_id})
        }
        ControllerEvent::AgentDropped { agent_id, reason } => json!({
            "event": "agent_dropped", "agentId": agent_id,
            "reason": match reason { DropReason::Disconnected => "disconnected", DropReason::Stale => "stale", DropReason::Rejected => "rejected", _ => "other" },
        }),
        ControllerEvent::GuildsChanged {
            agent_id,
            added,
            removed,
        } => json!({
            "event": "guilds_changed", "agentId": agent_id, "added": added, "removed": removed,
        }),
        ControllerEvent::SessionBound {
            agent_id,
            kind,
            guild_id,
            voice_channel_id,
            source,
            replaced,
            ..
        } => json!({
            "event": "session_bound", "agentId": agent_id, "kind": kind.as_str(),
            "guildId": guild_id, "voiceChannelId": voice_channel_id,
            "by": match source { BindSource::Selection => "selection", BindSource::Add => "add", _ => "other" },
            "replaced": replaced,
        }),
        ControllerEvent::SessionFreed {
            agent_id,
            kind,
            guild_id,
            voice_channel_id,
            reason,
        } => json!({
            "event": "session_freed", "agentId": agent_id, "kind": kind.as_str(),
            "guildId": guild_id, "voiceChannelId": voice_channel_id,
            "reason": match reason {
                FreeReason::AgentDropped => "agent-dropped",
                FreeReason::StartFailed => "start-failed",
                FreeReason::JoinFailed => "join-failed",
                _ => "other",
            },
        }),
        ControllerEvent::SessionJoinFailed {
            agent_id,
            kind,
            guild_id,
            voice_channel_id,
            error,
        } => json!({
            "event": "session_join_failed", "agentId": agent_id, "kind": kind.as_str(),
            "guildId": guild_id, "voiceChannelId": voice_channel_id, "error": error,
        }),
        ControllerEvent::SessionReleased {
            agent_id,
            kind,
            guild_id,
            voice_channel_id,
            reason,
        } => json!({
            "event": "session_released", "agentId": agent_id, "kind": kind.as_str(),
            "guildId": guild_id, "voiceChannelId": voice_channel_id, "reason": reason,
        }),
        ControllerEvent::RequestCompleted {
            id,
            agent_id,
            op,
            resp,
        } => json!({
            "event": "request_completed", "id": id.to_string(), "agentId": agent_id, "op": op, "ok": resp.ok,
            "error": resp.error,
        }),
        ControllerEvent::RequestFailed {
            id,
            agent_id,
            op,
            error,
        } => json!({
            "event": "request_failed", "id": id.to_string(), "agentId": agent_id, "op": op, "error": error,
        }),
        ControllerEvent::RequestTimedOut { id, agent_id, op } => json!({
            "event": "request_timed_out", "id": id.to_string(), "agentId": agent_id, "op": op, "error": AGENT_TIMEOUT,
        }),
        ControllerEvent::ProtocolViolation { conn, error } => json!({
            "event": "protocol_violation", "conn": conn.get(), "error": error.to_string(),
        }),
        _ => return None,
    })
}

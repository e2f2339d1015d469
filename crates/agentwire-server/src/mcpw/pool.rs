//! An agent pool: N reference agents run from one process and one runtime, each its own
//! [`Agent`](agentwire::mcpw::Agent) machine on its own connection (the orchestrator
//! registers one agent per connection), sharing one settings template, one API key and one
//! reconnect [`Backoff`], with their events merged into one stream.
//!
//! What is shared and what is not: a connection carries one registered agent, so a pool
//! never multiplexes agents over a connection (the spec's `ConnectionPool` keys connections
//! by agent id, one each, reused while active: each machine here keeps its connection and
//! redials it with the shared backoff). Each agent keeps its own codec state and its own
//! replica of the shared state; the server's full sync on every (re)connection is what
//! keeps a replica, the only client-side cache worth keeping, correct.

use tokio::sync::mpsc;

use super::agent_app::{
    connect_machine, AgentEvent, AgentMachine, AgentSettings, Backoff, WireSettings,
};
use agentwire::tokio::{ConfigError, Handle};

/// Events of the pool's agents: which agent (its index) and what happened.
pub type PoolEvents = mpsc::Receiver<(usize, AgentEvent)>;

/// What every agent of a pool shares.
#[derive(Debug, Clone)]
pub struct PoolConfig {
    /// The settings template: agent `i` (from 1) is `<agent_id>-<i>`, otherwise alike.
    pub settings: AgentSettings,
    /// How many agents. Default 1.
    pub count: usize,
    /// The API key every agent sends, if any.
    pub api_key: Option<String>,
    /// Reconnect waits, the same rule for each agent (each keeps its own count of
    /// failures, so one agent's outage does not slow the others). Default
    /// [`Backoff::default`].
    pub backoff: Backoff,
    /// Each agent keeps a replica of the shared state. Default `false`.
    pub shared_state: bool,
    /// The vote each agent answers collaboration requests with. Default `approve`.
    pub vote: String,
    /// How each agent speaks on the wire (versions offered, compression, batching).
    /// Default [`WireSettings::default`].
    pub wire: WireSettings,
}

impl PoolConfig {
    /// `count` agents from the template `settings`, the other fields at their defaults.
    pub fn new(settings: AgentSettings, count: usize) -> Self {
        Self {
            settings,
            count,
            api_key: None,
            backoff: Backoff::default(),
            shared_state: false,
            vote: "approve".to_owned(),
            wire: WireSettings::default(),
        }
    }
}

/// The running agents of a pool.
pub struct AgentPool {
    handles: Vec<Handle<AgentMachine>>,
    ids: Vec<String>,
}

impl AgentPool {
    /// Starts the agents of `config` against `url`. Call from inside a tokio runtime.
    pub fn connect(url: &str, config: &PoolConfig) -> Result<(Self, PoolEvents), ConfigError> {
        let (tx, rx) = mpsc::channel(256);
        let mut handles = Vec::with_capacity(config.count);
        let mut ids = Vec::with_capacity(config.count);
        for i in 0..config.count {
            let mut s = config.settings.clone();
            s.agent_id = format!("{}-{}", config.settings.agent_id, i + 1);
            ids.push(s.agent_id.clone());
            let machine = AgentMachine::new(s)
                .with_backoff(config.backoff)
                .with_shared_state(config.shared_state)
                .with_vote(&config.vote)
                .with_wire(config.wire.clone());
            let (handle, mut events) = connect_machine(url, machine, config.api_key.as_deref())?;
            let tx = tx.clone();
            tokio::spawn(async move {
                while let Some(ev) = events.recv().await {
                    if tx.send((i, ev)).await.is_err() {
                        break;
                    }
                }
            });
            handles.push(handle);
        }
        Ok((Self { handles, ids }, rx))
    }

    /// The agents' ids, by index.
    pub fn agent_ids(&self) -> &[String] {
        &self.ids
    }

    /// Agent `i`'s handle.
    pub fn handle(&self, i: usize) -> Option<&Handle<AgentMachine>> {
        self.handles.get(i)
    }

    /// Starts a graceful shutdown of every agent (`agent.shutdown` with `reason`, tasks
    /// handed over to other agents); each reports [`AgentEvent::Stopped`] once the server
    /// answered. Returns how many started one.
    pub async fn begin_shutdown(&self, reason: &'static str) -> usize {
        let mut started = 0;
        for h in &self.handles {
            if h.call(move |m, now| m.shutdown(reason, true, now))
                .await
                .unwrap_or(false)
            {
                started += 1;
            }
        }
        started
    }

    /// Stops every agent's driver at once (each closes its connection).
    pub async fn shutdown(&self) {
        for h in &self.handles {
            h.shutdown().await;
        }
    }
}

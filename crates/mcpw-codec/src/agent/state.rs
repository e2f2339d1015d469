//! The [`Agent`]'s side of the shared CRDT state: its commands, and what it does with
//! `state.sync` notifications, sync answers and full syncs.

use serde_json::Value;

use super::link::key_of;
use super::{Agent, AgentEvent, Request};
use crate::crdt::{CrdtOp, CrdtStore, StateSnapshot};
use crate::error::{AgentCommandError, ErrorBody, ErrorCode};
use crate::header::MessageType;
use crate::message::{Body, OtherCall};
use crate::params::{StateSync, StateSyncResult};

impl Agent {
    /// The replica of the shared state (empty until the first full sync; only kept with
    /// [`AgentConfig::shared_state`](crate::AgentConfig::shared_state)). Reads are local:
    /// this is the agent's cache of the state.
    pub fn state(&self) -> &CrdtStore {
        self.replica.store()
    }

    /// Whether the replica is in step with the server on this connection (its full sync
    /// arrived), so state changes can be made.
    pub fn is_state_ready(&self) -> bool {
        self.replica.is_ready()
    }

    /// Adds `by` to this agent's entry of the G-Counter `key`, here and (`state.sync`) on
    /// the server, which passes it on to the other agents sharing the state.
    pub fn state_increment(&mut self, key: &str, by: u64) -> Result<(), AgentCommandError> {
        let me = self.agent_id().to_owned();
        self.state_change(|_, _| {
            vec![CrdtOp::Increment {
                key: key.to_owned(),
                actor: me.clone(),
                by,
            }]
        })
    }

    /// Adds `element` to the OR-Set `key` under a new tag (`<agent_id>-<seq>`), which it
    /// returns.
    pub fn state_add(&mut self, key: &str, element: &str) -> Result<String, AgentCommandError> {
        let me = self.agent_id().to_owned();
        let mut tag = String::new();
        self.state_change(|_, seq| {
            tag = format!("{me}-{seq}");
            vec![CrdtOp::Add {
                key: key.to_owned(),
                element: element.to_owned(),
                tag: tag.clone(),
            }]
        })?;
        Ok(tag)
    }

    /// Removes `element` from the OR-Set `key`: every tag of it this replica has observed
    /// is named in the sync, so every replica removes the same adds (a concurrent add
    /// elsewhere wins). Returns how many tags were removed; with none, nothing is sent.
    pub fn state_remove(&mut self, key: &str, element: &str) -> Result<usize, AgentCommandError> {
        if !self.replica.is_ready() {
            return Err(AgentCommandError::StateNotReady);
        }
        let untagged = [CrdtOp::Remove {
            key: key.to_owned(),
            element: element.to_owned(),
            tag: None,
        }];
        let ops = self.replica.store().resolve(&untagged);
        let n = ops.len();
        if n > 0 {
            self.state_change(move |_, _| ops)?;
        }
        Ok(n)
    }

    /// Asks the server for the whole state (`state.get`) and replaces the replica with it
    /// when it arrives ([`AgentEvent::StateUpdated`] with `from: None`).
    pub fn refresh_state(&mut self) -> Result<(), AgentCommandError> {
        self.check_open()?;
        if !self.config.shared_state {
            return Err(AgentCommandError::StateNotReady);
        }
        self.fetch_state();
        Ok(())
    }

    /// Applies the ops `build` makes locally and sends them as a `state.sync`.
    fn state_change(
        &mut self,
        build: impl FnOnce(&CrdtStore, u64) -> Vec<CrdtOp>,
    ) -> Result<(), AgentCommandError> {
        self.check_open()?;
        if !self.replica.is_ready() {
            return Err(AgentCommandError::StateNotReady);
        }
        let me = self.agent_id().to_owned();
        let max = self.config.max_pending_syncs;
        let (seq, params) = self
            .replica
            .local(&me, max, build)
            .map_err(AgentCommandError::State)?;
        self.send_sync(seq, params);
        Ok(())
    }

    /// Sends own sync `seq`, awaiting its answer; refused with a retryable error (4002,
    /// 4003), it is sent again after the retry wait, as the agent's other requests are, so
    /// a rate limit delays a change instead of rolling it back.
    fn send_sync(&mut self, seq: u64, params: StateSync) {
        let body = Body::StateSync(params);
        let about = Request::StateSync { seq };
        if let Err(AgentCommandError::Encode(e)) =
            self.send_tracked(MessageType::REQUEST, body, about, true)
        {
            self.out.event(AgentEvent::EncodeFailed(e));
        }
    }

    /// Sends `state.get` unless one is awaited already.
    pub(super) fn fetch_state(&mut self) {
        if self.link.is_none() || !self.replica.start_fetch() {
            return;
        }
        let msg = self.message(
            MessageType::REQUEST,
            Body::Other(OtherCall::new(
                "state.get",
                Value::Object(Default::default()),
            )),
        );
        self.send_own(&msg);
        if let Some(link) = &mut self.link {
            link.pending.insert(key_of(&msg), Request::StateGet);
        }
    }

    /// Replaces the replica with `snapshot`; own syncs the server lacks go again when this
    /// is the connection's first full sync.
    fn apply_snapshot(&mut self, snapshot: StateSnapshot) {
        let resend = !self.replica.is_ready();
        let me = self.agent_id().to_owned();
        match self.replica.replace(&me, snapshot, resend) {
            Ok(again) => {
                for params in again {
                    let seq = params.vector_clock.get(&me).copied().unwrap_or(0);
                    self.send_sync(seq, params);
                }
                self.out.event(AgentEvent::StateUpdated { from: None });
            }
            Err(e) => self.out.event(AgentEvent::ProtocolViolation(ErrorBody::new(
                ErrorCode::INVALID_PARAMS,
                format!("full sync refused: {e}"),
            ))),
        }
    }

    /// Another agent's sync, forwarded by the server.
    pub(super) fn on_state_notification(&mut self, p: &StateSync) {
        if !self.config.shared_state {
            return;
        }
        match self.replica.remote(p) {
            Some(applied) => {
                if applied {
                    self.out.event(AgentEvent::StateUpdated {
                        from: Some(p.agent_id.clone()),
                    });
                }
                if self.replica.diverged(p.merkle_root.as_deref()) {
                    self.fetch_state();
                }
            }
            None => self.fetch_state(),
        }
    }

    /// The answer to one of the agent's state requests.
    pub(super) fn on_state_answer(&mut self, request: &Request, params: Value) {
        match request {
            Request::StateGet => match serde_json::from_value::<StateSnapshot>(params) {
                Ok(snapshot) => self.apply_snapshot(snapshot),
                Err(e) => self.out.event(AgentEvent::ProtocolViolation(ErrorBody::new(
                    ErrorCode::INVALID_PARAMS,
                    format!("state.get answer: {e}"),
                ))),
            },
            Request::StateSync { seq } => {
                self.replica.answered(*seq);
                let Ok(r) = serde_json::from_value::<StateSyncResult>(params) else {
                    return;
                };
                if let Some(snapshot) = r.state {
                    self.apply_snapshot(snapshot);
                } else if self.replica.diverged(r.merkle_root.as_deref()) {
                    self.fetch_state();
                }
            }
            _ => {}
        }
    }

    /// The server refused one of the agent's state requests: a refused sync was applied
    /// here already, so the replica is replaced by the server's.
    pub(super) fn on_state_refused(&mut self, request: &Request) {
        match request {
            Request::StateSync { seq } => {
                self.replica.answered(*seq);
                self.fetch_state();
            }
            Request::StateGet => self.replica.fetch_failed(),
            _ => {}
        }
    }
}

//! Voice sessions: which agent is bound to which (kind, guild, voice channel), agent
//! selection, and the events that bind, confirm, move and free sessions.

use std::collections::{BTreeMap, BTreeSet};

use agentwire_core::{Id128, Outbox};

use super::registry::Registry;
use crate::error::{CommandError, ProtocolError};
use crate::event::{BindSource, ControllerEvent, FreeReason};
use crate::id::{AgentId, ChannelId, GuildId, UserId};
use crate::message::{Add, Released, SessionKind};

/// The key of a voice session: kind, guild and voice channel (`guildId:voiceChannelId`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SessionKey {
    /// Music or assistant.
    pub kind: SessionKind,
    /// Guild.
    pub guild_id: GuildId,
    /// Voice channel.
    pub voice_channel_id: ChannelId,
}

impl SessionKey {
    /// A key.
    pub fn new(kind: SessionKind, guild_id: impl Into<GuildId>, vc: impl Into<ChannelId>) -> Self {
        Self {
            kind,
            guild_id: guild_id.into(),
            voice_channel_id: vc.into(),
        }
    }
}

/// A voice session bound to an agent: at selection (the agent chosen for a request that
/// starts the session), or by the agent's `add` event.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Session {
    /// The bound agent.
    pub agent_id: AgentId,
    /// Text channel from the `add` event.
    pub text_channel_id: Option<ChannelId>,
    /// Owner from the `add` event.
    pub owner_user_id: Option<UserId>,
    /// Whether the agent confirmed the session with an `add` (real agents never send one).
    pub confirmed: bool,
    /// The unanswered request that starts the session on the agent it was bound to by
    /// selection: if it fails before an `add` confirms the session, the session is freed.
    starting: Option<Id128>,
}

/// The bound sessions and the round-robin state of selection.
#[derive(Debug)]
pub(crate) struct Sessions {
    bound: BTreeMap<SessionKey, Session>,
    /// Per guild, the agent chosen last by rule 2 of the selection (round-robin).
    last_pick: BTreeMap<GuildId, AgentId>,
    /// [`Limits::max_sessions`](crate::Limits::max_sessions).
    max: usize,
}

impl Sessions {
    /// No sessions; at most `max` bound at once.
    pub(crate) fn new(max: usize) -> Self {
        Self {
            bound: BTreeMap::new(),
            last_pick: BTreeMap::new(),
            max,
        }
    }

    /// Bound sessions, ordered by key.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&SessionKey, &Session)> {
        self.bound.iter()
    }

    /// The session bound for `key`.
    pub(crate) fn get(&self, key: &SessionKey) -> Option<&Session> {
        self.bound.get(key)
    }

    /// Bound sessions.
    pub(crate) fn len(&self) -> usize {
        self.bound.len()
    }

    /// Picks the agent for `key` by the selection rules without binding it; `true` when it
    /// is the agent already bound.
    ///
    /// The agent already bound if it is live and ready; else an idle (bound to no session
    /// in that guild), ready agent that lists the guild, taking candidates in agent-id
    /// order, round-robin per guild.
    pub(crate) fn choose(
        &mut self,
        key: &SessionKey,
        registry: &Registry,
    ) -> Result<(AgentId, bool), CommandError> {
        if let Some(s) = self.bound.get(key) {
            if registry.agent(&s.agent_id).is_some_and(|a| a.ready) {
                return Ok((s.agent_id.clone(), true));
            }
        } else if self.bound.len() >= self.max {
            return Err(CommandError::TooManySessions);
        }
        let guild_id = &key.guild_id;
        // Agents bound to any session (music or assistant) in this guild are busy here.
        let busy: BTreeSet<&str> = self
            .bound
            .iter()
            .filter(|(k, _)| k.guild_id == *guild_id)
            .map(|(_, s)| s.agent_id.as_str())
            .collect();
        let mut any_listing = false;
        let mut candidates: Vec<&AgentId> = Vec::new();
        for a in registry.agents() {
            if !a.guild_ids.contains(guild_id) {
                continue;
            }
            any_listing = true;
            if a.ready && !busy.contains(a.agent_id.as_str()) {
                candidates.push(&a.agent_id);
            }
        }
        if !any_listing {
            return Err(CommandError::NoAgentsInGuild);
        }
        let last = self.last_pick.get(guild_id);
        let pick = last
            .and_then(|l| candidates.iter().find(|c| **c > l))
            .or_else(|| candidates.first())
            .map(|s| (*s).clone())
            .ok_or(CommandError::NoFreeAgents)?;
        self.last_pick.insert(guild_id.clone(), pick.clone());
        Ok((pick, false))
    }

    /// Binds `agent_id` to `key` at selection (replacing a binding to an agent that is gone
    /// or not ready); `starting` is the request that starts the session, if one does.
    pub(crate) fn bind_selected(
        &mut self,
        key: SessionKey,
        agent_id: &AgentId,
        starting: Option<Id128>,
        out: &mut Outbox<ControllerEvent>,
    ) {
        let session = Session {
            agent_id: agent_id.clone(),
            text_channel_id: None,
            owner_user_id: None,
            confirmed: false,
            starting,
        };
        self.bind(key, session, BindSource::Selection, out);
    }

    /// Binds `session` to `key` and reports it, naming the agent it replaced, if another.
    fn bind(
        &mut self,
        key: SessionKey,
        session: Session,
        source: BindSource,
        out: &mut Outbox<ControllerEvent>,
    ) {
        let agent_id = session.agent_id.clone();
        let text_channel_id = session.text_channel_id.clone();
        let owner_user_id = session.owner_user_id.clone();
        let replaced = self
            .bound
            .insert(key.clone(), session)
            .map(|old| old.agent_id)
            .filter(|old| *old != agent_id);
        out.event(ControllerEvent::SessionBound {
            agent_id,
            kind: key.kind,
            guild_id: key.guild_id,
            voice_channel_id: key.voice_channel_id,
            text_channel_id,
            owner_user_id,
            source,
            replaced,
        });
    }

    /// Another start op `id` went to the agent already bound to `key`: while the session is
    /// still unconfirmed and waiting on a start, the newest start decides (any success keeps
    /// the session); a session already started stays as it is. Whether `id` now starts it.
    pub(crate) fn restart(&mut self, key: &SessionKey, id: Id128) -> bool {
        match self.bound.get_mut(key) {
            Some(s) if !s.confirmed && s.starting.is_some() => {
                s.starting = Some(id);
                true
            }
            _ => false,
        }
    }

    /// Frees `key` (if bound) with a [`ControllerEvent::SessionFreed`].
    fn free(&mut self, key: SessionKey, reason: FreeReason, out: &mut Outbox<ControllerEvent>) {
        if let Some(s) = self.bound.remove(&key) {
            out.event(ControllerEvent::SessionFreed {
                agent_id: s.agent_id,
                kind: key.kind,
                guild_id: key.guild_id,
                voice_channel_id: key.voice_channel_id,
                reason,
            });
        }
    }

    /// Frees every session of `agent_id`, which left the registry (the real controller
    /// frees them on close too).
    pub(crate) fn free_agent(&mut self, agent_id: &AgentId, out: &mut Outbox<ControllerEvent>) {
        let keys: Vec<SessionKey> = self
            .bound
            .iter()
            .filter(|(_, s)| s.agent_id == *agent_id)
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            self.free(key, FreeReason::AgentDropped, out);
        }
    }

    /// The request `id` to `agent_id` that starts `key` is over: on success the session
    /// stays; on failure it is freed if it is still the unconfirmed binding that request
    /// made.
    pub(crate) fn start_settled(
        &mut self,
        key: &SessionKey,
        id: Id128,
        agent_id: &AgentId,
        ok: bool,
        out: &mut Outbox<ControllerEvent>,
    ) {
        let Some(s) = self.bound.get_mut(key) else {
            return;
        };
        if s.agent_id != *agent_id || s.confirmed {
            return;
        }
        if ok {
            s.starting = None;
        } else if s.starting == Some(id) {
            self.free(key.clone(), FreeReason::StartFailed, out);
        }
    }

    /// `add` from `sender`: with `ok: true` it confirms the binding made at selection, or
    /// binds (or moves) the session to the sender; with `ok: false` it frees the session if
    /// the sender is the bound agent (it is not in that channel). Fails when a new session
    /// would pass the limit.
    pub(crate) fn on_add(
        &mut self,
        sender: AgentId,
        add: Add,
        out: &mut Outbox<ControllerEvent>,
    ) -> Result<(), ProtocolError> {
        let key = SessionKey::new(add.kind, add.guild_id, add.voice_channel_id);
        if !add.ok {
            let bound_here = self.bound.get(&key).is_some_and(|s| s.agent_id == sender);
            out.event(ControllerEvent::SessionJoinFailed {
                agent_id: sender,
                kind: key.kind,
                guild_id: key.guild_id.clone(),
                voice_channel_id: key.voice_channel_id.clone(),
                error: add.error.unwrap_or_default(),
            });
            if bound_here {
                self.free(key, FreeReason::JoinFailed, out);
            }
            return Ok(());
        }
        if !self.bound.contains_key(&key) && self.bound.len() >= self.max {
            return Err(ProtocolError::Limit("sessions"));
        }
        let session = Session {
            agent_id: sender,
            text_channel_id: add.text_channel_id.map(ChannelId::from),
            owner_user_id: add.owner_user_id.map(UserId::from),
            confirmed: true,
            starting: None,
        };
        self.bind(key, session, BindSource::Add, out);
        Ok(())
    }

    /// `released` frees the session only when the sender is the bound agent; any other
    /// `released` is ignored (reported as [`ControllerEvent::ReleaseIgnored`], no violation).
    pub(crate) fn on_released(
        &mut self,
        sender: AgentId,
        rel: Released,
        out: &mut Outbox<ControllerEvent>,
    ) {
        let key = SessionKey::new(rel.kind, rel.guild_id, rel.voice_channel_id);
        let event = if self.bound.get(&key).is_some_and(|s| s.agent_id == sender) {
            self.bound.remove(&key);
            ControllerEvent::SessionReleased {
                agent_id: sender,
                kind: key.kind,
                guild_id: key.guild_id,
                voice_channel_id: key.voice_channel_id,
                reason: rel.reason,
            }
        } else {
            ControllerEvent::ReleaseIgnored {
                agent_id: sender,
                kind: key.kind,
                guild_id: key.guild_id,
                voice_channel_id: key.voice_channel_id,
                reason: rel.reason,
            }
        };
        out.event(event);
    }
}

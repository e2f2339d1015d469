//! The provider requests the server waits on, with their idle deadlines.
//!
//! Every STT, LLM, TTS and tool request the server emits is registered here under a
//! [`RequestId`] until it is answered, cancelled or times out. The registry owns the
//! requests' deadlines (each restarts on progress), so the turn that made a request only
//! keeps its id.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use agentwire_core::{Outbox, TimerSet};
use serde_json::{Map, Value};

use crate::config::ProviderTimeouts;
use crate::error::CommandError;
use crate::event::ServerEvent;
use crate::ids::{CallId, RequestId, SessionId};
use crate::message::ErrorCode;
use crate::provider::{ProviderError, ProviderKind};

use super::texts;

/// A provider request the server waits on.
#[derive(Debug)]
pub(crate) struct Pending {
    /// The session whose turn made it.
    pub(crate) session: SessionId,
    /// Its provider.
    pub(crate) kind: ProviderKind,
    /// When it was made (a tool's `durationMs` counts from here).
    pub(crate) started: Instant,
    /// What a tool request was for.
    pub(crate) tool: Option<ToolMeta>,
}

/// What a tool request was for.
#[derive(Debug)]
pub(crate) struct ToolMeta {
    pub(crate) call_id: CallId,
    pub(crate) name: String,
    pub(crate) arguments: Map<String, Value>,
}

/// The pending provider requests and their deadlines.
#[derive(Debug)]
pub(crate) struct Requests {
    pending: BTreeMap<RequestId, Pending>,
    deadlines: TimerSet<RequestId>,
    last_id: u64,
    timeouts: ProviderTimeouts,
}

impl Requests {
    /// No requests; `timeouts` gives each provider's idle time.
    pub(crate) fn new(timeouts: ProviderTimeouts) -> Self {
        Self {
            pending: BTreeMap::new(),
            deadlines: TimerSet::new(),
            last_id: 0,
            timeouts,
        }
    }

    /// Requests waiting for an answer.
    pub(crate) fn len(&self) -> usize {
        self.pending.len()
    }

    fn timeout_of(&self, kind: ProviderKind) -> Duration {
        let t = &self.timeouts;
        match kind {
            ProviderKind::Stt => t.stt,
            ProviderKind::Llm => t.llm,
            ProviderKind::Tts => t.tts,
            ProviderKind::Tool => t.tool,
        }
    }

    /// A fresh id (ids are never reused; a tool call gets one even when it is not run).
    pub(crate) fn next_id(&mut self) -> RequestId {
        self.last_id += 1;
        RequestId(self.last_id)
    }

    /// Registers a request of `kind` for `session`; its deadline starts at `now`.
    pub(crate) fn open(
        &mut self,
        session: &SessionId,
        kind: ProviderKind,
        now: Instant,
    ) -> RequestId {
        let id = self.next_id();
        self.insert(id, session, kind, None, now);
        id
    }

    /// Registers tool request `id` (from [`next_id`](Self::next_id)) for `session`.
    pub(crate) fn open_tool(
        &mut self,
        id: RequestId,
        session: &SessionId,
        meta: ToolMeta,
        now: Instant,
    ) {
        self.insert(id, session, ProviderKind::Tool, Some(meta), now);
    }

    fn insert(
        &mut self,
        id: RequestId,
        session: &SessionId,
        kind: ProviderKind,
        tool: Option<ToolMeta>,
        now: Instant,
    ) {
        self.pending.insert(
            id,
            Pending {
                session: session.clone(),
                kind,
                started: now,
                tool,
            },
        );
        self.deadlines.set(id, now + self.timeout_of(kind));
    }

    /// The session of `request` when it is pending and of `kind`.
    pub(crate) fn active(
        &self,
        request: RequestId,
        kind: ProviderKind,
    ) -> Result<SessionId, CommandError> {
        let p = self
            .pending
            .get(&request)
            .ok_or(CommandError::UnknownRequest)?;
        if p.kind != kind {
            return Err(CommandError::WrongProvider(p.kind));
        }
        Ok(p.session.clone())
    }

    /// The provider of a pending request and its session.
    pub(crate) fn get(&self, request: RequestId) -> Option<&Pending> {
        self.pending.get(&request)
    }

    /// Progress on `request`: its idle deadline starts again at `now`.
    pub(crate) fn refresh(&mut self, request: RequestId, kind: ProviderKind, now: Instant) {
        let at = now + self.timeout_of(kind);
        self.deadlines.set(request, at);
    }

    /// `request` was answered: forgotten, with its deadline.
    pub(crate) fn finish(&mut self, request: RequestId) -> Option<Pending> {
        self.deadlines.cancel(&request);
        self.pending.remove(&request)
    }

    /// `request` is no longer wanted: forgotten, and the application is told
    /// ([`ServerEvent::Cancel`]) when it was still pending.
    pub(crate) fn cancel(&mut self, request: RequestId, out: &mut Outbox<ServerEvent>) {
        if let Some(p) = self.finish(request) {
            out.event(ServerEvent::Cancel {
                request,
                kind: p.kind,
            });
        }
    }

    /// The earliest deadline.
    pub(crate) fn next(&self) -> Option<(Instant, RequestId)> {
        self.deadlines.next().map(|(at, id)| (at, *id))
    }

    /// Removes the earliest deadline if it is due at `now`.
    pub(crate) fn pop_expired(&mut self, now: Instant) -> Option<RequestId> {
        self.deadlines.pop_expired(now)
    }
}

/// The error code and text for a provider failure.
pub(crate) fn provider_error(kind: ProviderKind, e: ProviderError) -> (ErrorCode, String) {
    match (kind, e) {
        (_, ProviderError::Internal(m)) => (ErrorCode::INTERNAL_ERROR, m),
        (ProviderKind::Stt, ProviderError::Failed(m)) => (ErrorCode::STT_ERROR, m),
        (ProviderKind::Stt, ProviderError::Timeout) => {
            (ErrorCode::STT_TIMEOUT, texts::STT_TIMEOUT.into())
        }
        (ProviderKind::Llm, ProviderError::Failed(m)) => (ErrorCode::LLM_ERROR, m),
        (ProviderKind::Llm, ProviderError::Timeout) => {
            (ErrorCode::LLM_TIMEOUT, texts::LLM_TIMEOUT.into())
        }
        (ProviderKind::Tts, ProviderError::Failed(m)) => (ErrorCode::TTS_ERROR, m),
        (ProviderKind::Tts, ProviderError::Timeout) => {
            (ErrorCode::TTS_TIMEOUT, texts::TTS_TIMEOUT.into())
        }
        (ProviderKind::Tool, ProviderError::Failed(m)) => (ErrorCode::TOOL_ERROR, m),
        (ProviderKind::Tool, ProviderError::Timeout) => {
            (ErrorCode::TOOL_ERROR, texts::TOOL_TIMEOUT.into())
        }
    }
}

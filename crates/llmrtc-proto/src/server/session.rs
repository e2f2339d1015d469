//! The server's per-connection and per-session state, and the turn pipeline's phases.

use std::collections::{BTreeSet, VecDeque};
use std::time::Instant;

use agentwire_core::ConnId;
use serde_json::{Map, Value};

use crate::message::VisionAttachment;
use crate::provider::{ChatMessage, ProviderKind, RequestId, SpeechSegment, ToolRecord};
use crate::vad::Vad;

/// One WebSocket connection.
#[derive(Debug)]
pub(crate) struct Conn {
    /// Its session; `None` once the connection is refused or closing.
    pub(crate) session: Option<String>,
    /// Whether the application reported its data channel open.
    pub(crate) dc_open: bool,
}

/// One session: outlives its connection for the TTL.
#[derive(Debug)]
pub(crate) struct Session {
    pub(crate) conn: Option<ConnId>,
    pub(crate) history: VecDeque<ChatMessage>,
    /// Attachments waiting for the next speech segment.
    pub(crate) attachments: Vec<VisionAttachment>,
    pub(crate) vad: Option<Vad>,
    /// The speech segment being recorded.
    pub(crate) segment: Option<Vec<i16>>,
    /// The sample rate of `segment`.
    pub(crate) segment_rate: u32,
    /// Finished segments waiting for the current turn.
    pub(crate) queued: VecDeque<QueuedTurn>,
    pub(crate) turn: Option<Turn>,
    /// Playbook mode: the current stage.
    pub(crate) stage: Option<String>,
    pub(crate) last_activity: Instant,
}

impl Session {
    pub(crate) fn new(stage: Option<String>, now: Instant) -> Self {
        Self {
            conn: None,
            history: VecDeque::new(),
            attachments: Vec::new(),
            vad: None,
            segment: None,
            segment_rate: 0,
            queued: VecDeque::new(),
            turn: None,
            stage,
            last_activity: now,
        }
    }

    /// Appends to the history, dropping the oldest entries beyond `max`.
    pub(crate) fn remember(&mut self, entry: ChatMessage, max: usize) {
        self.history.push_back(entry);
        while self.history.len() > max {
            self.history.pop_front();
        }
    }
}

/// A finished speech segment waiting for its turn.
#[derive(Debug)]
pub(crate) struct QueuedTurn {
    pub(crate) segment: SpeechSegment,
    pub(crate) attachments: Vec<VisionAttachment>,
}

/// The turn a session is in: one utterance through STT, LLM (and tools), TTS.
#[derive(Debug)]
pub(crate) struct Turn {
    pub(crate) phase: Phase,
    pub(crate) attachments: Vec<VisionAttachment>,
    /// The LLM reply so far, over every round.
    pub(crate) reply: String,
    /// The last LLM chunk, held back so the final one can carry `done: true`.
    pub(crate) held: Option<String>,
    pub(crate) tool_results: Vec<ToolRecord>,
    /// LLM rounds after the first (each follows tool calls).
    pub(crate) rounds: usize,
}

impl Turn {
    pub(crate) fn new(req: RequestId, attachments: Vec<VisionAttachment>) -> Self {
        Self {
            phase: Phase::Stt { req },
            attachments,
            reply: String::new(),
            held: None,
            tool_results: Vec::new(),
            rounds: 0,
        }
    }

    /// Every provider request this turn is waiting on.
    pub(crate) fn requests(&self) -> Vec<RequestId> {
        match &self.phase {
            Phase::Stt { req } | Phase::Tts { req } => vec![*req],
            Phase::Llm { req, tools, .. } => req.iter().chain(tools.iter()).copied().collect(),
        }
    }
}

/// Where a turn is.
#[derive(Debug)]
pub(crate) enum Phase {
    /// Waiting for the transcript.
    Stt { req: RequestId },
    /// An LLM round: the LLM request (`None` once it is done) and the tools it called that
    /// are still running.
    Llm {
        req: Option<RequestId>,
        tools: BTreeSet<RequestId>,
        calls: usize,
    },
    /// `tts-start` sent, audio streaming.
    Tts { req: RequestId },
}

/// A provider request the server waits on.
#[derive(Debug)]
pub(crate) struct Pending {
    pub(crate) session: String,
    pub(crate) kind: ProviderKind,
    pub(crate) started: Instant,
    pub(crate) tool: Option<ToolMeta>,
}

/// What a tool request was for.
#[derive(Debug)]
pub(crate) struct ToolMeta {
    pub(crate) call_id: String,
    pub(crate) name: String,
    pub(crate) arguments: Map<String, Value>,
}

/// The server's deadlines.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Timer {
    Heartbeat(ConnId),
    Ttl(String),
    Provider(RequestId),
}

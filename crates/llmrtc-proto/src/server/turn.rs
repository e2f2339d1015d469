//! One turn of a session: an utterance through STT, the LLM (and its tool rounds), and TTS.
//!
//! A [`Turn`] is a state machine over [`Phase`]s. Each provider answer moves it and returns
//! a [`Step`] that tells its session what follows: wait, ask the LLM with what was heard,
//! start another LLM round, speak the reply, fail, or end. The turn owns its data (the
//! reply streamed so far, the held-back chunk, the round's tool calls and their records, the
//! reply's audio on a WebRTC track and when it will have played) and the ids of the
//! requests it waits on, whose deadlines the request registry keeps.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use agentwire_core::ConnId;

use serde_json::{Map, Value};

use crate::event::{ServerEvent, TurnOutcome};
use crate::ids::{CallId, RequestId, SessionId};
use crate::message::ErrorCode;
use crate::message::{
    Llm, LlmChunk, ServerMessage, ToolCallEnd, ToolCallStart, Transcript, VisionAttachment,
};
use crate::provider::{
    ChatMessage, LlmRequest, ProviderError, ProviderKind, SpeechSegment, StageContext, SttRequest,
    ToolCallRequest, ToolRecord, TtsRequest,
};

use crate::wav::{parse_wav, wav_from_pcm};

use super::requests::{provider_error, ToolMeta};
use super::texts;
use super::wire::Ctx;

/// A finished speech segment waiting for its turn.
#[derive(Debug)]
pub(crate) struct Utterance {
    pub(crate) segment: SpeechSegment,
    pub(crate) attachments: Vec<VisionAttachment>,
}

/// Where a turn is.
#[derive(Debug)]
enum Phase {
    /// Waiting for the transcript.
    Stt { req: RequestId },
    /// An LLM round: the LLM request (`None` once it is done), the tools it called that are
    /// still running, and how many it called.
    Llm {
        req: Option<RequestId>,
        tools: BTreeSet<RequestId>,
        calls: usize,
    },
    /// `tts-start` sent, audio streaming; or, with streaming TTS off, the audio gathered
    /// for one whole `tts` message; and what went on the WebRTC audio track.
    Tts {
        req: RequestId,
        whole: Option<Gathered>,
        track: TrackOut,
    },
}

/// The reply's audio on the connection's WebRTC audio track: where it went, when it will
/// have played, and a byte of PCM split between two chunks.
#[derive(Debug, Default)]
pub(crate) struct TrackOut {
    /// The connection that got [`ServerEvent::TrackAudio`], once one did.
    conn: Option<ConnId>,
    /// When the audio sent so far will have played, in real time from the first piece.
    playout_end: Option<Instant>,
    /// The odd last byte of a `pcm` chunk, completed by the next chunk's first.
    carry: Option<u8>,
    /// Whether [`ServerEvent::TrackAudioEnd`] was sent for a normal end.
    ended: bool,
    /// Whether the audio has played (`tts-complete` sent); then nothing is left to cancel.
    finished: bool,
}

impl TrackOut {
    /// Emits `samples` at `rate` for the track of `conn` and counts their playing time.
    fn send(
        &mut self,
        ctx: &mut Ctx<'_>,
        conn: ConnId,
        samples: Vec<i16>,
        rate: u32,
        now: Instant,
    ) {
        if samples.is_empty() {
            return;
        }
        let nanos = samples.len() as u64 * 1_000_000_000 / u64::from(rate.max(1));
        let from = self.playout_end.map_or(now, |end| end.max(now));
        self.playout_end = Some(from + Duration::from_nanos(nanos));
        self.conn = Some(conn);
        ctx.event(ServerEvent::TrackAudio {
            conn,
            samples,
            sample_rate: rate,
        });
    }
}

/// TTS chunks gathered for one whole `tts` message (streaming TTS off): the first chunk's
/// format and rate, and the audio so far.
#[derive(Debug, Default)]
pub(crate) struct Gathered {
    format: String,
    sample_rate: u32,
    audio: Vec<u8>,
}

impl Gathered {
    /// The `tts` message's format and audio: PCM becomes a WAV file (a `tts` message has no
    /// `sampleRate` to carry the rate), other formats go as they came.
    pub(crate) fn into_message(self) -> (String, Vec<u8>) {
        if self.format.eq_ignore_ascii_case("pcm") {
            (
                "wav".to_owned(),
                wav_from_pcm(self.sample_rate, &self.audio),
            )
        } else {
            (self.format, self.audio)
        }
    }
}

/// What the session does after the turn moved.
#[derive(Debug)]
pub(crate) enum Step {
    /// Nothing until the next answer.
    Wait,
    /// The user said this (not empty): remember it, then ask the LLM.
    Heard(String),
    /// Every tool of the round answered and the LLM is done: ask it again.
    NextRound,
    /// The reply is complete and not empty: remember it, then speak it.
    Speak(String),
    /// The turn failed with this code and text.
    Fail(ErrorCode, String),
    /// The turn is over.
    End(TurnOutcome),
}

/// The turn a session is in.
#[derive(Debug)]
pub(crate) struct Turn {
    phase: Phase,
    attachments: Vec<VisionAttachment>,
    /// The LLM reply so far, over every round.
    reply: String,
    /// The last LLM chunk, held back so the final one can carry `done: true`.
    held: Option<String>,
    tool_results: Vec<ToolRecord>,
    /// LLM rounds after the first (each follows tool calls).
    rounds: usize,
}

impl Turn {
    /// Starts a turn for `utterance` of `session`: asks for its transcript
    /// ([`ServerEvent::Stt`]).
    pub(crate) fn start(
        ctx: &mut Ctx<'_>,
        session: &SessionId,
        utterance: Utterance,
        now: Instant,
    ) -> Self {
        let req = ctx.requests.open(session, ProviderKind::Stt, now);
        ctx.event(ServerEvent::Stt(SttRequest {
            request: req,
            session: session.clone(),
            segment: utterance.segment,
        }));
        Self {
            phase: Phase::Stt { req },
            attachments: utterance.attachments,
            reply: String::new(),
            held: None,
            tool_results: Vec::new(),
            rounds: 0,
        }
    }

    /// Every provider request this turn is waiting on.
    fn requests(&self) -> Vec<RequestId> {
        match &self.phase {
            Phase::Stt { req } | Phase::Tts { req, .. } => vec![*req],
            Phase::Llm { req, tools, .. } => req.iter().chain(tools.iter()).copied().collect(),
        }
    }

    /// The TTS request while the reply is being spoken (from `tts-start` on).
    pub(crate) fn speaking(&self) -> Option<RequestId> {
        match self.phase {
            Phase::Tts { req, .. } => Some(req),
            _ => None,
        }
    }

    /// A partial transcript: `transcript` with `isFinal: false`, cut to the limit.
    pub(crate) fn partial(ctx: &mut Ctx<'_>, text: &str) {
        let text = cut(text, ctx.config.limits.max_transcript_bytes).to_owned();
        ctx.send(&ServerMessage::Transcript(Transcript {
            text,
            is_final: false,
        }));
    }

    /// The STT outcome: the final `transcript`, then what was heard (or nothing, or a
    /// failure).
    pub(crate) fn transcribed(ctx: &mut Ctx<'_>, result: Result<String, ProviderError>) -> Step {
        let text = match result {
            Ok(t) if t.len() > ctx.config.limits.max_transcript_bytes => {
                return Step::Fail(ErrorCode::STT_ERROR, texts::TRANSCRIPT_TOO_LONG.into());
            }
            Ok(t) => t,
            Err(e) => {
                let (code, msg) = provider_error(ProviderKind::Stt, e);
                return Step::Fail(code, msg);
            }
        };
        ctx.send(&ServerMessage::Transcript(Transcript {
            text: text.clone(),
            is_final: true,
        }));
        if text.trim().is_empty() {
            Step::End(TurnOutcome::NothingHeard)
        } else {
            Step::Heard(text)
        }
    }

    /// Starts an LLM round ([`ServerEvent::Llm`]) over `history`, in `stage`.
    pub(crate) fn ask_llm(
        &mut self,
        ctx: &mut Ctx<'_>,
        session: &SessionId,
        history: Vec<ChatMessage>,
        stage: Option<StageContext>,
        now: Instant,
    ) {
        let req = ctx.requests.open(session, ProviderKind::Llm, now);
        self.phase = Phase::Llm {
            req: Some(req),
            tools: BTreeSet::new(),
            calls: 0,
        };
        ctx.event(ServerEvent::Llm(LlmRequest {
            request: req,
            session: session.clone(),
            history,
            attachments: self.attachments.clone(),
            stage,
            tool_results: self.tool_results.clone(),
        }));
    }

    /// One piece of the reply: the previous held chunk goes out and this one is held.
    pub(crate) fn llm_chunk(&mut self, ctx: &mut Ctx<'_>, content: &str) -> Step {
        if self.reply.len() + content.len() > ctx.config.limits.max_reply_bytes {
            return Step::Fail(ErrorCode::LLM_ERROR, texts::REPLY_TOO_LONG.into());
        }
        self.reply.push_str(content);
        if let Some(previous) = self.held.replace(content.to_owned()) {
            ctx.send(&ServerMessage::LlmChunk(LlmChunk {
                content: previous,
                done: false,
            }));
        }
        Step::Wait
    }

    /// Counts a tool call of the current LLM round: `None` outside one, `Some(false)` when
    /// it is one too many.
    pub(crate) fn count_tool_call(&mut self, max: usize) -> Option<bool> {
        match &mut self.phase {
            Phase::Llm { calls, .. } => {
                *calls += 1;
                Some(*calls <= max)
            }
            _ => None,
        }
    }

    /// The LLM calls tool `name`: `tool-call-start`, then either the tool request
    /// ([`ServerEvent::ToolCall`]) or, for a tool the stage lacks (`known` false), its
    /// failure at once. Returns the call id.
    pub(crate) fn call_tool(
        &mut self,
        ctx: &mut Ctx<'_>,
        session: &SessionId,
        name: &str,
        arguments: Map<String, Value>,
        known: bool,
        now: Instant,
    ) -> CallId {
        // Text streamed before the call is shown before it.
        self.flush_held(ctx, false);
        let id = ctx.requests.next_id();
        let call_id = CallId::new(format!("call_{}", id.0));
        ctx.send(&ServerMessage::ToolCallStart(ToolCallStart {
            name: name.to_owned(),
            call_id: call_id.to_string(),
            arguments: arguments.clone(),
        }));
        if !known {
            let error = texts::unknown_tool(name);
            ctx.send(&ServerMessage::ToolCallEnd(ToolCallEnd {
                call_id: call_id.to_string(),
                result: None,
                error: Some(error.clone()),
                duration_ms: 0,
            }));
            ctx.error(ErrorCode::TOOL_ERROR, error.clone());
            self.tool_results.push(ToolRecord {
                call_id: call_id.clone(),
                name: name.to_owned(),
                arguments,
                outcome: Err(error),
            });
            return call_id;
        }
        let meta = ToolMeta {
            call_id: call_id.clone(),
            name: name.to_owned(),
            arguments: arguments.clone(),
        };
        ctx.requests.open_tool(id, session, meta, now);
        if let Phase::Llm { tools, .. } = &mut self.phase {
            tools.insert(id);
        }
        ctx.event(ServerEvent::ToolCall(ToolCallRequest {
            request: id,
            session: session.clone(),
            call_id: call_id.clone(),
            name: name.to_owned(),
            arguments,
        }));
        call_id
    }

    /// The LLM round is complete: without tool calls the reply is finished; with them, the
    /// next round waits for the tools. `None` outside an LLM round.
    pub(crate) fn llm_done(&mut self, ctx: &mut Ctx<'_>) -> Option<Step> {
        let Phase::Llm { req, calls, .. } = &mut self.phase else {
            return None;
        };
        *req = None;
        Some(if *calls == 0 {
            self.finish_reply(ctx)
        } else {
            self.next_round(ctx)
        })
    }

    /// A tool's outcome (`tool-call-end`, and `error TOOL_ERROR` for a failure), `started`
    /// being when it was asked for.
    pub(crate) fn tool_ended(
        ctx: &mut Ctx<'_>,
        meta: &ToolMeta,
        outcome: &Result<Value, String>,
        started: Instant,
        now: Instant,
    ) {
        let duration_ms =
            u64::try_from(now.saturating_duration_since(started).as_millis()).unwrap_or(u64::MAX);
        let (result, error) = match outcome {
            Ok(v) => (Some(v.clone()), None),
            Err(e) => (None, Some(e.clone())),
        };
        ctx.send(&ServerMessage::ToolCallEnd(ToolCallEnd {
            call_id: meta.call_id.to_string(),
            result,
            error: error.clone(),
            duration_ms,
        }));
        if let Some(e) = error {
            ctx.error(ErrorCode::TOOL_ERROR, e);
        }
    }

    /// Records tool `request`'s outcome for the next LLM round, then checks whether that
    /// round is due.
    pub(crate) fn tool_recorded(
        &mut self,
        ctx: &mut Ctx<'_>,
        request: RequestId,
        record: ToolRecord,
    ) -> Step {
        if let Phase::Llm { tools, .. } = &mut self.phase {
            tools.remove(&request);
        }
        self.tool_results.push(record);
        self.next_round(ctx)
    }

    /// The next LLM round once the LLM is done and no tool is left running.
    fn next_round(&mut self, ctx: &mut Ctx<'_>) -> Step {
        let ready = matches!(&self.phase, Phase::Llm { req: None, tools, .. } if tools.is_empty());
        if !ready {
            return Step::Wait;
        }
        self.rounds += 1;
        if self.rounds > ctx.config.limits.max_tool_rounds {
            return Step::Fail(ErrorCode::PLAYBOOK_ERROR, texts::TOO_MANY_ROUNDS.into());
        }
        Step::NextRound
    }

    /// The reply is complete: the last chunk (`done: true`), then `llm`.
    fn finish_reply(&mut self, ctx: &mut Ctx<'_>) -> Step {
        if !self.flush_held(ctx, true) {
            ctx.send(&ServerMessage::LlmChunk(LlmChunk {
                content: String::new(),
                done: true,
            }));
        }
        let reply = std::mem::take(&mut self.reply);
        ctx.send(&ServerMessage::Llm(Llm {
            text: reply.clone(),
        }));
        if reply.trim().is_empty() {
            Step::End(TurnOutcome::Completed)
        } else {
            Step::Speak(reply)
        }
    }

    /// Speaks `reply`: `tts-start` and the TTS request ([`ServerEvent::Tts`]).
    pub(crate) fn speak(
        &mut self,
        ctx: &mut Ctx<'_>,
        session: &SessionId,
        reply: String,
        now: Instant,
    ) {
        let req = ctx.requests.open(session, ProviderKind::Tts, now);
        let streaming = ctx.config.streaming_tts;
        self.phase = Phase::Tts {
            req,
            whole: (!streaming).then(Gathered::default),
            track: TrackOut::default(),
        };
        ctx.send(&ServerMessage::TtsStart);
        ctx.event(ServerEvent::Tts(TtsRequest {
            request: req,
            session: session.clone(),
            text: reply,
            streaming,
        }));
    }

    /// A TTS chunk while streaming TTS is off: gathered for the whole `tts` message. A
    /// chunk that would pass [`Limits::max_tts_bytes`](crate::Limits::max_tts_bytes), or
    /// whose format or rate differs from the first one's, fails the turn (`TTS_ERROR`).
    pub(crate) fn gather(
        &mut self,
        ctx: &Ctx<'_>,
        format: &str,
        sample_rate: u32,
        audio: &[u8],
    ) -> Step {
        let Phase::Tts {
            whole: Some(whole), ..
        } = &mut self.phase
        else {
            return Step::Wait;
        };
        if whole.audio.is_empty() && whole.format.is_empty() {
            whole.format = format.to_owned();
            whole.sample_rate = sample_rate;
        } else if whole.format != format || whole.sample_rate != sample_rate {
            return Step::Fail(ErrorCode::TTS_ERROR, texts::TTS_MIXED.into());
        }
        if whole.audio.len() + audio.len() > ctx.config.limits.max_tts_bytes {
            return Step::Fail(ErrorCode::TTS_ERROR, texts::TTS_TOO_LONG.into());
        }
        whole.audio.extend_from_slice(audio);
        Step::Wait
    }

    /// TTS audio for the WebRTC audio track: when the connection has one and the audio is
    /// PCM (`pcm`: 16-bit little-endian mono at `sample_rate`; `wav`: a whole file), it is
    /// emitted as [`ServerEvent::TrackAudio`] and `true` is returned; otherwise (no track,
    /// another format, rate 0, a WAV that does not parse) `false`, and the caller sends it
    /// as a message.
    pub(crate) fn track_chunk(
        &mut self,
        ctx: &mut Ctx<'_>,
        format: &str,
        sample_rate: u32,
        audio: &[u8],
        now: Instant,
    ) -> bool {
        let Some(link) = ctx.link.filter(|l| l.audio_track) else {
            return false;
        };
        let Phase::Tts { track, .. } = &mut self.phase else {
            return false;
        };
        if format.eq_ignore_ascii_case("pcm") && sample_rate > 0 {
            let mut bytes = audio;
            let mut samples = Vec::with_capacity(audio.len() / 2 + 1);
            if let (Some(lo), Some((&hi, rest))) = (track.carry, bytes.split_first()) {
                samples.push(i16::from_le_bytes([lo, hi]));
                track.carry = None;
                bytes = rest;
            }
            let pairs = bytes.chunks_exact(2);
            if let [last] = pairs.remainder() {
                track.carry = Some(*last);
            }
            samples.extend(pairs.map(|b| i16::from_le_bytes([b[0], b[1]])));
            track.send(ctx, link.conn, samples, sample_rate, now);
            return true;
        }
        if format.eq_ignore_ascii_case("wav") {
            if let Ok(w) = parse_wav(audio) {
                let rate = w.format.sample_rate;
                let samples = w.mono_samples().collect();
                track.send(ctx, link.conn, samples, rate, now);
                return true;
            }
        }
        false
    }

    /// TTS is done. When audio went on the track: [`ServerEvent::TrackAudioEnd`] (not
    /// cancelled), and, if it is still playing, when it will have played (the caller sends
    /// `tts-complete` then, and until then speech is barge-in).
    pub(crate) fn track_done(&mut self, ctx: &mut Ctx<'_>, now: Instant) -> Option<Instant> {
        let Phase::Tts { track, .. } = &mut self.phase else {
            return None;
        };
        let conn = track.conn?;
        if !track.ended {
            track.ended = true;
            ctx.event(ServerEvent::TrackAudioEnd {
                conn,
                cancelled: false,
            });
        }
        match track.playout_end {
            Some(end) if end > now => Some(end),
            _ => {
                track.finished = true;
                None
            }
        }
    }

    /// Whether the track audio of a finished TTS has played by `now` (the playout timer
    /// of this turn, not a stale one).
    pub(crate) fn played(&mut self, now: Instant) -> bool {
        let Phase::Tts { track, .. } = &mut self.phase else {
            return false;
        };
        let due = track.ended && !track.finished && track.playout_end.is_some_and(|e| e <= now);
        if due {
            track.finished = true;
        }
        due
    }

    /// The audio gathered for a whole `tts` message, if any (taken).
    pub(crate) fn take_gathered(&mut self) -> Option<Gathered> {
        match &mut self.phase {
            Phase::Tts { whole, .. } => whole.take().filter(|g| !g.format.is_empty()),
            _ => None,
        }
    }

    /// Sends the held LLM chunk with `done`; whether there was one.
    fn flush_held(&mut self, ctx: &mut Ctx<'_>, done: bool) -> bool {
        let Some(content) = self.held.take() else {
            return false;
        };
        ctx.send(&ServerMessage::LlmChunk(LlmChunk { content, done }));
        true
    }

    /// The turn failed with `code`: the LLM stream is closed, `error` goes out, and an open
    /// `tts-start` gets its `tts-complete`.
    pub(crate) fn fail(&mut self, ctx: &mut Ctx<'_>, code: ErrorCode, message: String) {
        let in_tts = self.speaking().is_some();
        self.flush_held(ctx, true);
        ctx.error(code, message);
        if in_tts {
            ctx.send(&ServerMessage::TtsComplete);
        }
    }

    /// Withdraws every request the turn still waits on ([`ServerEvent::Cancel`]), and
    /// drops track audio that has not played ([`ServerEvent::TrackAudioEnd`], cancelled).
    pub(crate) fn cancel(self, ctx: &mut Ctx<'_>) {
        for req in self.requests() {
            ctx.cancel(req);
        }
        if let Phase::Tts { track, .. } = &self.phase {
            if let (Some(conn), false) = (track.conn, track.finished) {
                ctx.event(ServerEvent::TrackAudioEnd {
                    conn,
                    cancelled: true,
                });
            }
        }
    }
}

/// `s` cut to at most `max` bytes at a character boundary.
pub(crate) fn cut(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

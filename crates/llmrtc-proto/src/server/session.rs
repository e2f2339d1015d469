//! A session: the conversation that outlives its connection for the TTL. It records speech
//! through its VAD into utterances, queues them, and runs them one [`Turn`] at a time,
//! keeping the history and (in playbook mode) the current stage.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Instant;

use agentwire_core::{ConnId, TimerSet};
use serde_json::{Map, Value};

use crate::codec::{decode_base64, encode_tts};
use crate::config::ServerConfig;
use crate::error::CommandError;
use crate::event::{ServerEvent, TurnOutcome};
use crate::ids::{CallId, RequestId, SessionId};
use crate::message::ErrorCode;
use crate::message::{AudioRef, ServerMessage, StageChange, VisionAttachment};
use crate::playbook::{Stage, REASON_KEYWORD_MATCH, REASON_TOOL_RESULT};
use crate::provider::{
    ChatMessage, ChatRole, ProviderError, SpeechSegment, StageContext, ToolRecord,
};
use crate::resample::Resampler;
use crate::vad::{Vad, VadEvent};
use crate::wav::parse_wav;

use super::requests::Pending;
use super::texts;
use super::turn::{Step, Turn, Utterance};
use super::wire::Ctx;

/// One session.
#[derive(Debug)]
pub(crate) struct Session {
    /// Its id (`ready.id`).
    id: SessionId,
    pub(crate) conn: Option<ConnId>,
    pub(crate) history: VecDeque<ChatMessage>,
    /// Attachments waiting for the next speech segment.
    pub(crate) attachments: Vec<VisionAttachment>,
    vad: Option<Vad>,
    /// The speech segment being recorded from `audio` messages, and its sample rate.
    segment: Option<(Vec<i16>, u32)>,
    /// Speech from the connection's WebRTC audio track.
    track: TrackIn,
    /// Finished utterances waiting for the current turn.
    queued: VecDeque<Utterance>,
    pub(crate) turn: Option<Turn>,
    /// Playbook mode: the current stage.
    pub(crate) stage: Option<String>,
    pub(crate) last_activity: Instant,
}

impl Session {
    /// A session `id` held by `conn`, starting in `stage`.
    pub(crate) fn new(id: SessionId, conn: ConnId, stage: Option<String>, now: Instant) -> Self {
        Self {
            id,
            conn: Some(conn),
            history: VecDeque::new(),
            attachments: Vec::new(),
            vad: None,
            segment: None,
            track: TrackIn::default(),
            queued: VecDeque::new(),
            turn: None,
            stage,
            last_activity: now,
        }
    }

    /// Appends to the history, dropping the oldest entries beyond `max`.
    fn remember(&mut self, role: ChatRole, text: String, max: usize) {
        self.history.push_back(ChatMessage { role, text });
        while self.history.len() > max {
            self.history.pop_front();
        }
    }

    /// The definition of the current stage (playbook mode).
    fn stage_def<'c>(&self, config: &'c ServerConfig) -> Option<&'c Stage> {
        config.playbook.as_ref()?.stage(self.stage.as_deref()?)
    }

    /// Moves to stage `to` and sends `stage-change` with `reason`.
    pub(crate) fn move_stage(&mut self, ctx: &mut Ctx<'_>, to: &str, reason: &str) {
        let from = self.stage.replace(to.to_owned()).unwrap_or_default();
        ctx.send(&ServerMessage::StageChange(StageChange {
            from,
            to: to.to_owned(),
            reason: reason.to_owned(),
        }));
    }

    /// Queues attachments for the next speech segment, up to the limit (beyond it:
    /// `error RATE_LIMITED`, and the rest are dropped).
    pub(crate) fn queue_attachments(&mut self, ctx: &mut Ctx<'_>, more: Vec<VisionAttachment>) {
        let room = ctx
            .config
            .limits
            .max_queued_attachments
            .saturating_sub(self.attachments.len());
        let dropped = more.len() > room;
        self.attachments.extend(more.into_iter().take(room));
        if dropped {
            ctx.error(ErrorCode::RATE_LIMITED, texts::TOO_MANY_ATTACHMENTS.into());
        }
    }

    // -----------------------------------------------------------------------------------
    // Speech in
    // -----------------------------------------------------------------------------------

    /// An `audio` message: its attachments queue; its WAV (base64) goes through the VAD
    /// ([`hear`](Self::hear)); bad base64 is `AUDIO_PROCESSING_ERROR`, a WAV this server
    /// does not take `INVALID_AUDIO_FORMAT`, a WAV at a rate the VAD does not run at
    /// `VAD_ERROR`.
    pub(crate) fn on_audio(
        &mut self,
        ctx: &mut Ctx<'_>,
        audio: AudioRef<'_>,
        scratch: &mut AudioScratch,
        now: Instant,
    ) {
        if let Some(a) = audio.attachments {
            self.queue_attachments(ctx, a);
        }
        let bytes = &mut scratch.wav;
        bytes.clear();
        let max = ctx.config.limits.max_message_bytes;
        if decode_base64(&audio.data, max, bytes).is_none() {
            let text = texts::BAD_BASE64.into();
            ctx.error(ErrorCode::AUDIO_PROCESSING_ERROR, text);
            return;
        }
        drop(audio.data);
        let (rate, samples) = match parse_wav(bytes) {
            Ok(w) if !ctx.config.vad.supports_rate(w.format.sample_rate) => {
                let text = texts::vad_rate(w.format.sample_rate, &ctx.config.vad);
                ctx.error(ErrorCode::VAD_ERROR, text);
                return;
            }
            Ok(w) => (w.format.sample_rate, w.mono_samples().collect::<Vec<i16>>()),
            Err(e) => {
                let text = format!("{}{e}", texts::UNSUPPORTED_AUDIO);
                ctx.error(ErrorCode::INVALID_AUDIO_FORMAT, text);
                return;
            }
        };
        self.hear(ctx, rate, &samples, &mut scratch.vad_events, now);
    }

    /// One `audio` message's samples at `rate`, through the VAD (`events` is a reusable
    /// buffer); a finished utterance starts its turn when the session is idle.
    fn hear(
        &mut self,
        ctx: &mut Ctx<'_>,
        rate: u32,
        samples: &[i16],
        events: &mut Vec<VadEvent>,
        now: Instant,
    ) {
        events.clear();
        let vad_config = &ctx.config.vad;
        // A new sample rate ends whatever the old stream was saying.
        if let Some(v) = self.vad.as_mut().filter(|v| v.sample_rate() != rate) {
            v.finish(events);
        }
        let vad = match &mut self.vad {
            Some(v) if v.sample_rate() == rate => v,
            slot => slot.insert(Vad::new(vad_config.clone(), rate)),
        };
        vad.push(samples, events);
        if vad_config.end_of_message_ends_speech {
            vad.finish(events);
        }
        // Events of the old stream come first; a segment keeps the rate it started at.
        for ev in events.drain(..) {
            self.on_vad(ctx, Intake::Message, ev, rate, now);
        }
        self.pump(ctx, now);
    }

    /// PCM from the connection's WebRTC audio track at `rate`: resampled to
    /// [`ServerConfig::track_sample_rate`], then through the track's own VAD, which runs
    /// on across calls (the track is one stream: only silence ends speech). A finished
    /// utterance starts its turn when the session is idle, as for `audio` messages.
    pub(crate) fn on_track(
        &mut self,
        ctx: &mut Ctx<'_>,
        samples: &[i16],
        rate: u32,
        scratch: &mut AudioScratch,
        now: Instant,
    ) {
        let to = ctx.config.track_sample_rate;
        let keep = self
            .track
            .resampler
            .as_ref()
            .is_some_and(|r| r.from_rate() == rate);
        if !keep {
            self.track.resampler = Resampler::new(rate, to);
        }
        let Some(resampler) = self.track.resampler.as_mut() else {
            return;
        };
        scratch.track.clear();
        resampler.process(samples, &mut scratch.track);
        let events = &mut scratch.vad_events;
        events.clear();
        self.track
            .vad
            .get_or_insert_with(|| Vad::new(ctx.config.vad.clone(), to))
            .push(&scratch.track, events);
        for ev in events.drain(..) {
            self.on_vad(ctx, Intake::Track, ev, to, now);
        }
        self.pump(ctx, now);
    }

    /// The segment being recorded from `src`.
    fn segment_of(&mut self, src: Intake) -> &mut Option<(Vec<i16>, u32)> {
        match src {
            Intake::Message => &mut self.segment,
            Intake::Track => &mut self.track.segment,
        }
    }

    fn on_vad(&mut self, ctx: &mut Ctx<'_>, src: Intake, ev: VadEvent, rate: u32, now: Instant) {
        let max_samples = ctx.config.limits.max_segment_bytes / 2;
        match ev {
            VadEvent::SpeechStart { pre_roll } => {
                // Barge-in: speech while TTS plays cancels it first.
                if let Some(req) = self.turn.as_ref().and_then(Turn::speaking) {
                    ctx.cancel(req);
                    ctx.send(&ServerMessage::TtsCancelled);
                    self.end_turn(ctx, TurnOutcome::Interrupted, now);
                }
                ctx.send(&ServerMessage::SpeechStart);
                let mut seg = pre_roll;
                seg.truncate(max_samples);
                *self.segment_of(src) = Some((seg, rate));
            }
            VadEvent::Speech(samples) => {
                let full = match self.segment_of(src) {
                    Some((seg, _)) => {
                        let room = max_samples.saturating_sub(seg.len());
                        seg.extend_from_slice(&samples[..room.min(samples.len())]);
                        seg.len() >= max_samples
                    }
                    None => false,
                };
                if full {
                    self.end_segment(ctx, src);
                }
            }
            VadEvent::SpeechEnd => self.end_segment(ctx, src),
        }
    }

    /// Ends the speech segment being recorded from `src` (if any): `speech-end`, and the
    /// utterance queues for its turn (or, over the limit, `error RATE_LIMITED`).
    fn end_segment(&mut self, ctx: &mut Ctx<'_>, src: Intake) {
        let Some((samples, sample_rate)) = self.segment_of(src).take() else {
            return;
        };
        let attachments = std::mem::take(&mut self.attachments);
        let full = self.queued.len() >= ctx.config.limits.max_queued_turns;
        if !full {
            self.queued.push_back(Utterance {
                segment: SpeechSegment {
                    sample_rate,
                    samples,
                },
                attachments,
            });
        }
        ctx.send(&ServerMessage::SpeechEnd);
        if full {
            ctx.error(ErrorCode::RATE_LIMITED, texts::TOO_MANY_TURNS.into());
        }
    }

    // -----------------------------------------------------------------------------------
    // Turns
    // -----------------------------------------------------------------------------------

    /// Starts the next queued utterance's turn if the session is connected and idle.
    fn pump(&mut self, ctx: &mut Ctx<'_>, now: Instant) {
        if self.turn.is_some() || self.conn.is_none() {
            return;
        }
        if let Some(next) = self.queued.pop_front() {
            self.turn = Some(Turn::start(ctx, &self.id, next, now));
        }
    }

    /// Carries out what the turn asked for after it moved.
    fn advance(&mut self, ctx: &mut Ctx<'_>, step: Step, now: Instant) {
        match step {
            Step::Wait => {}
            Step::Heard(text) => {
                let max = ctx.config.limits.max_history;
                self.remember(ChatRole::User, text.clone(), max);
                // Playbook: a keyword in the transcript moves the stage before the LLM is asked.
                let keyword_to = self
                    .stage_def(ctx.config)
                    .and_then(|stage| stage.on_transcript(&text).map(|t| t.to.clone()));
                if let Some(to) = keyword_to {
                    self.move_stage(ctx, &to, REASON_KEYWORD_MATCH);
                }
                self.ask_llm(ctx, now);
            }
            Step::NextRound => self.ask_llm(ctx, now),
            Step::Speak(reply) => {
                let max = ctx.config.limits.max_history;
                self.remember(ChatRole::Assistant, reply.clone(), max);
                if let Some(turn) = self.turn.as_mut() {
                    turn.speak(ctx, &self.id, reply, now);
                }
            }
            Step::Fail(code, message) => self.fail_turn(ctx, code, message, now),
            Step::End(outcome) => self.end_turn(ctx, outcome, now),
        }
    }

    fn ask_llm(&mut self, ctx: &mut Ctx<'_>, now: Instant) {
        let stage = self.stage_def(ctx.config).map(|st| StageContext {
            name: st.name.clone(),
            instructions: st.instructions.clone(),
            tools: st.tools.clone(),
        });
        let history = self.history.iter().cloned().collect();
        if let Some(turn) = self.turn.as_mut() {
            turn.ask_llm(ctx, &self.id, history, stage, now);
        }
    }

    /// A turn failed with `code`: see [`Turn::fail`]; then it ends.
    pub(crate) fn fail_turn(
        &mut self,
        ctx: &mut Ctx<'_>,
        code: ErrorCode,
        message: String,
        now: Instant,
    ) {
        match self.turn.as_mut() {
            Some(turn) => turn.fail(ctx, code.clone(), message),
            None => ctx.error(code.clone(), message),
        }
        self.end_turn(ctx, TurnOutcome::Failed(code), now);
    }

    /// Ends the current turn (cancelling what it still waits on) and starts the next.
    fn end_turn(&mut self, ctx: &mut Ctx<'_>, outcome: TurnOutcome, now: Instant) {
        let Some(turn) = self.turn.take() else {
            return;
        };
        turn.cancel(ctx);
        ctx.event(ServerEvent::TurnEnded {
            session: self.id.clone(),
            outcome,
        });
        self.pump(ctx, now);
    }

    /// Drops the turn, queued utterances and VAD state. With `tell`, a `tts-start` the
    /// client got is closed with `tts-cancelled` (the connection stays, as when a
    /// `reconnect` replaces the session); otherwise nothing is sent (it is gone).
    pub(crate) fn abandon(&mut self, ctx: &mut Ctx<'_>, tell: bool) {
        let in_tts = self.turn.as_ref().and_then(Turn::speaking).is_some();
        if tell && in_tts {
            ctx.send(&ServerMessage::TtsCancelled);
        }
        self.queued.clear();
        self.segment = None;
        self.vad = None;
        self.track = TrackIn::default();
        if let Some(turn) = self.turn.take() {
            turn.cancel(ctx);
            ctx.event(ServerEvent::TurnEnded {
                session: self.id.clone(),
                outcome: TurnOutcome::Abandoned,
            });
        }
    }

    // -----------------------------------------------------------------------------------
    // Provider answers (the request was checked and its registry entry updated)
    // -----------------------------------------------------------------------------------

    /// The STT outcome.
    pub(crate) fn stt_result(
        &mut self,
        ctx: &mut Ctx<'_>,
        result: Result<String, ProviderError>,
        now: Instant,
    ) {
        let step = Turn::transcribed(ctx, result);
        self.advance(ctx, step, now);
    }

    /// One non-empty piece of the LLM reply.
    pub(crate) fn llm_chunk(
        &mut self,
        ctx: &mut Ctx<'_>,
        content: &str,
        now: Instant,
    ) -> Result<(), CommandError> {
        let turn = self.turn.as_mut().ok_or(CommandError::UnknownRequest)?;
        let step = turn.llm_chunk(ctx, content);
        self.advance(ctx, step, now);
        Ok(())
    }

    /// The LLM calls tool `name` (playbook mode).
    pub(crate) fn llm_tool_call(
        &mut self,
        ctx: &mut Ctx<'_>,
        name: &str,
        arguments: Map<String, Value>,
        now: Instant,
    ) -> Result<CallId, CommandError> {
        let known = self
            .stage_def(ctx.config)
            .is_some_and(|s| s.tool(name).is_some());
        let max = ctx.config.limits.max_tool_calls_per_round;
        let turn = self.turn.as_mut().ok_or(CommandError::UnknownRequest)?;
        match turn.count_tool_call(max) {
            None => Err(CommandError::UnknownRequest),
            Some(false) => {
                self.fail_turn(
                    ctx,
                    ErrorCode::PLAYBOOK_ERROR,
                    texts::TOO_MANY_CALLS.into(),
                    now,
                );
                Err(CommandError::OutOfOrder(
                    "too many tool calls; the turn failed",
                ))
            }
            Some(true) => Ok(turn.call_tool(ctx, &self.id, name, arguments, known, now)),
        }
    }

    /// The LLM round is complete.
    pub(crate) fn llm_done(&mut self, ctx: &mut Ctx<'_>, now: Instant) -> Result<(), CommandError> {
        let step = self
            .turn
            .as_mut()
            .and_then(|t| t.llm_done(ctx))
            .ok_or(CommandError::UnknownRequest)?;
        self.advance(ctx, step, now);
        Ok(())
    }

    /// A TTS chunk while streaming TTS is off: gathered (or, beyond the limit, the turn
    /// fails with `TTS_ERROR`).
    pub(crate) fn gather_tts(
        &mut self,
        ctx: &mut Ctx<'_>,
        format: &str,
        sample_rate: u32,
        audio: &[u8],
        now: Instant,
    ) {
        if let Some(turn) = self.turn.as_mut() {
            let step = turn.gather(ctx, format, sample_rate, audio);
            self.advance(ctx, step, now);
        }
    }

    /// TTS finished: the gathered audio as one `tts` (streaming TTS off), `tts-complete`,
    /// and the turn ends. When audio on the WebRTC track is still playing, returns when it
    /// will have played: `tts-complete` waits for then ([`played`](Self::played)).
    pub(crate) fn tts_done(&mut self, ctx: &mut Ctx<'_>, now: Instant) -> Option<Instant> {
        if let Some(at) = self.turn.as_mut().and_then(|t| t.track_done(ctx, now)) {
            return Some(at);
        }
        if let Some(whole) = self.turn.as_mut().and_then(Turn::take_gathered) {
            let (format, audio) = whole.into_message();
            ctx.send_payload(|out| encode_tts(out, &format, &audio));
        }
        ctx.send(&ServerMessage::TtsComplete);
        self.end_turn(ctx, TurnOutcome::Completed, now);
        None
    }

    /// The playout timer fired: if this turn's track audio has played, `tts-complete` and
    /// the turn ends (a timer left from an earlier turn does nothing).
    pub(crate) fn played(&mut self, ctx: &mut Ctx<'_>, now: Instant) {
        if self.turn.as_mut().is_some_and(|t| t.played(now)) {
            ctx.send(&ServerMessage::TtsComplete);
            self.end_turn(ctx, TurnOutcome::Completed, now);
        }
    }

    /// Tool request `request` (`pending`, already out of the registry) ended with `outcome`;
    /// a success may move the stage; the next LLM round follows when it is due.
    pub(crate) fn tool_done(
        &mut self,
        ctx: &mut Ctx<'_>,
        request: RequestId,
        pending: Pending,
        outcome: Result<Value, String>,
        now: Instant,
    ) {
        let Some(meta) = pending.tool else {
            return;
        };
        Turn::tool_ended(ctx, &meta, &outcome, pending.started, now);
        let to = if outcome.is_ok() {
            self.stage_def(ctx.config)
                .and_then(|st| st.on_tool_result(&meta.name))
                .map(|t| t.to.clone())
        } else {
            None
        };
        if let Some(to) = to {
            self.move_stage(ctx, &to, REASON_TOOL_RESULT);
        }
        if let Some(turn) = self.turn.as_mut() {
            let record = ToolRecord {
                call_id: meta.call_id,
                name: meta.name,
                arguments: meta.arguments,
                outcome,
            };
            let step = turn.tool_recorded(ctx, request, record);
            self.advance(ctx, step, now);
        }
    }
}

/// Where speech comes from: `audio` messages or the WebRTC audio track. Each has its own
/// VAD and segment, so one does not cut the other's speech short.
#[derive(Debug, Clone, Copy)]
enum Intake {
    Message,
    Track,
}

/// Speech from the connection's WebRTC audio track: its resampler (from the track's rate
/// to [`ServerConfig::track_sample_rate`]), its VAD, and its segment being recorded.
#[derive(Debug, Default)]
struct TrackIn {
    resampler: Option<Resampler>,
    vad: Option<Vad>,
    segment: Option<(Vec<i16>, u32)>,
}

/// Buffers reused across `audio` messages and track audio.
#[derive(Debug, Default)]
pub(crate) struct AudioScratch {
    /// The decoded WAV file.
    wav: Vec<u8>,
    /// Track audio resampled for the VAD.
    track: Vec<i16>,
    /// The VAD's events of one message.
    vad_events: Vec<VadEvent>,
}

/// Every session, the deadlines of the disconnected ones (their TTL), and the ids of those
/// that expired.
#[derive(Debug, Default)]
pub(crate) struct Sessions {
    map: BTreeMap<SessionId, Session>,
    ttl: TimerSet<SessionId>,
    /// When a session's TTS on the WebRTC track will have played (`tts-complete` then).
    playout: TimerSet<SessionId>,
    expired: Expired,
}

impl Sessions {
    /// Sessions held.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// Session `id`.
    pub(crate) fn get(&self, id: &str) -> Option<&Session> {
        self.map.get(id)
    }

    /// Session `id`, to change it.
    pub(crate) fn get_mut(&mut self, id: &str) -> Option<&mut Session> {
        self.map.get_mut(id)
    }

    /// Whether session `id` is held.
    pub(crate) fn contains(&self, id: &str) -> bool {
        self.map.contains_key(id)
    }

    /// Holds `session`.
    pub(crate) fn insert(&mut self, session: Session) {
        self.map.insert(session.id.clone(), session);
    }

    /// Drops session `id` (and its TTL) without remembering it as expired.
    pub(crate) fn remove(&mut self, id: &str) -> Option<Session> {
        let id_ = SessionId::from(id);
        self.ttl.cancel(&id_);
        self.playout.cancel(&id_);
        self.map.remove(id)
    }

    /// Session `id`'s TTS on the track will have played at `at`.
    pub(crate) fn set_playout(&mut self, id: &str, at: Instant) {
        self.playout.set(SessionId::from(id), at);
    }

    /// The earliest playout end.
    pub(crate) fn next_playout(&self) -> Option<Instant> {
        self.playout.next_deadline()
    }

    /// The session whose playout ends first, if it ended by `now`.
    pub(crate) fn pop_playout(&mut self, now: Instant) -> Option<SessionId> {
        self.playout.pop_expired(now)
    }

    /// Drops session `id` (and its TTL) and remembers its id as expired (at most `max`
    /// ids are remembered).
    pub(crate) fn expire(&mut self, id: &SessionId, max: usize) -> Option<Session> {
        let s = self.remove(id)?;
        self.expired.remember(id.clone(), max);
        Some(s)
    }

    /// Whether `id` belonged to a session that expired (and is still remembered).
    pub(crate) fn was_expired(&self, id: &str) -> bool {
        self.expired.contains(id)
    }

    /// Session `id`'s TTL ends at `at`.
    pub(crate) fn set_ttl(&mut self, id: &str, at: Instant) {
        self.ttl.set(SessionId::from(id), at);
    }

    /// Session `id` is connected again: no TTL.
    pub(crate) fn cancel_ttl(&mut self, id: &str) {
        self.ttl.cancel(&SessionId::from(id));
    }

    /// The earliest TTL.
    pub(crate) fn next_ttl(&self) -> Option<Instant> {
        self.ttl.next_deadline()
    }

    /// The session whose TTL is the earliest, if it ended by `now`.
    pub(crate) fn pop_ttl(&mut self, now: Instant) -> Option<SessionId> {
        self.ttl.pop_expired(now)
    }

    /// The least recently active disconnected session (the first of equals in id order).
    pub(crate) fn least_recent_disconnected(&self) -> Option<SessionId> {
        self.map
            .iter()
            .filter(|(_, s)| s.conn.is_none())
            .min_by_key(|(_, s)| s.last_activity)
            .map(|(id, _)| id.clone())
    }
}

/// Expired session ids, remembered (bounded, oldest forgotten first) so that a late
/// `reconnect` gets `SESSION_EXPIRED` rather than `SESSION_NOT_FOUND`.
#[derive(Debug, Default)]
struct Expired {
    order: VecDeque<SessionId>,
    ids: BTreeSet<SessionId>,
}

impl Expired {
    /// Remembers `id`, forgetting the oldest beyond `max` (`0`: remembers nothing).
    fn remember(&mut self, id: SessionId, max: usize) {
        if max == 0 {
            return;
        }
        while self.order.len() >= max {
            if let Some(old) = self.order.pop_front() {
                self.ids.remove(&old);
            }
        }
        self.ids.insert(id.clone());
        self.order.push_back(id);
    }

    /// Whether `id` is remembered.
    fn contains(&self, id: &str) -> bool {
        self.ids.contains(id)
    }
}

//! The exact wire strings the server sends: `error` texts and close reasons.

/// Close reason when a connection sent no `ping` within the heartbeat timeout (code 1008).
pub const CLOSE_HEARTBEAT: &str = "heartbeat-timeout";
/// Close reason when the server is full (code 1013).
pub const CLOSE_FULL: &str = "server-full";
/// Close reason for a connection whose session a `reconnect` on another connection took
/// (code 1000).
pub const CLOSE_SESSION_MOVED: &str = "session-moved";
/// Close reason of [`LlmrtcServer::close`](crate::LlmrtcServer::close) (code 1000).
pub const CLOSE_CLOSED: &str = "closed";

/// `offer` without [`ServerConfig::webrtc`](crate::ServerConfig::webrtc)
/// (WEBRTC_UNAVAILABLE).
pub const WEBRTC_UNAVAILABLE: &str = "WebRTC is not available on this server";
/// `reconnect` with an unknown id (SESSION_NOT_FOUND).
pub const SESSION_NOT_FOUND: &str = "Session not found";
/// `reconnect` with an expired id (SESSION_EXPIRED).
pub const SESSION_EXPIRED: &str = "Session expired";
/// `audio.data` is not base64, or decodes to more than the message limit
/// (AUDIO_PROCESSING_ERROR).
pub const BAD_BASE64: &str = "Audio data is not valid base64";
/// The prefix of the text of audio that is not a supported WAV (INVALID_AUDIO_FORMAT); the
/// parser's reason follows it.
pub const UNSUPPORTED_AUDIO: &str = "Unsupported audio: ";
/// The text of the `error` for audio at a sample rate the VAD does not run at (VAD_ERROR).
pub fn vad_rate(rate: u32, vad: &crate::vad::VadConfig) -> String {
    format!(
        "Voice activity detection does not run at {rate} Hz (it takes {} to {} Hz)",
        vad.min_sample_rate, vad.max_sample_rate
    )
}
/// Too many turns waiting (RATE_LIMITED).
pub const TOO_MANY_TURNS: &str = "Too many utterances waiting; this one was dropped";
/// Too many attachments waiting (RATE_LIMITED).
pub const TOO_MANY_ATTACHMENTS: &str = "Too many attachments waiting; the rest were dropped";
/// The first message of a run over a connection's message or byte rate (RATE_LIMITED).
pub const RATE_LIMITED: &str =
    "Too many messages or bytes per second; this one was dropped, and more will be until the rate falls";
/// Sent before closing a connection over a limit (RATE_LIMITED).
pub const SERVER_FULL: &str = "The server has reached its connection or session limit";
/// STT timed out (STT_TIMEOUT).
pub const STT_TIMEOUT: &str = "Speech-to-text timed out";
/// LLM timed out (LLM_TIMEOUT).
pub const LLM_TIMEOUT: &str = "LLM timed out";
/// TTS timed out (TTS_TIMEOUT).
pub const TTS_TIMEOUT: &str = "Text-to-speech timed out";
/// A tool timed out (TOOL_ERROR; also the `tool-call-end.error`).
pub const TOOL_TIMEOUT: &str = "Tool timed out";
/// The transcript exceeded `max_transcript_bytes` (STT_ERROR).
pub const TRANSCRIPT_TOO_LONG: &str = "Transcript too long";
/// The reply exceeded `max_reply_bytes` (LLM_ERROR).
pub const REPLY_TOO_LONG: &str = "LLM reply too long";
/// With streaming TTS off, the gathered audio passed `max_tts_bytes` (TTS_ERROR).
pub const TTS_TOO_LONG: &str = "TTS audio too long for one tts message";
/// With streaming TTS off, TTS chunks of one reply changed format or sample rate
/// (TTS_ERROR).
pub const TTS_MIXED: &str = "TTS chunks of one reply changed format or sample rate";
/// More tool rounds than `max_tool_rounds` (PLAYBOOK_ERROR).
pub const TOO_MANY_ROUNDS: &str = "Too many tool rounds in one turn";
/// More tool calls in a round than `max_tool_calls_per_round` (PLAYBOOK_ERROR).
pub const TOO_MANY_CALLS: &str = "Too many tool calls in one LLM round";
/// The text of the `error` for a tool the current stage lacks (TOOL_ERROR; also the
/// `tool-call-end.error`), with the tool's name quoted.
pub fn unknown_tool(name: &str) -> String {
    format!("Unknown tool {name:?} in the current stage")
}

//! The reply being assembled from server messages: the `llm-chunk` stream's text and the
//! TTS audio between `tts-start` and `tts-complete`, both bounded.

use agentwire_core::Outbox;

use crate::codec::decode_base64;
use crate::config::ClientConfig;
use crate::error::ProtocolError;
use crate::message::ServerMessage;
use crate::wav::parse_wav;

use super::event::ClientEvent;

/// TTS audio being assembled between `tts-start` and `tts-complete`.
#[derive(Debug, Default)]
struct TtsBuf {
    format: Option<String>,
    sample_rate: Option<u32>,
    audio: Vec<u8>,
    overflow: bool,
}

/// The streamed LLM text and TTS audio of the reply in progress.
#[derive(Debug, Default)]
pub(crate) struct Reply {
    llm_text: String,
    llm_overflow: bool,
    tts: Option<TtsBuf>,
}

impl Reply {
    /// The connection ended: whatever was being assembled is dropped.
    pub(crate) fn reset(&mut self) {
        self.tts = None;
        self.llm_text.clear();
        self.llm_overflow = false;
    }

    /// The client closed: TTS audio being assembled is dropped.
    pub(crate) fn drop_audio(&mut self) {
        self.tts = None;
    }

    /// Handles `msg` if it is part of a reply (`transcript`, `llm-chunk`, `llm`, the TTS
    /// messages), emitting its events to `out`; any other message is handed back.
    pub(crate) fn on_message(
        &mut self,
        msg: ServerMessage,
        config: &ClientConfig,
        out: &mut Outbox<ClientEvent>,
    ) -> Option<ServerMessage> {
        match msg {
            ServerMessage::Transcript(t) => {
                if t.is_final {
                    self.llm_text.clear();
                    self.llm_overflow = false;
                }
                out.event(ClientEvent::Message(ServerMessage::Transcript(t)));
            }
            ServerMessage::LlmChunk(c) => {
                if self.llm_text.len() + c.content.len() <= config.max_llm_text_bytes {
                    self.llm_text.push_str(&c.content);
                } else if !self.llm_overflow {
                    self.llm_overflow = true;
                    violation(
                        out,
                        ProtocolError::TextTooLarge {
                            max: config.max_llm_text_bytes,
                        },
                    );
                }
                out.event(ClientEvent::Message(ServerMessage::LlmChunk(c)));
            }
            ServerMessage::Llm(l) => {
                let streamed = std::mem::take(&mut self.llm_text);
                self.llm_overflow = false;
                out.event(ClientEvent::Message(ServerMessage::Llm(l.clone())));
                out.event(ClientEvent::LlmReply {
                    text: l.text,
                    streamed,
                });
            }
            ServerMessage::TtsStart => {
                self.tts = Some(TtsBuf::default());
                out.event(ClientEvent::Message(ServerMessage::TtsStart));
            }
            ServerMessage::TtsChunk(c) => {
                self.on_tts_chunk(c.format, c.sample_rate, &c.data, config, out);
            }
            ServerMessage::Tts(t) => {
                let mut audio = Vec::new();
                if decode_base64(&t.data, config.max_tts_audio_bytes, &mut audio).is_none() {
                    violation(out, ProtocolError::BadAudio("tts"));
                    return None;
                }
                // A WAV file carries its rate (what the server sends with streaming TTS off).
                let sample_rate = if t.format.eq_ignore_ascii_case("wav") {
                    parse_wav(&audio).ok().map(|w| w.format.sample_rate)
                } else {
                    None
                };
                out.event(ClientEvent::TtsAudio {
                    format: t.format,
                    sample_rate,
                    audio,
                });
            }
            ServerMessage::TtsComplete => {
                let buf = self.tts.take();
                out.event(ClientEvent::Message(ServerMessage::TtsComplete));
                if let Some(b) = buf.filter(|b| !b.overflow && !b.audio.is_empty()) {
                    out.event(ClientEvent::TtsAudio {
                        format: b.format.unwrap_or_default(),
                        sample_rate: b.sample_rate,
                        audio: b.audio,
                    });
                }
            }
            ServerMessage::TtsCancelled => {
                self.tts = None;
                out.event(ClientEvent::Message(ServerMessage::TtsCancelled));
            }
            other => return Some(other),
        }
        None
    }

    fn on_tts_chunk(
        &mut self,
        format: String,
        sample_rate: u32,
        data: &str,
        config: &ClientConfig,
        out: &mut Outbox<ClientEvent>,
    ) {
        let max = config.max_tts_audio_bytes;
        let mut audio = Vec::new();
        if decode_base64(data, max, &mut audio).is_none() {
            return violation(out, ProtocolError::BadAudio("tts-chunk"));
        }
        // Chunks without a tts-start still count: start a buffer.
        let buf = self.tts.get_or_insert_with(TtsBuf::default);
        let mut overflowed = false;
        if !buf.overflow {
            if buf.audio.len() + audio.len() > max {
                buf.overflow = true;
                buf.audio = Vec::new();
                overflowed = true;
            } else {
                buf.audio.extend_from_slice(&audio);
                buf.format.get_or_insert_with(|| format.clone());
                buf.sample_rate.get_or_insert(sample_rate);
            }
        }
        if overflowed {
            violation(out, ProtocolError::AudioTooLarge { max });
        }
        out.event(ClientEvent::TtsChunk {
            format,
            sample_rate,
            audio,
        });
    }
}

fn violation(out: &mut Outbox<ClientEvent>, error: ProtocolError) {
    out.event(ClientEvent::ProtocolViolation { error });
}

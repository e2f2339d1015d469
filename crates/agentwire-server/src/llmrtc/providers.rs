//! Provider traits of the reference server and its built-in **offline stand-ins**.
//!
//! The stand-ins are not speech recognition, a language model or speech synthesis: they
//! let the protocol run end to end without network access or API keys.
//!
//! - [`ScriptedStt`] (stand-in STT) returns the next line of a transcript file per utterance,
//!   after interim results word by word (partial transcripts).
//! - [`EchoLlm`] (stand-in LLM) answers from the transcript, token by token, and in playbook
//!   mode calls a stage tool when the user's words name it.
//! - [`ToneTts`] (stand-in TTS) "speaks" a reply as PCM tones, one per word.
//! - [`CannedTools`] (stand-in tools) answers every playbook tool call with a confirmation.
//!
//! Real providers implement the same traits (wrapping an STT, LLM or TTS API).

use std::path::Path;

use agentwire::llmrtc::{ChatRole, LlmRequest, Playbook, SpeechSegment};
use serde_json::{json, Map, Value};

use super::audio::{tone_pcm, TTS_RATE};

/// What a speech recognizer heard in one utterance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transcription {
    /// The interim results a streaming recognizer reported on the way, in order (sent as
    /// `transcript` with `isFinal: false`); empty for one that only gives the final text.
    pub partials: Vec<String>,
    /// The final text (`transcript` with `isFinal: true`).
    pub text: String,
}

impl Transcription {
    /// Only a final text, no interim results.
    pub fn final_only(text: impl Into<String>) -> Self {
        Self {
            partials: Vec::new(),
            text: text.into(),
        }
    }
}

/// Speech to text.
pub trait SpeechToText: Send {
    /// What was said in one utterance: interim results and the final text.
    fn transcribe(&mut self, segment: &SpeechSegment) -> Result<Transcription, String>;
}

/// What the language model does in one round.
#[derive(Debug, Clone, PartialEq)]
pub enum LlmStep {
    /// Stream this text, piece by piece.
    Tokens(Vec<String>),
    /// Call this tool (playbook mode), then stream the pieces that follow it.
    ToolCall {
        /// Text streamed before the call.
        preamble: Vec<String>,
        /// The tool.
        name: String,
        /// Its arguments.
        arguments: Map<String, Value>,
    },
}

/// The language model.
pub trait LanguageModel: Send {
    /// The next round of the reply to `req`.
    fn reply(&mut self, req: &LlmRequest) -> Result<LlmStep, String>;
}

/// Text to speech: 16-bit mono PCM pieces at a sample rate.
pub trait TextToSpeech: Send {
    /// The sample rate of the audio.
    fn sample_rate(&self) -> u32;
    /// The audio of `text`, in pieces to stream.
    fn synthesize(&mut self, text: &str) -> Result<Vec<Vec<u8>>, String>;
}

/// Playbook tools.
pub trait Tools: Send {
    /// Runs tool `name`.
    fn call(&mut self, name: &str, arguments: &Map<String, Value>) -> Result<Value, String>;
}

/// Stand-in STT: the next line of a transcript per utterance (cycling), `"(no transcript)"`
/// when the script is empty.
#[derive(Debug, Clone)]
pub struct ScriptedStt {
    lines: Vec<String>,
    next: usize,
}

impl ScriptedStt {
    /// A script of `lines` (blank lines and `#` comments dropped).
    pub fn new(lines: impl IntoIterator<Item = String>) -> Self {
        let lines = lines
            .into_iter()
            .map(|l| l.trim().to_owned())
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .collect();
        Self { lines, next: 0 }
    }

    /// Reads a transcript file, one utterance per line.
    pub fn from_file(path: &Path) -> std::io::Result<Self> {
        let text = std::fs::read_to_string(path)?;
        Ok(Self::from_text(&text))
    }

    /// A script from its text, one utterance per line.
    pub fn from_text(text: &str) -> Self {
        Self::new(text.lines().map(str::to_owned))
    }

    /// The example script ([`EXAMPLE_TRANSCRIPT`]), built into the program: what the
    /// server uses without `--transcript`, from a checkout or installed alike.
    pub fn example() -> Self {
        Self::from_text(EXAMPLE_TRANSCRIPT)
    }
}

/// `src/llmrtc/data/transcript.txt` of this crate, compiled into the program (its text, not
/// its path), so the default works wherever the binary runs.
pub const EXAMPLE_TRANSCRIPT: &str = include_str!("data/transcript.txt");

/// `src/llmrtc/data/playbook.json` of this crate, compiled into the program.
pub const EXAMPLE_PLAYBOOK: &str = include_str!("data/playbook.json");

impl SpeechToText for ScriptedStt {
    /// The next line, with the interim results a streaming recognizer would report before
    /// it: the line's first word, its first two words, and so on ([`partials`]).
    fn transcribe(&mut self, _segment: &SpeechSegment) -> Result<Transcription, String> {
        if self.lines.is_empty() {
            return Ok(Transcription::final_only("(no transcript)"));
        }
        let line = self.lines[self.next % self.lines.len()].clone();
        self.next += 1;
        Ok(Transcription {
            partials: partials(&line),
            text: line,
        })
    }
}

/// The interim results of `text` word by word: every prefix that ends at a word's end and
/// is shorter than the text, without trailing punctuation (`"Hello there."` gives
/// `["Hello"]`).
pub fn partials(text: &str) -> Vec<String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    (1..words.len())
        .map(|n| {
            words[..n]
                .join(" ")
                .trim_end_matches(|c: char| c.is_ascii_punctuation())
                .to_owned()
        })
        .collect()
}

/// Splits `text` into the tokens an LLM would stream (words with their leading space).
pub fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, w) in text.split(' ').enumerate() {
        out.push(if i == 0 {
            w.to_owned()
        } else {
            format!(" {w}")
        });
    }
    out.retain(|t| !t.is_empty());
    out
}

/// The first word of a camelCase or snake_case tool name, lowercased (`bookTable` → `book`).
fn tool_word(name: &str) -> String {
    let first: String = name
        .chars()
        .enumerate()
        .take_while(|(i, c)| *i == 0 || (c.is_lowercase() && *c != '_'))
        .map(|(_, c)| c)
        .collect();
    first.to_lowercase()
}

/// Stand-in LLM: replies "You said: ...", remembers how many turns the conversation has had,
/// counts the turn's images ("I see 1 image."), and in playbook mode calls the first stage tool whose first name word (`book` for
/// `bookTable`) appears in the user's words, then confirms with the tool's result.
#[derive(Debug, Clone, Default)]
pub struct EchoLlm;

impl LanguageModel for EchoLlm {
    fn reply(&mut self, req: &LlmRequest) -> Result<LlmStep, String> {
        let user = req
            .history
            .iter()
            .rev()
            .find(|m| m.role == ChatRole::User)
            .map_or("", |m| m.text.as_str());
        let turn = req
            .history
            .iter()
            .filter(|m| m.role == ChatRole::User)
            .count();
        if let Some(done) = req.tool_results.last() {
            // A round after a tool call continues the reply streamed before the call
            // ("I'll take care of that."), so its first token starts with a space.
            let text = match &done.outcome {
                Ok(v) => format!(
                    "Done! {} confirmed{}.",
                    done.name,
                    v.get("confirmation")
                        .and_then(Value::as_str)
                        .map_or(String::new(), |c| format!(", reference {c}"))
                ),
                Err(e) => format!("Sorry, {} failed: {e}.", done.name),
            };
            return Ok(LlmStep::Tokens(tokens(&format!(" {text}"))));
        }
        if let Some(stage) = &req.stage {
            let lower = user.to_lowercase();
            if let Some(tool) = stage.tools.iter().find(|t| {
                lower
                    .split(|c: char| !c.is_alphanumeric())
                    .any(|w| w == tool_word(&t.name))
            }) {
                let mut arguments = Map::new();
                arguments.insert("request".into(), Value::String(user.to_owned()));
                return Ok(LlmStep::ToolCall {
                    preamble: tokens("I'll take care of that."),
                    name: tool.name.clone(),
                    arguments,
                });
            }
        }
        let seen = match req.attachments.len() {
            0 => String::new(),
            1 => " I see 1 image.".to_owned(),
            n => format!(" I see {n} images."),
        };
        let text = if lower_has(user, "story") {
            "Once upon a time a packet left its socket and travelled through many routers, \
             and every router passed it on, until at last it reached the speaker."
                .to_owned()
        } else {
            let said = user.trim_end_matches(['.', '?', '!']);
            format!("You said: {said}. That was turn {turn}.{seen}")
        };
        Ok(LlmStep::Tokens(tokens(&text)))
    }
}

fn lower_has(text: &str, word: &str) -> bool {
    text.to_lowercase().contains(word)
}

/// Stand-in TTS: one 120 ms tone per word (pitch from the word's length) with 30 ms
/// pauses, at 24 kHz, streamed one word per piece.
#[derive(Debug, Clone, Default)]
pub struct ToneTts;

impl TextToSpeech for ToneTts {
    fn sample_rate(&self) -> u32 {
        TTS_RATE
    }

    fn synthesize(&mut self, text: &str) -> Result<Vec<Vec<u8>>, String> {
        Ok(text
            .split_whitespace()
            .map(|w| {
                let freq = 220.0 + 40.0 * (w.len().min(12) as f32);
                let mut pcm = tone_pcm(freq, 120);
                pcm.extend(std::iter::repeat_n(0u8, TTS_RATE as usize * 30 / 1000 * 2));
                pcm
            })
            .collect())
    }
}

/// Stand-in tools: every call succeeds with `{ok, tool, confirmation}`, the confirmation
/// counting up (`AW-0001`, ...).
#[derive(Debug, Clone, Default)]
pub struct CannedTools {
    calls: u32,
}

impl Tools for CannedTools {
    fn call(&mut self, name: &str, arguments: &Map<String, Value>) -> Result<Value, String> {
        self.calls += 1;
        Ok(json!({
            "ok": true,
            "tool": name,
            "arguments": arguments,
            "confirmation": format!("AW-{:04}", self.calls),
        }))
    }
}

/// Loads a playbook (stages and tools as JSON, see `src/llmrtc/data/playbook.json` of this
/// crate) and checks it.
pub fn load_playbook(path: &Path) -> Result<Playbook, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse_playbook(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Parses and checks a playbook's JSON.
pub fn parse_playbook(text: &str) -> Result<Playbook, String> {
    let playbook: Playbook = serde_json::from_str(text).map_err(|e| e.to_string())?;
    playbook.validate().map_err(|e| e.to_string())?;
    Ok(playbook)
}

/// The example playbook ([`EXAMPLE_PLAYBOOK`]: a `bookTable` tool and two stages), built
/// into the program.
pub fn example_playbook() -> Result<Playbook, String> {
    parse_playbook(EXAMPLE_PLAYBOOK).map_err(|e| format!("the built-in example playbook: {e}"))
}

/// The providers a server runs with.
pub struct Providers {
    /// Speech to text.
    pub stt: Box<dyn SpeechToText>,
    /// The language model.
    pub llm: Box<dyn LanguageModel>,
    /// Text to speech.
    pub tts: Box<dyn TextToSpeech>,
    /// Playbook tools.
    pub tools: Box<dyn Tools>,
}

impl Providers {
    /// The offline stand-ins, with `stt` reading `transcript`.
    pub fn stand_ins(stt: ScriptedStt) -> Self {
        Self {
            stt: Box::new(stt),
            llm: Box::new(EchoLlm),
            tts: Box::new(ToneTts),
            tools: Box::new(CannedTools::default()),
        }
    }
}

//! The reference llmrtc client: an `LlmrtcClient` machine under agentwire-tokio's dialer
//! driver (the machine decides when to reconnect), plus a readable rendering of its events.

use std::time::Duration;

use agentwire::llmrtc::{
    ClientCommandError, ClientConfig, ClientEvent, ConnectionState, LlmrtcClient, ServerMessage,
    SplitMix64, DEFAULT_MAX_MESSAGE_BYTES,
};
use agentwire::tokio::{Client, ClientConfig as TransportConfig, Closed, Events, Handle, Limits};

/// A running client.
pub struct LlmrtcClientApp {
    /// Commands to the machine.
    pub handle: Handle<LlmrtcClient>,
    /// Its events.
    pub events: Events<ClientEvent>,
}

/// Why waiting for an event stopped.
#[derive(Debug)]
pub enum WaitError {
    /// Not within the time given.
    Timeout(&'static str),
    /// The client stopped.
    Ended(&'static str),
}

impl std::fmt::Display for WaitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Timeout(w) => write!(f, "timed out waiting for {w}"),
            Self::Ended(w) => write!(f, "client ended while waiting for {w}"),
        }
    }
}

impl std::error::Error for WaitError {}

/// Transport settings: messages up to the llmrtc default (8 MiB: whole `tts` replies).
pub fn transport_config() -> TransportConfig {
    TransportConfig::default().with_limits(
        Limits::default()
            .with_max_message_size(DEFAULT_MAX_MESSAGE_BYTES)
            .with_max_frame_size(DEFAULT_MAX_MESSAGE_BYTES),
    )
}

impl LlmrtcClientApp {
    /// Connects to `url` and starts the client (state `connecting`). `seed` feeds the
    /// reconnect jitter.
    pub async fn start(
        url: &str,
        config: ClientConfig,
        seed: u64,
    ) -> Result<Self, Box<dyn std::error::Error>> {
        let machine = LlmrtcClient::new(config, SplitMix64::new(seed));
        let (handle, events) = Client::connect_dialer(url, machine, transport_config())?;
        let (now, unix_ms) = super::clocks();
        handle
            .call(move |c, _| {
                c.set_wall_clock(unix_ms, now);
                c.start(now)
            })
            .await??;
        Ok(Self { handle, events })
    }

    /// Sends one WAV file as `audio`.
    pub async fn send_audio(&self, wav: Vec<u8>) -> Result<(), Box<dyn std::error::Error>> {
        self.handle
            .call(move |c, now| c.send_audio(&wav, &[], now))
            .await??;
        Ok(())
    }

    /// Drops the connection; the client reconnects and resumes its session.
    pub async fn drop_connection(&self) -> Result<bool, Closed> {
        self.handle.call(|c, now| c.drop_connection(now)).await
    }

    /// The state now.
    pub async fn state(&self) -> Result<ConnectionState, Closed> {
        self.handle.call(|c, _| c.state()).await
    }

    /// The session id now.
    pub async fn session_id(&self) -> Result<Option<String>, Closed> {
        self.handle
            .call(|c, _| c.session_id().map(str::to_owned))
            .await
    }

    /// Closes the client (close 1000, state `closed`) and waits for the driver to stop.
    pub async fn close(self) {
        let _ = self.handle.call(|c, now| c.close(now)).await;
        self.handle.shutdown().await;
    }

    /// Events until one matches `pred` (each passed to `seen` first), within `timeout`.
    pub async fn wait_for(
        &mut self,
        what: &'static str,
        timeout: Duration,
        mut seen: impl FnMut(&ClientEvent),
        mut pred: impl FnMut(&ClientEvent) -> bool,
    ) -> Result<ClientEvent, WaitError> {
        let fut = async {
            while let Some(e) = self.events.recv().await {
                seen(&e);
                if pred(&e) {
                    return Ok(e);
                }
            }
            Err(WaitError::Ended(what))
        };
        tokio::time::timeout(timeout, fut)
            .await
            .unwrap_or(Err(WaitError::Timeout(what)))
    }
}

impl From<ClientCommandError> for WaitError {
    fn from(_: ClientCommandError) -> Self {
        Self::Ended("a command")
    }
}

/// One line describing `e` for a transcript, or `None` for events shown otherwise
/// (`llm-chunk` text is printed inline as it streams).
pub fn describe(e: &ClientEvent) -> Option<String> {
    Some(match e {
        ClientEvent::StateChanged { from, to } => format!("[state] {from} -> {to}"),
        ClientEvent::Ready {
            id,
            protocol_version,
            ice_servers,
        } => format!(
            "[ready] session {id}, protocol v{protocol_version}, {} ICE server(s)",
            ice_servers.as_ref().map_or(0, Vec::len)
        ),
        ClientEvent::VersionMismatch { server, client } => {
            format!("[warn] server speaks protocol v{server}, we speak v{client}; continuing")
        }
        ClientEvent::ResumeRequested { previous } => format!("[reconnect] asking for {previous}"),
        ClientEvent::Resumed {
            success,
            session_id,
            history_recovered,
        } => format!(
            "[reconnect-ack] success={success} session={session_id} historyRecovered={history_recovered}"
        ),
        ClientEvent::Pong { timestamp, rtt } => format!("[pong] {timestamp} rtt={rtt:?}"),
        ClientEvent::PongMissed { missed } => format!("[heartbeat] pong missed ({missed})"),
        ClientEvent::ConnectionLost { reason } => format!("[connection] lost: {reason:?}"),
        ClientEvent::Reconnecting {
            attempt,
            max_attempts,
            delay,
        } => format!("[reconnecting] try {attempt}/{max_attempts} in {delay:.2?}"),
        ClientEvent::Message(m) => match m {
            ServerMessage::LlmChunk(_) => return None,
            ServerMessage::Transcript(t) => format!(
                "[transcript] {:?}{}",
                t.text,
                if t.is_final { "" } else { " (partial)" }
            ),
            ServerMessage::ToolCallStart(t) => format!(
                "[tool-call-start] {} {} {}",
                t.call_id,
                t.name,
                serde_json::Value::Object(t.arguments.clone())
            ),
            ServerMessage::ToolCallEnd(t) => format!(
                "[tool-call-end] {} {}ms result={} error={:?}",
                t.call_id,
                t.duration_ms,
                t.result.as_ref().map_or("-".into(), ToString::to_string),
                t.error
            ),
            ServerMessage::StageChange(s) => {
                format!("[stage-change] {} -> {} ({})", s.from, s.to, s.reason)
            }
            ServerMessage::Error(err) => format!("[error] {}: {}", err.code, err.message),
            ServerMessage::Llm(l) => format!("[llm] {:?}", l.text),
            other => format!("[{}]", other.type_name()),
        },
        ClientEvent::TtsChunk {
            sample_rate, audio, ..
        } => format!(
            "[tts-chunk] {} bytes ({} ms at {sample_rate} Hz)",
            audio.len(),
            audio.len() as u64 * 1000 / 2 / u64::from((*sample_rate).max(1))
        ),
        ClientEvent::LlmReply { .. } => return None,
        ClientEvent::TtsAudio {
            format,
            sample_rate,
            audio,
        } => format!(
            "[tts audio] {} bytes of {format} at {sample_rate:?} Hz",
            audio.len()
        ),
        ClientEvent::Ignored { type_name, reason } => {
            format!("[ignored] {type_name} ({reason:?})")
        }
        ClientEvent::ProtocolViolation { error } => format!("[violation] {error}"),
        other => format!("{other:?}"),
    })
}

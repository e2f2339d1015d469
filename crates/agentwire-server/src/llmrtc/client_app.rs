//! The reference llmrtc client: an `LlmrtcClient` machine under agentwire-tokio's dialer
//! driver (the machine decides when to reconnect), over the WebSocket alone ([`start`]) or
//! with WebRTC ([`start_webrtc`]: it offers a peer connection after every `ready` and takes
//! payloads from the data channel once it opens), plus a readable rendering of its events.
//!
//! [`start`]: LlmrtcClientApp::start
//! [`start_webrtc`]: LlmrtcClientApp::start_webrtc

use std::io::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use agentwire::llmrtc::{
    ClientCommandError, ClientConfig, ClientEvent, ConnectionState, IgnoreReason, LlmrtcClient,
    LossReason, ServerMessage, SessionMode, SplitMix64, VisionAttachment,
    DEFAULT_MAX_MESSAGE_BYTES,
};
use agentwire::tokio::{
    Client, ClientConfig as TransportConfig, Closed, Events, Handle, Limits, UdpStats,
};
use llmrtc_webrtc::{AudioOffer, WebrtcClient, WebrtcClientEvent, WebrtcConfig};

use super::machine::ClientMachine;

/// A running client.
pub struct LlmrtcClientApp {
    /// Commands to the machine (which dereferences to the `LlmrtcClient`).
    pub handle: Handle<ClientMachine>,
    /// Its events.
    pub events: Events<WebrtcClientEvent>,
}

/// Why waiting for an event stopped.
#[derive(Debug)]
#[non_exhaustive]
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
    crate::common::client_transport(TransportConfig::default()).with_limits(
        Limits::default()
            .with_max_message_size(DEFAULT_MAX_MESSAGE_BYTES)
            .with_max_frame_size(DEFAULT_MAX_MESSAGE_BYTES),
    )
}

impl LlmrtcClientApp {
    /// Connects to `url` and starts the client (state `connecting`), over the WebSocket
    /// alone. `seed` feeds the reconnect jitter.
    pub async fn start(
        url: &str,
        config: ClientConfig,
        seed: u64,
    ) -> Result<Self, Box<dyn std::error::Error>> {
        let machine = ClientMachine::websocket(LlmrtcClient::new(config, SplitMix64::new(seed)));
        let (handle, events) = Client::connect_dialer(url, machine, transport_config())?;
        Self::started(handle, events).await
    }

    /// As [`start`](Self::start), with WebRTC: a UDP socket on the local address that
    /// routes to the server, and after every `ready` (reconnects included) an `offer` of a
    /// peer connection with the data channel and `audio` (an Opus track, or none). Payload
    /// messages come from the data channel once it opens
    /// ([`WebrtcClientEvent::ChannelOpen`], [`wait_for_event`](Self::wait_for_event)), each
    /// once.
    pub async fn start_webrtc(
        url: &str,
        config: ClientConfig,
        seed: u64,
        audio: AudioOffer,
    ) -> Result<Self, Box<dyn std::error::Error>> {
        let udp = udp_socket_towards(url).await?;
        let bind = udp.local_addr()?;
        let mut client = WebrtcClient::new(config, SplitMix64::new(seed), WebrtcConfig::new(bind))?;
        client.set_auto_offer(Some(audio));
        let machine = ClientMachine::webrtc(client);
        let (handle, events) =
            Client::connect_dialer_with_udp(url, udp, machine, transport_config())?;
        Self::started(handle, events).await
    }

    async fn started(
        handle: Handle<ClientMachine>,
        events: Events<WebrtcClientEvent>,
    ) -> Result<Self, Box<dyn std::error::Error>> {
        let (now, unix_ms) = crate::common::clocks();
        handle
            .call(move |c, _| {
                c.set_wall_clock(now, unix_ms);
                c.start(now)
            })
            .await??;
        Ok(Self { handle, events })
    }

    /// Sends a WAV file's speech (PCM 16-bit, mono or stereo, any rate) on the microphone
    /// track: a client started with [`AudioOffer::SendRecv`] whose track is up
    /// ([`WebrtcClientEvent::TrackReady`]). The machine encodes it to Opus and paces it in
    /// real time (one 20 ms frame every 20 ms), as a microphone would; one second of
    /// silence follows, because a microphone goes on sending after the speaker stops and
    /// the server's VAD ends an utterance on silence, not on the end of a track's frames.
    pub async fn send_mic_wav(&self, wav: &[u8]) -> Result<(), Box<dyn std::error::Error>> {
        let parsed = agentwire::llmrtc::wav::parse_wav(wav)?;
        let rate = parsed.format.sample_rate;
        let mut samples: Vec<i16> = parsed.mono_samples().collect();
        samples.resize(samples.len() + rate as usize, 0);
        self.handle
            .call(move |c, now| match c.webrtc_mut() {
                Some(w) => w.send_mic(&samples, rate, now).map_err(|e| e.to_string()),
                None => Err("no WebRTC: start the client with start_webrtc".to_owned()),
            })
            .await??;
        Ok(())
    }

    /// Whether the WebRTC data channel is open now (always `false` without WebRTC).
    pub async fn channel_open(&self) -> Result<bool, Closed> {
        self.handle
            .call(|c, _| c.webrtc_ref().is_some_and(WebrtcClient::is_channel_open))
            .await
    }

    /// The UDP socket's counters, with WebRTC.
    pub fn udp_stats(&self) -> Option<UdpStats> {
        self.handle.udp_stats()
    }

    /// Sends one WAV file as `audio`.
    pub async fn send_audio(&self, wav: Vec<u8>) -> Result<(), Box<dyn std::error::Error>> {
        self.handle
            .call(move |c, now| c.send_audio(&wav, &[], now))
            .await??;
        Ok(())
    }

    /// Sends `attachments` as one `attachments` message: they go with the next turn.
    pub async fn send_attachments(
        &self,
        attachments: Vec<VisionAttachment>,
    ) -> Result<(), Box<dyn std::error::Error>> {
        self.handle
            .call(move |c, now| c.send_attachments(attachments, now))
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

    /// llmrtc events until one matches `pred` (each passed to `seen` first), within
    /// `timeout`. WebRTC events (data channel open, peer closed) are skipped: see
    /// [`wait_for_event`](Self::wait_for_event).
    pub async fn wait_for(
        &mut self,
        what: &'static str,
        timeout: Duration,
        mut seen: impl FnMut(&ClientEvent),
        mut pred: impl FnMut(&ClientEvent) -> bool,
    ) -> Result<ClientEvent, WaitError> {
        let found = self
            .wait_for_event(
                what,
                timeout,
                |e| {
                    if let WebrtcClientEvent::Llmrtc(e) = e {
                        seen(e);
                    }
                },
                |e| matches!(e, WebrtcClientEvent::Llmrtc(e) if pred(e)),
            )
            .await?;
        match found {
            WebrtcClientEvent::Llmrtc(e) => Ok(e),
            _ => Err(WaitError::Ended(what)),
        }
    }

    /// Every event, WebRTC ones included, until one matches `pred` (each passed to `seen`
    /// first), within `timeout`.
    pub async fn wait_for_event(
        &mut self,
        what: &'static str,
        timeout: Duration,
        mut seen: impl FnMut(&WebrtcClientEvent),
        mut pred: impl FnMut(&WebrtcClientEvent) -> bool,
    ) -> Result<WebrtcClientEvent, WaitError> {
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

/// A UDP socket bound to the local IP that routes to the host of `url` (`ws://` or
/// `wss://`), any free port: the client's host candidate.
pub async fn udp_socket_towards(url: &str) -> std::io::Result<tokio::net::UdpSocket> {
    let invalid =
        |why: &str| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{url}: {why}"));
    let (secure, rest) = if let Some(r) = url.strip_prefix("wss://") {
        (true, r)
    } else if let Some(r) = url.strip_prefix("ws://") {
        (false, r)
    } else {
        return Err(invalid("not a ws:// or wss:// URL"));
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let authority = authority.rsplit('@').next().unwrap_or_default();
    let default_port = if secure { 443 } else { 80 };
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, after) = v6.split_once(']').ok_or_else(|| invalid("unclosed ["))?;
        let port = after.strip_prefix(':').map(str::parse).transpose();
        (
            h,
            port.map_err(|_| invalid("bad port"))?
                .unwrap_or(default_port),
        )
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, p.parse().map_err(|_| invalid("bad port"))?),
            None => (authority, default_port),
        }
    };
    let server = tokio::net::lookup_host((host, port))
        .await?
        .next()
        .ok_or_else(|| invalid("no address"))?;
    let unspecified: IpAddr = if server.is_ipv4() {
        std::net::Ipv4Addr::UNSPECIFIED.into()
    } else {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    };
    // A connected probe tells which local address the OS routes to the server from.
    let probe = std::net::UdpSocket::bind(SocketAddr::new(unspecified, 0))?;
    probe.connect(server)?;
    let local = probe.local_addr()?.ip();
    tokio::net::UdpSocket::bind(SocketAddr::new(local, 0)).await
}

impl From<ClientCommandError> for WaitError {
    fn from(_: ClientCommandError) -> Self {
        Self::Ended("a command")
    }
}

/// The attachment a command-line argument names: a `data:` URI or an `http(s)://` URL as
/// given (the spec's `VisionAttachment.data` is "Base64 data URI or URL"), or else the path
/// of an image file, read and sent as a base64 data URI whose type comes from the file's
/// extension (png, jpg/jpeg, gif, webp; anything else is refused, so a typo is not sent as
/// an image). Files are capped at 4 MiB, so the message stays within the 8 MiB limit.
pub fn attachment_from_arg(arg: &str) -> Result<VisionAttachment, String> {
    const MAX_FILE: u64 = 4 << 20;
    if let Some(rest) = arg.strip_prefix("data:") {
        let (meta, _) = rest
            .split_once(',')
            .ok_or_else(|| format!("{arg:.40}: a data URI needs a comma before its data"))?;
        let mime = meta.split(';').next().unwrap_or_default();
        let attachment = VisionAttachment::new(arg);
        return Ok(if mime.is_empty() {
            attachment
        } else {
            attachment.with_mime_type(mime)
        });
    }
    if arg.starts_with("http://") || arg.starts_with("https://") {
        return Ok(VisionAttachment::new(arg));
    }
    let path = std::path::Path::new(arg);
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let mime = match ext.as_deref() {
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("webp") => "image/webp",
        _ => {
            return Err(format!(
                "{arg}: not a data URI, an http(s) URL or a .png/.jpg/.jpeg/.gif/.webp file"
            ))
        }
    };
    let size = std::fs::metadata(path)
        .map_err(|e| format!("{arg}: {e}"))?
        .len();
    if size > MAX_FILE {
        return Err(format!(
            "{arg}: {size} bytes, more than the 4 MiB an attachment may be"
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("{arg}: {e}"))?;
    let mut uri = format!("data:{mime};base64,").into_bytes();
    agentwire::llmrtc::write_base64(&mut uri, &bytes);
    let uri = String::from_utf8(uri).map_err(|e| e.to_string())?;
    let alt = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(VisionAttachment::new(uri)
        .with_mime_type(mime)
        .with_alt(alt))
}

/// Renders client events as a readable transcript for a person: one sentence per event,
/// the LLM reply as it streams, and each reply's TTS audio summed up in one line (not a line
/// per chunk). Never a Rust `Debug` dump.
#[derive(Debug, Default)]
pub struct Transcript {
    /// Prefix of every line (the demo indents).
    indent: &'static str,
    /// Streamed LLM text left the cursor mid-line.
    mid_line: bool,
    /// TTS chunks of the reply being spoken.
    chunks: u32,
    /// Their decoded bytes.
    chunk_bytes: usize,
    /// Their sample rate.
    chunk_rate: u32,
    /// Payload messages whose WebSocket copy was set aside because they came on the data
    /// channel, since [`take_channel_payloads`](Self::take_channel_payloads).
    channel_payloads: usize,
}

impl Transcript {
    /// A transcript whose lines start with `indent`.
    pub fn new(indent: &'static str) -> Self {
        Self {
            indent,
            ..Self::default()
        }
    }

    /// What to write to stdout for `e` (empty for events shown otherwise, such as single
    /// TTS chunks); streamed LLM text comes without a line break until its last chunk.
    pub fn render(&mut self, e: &ClientEvent) -> String {
        match e {
            ClientEvent::Message(ServerMessage::LlmChunk(c)) => {
                // The reply streams on one line of its own, started with a label.
                let mut text = if self.mid_line {
                    c.content.clone()
                } else if c.content.trim().is_empty() && !c.done {
                    return String::new(); // nothing to show yet
                } else {
                    format!("{}[reply] {}", self.indent, c.content.trim_start())
                };
                self.mid_line = !c.done;
                if c.done {
                    text.push('\n');
                }
                text
            }
            ClientEvent::TtsChunk {
                sample_rate, audio, ..
            } => {
                self.chunks += 1;
                self.chunk_bytes += audio.len();
                self.chunk_rate = *sample_rate;
                String::new()
            }
            other => {
                let Some(line) = self.describe(other) else {
                    return String::new();
                };
                let lead = if std::mem::take(&mut self.mid_line) {
                    "\n"
                } else {
                    ""
                };
                format!("{lead}{}{line}\n", self.indent)
            }
        }
    }

    /// Writes [`render`](Self::render)'s text to stdout.
    pub fn print(&mut self, e: &ClientEvent) {
        let text = self.render(e);
        if !text.is_empty() {
            print!("{text}");
            let _ = std::io::stdout().flush();
        }
    }

    /// How many payload messages came on the WebRTC data channel (their WebSocket copies
    /// set aside) among the events rendered since the last call.
    pub fn take_channel_payloads(&mut self) -> usize {
        std::mem::take(&mut self.channel_payloads)
    }

    /// Prints `e` as [`print`](Self::print) does, and a line for the WebRTC events (the
    /// data channel opening, the peer connection closing).
    pub fn print_event(&mut self, e: &WebrtcClientEvent) {
        match e {
            WebrtcClientEvent::Llmrtc(e) => self.print(e),
            WebrtcClientEvent::ChannelOpen => {
                self.line("WebRTC data channel open: payloads now arrive on it");
            }
            WebrtcClientEvent::PeerClosed => {
                self.line("WebRTC peer connection closed: payloads arrive on the WebSocket");
            }
            _ => {}
        }
    }

    fn line(&mut self, text: &str) {
        let brk = if self.mid_line { "\n" } else { "" };
        self.mid_line = false;
        println!("{brk}{}{text}", self.indent);
    }

    fn take_chunks(&mut self) -> (u32, usize, u32) {
        let taken = (self.chunks, self.chunk_bytes, self.chunk_rate);
        self.chunks = 0;
        self.chunk_bytes = 0;
        taken
    }

    /// One sentence for `e`, or `None` for events shown otherwise.
    fn describe(&mut self, e: &ClientEvent) -> Option<String> {
        Some(match e {
            ClientEvent::StateChanged { from, to } => format!("[state] {from} -> {to}"),
            ClientEvent::Ready {
                id,
                protocol_version,
                ice_servers,
                mode,
            } => format!(
                "[ready] session {id}, protocol v{protocol_version}, {} mode, {}",
                mode.as_ref().unwrap_or(&SessionMode::PIPELINE),
                match ice_servers.as_ref().map_or(0, Vec::len) {
                    0 => "no ICE servers".to_owned(),
                    1 => "1 ICE server".to_owned(),
                    n => format!("{n} ICE servers"),
                }
            ),
            ClientEvent::VersionMismatch { server, client } => {
                format!("[warn] server speaks protocol v{server}, we speak v{client}; continuing")
            }
            ClientEvent::ResumeRequested { previous } => {
                format!("[reconnect] asking to resume session {previous}")
            }
            ClientEvent::Resumed {
                success,
                session_id,
                history_recovered,
            } => format!(
                "[reconnect-ack] success={success} session={session_id} historyRecovered={history_recovered}"
            ),
            ClientEvent::Pong { rtt, .. } => match rtt {
                Some(rtt) => format!("[pong] round trip {}", millis(*rtt)),
                None => "[pong] an answer to an older ping".to_owned(),
            },
            ClientEvent::PongMissed { missed } => {
                format!("[heartbeat] no pong in time ({missed} in a row)")
            }
            ClientEvent::ConnectionLost { reason } => {
                format!("[connection] lost: {}", loss(*reason))
            }
            ClientEvent::Reconnecting {
                attempt,
                max_attempts,
                delay,
            } => format!(
                "[reconnecting] try {attempt} of {max_attempts} in {:.2} s",
                delay.as_secs_f64()
            ),
            ClientEvent::Message(m) => self.message(m)?,
            ClientEvent::TtsChunk { .. } | ClientEvent::LlmReply { .. } => return None,
            ClientEvent::TtsAudio {
                format,
                sample_rate,
                audio,
            } => {
                let (chunks, _, chunk_rate) = self.take_chunks();
                let rate = sample_rate.unwrap_or(chunk_rate);
                let how = match chunks {
                    0 => "in one tts message".to_owned(),
                    1 => "in 1 chunk".to_owned(),
                    n => format!("in {n} chunks"),
                };
                if rate > 0 && format == "pcm" {
                    format!(
                        "[speech] {:.2} s of {format} audio at {rate} Hz ({} bytes) {how}",
                        audio.len() as f64 / 2.0 / f64::from(rate),
                        audio.len()
                    )
                } else {
                    format!("[speech] {} bytes of {format} audio {how}", audio.len())
                }
            }
            // Every payload comes twice while the data channel is open: the copy set
            // aside is the expected one, not news.
            ClientEvent::Ignored {
                reason: IgnoreReason::OtherChannel,
                ..
            } => {
                self.channel_payloads += 1;
                return None;
            }
            ClientEvent::Ignored { type_name, reason } => format!(
                "[ignored] a {type_name} message ({})",
                match reason {
                    IgnoreReason::UnknownType => "a type this client does not know",
                    IgnoreReason::BeforeReady => "it came before ready",
                    _ => "ignored",
                }
            ),
            ClientEvent::ProtocolViolation { error } => {
                format!("[violation] the server sent a bad message: {error}")
            }
            _ => "[event] an event this program does not describe".to_owned(),
        })
    }

    fn message(&mut self, m: &ServerMessage) -> Option<String> {
        Some(match m {
            ServerMessage::LlmChunk(_) => return None,
            ServerMessage::Transcript(t) => {
                if t.is_final {
                    format!("[transcript] \"{}\"", t.text)
                } else {
                    format!("[transcript] \"{}\" (partial)", t.text)
                }
            }
            ServerMessage::AssistantTranscript(t) => {
                if t.is_final {
                    format!("[assistant-transcript] \"{}\"", t.text)
                } else {
                    format!("[assistant-transcript] \"{}\" (partial)", t.text)
                }
            }
            ServerMessage::Usage(u) => {
                let mut input = format!("{} input tokens", u.input_tokens);
                let extra: Vec<String> = [
                    u.audio_input_tokens.map(|n| format!("{n} audio")),
                    u.cached_tokens.map(|n| format!("{n} cached")),
                ]
                .into_iter()
                .flatten()
                .collect();
                if !extra.is_empty() {
                    input = format!("{input} ({})", extra.join(", "));
                }
                let mut output = format!("{} output tokens", u.output_tokens);
                if let Some(n) = u.audio_output_tokens {
                    output = format!("{output} ({n} audio)");
                }
                format!("[usage] {input}, {output}")
            }
            ServerMessage::ModeChanged(c) => {
                format!("[mode-changed] the session now runs in {} mode", c.mode)
            }
            ServerMessage::ToolCallStart(t) => format!(
                "[tool-call-start] {} ({}) with {}",
                t.name,
                t.call_id,
                serde_json::Value::Object(t.arguments.clone())
            ),
            ServerMessage::ToolCallEnd(t) => match (&t.error, &t.result) {
                (Some(err), _) => format!(
                    "[tool-call-end] {} failed after {} ms: {err}",
                    t.call_id, t.duration_ms
                ),
                (None, Some(result)) => format!(
                    "[tool-call-end] {} succeeded in {} ms: {result}",
                    t.call_id, t.duration_ms
                ),
                (None, None) => format!(
                    "[tool-call-end] {} finished in {} ms",
                    t.call_id, t.duration_ms
                ),
            },
            ServerMessage::StageChange(s) => {
                format!("[stage-change] {} -> {} ({})", s.from, s.to, s.reason)
            }
            ServerMessage::Error(err) => format!("[error] {}: {}", err.code, err.message),
            ServerMessage::Llm(l) => format!("[llm] \"{}\"", l.text),
            ServerMessage::TtsStart => {
                self.take_chunks();
                "[tts-start] the reply is being spoken".to_owned()
            }
            ServerMessage::TtsComplete => return None, // the [speech] line follows
            ServerMessage::TtsCancelled => {
                let (chunks, bytes, rate) = self.take_chunks();
                if chunks > 0 && rate > 0 {
                    format!(
                        "[tts-cancelled] speech cut off after {chunks} chunk(s), {:.2} s",
                        bytes as f64 / 2.0 / f64::from(rate)
                    )
                } else {
                    "[tts-cancelled] speech cut off before any audio".to_owned()
                }
            }
            ServerMessage::Signal(_) => "[signal] the WebRTC answer arrived".to_owned(),
            other => format!("[{}]", other.type_name()),
        })
    }
}

/// A duration in milliseconds with one decimal (`12.3 ms`).
fn millis(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// Why a connection was lost, as a phrase.
fn loss(reason: LossReason) -> &'static str {
    match reason {
        LossReason::Disconnected => "the connection closed",
        LossReason::DialFailed => "could not connect",
        LossReason::ReadyTimeout => "no ready in time",
        LossReason::HeartbeatTimeout => "the server stopped answering pings",
        LossReason::Requested => "dropped on request",
        _ => "the connection ended",
    }
}

//! The reference llmrtc server: an `LlmrtcServer` machine served by agentwire-tokio, its
//! provider requests answered by [`Providers`] (the offline stand-ins unless you plug in
//! real ones), LLM tokens and TTS audio streamed with a configurable pace.

use std::net::SocketAddr;
use std::time::Duration;

use agentwire::core::UuidV4Ids;
use agentwire::llmrtc::{LlmrtcServer, ProviderError, RequestId, ServerConfig, ServerEvent};
use agentwire::tokio::{Handle, Server, ServerConfig as TransportConfig};

use super::providers::{LlmStep, Providers, Transcription};

/// How fast the stand-ins stream (a real LLM or TTS streams at its own pace).
#[derive(Debug, Clone, Copy)]
pub struct Pacing {
    /// Wait before each LLM token.
    pub token: Duration,
    /// Wait before each TTS piece (one word of tones).
    pub tts_piece: Duration,
}

impl Pacing {
    /// About real time: 30 ms per token, 150 ms per spoken word.
    pub fn real_time() -> Self {
        Self {
            token: Duration::from_millis(30),
            tts_piece: Duration::from_millis(150),
        }
    }

    /// Fast, for the demo and tests: 2 ms per token, 25 ms per spoken word (still slow
    /// enough to interrupt).
    pub fn fast() -> Self {
        Self {
            token: Duration::from_millis(2),
            tts_piece: Duration::from_millis(25),
        }
    }
}

/// A running llmrtc server.
pub struct LlmrtcApp {
    /// The transport server (address, shutdown).
    pub server: Server<LlmrtcServer>,
    /// Commands to the machine.
    pub handle: Handle<LlmrtcServer>,
    /// The task answering provider requests; ends when the server stops.
    pub events_task: tokio::task::JoinHandle<()>,
}

impl LlmrtcApp {
    /// `ws://<addr>/`.
    pub fn url(&self) -> String {
        format!("ws://{}/", self.server.local_addr())
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// Shuts the server down (peers get 1001) and waits for the event task.
    pub async fn shutdown(self) {
        self.server.shutdown().await;
        let _ = self.events_task.await;
    }
}

/// How long `ready` waits after the upgrade. The real web client in Node (with `ws`) misses a
/// `ready` that shares a TCP read with the HTTP 101 (see `Limits::first_frame_delay`); the
/// hold must outlast the client's wait between the two reads, which grows with CPU load.
/// Measured with its 20-connection check (tests/interop/llmrtc_web_client.mjs) on 2 cores:
/// with no hold it loses `ready` within the first 3 connections; 1-5 ms still lose it; 10-20
/// ms hold on an idle machine but not with six CPU-bound processes beside it; 40 ms held
/// every connection of 8 runs of 20 with them. Browsers deliver `open` and each message as
/// separate tasks and never needed it: for them and every other client, `ready` comes 40 ms
/// later (measured from the connect call: median 1.5 ms before, 43 ms after), once per
/// connection, beside a WebRTC setup of 200 ms or more.
const FIRST_FRAME_DELAY: Duration = Duration::from_millis(40);

/// Transport settings for `config`: message and frame caps follow its `max_message_bytes`.
pub fn transport_config(config: &ServerConfig) -> TransportConfig {
    let transport = TransportConfig::default().with_limits(
        crate::common::message_limits(config.limits.max_message_bytes)
            .with_first_frame_delay(FIRST_FRAME_DELAY),
    );
    crate::common::protect(transport, "llmrtc", "/", address_refusal())
}

/// How the server refuses a connection over the per-address cap: as it refuses one over its
/// `max_connections`, with `error RATE_LIMITED` (no `ready`) and close 1013.
pub fn address_refusal() -> agentwire::tokio::Refusal {
    let text = serde_json::json!({
        "type": "error",
        "code": "RATE_LIMITED",
        "message": "too many connections from this address",
    })
    .to_string();
    agentwire::tokio::Refusal::close(
        agentwire::core::CloseCode::TRY_AGAIN_LATER,
        "too-many-connections",
    )
    .with_frame(agentwire::core::FrameBuf::text(text))
}

/// Starts a server on `addr`. `on_event` sees every machine event first (in the event task:
/// keep it quick).
pub async fn start(
    addr: &str,
    config: ServerConfig,
    mut providers: Providers,
    pacing: Pacing,
    mut on_event: impl FnMut(&ServerEvent) + Send + 'static,
) -> std::io::Result<LlmrtcApp> {
    let transport = transport_config(&config);
    let machine = LlmrtcServer::new(config, UuidV4Ids)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))?;
    let (server, mut events) = Server::bind(addr, machine, transport).await?;
    let handle = server.handle();
    let h = handle.clone();
    let events_task = tokio::spawn(async move {
        while let Some(ev) = events.recv().await {
            on_event(&ev);
            answer(&h, &mut providers, pacing, ev).await;
        }
    });
    Ok(LlmrtcApp {
        server,
        handle,
        events_task,
    })
}

fn failed(e: String) -> ProviderError {
    ProviderError::Failed(e)
}

/// Runs one provider call; a panic in it becomes [`ProviderError::Internal`] (sent as
/// `INTERNAL_ERROR`), so a buggy provider fails its turn instead of the server's event task.
fn guarded<T>(
    what: &str,
    call: impl FnOnce() -> Result<T, String>,
) -> Result<Result<T, String>, ProviderError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(call)).map_err(|panic| {
        let why = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".to_owned());
        ProviderError::Internal(format!("the {what} provider failed unexpectedly: {why}"))
    })
}

/// Answers one provider request (streams run in their own tasks).
async fn answer(h: &Handle<LlmrtcServer>, p: &mut Providers, pacing: Pacing, ev: ServerEvent) {
    match ev {
        ServerEvent::Stt(r) => {
            let heard = guarded("speech-to-text", || p.stt.transcribe(&r.segment));
            tokio::spawn(stream_stt(h.clone(), r.request, heard, pacing.token));
        }
        ServerEvent::Llm(r) => {
            let step = guarded("language model", || p.llm.reply(&r));
            tokio::spawn(stream_llm(h.clone(), r.request, step, pacing.token));
        }
        ServerEvent::Tts(r) => {
            // With streaming TTS off (`r.streaming` false) the machine gathers the pieces
            // into one whole `tts` message; they are paced the same, as synthesis time.
            let rate = p.tts.sample_rate();
            let pieces = guarded("text-to-speech", || p.tts.synthesize(&r.text));
            tokio::spawn(stream_tts(
                h.clone(),
                r.request,
                rate,
                pieces,
                pacing.tts_piece,
            ));
        }
        ServerEvent::ToolCall(r) => {
            let outcome = guarded("tool", || p.tools.call(&r.name, &r.arguments)).unwrap_or_else(
                |e| match e {
                    ProviderError::Internal(m) | ProviderError::Failed(m) => Err(m),
                    _ => Err("the tool failed".to_owned()),
                },
            );
            let _ = h
                .call(move |m, now| m.tool_result(r.request, outcome, now))
                .await;
        }
        // Cancelled requests fail their next call with UnknownRequest, which ends their
        // stream task; nothing else to do for the stand-ins.
        _ => {}
    }
}

/// Sends the interim transcripts (paced like tokens), then the final one.
async fn stream_stt(
    h: Handle<LlmrtcServer>,
    request: RequestId,
    heard: Result<Result<Transcription, String>, ProviderError>,
    pace: Duration,
) {
    let heard = match heard {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => {
            let _ = h
                .call(move |m, now| m.stt_result(request, Err(failed(e)), now))
                .await;
            return;
        }
        Err(e) => {
            let _ = h
                .call(move |m, now| m.stt_result(request, Err(e), now))
                .await;
            return;
        }
    };
    for partial in heard.partials {
        tokio::time::sleep(pace).await;
        match h
            .call(move |m, now| m.stt_partial(request, &partial, now))
            .await
        {
            Ok(Ok(())) => {}
            _ => return, // cancelled (disconnect, timeout) or the server stopped
        }
    }
    let text = heard.text;
    let _ = h
        .call(move |m, now| m.stt_result(request, Ok(text), now))
        .await;
}

async fn stream_llm(
    h: Handle<LlmrtcServer>,
    request: RequestId,
    step: Result<Result<LlmStep, String>, ProviderError>,
    pace: Duration,
) {
    let step = step.and_then(|s| s.map_err(failed));
    let (tokens, tool) = match step {
        Err(e) => {
            let _ = h.call(move |m, now| m.llm_failed(request, e, now)).await;
            return;
        }
        Ok(LlmStep::Tokens(t)) => (t, None),
        Ok(LlmStep::ToolCall {
            preamble,
            name,
            arguments,
        }) => (preamble, Some((name, arguments))),
    };
    for t in tokens {
        tokio::time::sleep(pace).await;
        match h.call(move |m, now| m.llm_chunk(request, &t, now)).await {
            Ok(Ok(())) => {}
            _ => return, // cancelled (barge-in, disconnect) or the server stopped
        }
    }
    if let Some((name, arguments)) = tool {
        let _ = h
            .call(move |m, now| m.llm_tool_call(request, &name, arguments, now))
            .await;
    }
    let _ = h.call(move |m, now| m.llm_done(request, now)).await;
}

async fn stream_tts(
    h: Handle<LlmrtcServer>,
    request: RequestId,
    rate: u32,
    pieces: Result<Result<Vec<Vec<u8>>, String>, ProviderError>,
    pace: Duration,
) {
    let pieces = match pieces.and_then(|p| p.map_err(failed)) {
        Ok(p) => p,
        Err(e) => {
            let _ = h.call(move |m, now| m.tts_failed(request, e, now)).await;
            return;
        }
    };
    for piece in pieces {
        tokio::time::sleep(pace).await;
        match h
            .call(move |m, now| m.tts_chunk(request, "pcm", rate, &piece, now))
            .await
        {
            Ok(Ok(())) => {}
            _ => return,
        }
    }
    let _ = h.call(move |m, now| m.tts_done(request, now)).await;
}

//! Embedding llmrtc: the `LlmrtcServer` machine of `llmrtc-proto` served by
//! `agentwire-tokio`'s `Server`, and an `LlmrtcClient` machine driven by its `Client` (the
//! client owns its reconnect policy: `connect_dialer`). The machine runs the turn (voice
//! activity detection, then STT, LLM and TTS requests as events); the application is the
//! providers: here it answers each request at once with canned text and silence.
//!
//! ```text
//! cargo run --release --example embed_llmrtc
//! ```

use std::time::Duration;

use agentwire_core::UuidV4Ids;
use agentwire_tokio::{Client, ClientConfig as Transport, Events, Server, ServerConfig};
use llmrtc_proto::wav::wav_from_samples;
use llmrtc_proto::{
    ClientConfig, ClientEvent, LlmrtcClient, LlmrtcServer, ServerEvent, SplitMix64,
};

type Error = Box<dyn std::error::Error>;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let machine = LlmrtcServer::new(llmrtc_proto::ServerConfig::default(), UuidV4Ids)?;
    let (server, mut requests) =
        Server::bind("127.0.0.1:0", machine, ServerConfig::default()).await?;
    let url = format!("ws://{}/", server.local_addr());
    println!("llmrtc server on {url}");

    // The providers: every STT, LLM and TTS request is an event, answered by a command.
    let providers = server.handle();
    tokio::spawn(async move {
        while let Some(event) = requests.recv().await {
            let answered = match event {
                ServerEvent::Stt(r) => {
                    println!("  [stt] a {} ms speech segment", r.segment.duration_ms());
                    let text = Ok("What's the weather like?".to_owned());
                    providers
                        .call(move |s, now| s.stt_result(r.request, text, now))
                        .await
                }
                ServerEvent::Llm(r) => {
                    println!("  [llm] {} message(s) of history", r.history.len());
                    providers
                        .call(move |s, now| {
                            s.llm_chunk(r.request, "Sunny,", now)?;
                            s.llm_chunk(r.request, " all day.", now)?;
                            s.llm_done(r.request, now)
                        })
                        .await
                }
                ServerEvent::Tts(r) => {
                    println!("  [tts] {:?}", r.text);
                    let pcm = vec![0u8; 4800]; // 100 ms of 24 kHz silence
                    providers
                        .call(move |s, now| {
                            s.tts_chunk(r.request, "pcm", 24_000, &pcm, now)?;
                            s.tts_done(r.request, now)
                        })
                        .await
                }
                _ => continue, // sessions, turns, errors: for logs and metrics
            };
            if answered.is_err() {
                break; // the server has stopped
            }
        }
    });

    let client = LlmrtcClient::new(ClientConfig::default(), SplitMix64::new(7));
    let (client, mut events) = Client::connect_dialer(&url, client, Transport::default())?;
    // The client dials once it is started (and redials by its own policy after a loss).
    client.call(|c, now| c.start(now)).await??;
    if let ClientEvent::Ready { id, .. } =
        until(&mut events, |e| matches!(e, ClientEvent::Ready { .. })).await?
    {
        println!("client <- ready, session {id}");
    }

    // An utterance: 200 ms of silence, 500 ms of "speech", 700 ms of silence, 16 kHz.
    let mut samples = vec![0i16; 3200];
    samples.extend((0..8000).map(|i| if i % 16 < 8 { 3000 } else { -3000 }));
    samples.extend(vec![0i16; 11200]);
    let wav = wav_from_samples(16_000, &samples);
    client
        .call(move |c, now| c.send_audio(&wav, &[], now))
        .await??;
    if let ClientEvent::LlmReply { text, .. } =
        until(&mut events, |e| matches!(e, ClientEvent::LlmReply { .. })).await?
    {
        println!("client <- llm {text:?}");
    }
    if let ClientEvent::TtsAudio { format, audio, .. } =
        until(&mut events, |e| matches!(e, ClientEvent::TtsAudio { .. })).await?
    {
        println!("client <- tts: {} bytes of {format}", audio.len());
    }

    client.shutdown().await;
    server.shutdown().await;
    Ok(())
}

/// The next event of `events` that `pick` wants (the others are skipped), within 10 s.
async fn until<E>(events: &mut Events<E>, pick: impl Fn(&E) -> bool) -> Result<E, Error> {
    let wait = async {
        while let Some(e) = events.recv().await {
            if pick(&e) {
                return Some(e);
            }
        }
        None
    };
    tokio::time::timeout(Duration::from_secs(10), wait)
        .await?
        .ok_or_else(|| "the driver stopped".into())
}

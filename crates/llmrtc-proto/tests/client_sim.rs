//! `LlmrtcClient` against the real `LlmrtcServer` in the in-memory simulator: a whole turn,
//! reconnect with history recovery, heartbeats over a long quiet time, the try limit while
//! the server is unreachable, and the dual-channel rule with the server's data-channel
//! copies carried to the client.

use std::time::{Duration, Instant};

use agentwire_core::sim::{Sim, SimConfig};
use agentwire_core::SequentialIds;
use llmrtc_proto::wav::wav_from_samples;
use llmrtc_proto::{
    ClientConfig, ClientEvent, ConnectionState, LlmrtcClient, LlmrtcServer, ServerConfig,
    ServerEvent, SplitMix64,
};

#[allow(clippy::disallowed_methods)] // the one base time of a test
fn t0() -> Instant {
    Instant::now()
}

const S: Duration = Duration::from_secs(1);

/// 300 ms silence, 400 ms loud square wave, 600 ms silence at 16 kHz.
fn utterance_wav() -> Vec<u8> {
    let mut v = vec![0i16; 4800];
    v.extend((0..6400).map(|i| if (i / 8) % 2 == 0 { 4000 } else { -4000 }));
    v.extend(vec![0i16; 9600]);
    wav_from_samples(16_000, &v)
}

struct World {
    sim: Sim<LlmrtcServer, LlmrtcClient>,
    reachable: bool,
    /// Carry the server's data-channel copies to the client.
    carry_dc: bool,
    events: Vec<ClientEvent>,
}

impl World {
    fn new(server: ServerConfig, client: ClientConfig) -> Self {
        let server = LlmrtcServer::new(server, SequentialIds::new(0)).expect("config");
        let mut sim = Sim::new(server, t0(), SimConfig::default());
        sim.add_client(LlmrtcClient::new(client, SplitMix64::new(42)));
        sim.call_client(0, |c, now| c.start(now)).expect("start");
        Self {
            sim,
            reachable: true,
            carry_dc: false,
            events: Vec::new(),
        }
    }

    /// Runs `d` of simulated time in small steps, answering the server's provider requests
    /// with fixed stand-ins and carrying data-channel copies when asked.
    fn run(&mut self, d: Duration) {
        let step = Duration::from_millis(5);
        let end = self.sim.now() + d;
        let mut guard = 0;
        while self.sim.now() < end {
            guard += 1;
            assert!(guard < 1_000_000, "bounded");
            let reachable = self.reachable;
            self.sim.run_dialing_for(step, |_| reachable);
            for ev in self.sim.take_server_events() {
                self.answer(ev);
            }
            self.events.extend(self.sim.take_client_events(0));
        }
    }

    fn answer(&mut self, ev: ServerEvent) {
        match ev {
            ServerEvent::Stt(r) => {
                let _ = self
                    .sim
                    .call_server(|s, now| s.stt_result(r.request, Ok("hello".into()), now));
            }
            ServerEvent::Llm(r) => {
                self.sim.call_server(|s, now| {
                    let _ = s.llm_chunk(r.request, "Hi", now);
                    let _ = s.llm_chunk(r.request, " there", now);
                    let _ = s.llm_done(r.request, now);
                });
            }
            ServerEvent::Tts(r) => {
                self.sim.call_server(|s, now| {
                    let _ = s.tts_chunk(r.request, "pcm", 24_000, &[1, 0, 2, 0], now);
                    let _ = s.tts_chunk(r.request, "pcm", 24_000, &[3, 0], now);
                    let _ = s.tts_done(r.request, now);
                });
            }
            ServerEvent::DataChannel { frame, .. } if self.carry_dc => {
                self.sim.call_client(0, |c, now| {
                    c.handle_data_channel_frame(frame.as_frame(), now)
                });
            }
            _ => {}
        }
    }

    fn client(&self) -> &LlmrtcClient {
        self.sim.client(0)
    }

    fn count(&self, pred: impl Fn(&ClientEvent) -> bool) -> usize {
        self.events.iter().filter(|e| pred(e)).count()
    }

    fn say(&mut self) {
        let wav = utterance_wav();
        self.sim
            .call_client(0, |c, now| c.send_audio(&wav, &[], now))
            .expect("send");
    }
}

#[test]
fn a_turn_through_the_real_server_then_a_reconnect_recovers_the_history() {
    let mut w = World::new(ServerConfig::default(), ClientConfig::default());
    w.run(S);
    assert_eq!(w.client().state(), ConnectionState::Connected);
    let session = w.client().session_id().expect("session").to_owned();
    w.say();
    w.run(S);
    let replies: Vec<&ClientEvent> = w
        .events
        .iter()
        .filter(|e| {
            matches!(
                e,
                ClientEvent::LlmReply { .. } | ClientEvent::TtsAudio { .. }
            )
        })
        .collect();
    assert_eq!(
        replies,
        [
            &ClientEvent::LlmReply {
                text: "Hi there".into(),
                streamed: "Hi there".into()
            },
            &ClientEvent::TtsAudio {
                format: "pcm".into(),
                sample_rate: Some(24_000),
                audio: vec![1, 0, 2, 0, 3, 0]
            }
        ]
    );
    assert_eq!(
        w.sim.server().history(&session).map(Iterator::count),
        Some(2)
    );
    // The network drops; the client comes back after ~1 s and recovers the session.
    w.sim.disconnect(0);
    w.run(S * 2);
    assert_eq!(w.client().state(), ConnectionState::Connected);
    assert!(w.events.contains(&ClientEvent::Resumed {
        success: true,
        session_id: session.clone().into(),
        history_recovered: true
    }));
    assert_eq!(w.client().session_id(), Some(session.as_str()));
    assert_ne!(w.client().ready_id(), Some(session.as_str()));
    assert_eq!(w.sim.server().conn_of(&session), w.sim.server_conn_of(0));
    // The next turn continues the recovered history.
    w.say();
    w.run(S);
    assert_eq!(
        w.sim.server().history(&session).map(Iterator::count),
        Some(4)
    );
}

#[test]
fn heartbeats_keep_a_quiet_connection_for_ten_minutes() {
    let mut w = World::new(ServerConfig::default(), ClientConfig::default());
    w.run(S * 600);
    assert_eq!(w.client().state(), ConnectionState::Connected);
    assert_eq!(
        w.count(|e| matches!(e, ClientEvent::ConnectionLost { .. })),
        0
    );
    let pongs = w.count(|e| matches!(e, ClientEvent::Pong { rtt: Some(_), .. }));
    assert!((39..=40).contains(&pongs), "{pongs} pongs in 600 s");
    assert_eq!(w.count(|e| matches!(e, ClientEvent::PongMissed { .. })), 0);
}

#[test]
fn an_unreachable_server_gets_five_tries_then_failed() {
    let mut w = World::new(ServerConfig::default(), ClientConfig::default());
    w.run(S);
    // The connection drops and the server stays unreachable.
    w.reachable = false;
    w.sim.disconnect(0);
    let down = w.sim.now();
    w.run(S * 120);
    assert_eq!(w.client().state(), ConnectionState::Failed);
    let tries = w.count(|e| matches!(e, ClientEvent::Reconnecting { .. }));
    assert_eq!(tries, 5);
    assert_eq!(
        w.count(|e| matches!(
            e,
            ClientEvent::StateChanged {
                to: ConnectionState::Failed,
                ..
            }
        )),
        1
    );
    // 1 + 2 + 4 + 8 + 16 s of waiting, each with up to 30 % jitter.
    let waited: Duration = w
        .events
        .iter()
        .filter_map(|e| match e {
            ClientEvent::Reconnecting { delay, .. } => Some(*delay),
            _ => None,
        })
        .sum();
    assert!(waited >= S * 31 && waited <= S * 31 * 13 / 10, "{waited:?}");
    assert!(w.sim.now() - down >= waited);
}

#[test]
fn with_the_data_channel_open_each_payload_is_handled_once() {
    let mut w = World::new(ServerConfig::default(), ClientConfig::default());
    w.carry_dc = true;
    w.run(S);
    let conn = w.sim.server_conn_of(0).expect("conn");
    w.sim
        .call_server(|s, _| s.set_data_channel_open(conn, true))
        .expect("dc");
    w.sim
        .call_client(0, |c, now| c.set_data_channel_open(true, now));
    w.events.clear();
    w.say();
    w.run(S);
    let types: Vec<&str> = w
        .events
        .iter()
        .filter_map(|e| match e {
            ClientEvent::Message(m) => Some(m.type_name()),
            ClientEvent::TtsChunk { .. } => Some("tts-chunk"),
            _ => None,
        })
        .collect();
    assert_eq!(
        types,
        [
            "speech-start",
            "speech-end",
            "transcript",
            "llm-chunk",
            "llm-chunk",
            "llm",
            "tts-start",
            "tts-chunk",
            "tts-chunk",
            "tts-complete"
        ]
    );
    // Every payload came twice (WebSocket and data channel); one copy of each was ignored.
    let ignored = w.count(|e| matches!(e, ClientEvent::Ignored { .. }));
    assert_eq!(ignored, types.len());
}

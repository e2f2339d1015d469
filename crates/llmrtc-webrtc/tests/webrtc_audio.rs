//! The audio tracks over the in-memory network (feature `opus`): microphone audio from the
//! client's track makes a turn (`speech-start`, `speech-end`, transcript), and the reply's
//! TTS comes back on the server's track, with `tts-start` and `tts-complete` as messages.
#![cfg(feature = "opus")]

mod common;

use std::time::Duration;

use common::Net;
use llmrtc_proto::ClientEvent;
use llmrtc_webrtc::{AudioOffer, WebrtcClientEvent};

/// `ms` of a loud 200 Hz square wave at 48 kHz.
fn speech(ms: usize) -> Vec<i16> {
    (0..ms * 48)
        .map(|i| if (i / 120) % 2 == 0 { 9000 } else { -9000 })
        .collect()
}

fn types_seen(net: &Net) -> Vec<String> {
    net.client_messages(0)
        .into_iter()
        .filter_map(|e| match e {
            ClientEvent::Message(m) => Some(m.type_name().to_owned()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_spoken_turn_goes_over_the_audio_tracks() {
    let mut net = Net::new();
    tracks_up(&mut net);
    let conn = net.clients[0].server_conn.unwrap();
    assert!(net.server.llmrtc_ref().has_audio_track(conn));

    // The microphone: silence, speech, silence, in 20 ms pieces as a capture device gives.
    speak(&mut net, &utterance());
    net.run_for(Duration::from_millis(200));
    let types = types_seen(&net);
    assert!(types.contains(&"speech-start".to_owned()), "{types:?}");
    assert!(types.contains(&"speech-end".to_owned()), "{types:?}");
    // The track's utterance is transcribed (`answer_up_to_tts` finds the STT request).
    let tts = net.answer_up_to_tts("Hello", "Hi there!");
    let now = net.now;
    // 500 ms of 24 kHz speech from the TTS provider.
    let reply: Vec<u8> = (0..12_000)
        .map(|i: i32| if (i / 60) % 2 == 0 { 8000i16 } else { -8000 })
        .flat_map(|s| s.to_le_bytes())
        .collect();
    net.server
        .llmrtc()
        .tts_chunk(tts, "pcm", 24_000, &reply, now)
        .unwrap();
    net.server.llmrtc().tts_done(tts, now).unwrap();
    net.run_for(Duration::from_secs(2));

    let heard: Vec<i16> = net.clients[0]
        .events
        .iter()
        .filter_map(|e| match e {
            WebrtcClientEvent::TrackAudio {
                samples,
                sample_rate: 48_000,
            } => Some(samples.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    // 500 ms of reply at 48 kHz (the last frame padded), and it is loud.
    assert!(heard.len() >= 24_000, "heard {} samples", heard.len());
    let energy = heard.iter().map(|s| f64::from(*s).abs()).sum::<f64>() / heard.len() as f64;
    assert!(energy > 1000.0, "mean amplitude {energy}");
    let types = types_seen(&net);
    for t in ["transcript", "llm", "tts-start", "tts-complete"] {
        assert_eq!(
            types.iter().filter(|x| *x == t).count(),
            1,
            "{t} once in {types:?}"
        );
    }
    assert!(
        !types.contains(&"tts-chunk".to_owned()),
        "TTS went on the track: {types:?}"
    );
}

/// A client whose Opus track (both ways) is up.
fn tracks_up(net: &mut Net) {
    net.add_client(50000);
    net.run_for(Duration::from_millis(50));
    let now = net.now;
    net.clients[0].m.offer(AudioOffer::SendRecv, now).unwrap();
    let ready = net.run_until(Duration::from_secs(2), |n| {
        n.clients[0]
            .events
            .iter()
            .any(|e| matches!(e, WebrtcClientEvent::TrackReady))
    });
    assert!(ready, "the client's track is up");
}

/// Speaks `mic` into the client's track in 20 ms pieces, in real (simulated) time.
fn speak(net: &mut Net, mic: &[i16]) {
    for piece in mic.chunks(960) {
        let now = net.now;
        net.clients[0].m.send_mic(piece, 48_000, now).unwrap();
        net.run_for(Duration::from_millis(20));
    }
}

fn utterance() -> Vec<i16> {
    let mut mic = vec![0i16; 300 * 48];
    mic.extend(speech(600));
    mic.extend(vec![0i16; 1200 * 48]);
    mic
}

fn heard(net: &Net) -> usize {
    net.clients[0]
        .events
        .iter()
        .map(|e| match e {
            WebrtcClientEvent::TrackAudio { samples, .. } => samples.len(),
            _ => 0,
        })
        .sum()
}

#[test]
fn speech_during_track_tts_cuts_it_off() {
    let mut net = Net::new();
    tracks_up(&mut net);
    speak(&mut net, &utterance());
    let now = net.now;
    let tts = net.answer_up_to_tts("Hello", "A long answer.");
    // 4 s of reply.
    let reply: Vec<u8> = (0..96_000)
        .map(|i: i32| if (i / 60) % 2 == 0 { 8000i16 } else { -8000 })
        .flat_map(|s| s.to_le_bytes())
        .collect();
    net.server
        .llmrtc()
        .tts_chunk(tts, "pcm", 24_000, &reply, now)
        .unwrap();
    net.server.llmrtc().tts_done(tts, now).unwrap();
    net.run_for(Duration::from_millis(500));
    assert!(heard(&net) > 0, "the reply is playing");
    // The user talks over it.
    speak(&mut net, &utterance());
    let types = types_seen(&net);
    assert!(types.contains(&"tts-cancelled".to_owned()), "{types:?}");
    assert!(!types.contains(&"tts-complete".to_owned()), "{types:?}");
    let at_cut = heard(&net);
    net.run_for(Duration::from_secs(4));
    assert!(
        heard(&net) < 4 * 48_000,
        "the rest of the reply is dropped: heard {} samples",
        heard(&net)
    );
    assert!(
        heard(&net) - at_cut < 48_000 / 5,
        "nothing much after the cut"
    );
}

#[test]
fn without_audio_the_answer_refuses_the_track_and_the_data_channel_works() {
    let webrtc = llmrtc_webrtc::WebrtcConfig::new(common::SERVER_UDP).with_audio(false);
    let mut net = Net::with(Default::default(), webrtc);
    net.add_client(50000);
    net.run_for(Duration::from_millis(50));
    let now = net.now;
    net.clients[0].m.offer(AudioOffer::SendRecv, now).unwrap();
    assert!(net.run_until(Duration::from_secs(2), |n| n.clients[0].m.is_channel_open()));
    net.run_for(Duration::from_millis(200));
    let conn = net.clients[0].server_conn.unwrap();
    assert!(!net.server.llmrtc_ref().has_audio_track(conn));
    assert!(!net.clients[0]
        .events
        .iter()
        .any(|e| matches!(e, WebrtcClientEvent::TrackReady)));
}

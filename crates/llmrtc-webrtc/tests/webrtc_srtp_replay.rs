//! Valid SRTP replayed (feature `opus`): a client speaks a turn on its microphone track, and
//! every SRTP packet it sent (authentic, encrypted with the session's keys) is sent to the
//! server again, from the client's own address, from a stranger's and from another
//! session's. Replays from the client's address are dropped by str0m's SRTP replay window
//! (RFC 3711 section 3.3.2; they decode to no audio, so they make no second turn); replays
//! from other addresses reach no peer that could decrypt them (a stranger's are counted in
//! `dropped_datagrams`). Nothing panics, the other session is unhurt, and the track goes on
//! carrying new speech.
#![cfg(feature = "opus")]

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use agentwire_core::{DatagramMachine, FrameBuf};
use common::{Net, SERVER_UDP};
use llmrtc_proto::{ClientEvent, ServerEvent};
use llmrtc_webrtc::{AudioOffer, WebrtcClientEvent};

/// `ms` of a loud 200 Hz square wave at 48 kHz.
fn speech(ms: usize) -> Vec<i16> {
    (0..ms * 48)
        .map(|i| if (i / 120) % 2 == 0 { 9000 } else { -9000 })
        .collect()
}

/// Silence, speech, silence: one turn for the server's VAD.
fn utterance() -> Vec<i16> {
    let mut mic = vec![0i16; 300 * 48];
    mic.extend(speech(600));
    mic.extend(vec![0i16; 1200 * 48]);
    mic
}

/// Speaks `mic` into client `i`'s track in 20 ms pieces, in real (simulated) time.
fn speak(net: &mut Net, i: usize, mic: &[i16]) {
    for piece in mic.chunks(960) {
        let now = net.now;
        net.clients[i].m.send_mic(piece, 48_000, now).unwrap();
        net.run_for(Duration::from_millis(20));
    }
}

/// How many messages of type `ty` client `i` got.
fn count(net: &Net, i: usize, ty: &str) -> usize {
    net.client_messages(i)
        .into_iter()
        .filter(|e| matches!(e, ClientEvent::Message(m) if m.type_name() == ty))
        .count()
}

/// How many STT requests the server made.
fn stt_requests(net: &Net) -> usize {
    net.server_llmrtc_events()
        .into_iter()
        .filter(|e| matches!(e, ServerEvent::Stt(_)))
        .count()
}

/// Whether `d` is an RTP (SRTP) packet, not RTCP, STUN or DTLS (RFC 7983, RFC 5761).
fn is_srtp(d: &[u8]) -> bool {
    d.len() > 12 && d[0] >> 6 == 2 && !(192..=223).contains(&d[1])
}

#[test]
fn replayed_srtp_is_dropped_and_hurts_no_session() {
    let mut net = Net::new();
    // Client 0: data channel and a microphone track. Client 1: data channel only.
    net.add_client(50000);
    net.add_client(50001);
    net.run_for(Duration::from_millis(50));
    let now = net.now;
    net.clients[0].m.offer(AudioOffer::SendRecv, now).unwrap();
    net.clients[1].m.offer(AudioOffer::None, now).unwrap();
    let up = net.run_until(Duration::from_secs(2), |n| {
        n.clients.iter().all(|c| c.m.is_channel_open())
            && n.clients[0]
                .events
                .iter()
                .any(|e| matches!(e, WebrtcClientEvent::TrackReady))
    });
    assert!(up, "both channels open and client 0's track up");
    let (a, b) = (net.clients[0].addr, net.clients[1].addr);
    let b_conn = net.clients[1].server_conn.unwrap();

    // One spoken turn on the track.
    let first_srtp = net.client_sent.len();
    speak(&mut net, 0, &utterance());
    net.run_for(Duration::from_millis(200));
    assert_eq!(count(&net, 0, "speech-start"), 1);
    assert_eq!(count(&net, 0, "speech-end"), 1);
    assert_eq!(stt_requests(&net), 1, "the utterance was transcribed");
    // The turn ends (reply without audio), so new speech would start a new turn.
    let tts = net.answer_up_to_tts("Hello", "Hi.");
    let now = net.now;
    net.server.llmrtc().tts_done(tts, now).unwrap();
    net.run_for(Duration::from_millis(100));
    assert_eq!(count(&net, 0, "tts-complete"), 1);
    let srtp: Vec<Vec<u8>> = net.client_sent[first_srtp..]
        .iter()
        .filter(|(from, d)| *from == a && is_srtp(d))
        .map(|(_, d)| d.clone())
        .collect();
    // 2.1 s of audio in 20 ms packets: all of it within the 128-packet replay window.
    assert!(
        (100..128).contains(&srtp.len()),
        "{} SRTP packets captured",
        srtp.len()
    );

    // Replayed from the client's own address: the same bytes again, twice, in order and
    // reversed. Were they accepted, they would decode to the same loud utterance and make a
    // second turn.
    let now = net.now;
    for d in srtp.iter().chain(srtp.iter().rev()) {
        net.server.handle_datagram(a, SERVER_UDP, d, now);
    }
    // From a stranger's address: no peer's, dropped and counted, one by one.
    let stranger: SocketAddr = "127.0.0.1:6666".parse().unwrap();
    let dropped = net.server.dropped_datagrams();
    for d in &srtp {
        net.server.handle_datagram(stranger, SERVER_UDP, d, now);
    }
    assert_eq!(
        net.server.dropped_datagrams() - dropped,
        srtp.len() as u64,
        "every replay from a stranger is dropped and counted"
    );
    // From the other session's address: its peer has no such stream and other keys.
    for d in &srtp {
        net.server.handle_datagram(b, SERVER_UDP, d, now);
    }
    net.run_for(Duration::from_secs(2));
    assert_eq!(
        count(&net, 0, "speech-start"),
        1,
        "the replayed utterance made no speech"
    );
    assert_eq!(stt_requests(&net), 1, "no second transcription");
    assert_eq!(
        count(&net, 1, "speech-start"),
        0,
        "nothing reached client 1"
    );
    assert!(!net.server.llmrtc_ref().has_audio_track(b_conn));

    // No session is hurt: both peers are up, a payload reaches each client once...
    assert_eq!(net.server.peers(), 2);
    for i in 0..2 {
        assert!(net.clients[i].m.is_channel_open(), "client {i}");
        assert!(net
            .server
            .is_channel_open(net.clients[i].server_conn.unwrap()));
    }
    let errors_before: Vec<usize> = (0..2).map(|i| net.errors_seen(i).len()).collect();
    for i in 0..2 {
        net.client_ws_send(i, FrameBuf::text(r#"{"type":"audio","data":"%%%"}"#));
    }
    net.run_for(Duration::from_millis(200));
    for (i, before) in errors_before.iter().enumerate() {
        assert_eq!(net.errors_seen(i).len(), before + 1, "client {i}");
    }
    // ...and the track carries new speech: the next utterance is a new turn.
    speak(&mut net, 0, &utterance());
    net.run_for(Duration::from_millis(200));
    assert_eq!(count(&net, 0, "speech-start"), 2);
    assert_eq!(stt_requests(&net), 2, "the new utterance was transcribed");
}

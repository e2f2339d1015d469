//! Replays every committed seed under `fuzz/seeds/llmrtc_webrtc_*/` through the matching
//! `llmrtc_webrtc::fuzzing` function, so stable CI covers fuzz regressions without nightly
//! or cargo-fuzz.

use agentwire_testkit::seeds::{pseudo_random_inputs, replay, seeds_dir};
use agentwire_testkit::XorShift64;
use llmrtc_webrtc::fuzzing;

#[test]
fn offer_seeds() {
    assert!(replay("llmrtc_webrtc_offer", fuzzing::offer) >= 8);
}

#[test]
fn server_seeds() {
    assert!(replay("llmrtc_webrtc_server", fuzzing::server) >= 8);
}

/// A cheap stable stand-in for the fuzzer: deterministic pseudo-random inputs through both
/// targets.
#[test]
fn pseudo_random_inputs_pass_every_target() {
    let targets = [
        ("offer", fuzzing::offer as fn(&[u8])),
        ("server", fuzzing::server),
    ];
    pseudo_random_inputs(&targets, 40, 1024, |_, _| {});
}

/// Writes the seeds: hand-made offers (real SDP and broken variants) and pseudo-random step
/// sequences with small op bytes. Run by hand
/// (`cargo test -p llmrtc-webrtc --test fuzz_seeds -- --ignored`); the seeds are committed.
#[test]
#[ignore]
fn generate_seeds() {
    let offers: [&[u8]; 10] = [
        br#"{"type":"offer","sdp":"v=0\r\n"}"#,
        br#"{"type":"answer","sdp":"v=0\r\n"}"#,
        br#"null"#,
        br#"{"type":"offer"}"#,
        b"v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\nc=IN IP4 0.0.0.0\r\na=mid:0\r\na=ice-ufrag:abcd\r\na=ice-pwd:abcdefghijklmnopqrstuv\r\na=fingerprint:sha-256 00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF\r\na=setup:actpass\r\na=sctp-port:5000\r\n",
        b"v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=rtpmap:111 opus/48000/2\r\n",
        b"v=0\r\nm=application 0 UDP/DTLS/SCTP webrtc-datachannel\r\na=ice-ufrag:\r\n",
        b"\xff\xfe garbage",
        b"",
        br#"{"type":"offer","sdp":"v=0\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\na=fingerprint:sha-256 zz\r\n"}"#,
    ];
    let dir = seeds_dir("llmrtc_webrtc_offer");
    std::fs::create_dir_all(&dir).expect("dir");
    for (i, o) in offers.iter().enumerate() {
        std::fs::write(dir.join(format!("seed-{i:02}")), o).expect("write");
    }
    let dir = seeds_dir("llmrtc_webrtc_server");
    std::fs::create_dir_all(&dir).expect("dir");
    let mut rng = XorShift64::new(0x005e_ed0f_3e7c);
    for i in 0..12 {
        let len = 32 + rng.below(400) as usize;
        let data: Vec<u8> = (0..len).map(|_| rng.below(24) as u8).collect();
        fuzzing::server(&data);
        std::fs::write(dir.join(format!("seed-{i:02}")), &data).expect("write");
    }
}

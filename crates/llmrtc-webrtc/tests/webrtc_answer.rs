//! What the server's SDP answer says about the server: it is ICE-lite (`a=ice-lite`), it
//! bundles every m-line on one transport, and that transport's host candidates are the
//! configured bind address and every public address (an unspecified bind address is left
//! out); a client still connects through the bind address.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{Net, SERVER_UDP};
use llmrtc_webrtc::{AudioOffer, WebrtcConfig, WebrtcConfigError, WebrtcServer};

/// The SDP of every `signal` the server sent, in order.
fn answers(net: &Net) -> Vec<String> {
    net.server_frames
        .iter()
        .filter_map(|(_, f)| {
            let v: serde_json::Value = serde_json::from_str(f.as_text()?).ok()?;
            (v["type"] == "signal").then(|| {
                assert_eq!(v["signal"]["type"], "answer", "{v}");
                v["signal"]["sdp"].as_str().expect("sdp").to_owned()
            })
        })
        .collect()
}

/// A host candidate of an SDP: its address and the m-line section it is in.
#[derive(Debug, PartialEq, Eq)]
struct HostCandidate {
    section: usize,
    addr: SocketAddr,
}

/// Every `a=candidate` line of `sdp` (`foundation component transport priority ip port typ
/// type`), checked to be a UDP host candidate, with its m-line section (1 for the first).
fn host_candidates(sdp: &str) -> Vec<HostCandidate> {
    let mut section = 0;
    let mut out = Vec::new();
    for line in sdp.lines() {
        if line.starts_with("m=") {
            section += 1;
        }
        let Some(c) = line.strip_prefix("a=candidate:") else {
            continue;
        };
        let f: Vec<&str> = c.split_whitespace().collect();
        assert!(f.len() >= 8, "{line}");
        assert!(f[2].eq_ignore_ascii_case("udp"), "{line}");
        assert_eq!((f[6], f[7]), ("typ", "host"), "{line}");
        let ip = f[4].parse().expect("candidate ip");
        let port = f[5].parse().expect("candidate port");
        out.push(HostCandidate {
            section,
            addr: SocketAddr::new(ip, port),
        });
    }
    out
}

/// The session-level lines of `sdp` (before the first m-line).
fn session_lines(sdp: &str) -> Vec<&str> {
    sdp.lines().take_while(|l| !l.starts_with("m=")).collect()
}

/// A net whose server has `webrtc`, one client that offered `audio`, and the answer it got.
fn answered(webrtc: WebrtcConfig, audio: AudioOffer) -> (Net, String) {
    let mut net = Net::with(Default::default(), webrtc);
    net.add_client(50000);
    net.run_for(Duration::from_millis(50));
    let now = net.now;
    net.clients[0].m.offer(audio, now).unwrap();
    net.run_for(Duration::from_millis(10));
    let answers = answers(&net);
    assert_eq!(answers.len(), 1, "one offer, one answer");
    let sdp = answers.into_iter().next().unwrap();
    (net, sdp)
}

#[test]
fn the_answer_is_ice_lite_with_the_bind_and_public_addresses_as_host_candidates() {
    let public: SocketAddr = "203.0.113.7:40000".parse().unwrap();
    let webrtc = WebrtcConfig::new(SERVER_UDP).with_public_addr(public);
    let (mut net, sdp) = answered(webrtc, AudioOffer::SendRecv);

    assert!(
        session_lines(&sdp).contains(&"a=ice-lite"),
        "a=ice-lite at session level:\n{sdp}"
    );
    // Every m-line is in one BUNDLE group, so the candidates of its first m-line (the
    // group's transport) serve them all.
    let mids: Vec<&str> = sdp
        .lines()
        .filter_map(|l| l.strip_prefix("a=mid:"))
        .collect();
    assert_eq!(
        mids.len(),
        2,
        "the data channel and the audio track:\n{sdp}"
    );
    let bundle = format!("a=group:BUNDLE {}", mids.join(" "));
    assert!(
        session_lines(&sdp).contains(&bundle.as_str()),
        "{bundle}:\n{sdp}"
    );
    let found = host_candidates(&sdp);
    assert_eq!(
        found,
        vec![
            HostCandidate {
                section: 1,
                addr: SERVER_UDP
            },
            HostCandidate {
                section: 1,
                addr: public
            },
        ],
        "the bind address, then the public one, on the bundle's transport:\n{sdp}"
    );
    assert_eq!(net.server.candidates(), [SERVER_UDP, public]);

    // The client reaches the server on the bind address (the public one leads nowhere
    // here): the data channel opens.
    assert!(net.run_until(Duration::from_secs(2), |n| n.clients[0].m.is_channel_open()));
}

#[test]
fn a_server_bound_to_every_interface_offers_only_its_public_addresses() {
    let any: SocketAddr = "0.0.0.0:40000".parse().unwrap();
    let public: SocketAddr = "198.51.100.4:40000".parse().unwrap();
    let public6: SocketAddr = "[2001:db8::4]:40000".parse().unwrap();
    let webrtc = WebrtcConfig::new(any)
        .with_public_addr(public)
        .with_public_addr(public6)
        .with_public_addr(public);
    let (_net, sdp) = answered(webrtc, AudioOffer::None);
    assert!(session_lines(&sdp).contains(&"a=ice-lite"), "{sdp}");
    let found: Vec<SocketAddr> = host_candidates(&sdp).into_iter().map(|c| c.addr).collect();
    assert_eq!(
        found,
        vec![public, public6],
        "no 0.0.0.0 candidate, each public address once:\n{sdp}"
    );
}

#[test]
fn without_a_reachable_address_the_server_is_not_built() {
    let any: SocketAddr = "0.0.0.0:40000".parse().unwrap();
    let no_port: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let public_no_port: SocketAddr = "203.0.113.7:0".parse().unwrap();
    for (webrtc, bad) in [
        (WebrtcConfig::new(any), any),
        (WebrtcConfig::new(no_port), no_port),
        (
            WebrtcConfig::new(SERVER_UDP).with_public_addr(public_no_port),
            public_no_port,
        ),
    ] {
        let err = WebrtcServer::new(
            Default::default(),
            webrtc,
            agentwire_core::SequentialIds::new(1),
        )
        .expect_err("no usable candidate");
        assert!(
            matches!(err, WebrtcConfigError::BadAddress(a) if a == bad),
            "{err:?}"
        );
    }
}

//! The server's security end to end over 127.0.0.1, port 0: every protocol over `wss://`
//! (test certificates from rcgen, clients configured by `security::client_tls`), TLS 1.2
//! refused on the MCPW listener and accepted on another, a certificate reloaded while a
//! connection stays up, an address outside an allowlist refused, rotated API keys and
//! runner secrets (the retired one refused after the overlap), and a pinned client
//! refusing a server whose certificate does not match.

#[allow(dead_code)]
#[path = "../../../tests/support/temp_dir.rs"]
mod temp_dir;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agentwire_server::config::{Config, Protocol};
use agentwire_server::gateway::Gateway;
use agentwire_server::security::{self, client_tls, client_tls_pin_only};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use temp_dir::temp_dir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderName, HeaderValue};
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::Connector;

/// How long one step (a connect, an answer) may take before the test fails.
const STEP: Duration = Duration::from_secs(20);

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<TcpStream>>;

async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(STEP, fut)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

/// Waits until `check` holds, trying every 50 ms for at most `STEP` (for what a file
/// watcher picks up on its own period).
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + STEP;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "never happened: {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A self-signed certificate for `localhost` and 127.0.0.1, written as `<name>.crt` and
/// `<name>.key` in `dir`: (cert path, key path, cert DER).
fn certificate(dir: &Path, name: &str) -> (PathBuf, PathBuf, Vec<u8>) {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
        .expect("certificate");
    let cert = dir.join(format!("{name}.crt"));
    let key = dir.join(format!("{name}.key"));
    std::fs::write(&cert, ck.cert.pem()).expect("write cert");
    std::fs::write(&key, ck.signing_key.serialize_pem()).expect("write key");
    (cert, key, ck.cert.der().to_vec())
}

/// Overwrites `to` with `from`'s content in one rename, as a deployment tool would.
fn replace_file(from: &Path, to: &Path) {
    let tmp = to.with_extension("new");
    std::fs::copy(from, &tmp).expect("copy");
    std::fs::rename(&tmp, to).expect("rename");
}

/// Two certificates for a rotation, the old pair in the live files a listener serves.
struct Rotation {
    old_cert: PathBuf,
    new_cert: PathBuf,
    new_key: PathBuf,
    new_der: Vec<u8>,
    live_cert: PathBuf,
    live_key: PathBuf,
}

fn rotation(dir: &Path) -> Rotation {
    let (old_cert, old_key, _) = certificate(dir, "old");
    let (new_cert, new_key, new_der) = certificate(dir, "new");
    let (live_cert, live_key) = (dir.join("live.crt"), dir.join("live.key"));
    replace_file(&old_cert, &live_cert);
    replace_file(&old_key, &live_key);
    Rotation {
        old_cert,
        new_cert,
        new_key,
        new_der,
        live_cert,
        live_key,
    }
}

/// A configuration: no admin listener, the relay's study logs in `dir`, llmrtc over the
/// WebSocket alone, and `rest` (listeners and sections) appended.
fn config(dir: &Path, rest: &str) -> Config {
    let text = format!(
        "[admin]\nenabled = false\n\n[relay]\nlog_dir = {:?}\n\n[llmrtc]\nwebrtc = false\n\n{rest}",
        dir.join("logs").display().to_string()
    );
    Config::from_toml_str(&text, "tls-test.toml").expect("config")
}

/// `[listener.tls]` for `cert`/`key`, checked every second.
fn tls_table(cert: &Path, key: &Path) -> String {
    format!(
        "[listener.tls]\ncert = {:?}\nkey = {:?}\nreload_secs = 1\n",
        cert.display().to_string(),
        key.display().to_string()
    )
}

async fn start(config: &Config) -> Gateway {
    within("gateway start", Gateway::start(config))
        .await
        .expect("gateway")
}

/// Opens a WebSocket to `url` with `tls` (and `mcp.v1` offered, for MCPW).
async fn wss(
    url: &str,
    tls: Arc<rustls::ClientConfig>,
    headers: &[(&str, &str)],
) -> Result<Ws, tungstenite::Error> {
    let mut req = url.into_client_request().expect("request");
    for (name, value) in headers {
        req.headers_mut().insert(
            HeaderName::from_bytes(name.as_bytes()).expect("header name"),
            HeaderValue::from_str(value).expect("header value"),
        );
    }
    let connect = tokio_tungstenite::connect_async_tls_with_config(
        req,
        None,
        false,
        Some(Connector::Rustls(tls)),
    );
    within(url, connect).await.map(|(ws, _)| ws)
}

/// The next text message as JSON (other frames skipped); `None` when the socket ends.
async fn next_json(ws: &mut Ws) -> Option<Value> {
    loop {
        match within("next message", ws.next()).await? {
            Ok(Message::Text(t)) => return Some(serde_json::from_str(&t).expect("json")),
            Ok(Message::Close(_)) | Err(_) => return None,
            Ok(_) => {}
        }
    }
}

async fn send_json(ws: &mut Ws, v: Value) {
    ws.send(Message::text(v.to_string())).await.expect("send");
}

/// One exchange of `protocol` over `ws` that only its server answers so.
async fn speak(protocol: Protocol, ws: &mut Ws) {
    match protocol {
        Protocol::Bus => {
            send_json(ws, json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})).await;
            // The bus answers (before `initialize`, with its JSON-RPC error).
            let answer = next_json(ws).await.expect("bus answer");
            assert_eq!(
                (&answer["jsonrpc"], &answer["id"]),
                (&json!("2.0"), &json!(1)),
                "{answer}"
            );
        }
        Protocol::Chopsticks => {
            ws.send(Message::text("{")).await.expect("send");
            let answer = next_json(ws).await.expect("chopsticks answer");
            assert_eq!(answer["type"], "error", "{answer}");
        }
        Protocol::Mcpw => {
            send_json(ws, json!({"id": "p1", "type": 0, "method": "ping"})).await;
            let answer = next_json(ws).await.expect("mcpw answer");
            assert_eq!(
                (&answer["id"], &answer["type"]),
                (&json!("p1"), &json!(1)),
                "{answer}"
            );
        }
        Protocol::Llmrtc => {
            let ready = next_json(ws).await.expect("llmrtc ready");
            assert_eq!(ready["type"], "ready", "{ready}");
        }
        Protocol::Relay => {
            send_json(
                ws,
                json!({"v": "mvp-0.2", "id": "h1", "type": "relay.join",
                       "payload": {"role": "host", "sessionId": "tls"}}),
            )
            .await;
            loop {
                let msg = next_json(ws).await.expect("relay answer");
                if msg["type"] == "relay.joined" {
                    break;
                }
            }
        }
        _ => unreachable!("five protocols"),
    }
}

const PROTOCOLS: [Protocol; 5] = [
    Protocol::Bus,
    Protocol::Chopsticks,
    Protocol::Mcpw,
    Protocol::Llmrtc,
    Protocol::Relay,
];

/// What the client must send to be served: the subprotocol MCPW requires.
fn headers_for(protocol: Protocol) -> Vec<(&'static str, &'static str)> {
    match protocol {
        Protocol::Mcpw => vec![("Sec-WebSocket-Protocol", "mcp.v1")],
        _ => Vec::new(),
    }
}

#[tokio::test]
async fn every_protocol_speaks_wss_with_our_client_tls() {
    let dir = temp_dir("wss");
    let (cert, key, der) = certificate(&dir, "server");
    let config = config(
        &dir,
        &format!(
            "[[listener]]\nname = \"main\"\nlisten = \"127.0.0.1:0\"\n{}",
            tls_table(&cert, &key)
        ),
    );
    let gateway = start(&config).await;
    let trusting = client_tls(Some(&cert), None).expect("client tls");
    let pinned = client_tls(Some(&cert), Some(security::sha256(&der))).expect("pinned tls");
    for protocol in PROTOCOLS {
        let url = gateway.url(protocol).expect("url");
        assert!(url.starts_with("wss://"), "{url}");
        for tls in [&trusting, &pinned] {
            let mut ws = wss(&url, Arc::clone(tls), &headers_for(protocol))
                .await
                .unwrap_or_else(|e| panic!("{url}: {e}"));
            speak(protocol, &mut ws).await;
        }
    }
    reference_clients(&gateway, Arc::clone(&pinned)).await;
    // Without the test CA, only the public roots: the self-signed certificate is refused.
    let url = gateway.url(Protocol::Bus).expect("url");
    let public_only = client_tls(None, None).expect("client tls");
    assert!(wss(&url, public_only, &[]).await.is_err());
    gateway.shutdown().await;
}

/// The reference clients of the five protocols (what the `agentwire` client subcommands
/// run) over `wss://` with `tls` installed as `--ca`/`--pin-sha256` install it: each gets
/// its protocol's first answer. The only test here that installs client TLS process-wide.
async fn reference_clients(gateway: &Gateway, tls: Arc<rustls::ClientConfig>) {
    use agentwire_server::chopsticks::agent_app::AgentLog;
    use agentwire_server::mcpw::agent_app::{AgentEvent, AgentSettings};
    agentwire_server::common::install_client_tls(tls);
    let url = |p: Protocol| gateway.url(p).expect("url");

    let (bus, _) = agentwire_server::bus::client_app::connect(
        &url(Protocol::Bus),
        agentwire::jsonrpc_bus::ClientConfig::new("tls-client"),
        agentwire_server::bus::client_app::transport_config(),
        |_| {},
    )
    .expect("bus client");
    within("bus ping", bus.ping()).await.expect("ping");
    bus.shutdown().await;

    let (tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
    let agent = agentwire_server::chopsticks::agent_app::start(
        &url(Protocol::Chopsticks),
        agentwire::chopsticks::AgentConfig::new("tls-agent"),
        false,
        move |_, log| {
            let _ = tx.send(matches!(log, AgentLog::Connected));
        },
    )
    .expect("chopsticks agent");
    within("chopsticks connected", async {
        while !seen.recv().await.expect("agent running") {}
    })
    .await;
    agent.stop("test done").await;

    let settings = AgentSettings {
        agent_id: "tls-agent".into(),
        agent_type: "tester".into(),
        capabilities: vec![agentwire::mcpw::Capability::new("code_review", 0.9)],
        binary: true,
        heartbeat: Duration::from_secs(5),
        steps: 1,
        step: Duration::from_millis(20),
        hmac_secret: None,
    };
    let (handle, mut events) =
        agentwire_server::mcpw::agent_app::connect(&url(Protocol::Mcpw), settings, None)
            .expect("mcpw agent");
    within("mcpw registered", async {
        while !matches!(
            events.recv().await.expect("agent running"),
            AgentEvent::Registered(_)
        ) {}
    })
    .await;
    handle.shutdown().await;

    let mut client = agentwire_server::llmrtc::client_app::LlmrtcClientApp::start(
        &url(Protocol::Llmrtc),
        agentwire::llmrtc::ClientConfig::default(),
        7,
    )
    .await
    .expect("llmrtc client");
    client
        .wait_for(
            "ready",
            STEP,
            |_| {},
            |e| matches!(e, agentwire::llmrtc::ClientEvent::Ready { .. }),
        )
        .await
        .expect("ready");
    client.close().await;

    let mut relay =
        agentwire_server::relay::agent_app::Agent::connect(&url(Protocol::Relay), |_, _| {})
            .await
            .expect("relay agent");
    let joined = relay.join("tls", "tls-agent").await.expect("join");
    assert_eq!(joined["sessionId"], "tls", "{joined}");
}

/// A client limited to TLS 1.2 (or to one TLS 1.3 suite) that trusts `cert`.
fn limited_client(cert: &Path, tls12: bool) -> Arc<rustls::ClientConfig> {
    let mut provider = rustls::crypto::ring::default_provider();
    if !tls12 {
        provider.cipher_suites = vec![rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256];
    }
    let versions: &[&rustls::SupportedProtocolVersion] = if tls12 {
        &[&rustls::version::TLS12]
    } else {
        &[&rustls::version::TLS13]
    };
    let mut roots = rustls::RootCertStore::empty();
    let pem = std::fs::read(cert).expect("cert");
    for c in rustls_pemfile_certs(&pem) {
        roots.add(c).expect("root");
    }
    let mut cfg = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(versions)
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(cfg)
}

fn rustls_pemfile_certs(pem: &[u8]) -> Vec<rustls::pki_types::CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .expect("pem")
}

#[tokio::test]
async fn tls_1_2_is_refused_on_the_mcpw_listener_and_accepted_on_another() {
    let dir = temp_dir("tls12");
    let (cert, key, _) = certificate(&dir, "server");
    let tls = tls_table(&cert, &key);
    let config = config(
        &dir,
        &format!(
            "[mcpw]\nlistener = \"agents\"\n\n\
             [[listener]]\nname = \"main\"\nlisten = \"127.0.0.1:0\"\n{tls}\n\
             [[listener]]\nname = \"agents\"\nlisten = \"127.0.0.1:0\"\n{tls}"
        ),
    );
    let gateway = start(&config).await;
    let mcpw = gateway.url(Protocol::Mcpw).expect("mcpw url");
    let bus = gateway.url(Protocol::Bus).expect("bus url");
    assert_ne!(
        gateway.local_addr("agents"),
        gateway.local_addr("main"),
        "two listeners"
    );
    let mcp = headers_for(Protocol::Mcpw);

    let tls12 = limited_client(&cert, true);
    match wss(&mcpw, Arc::clone(&tls12), &mcp).await {
        Err(tungstenite::Error::Io(_) | tungstenite::Error::Tls(_)) => {}
        other => panic!(
            "TLS 1.2 must fail the handshake on MCPW, got {:?}",
            other.map(|_| ())
        ),
    }
    // The spec lists two TLS 1.3 suites; a client offering only the third is refused too.
    let aes128 = limited_client(&cert, false);
    assert!(wss(&mcpw, Arc::clone(&aes128), &mcp).await.is_err());
    // The same clients are served on the listener without MCPW (rustls' defaults).
    for client in [tls12, aes128] {
        let mut ws = wss(&bus, client, &[])
            .await
            .expect("bus over TLS 1.2 / AES-128");
        speak(Protocol::Bus, &mut ws).await;
    }
    // And a TLS 1.3 client with the spec's suites is served on MCPW.
    let mut ws = wss(&mcpw, client_tls(Some(&cert), None).expect("tls"), &mcp)
        .await
        .expect("mcpw over TLS 1.3");
    speak(Protocol::Mcpw, &mut ws).await;
    drop(ws);
    gateway.shutdown().await;
}

#[tokio::test]
async fn a_reloaded_certificate_serves_new_connections_while_old_ones_stay_up() {
    let dir = temp_dir("reload");
    let Rotation {
        old_cert,
        new_cert,
        new_key,
        new_der,
        live_cert,
        live_key,
    } = rotation(&dir);
    let config = config(
        &dir,
        &format!(
            "[[listener]]\nname = \"main\"\nlisten = \"127.0.0.1:0\"\n{}",
            tls_table(&live_cert, &live_key)
        ),
    );
    let gateway = start(&config).await;
    let url = gateway.url(Protocol::Bus).expect("url");
    let trusts_old = client_tls(Some(&old_cert), None).expect("tls");
    let trusts_new = client_tls(Some(&new_cert), None).expect("tls");
    let mut old_conn = wss(&url, Arc::clone(&trusts_old), &[]).await.expect("old");
    speak(Protocol::Bus, &mut old_conn).await;
    assert!(wss(&url, Arc::clone(&trusts_new), &[]).await.is_err());

    // The new pair, one file after the other: should the watcher look in between, the
    // certificate and key do not match, and it keeps serving the old pair.
    replace_file(&new_cert, &live_cert);
    replace_file(&new_key, &live_key);
    let url2 = url.clone();
    let new = Arc::clone(&trusts_new);
    eventually("the new certificate is served", || {
        let (url, tls) = (url2.clone(), Arc::clone(&new));
        async move { wss(&url, tls, &[]).await.is_ok() }
    })
    .await;
    // Pinned to the new certificate's SHA-256: accepted.
    let pinned = client_tls(Some(&new_cert), Some(security::sha256(&new_der))).expect("tls");
    let mut ws = wss(&url, pinned, &[])
        .await
        .expect("pinned to the new certificate");
    speak(Protocol::Bus, &mut ws).await;
    // New connections that trust only the old certificate are refused (a fresh client:
    // one that connected before may resume its TLS session, which skips the certificate)...
    let fresh_old = client_tls(Some(&old_cert), None).expect("tls");
    assert!(wss(&url, fresh_old, &[]).await.is_err());
    // ...and the connection made before the reload still works.
    speak(Protocol::Bus, &mut old_conn).await;
    drop((ws, old_conn));
    gateway.shutdown().await;
}

/// Sends an upgrade request from a fresh TCP connection to `addr`; what comes back before
/// the server ends the connection.
async fn raw_answer(addr: SocketAddr) -> Vec<u8> {
    let mut tcp = TcpStream::connect(addr).await.expect("connect");
    let _ = tcp
        .write_all(
            b"GET /bus HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
              Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        )
        .await;
    let mut answer = vec![0u8; 512];
    let n = within("answer or close", tcp.read(&mut answer))
        .await
        .unwrap_or(0);
    answer.truncate(n);
    answer
}

#[tokio::test]
async fn an_address_outside_the_allowlist_is_refused() {
    let dir = temp_dir("allow");
    let config = config(
        &dir,
        "[bus]\nlistener = \"open\"\n\n\
         [[listener]]\nname = \"main\"\nlisten = \"127.0.0.1:0\"\nallow = [\"127.0.0.2\"]\n\n\
         [[listener]]\nname = \"open\"\nlisten = \"127.0.0.1:0\"\nallow = [\"127.0.0.1/32\"]\n",
    );
    let gateway = start(&config).await;
    // We connect from 127.0.0.1: outside "main"'s list, closed before any HTTP.
    let closed = gateway.local_addr("main").expect("main");
    for _ in 0..3 {
        let answer = raw_answer(closed).await;
        assert!(
            answer.is_empty(),
            "refused before any HTTP, got {:?}",
            String::from_utf8_lossy(&answer)
        );
    }
    // Each refusal is counted on the listener's metrics.
    let metrics = gateway.metrics().render();
    assert!(
        metrics
            .contains("agentwire_listener_drops_total{listener=\"main\",reason=\"not_allowed\"} 3"),
        "{metrics}"
    );
    // Inside "open"'s list: served.
    let answer = raw_answer(gateway.local_addr("open").expect("open")).await;
    assert!(
        answer.starts_with(b"HTTP/1.1 101"),
        "{:?}",
        String::from_utf8_lossy(&answer)
    );
    let (mut ws, _) = within(
        "bus",
        tokio_tungstenite::connect_async(gateway.url(Protocol::Bus).expect("url")),
    )
    .await
    .expect("bus");
    speak(Protocol::Bus, &mut ws).await;
    drop(ws);
    gateway.shutdown().await;
}

#[tokio::test]
async fn a_pinned_client_refuses_a_server_whose_certificate_does_not_match() {
    let dir = temp_dir("pin");
    let (cert, key, der) = certificate(&dir, "server");
    let (_, _, other_der) = certificate(&dir, "other");
    let config = config(
        &dir,
        &format!(
            "[[listener]]\nname = \"main\"\nlisten = \"127.0.0.1:0\"\n{}",
            tls_table(&cert, &key)
        ),
    );
    let gateway = start(&config).await;
    let url = gateway.url(Protocol::Mcpw).expect("url");
    let mcp = headers_for(Protocol::Mcpw);
    // Trusted chain, wrong pin: refused.
    let wrong = client_tls(Some(&cert), Some(security::sha256(&other_der))).expect("tls");
    assert!(wss(&url, wrong, &mcp).await.is_err());
    // The pin alone (no CA file, chain checks opted out): the right pin is served, a wrong
    // one refused.
    let right = client_tls_pin_only(security::sha256(&der)).expect("tls");
    let mut ws = wss(&url, right, &mcp).await.expect("pinned");
    speak(Protocol::Mcpw, &mut ws).await;
    let wrong = client_tls_pin_only(security::sha256(&other_der)).expect("tls");
    assert!(wss(&url, wrong, &mcp).await.is_err());
    // The pin as a user writes it (openssl's colon form) parses to the same bytes.
    let colons: Vec<String> = security::sha256(&der)
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect();
    assert_eq!(
        security::parse_pin_sha256(&colons.join(":")).expect("pin"),
        security::sha256(&der)
    );
    drop(ws);
    gateway.shutdown().await;
}

/// Whether an MCPW upgrade to a plain `ws://` `url` with API key `key` is accepted (101)
/// rather than refused (401).
async fn mcpw_key_accepted(url: &str, key: &str) -> bool {
    // The TLS configuration is not used for ws:// URLs.
    mcpw_key_accepted_over(url, client_tls(None, None).expect("tls"), key).await
}

/// Whether a chopsticks agent announcing runner secret `secret` is registered: after its
/// `hello`, a bad frame gets the plain `Invalid JSON` error on an open connection, where a
/// refused hello gets `Unauthorized runner secret.` and the close.
async fn chopsticks_secret_accepted(url: &str, secret: &str) -> bool {
    let (mut ws, _) = within("chopsticks", tokio_tungstenite::connect_async(url))
        .await
        .expect("chopsticks");
    let hello = json!({"type": "hello", "protocolVersion": "1.0.0", "agentId": "rotating",
        "botUserId": null, "tag": null, "ready": true, "guildIds": [], "poolId": "p",
        "runnerSecret": secret});
    ws.send(Message::text(hello.to_string()))
        .await
        .expect("hello");
    ws.send(Message::text("{")).await.expect("bad frame");
    let answer = next_json(&mut ws).await.expect("answer");
    let text = answer["error"].as_str().unwrap_or_default().to_owned();
    assert!(
        text.contains("Unauthorized") || text.contains("JSON"),
        "unexpected answer {answer}"
    );
    !text.contains("Unauthorized")
}

/// A gateway whose MCPW API keys and Chopsticks runner secrets come from key files checked
/// every second, with `overlap_secs`, started on `old-key`/`old-secret` and rotated to
/// `new-key`/`new-secret` (returned once the new ones are accepted): (gateway, MCPW URL,
/// Chopsticks URL).
async fn rotated_gateway(dir: &Path, overlap_secs: u64) -> (Gateway, String, String) {
    let (api_file, secrets_file) = (dir.join("api_keys"), dir.join("runner_secrets"));
    std::fs::write(&api_file, "# MCPW keys\nold-key\n").expect("write");
    std::fs::write(&secrets_file, "old-secret\n").expect("write");
    let config = config(
        dir,
        &format!(
            "[keys]\noverlap_secs = {overlap_secs}\nreload_secs = 1\n\n\
             [mcpw]\napi_keys_file = {:?}\nconnect_rate_per_minute = 100000\nconnect_burst = 100000\n\n\
             [chopsticks]\nrunner_secrets_file = {:?}\n\n\
             [[listener]]\nname = \"main\"\nlisten = \"127.0.0.1:0\"\n",
            api_file.display().to_string(),
            secrets_file.display().to_string()
        ),
    );
    let gateway = start(&config).await;
    let mcpw = gateway.url(Protocol::Mcpw).expect("mcpw");
    let chopsticks = gateway.url(Protocol::Chopsticks).expect("chopsticks");
    assert!(mcpw_key_accepted(&mcpw, "old-key").await);
    assert!(!mcpw_key_accepted(&mcpw, "new-key").await);
    assert!(!mcpw_key_accepted(&mcpw, "").await);
    assert!(chopsticks_secret_accepted(&chopsticks, "old-secret").await);
    assert!(!chopsticks_secret_accepted(&chopsticks, "new-secret").await);

    std::fs::write(&api_file, "new-key\n").expect("rotate keys");
    std::fs::write(&secrets_file, "new-secret\n").expect("rotate secrets");
    eventually("the new API key is accepted", || {
        mcpw_key_accepted(&mcpw, "new-key")
    })
    .await;
    eventually("the new runner secret is accepted", || {
        chopsticks_secret_accepted(&chopsticks, "new-secret")
    })
    .await;
    (gateway, mcpw, chopsticks)
}

#[tokio::test]
async fn a_rotated_key_is_accepted_and_the_retired_one_stays_valid_during_the_overlap() {
    let dir = temp_dir("keys-overlap");
    let (gateway, mcpw, chopsticks) = rotated_gateway(&dir, 3600).await;
    for key in ["old-key", "new-key"] {
        assert!(mcpw_key_accepted(&mcpw, key).await, "{key}");
    }
    for secret in ["old-secret", "new-secret"] {
        assert!(
            chopsticks_secret_accepted(&chopsticks, secret).await,
            "{secret}"
        );
    }
    assert!(!mcpw_key_accepted(&mcpw, "other-key").await);
    gateway.shutdown().await;
}

#[tokio::test]
async fn a_rotated_key_is_accepted_and_the_retired_one_refused_after_the_overlap() {
    let dir = temp_dir("keys");
    let (gateway, mcpw, chopsticks) = rotated_gateway(&dir, 1).await;
    eventually("the retired API key is refused", || async {
        !mcpw_key_accepted(&mcpw, "old-key").await
    })
    .await;
    eventually("the retired runner secret is refused", || async {
        !chopsticks_secret_accepted(&chopsticks, "old-secret").await
    })
    .await;
    assert!(mcpw_key_accepted(&mcpw, "new-key").await);
    assert!(chopsticks_secret_accepted(&chopsticks, "new-secret").await);
    gateway.shutdown().await;
}

/// The `agentwire serve` binary on a configuration file, and the URLs it announced.
#[cfg(unix)]
struct Binary {
    child: std::process::Child,
    urls: Vec<(String, String)>,
}

#[cfg(unix)]
impl Binary {
    /// Starts `agentwire serve --config <dir>/agentwire.toml` with `text`, waiting for its
    /// five `serving protocol=... url=...` lines.
    async fn serve(dir: &Path, text: &str) -> Self {
        use std::io::BufRead;
        let path = dir.join("agentwire.toml");
        std::fs::write(&path, text).expect("config file");
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_agentwire"))
            .args(["serve", "--config"])
            .arg(&path)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("agentwire serve");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, mut lines) = tokio::sync::mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut urls = Vec::new();
        while urls.len() < 5 {
            let line = within("the serving lines", lines.recv())
                .await
                .expect("agentwire serve exited before serving");
            let Some(rest) = line.strip_prefix("serving ") else {
                continue;
            };
            let field = |key: &str| {
                rest.split_whitespace()
                    .find_map(|f| f.strip_prefix(key))
                    .map(str::to_owned)
                    .expect("field")
            };
            urls.push((field("protocol="), field("url=")));
        }
        Self { child, urls }
    }

    fn url(&self, protocol: &str) -> String {
        self.urls
            .iter()
            .find(|(p, _)| p == protocol)
            .map(|(_, u)| u.clone())
            .expect("url")
    }

    fn signal(&self, signal: &str) {
        let status = std::process::Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
    }
}

#[cfg(unix)]
impl Drop for Binary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether an MCPW upgrade over `tls` with API key `key` is accepted (101) or refused (401).
async fn mcpw_key_accepted_over(url: &str, tls: Arc<rustls::ClientConfig>, key: &str) -> bool {
    let bearer = format!("Bearer {key}");
    let headers = [
        ("Sec-WebSocket-Protocol", "mcp.v1"),
        ("Authorization", bearer.as_str()),
    ];
    match wss(url, tls, &headers).await {
        Ok(_) => true,
        Err(tungstenite::Error::Http(resp)) if resp.status() == 401 => false,
        Err(e) => panic!("unexpected: {e}"),
    }
}

#[cfg(unix)]
#[tokio::test]
async fn sighup_reloads_the_certificate_and_the_key_files_and_the_server_serves_on() {
    let dir = temp_dir("sighup");
    let Rotation {
        old_cert,
        new_cert,
        new_key,
        live_cert,
        live_key,
        ..
    } = rotation(&dir);
    let api_keys = dir.join("api_keys");
    std::fs::write(&api_keys, "old-key\n").expect("keys");
    // Every period an hour long: within the test only SIGHUP can reload anything.
    let text = format!(
        "[admin]\nenabled = false\n\n[relay]\nlog_dir = {:?}\n\n[llmrtc]\nwebrtc = false\n\n\
         [keys]\nreload_secs = 3600\noverlap_secs = 3600\n\n\
         [mcpw]\napi_keys_file = {:?}\n\n\
         [[listener]]\nname = \"main\"\nlisten = \"127.0.0.1:0\"\n\
         [listener.tls]\ncert = {:?}\nkey = {:?}\nreload_secs = 3600\n",
        dir.join("logs").display().to_string(),
        api_keys.display().to_string(),
        live_cert.display().to_string(),
        live_key.display().to_string()
    );
    let mut served = Binary::serve(&dir, &text).await;
    let mcpw = served.url("mcpw");
    let trusts_old = || client_tls(Some(&old_cert), None).expect("tls");
    let trusts_new = || client_tls(Some(&new_cert), None).expect("tls");
    assert!(mcpw_key_accepted_over(&mcpw, trusts_old(), "old-key").await);
    assert!(!mcpw_key_accepted_over(&mcpw, trusts_old(), "new-key").await);

    replace_file(&new_cert, &live_cert);
    replace_file(&new_key, &live_key);
    std::fs::write(&api_keys, "new-key\n").expect("keys");
    served.signal("HUP");
    let url = mcpw.clone();
    eventually("SIGHUP loaded the new certificate and key", || {
        let url = url.clone();
        async move {
            match wss(&url, trusts_new(), &headers_for(Protocol::Mcpw)).await {
                Err(tungstenite::Error::Http(_)) | Ok(_) => {
                    mcpw_key_accepted_over(&url, trusts_new(), "new-key").await
                }
                Err(_) => false,
            }
        }
    })
    .await;
    // The retired key is within its (hour-long) overlap; the old certificate is gone.
    assert!(mcpw_key_accepted_over(&mcpw, trusts_new(), "old-key").await);
    assert!(wss(&mcpw, trusts_old(), &headers_for(Protocol::Mcpw))
        .await
        .is_err());
    // SIGHUP did not end the server.
    assert!(served.child.try_wait().expect("try_wait").is_none());
    served.signal("TERM");
}

//! What `agentwire serve` costs over the same machine behind a bare agentwire-tokio
//! `Server`, measured in one run as paired ratios (`agentwire_testkit::bench::paired`):
//!
//! - `gateway/bus/loopback/chain10`: one `sendMessage` through a chain of ten intercepting
//!   subscribers (each answers `stopPropagation: false`) and back to the publisher, over
//!   127.0.0.1, with the reference bus client;
//! - `gateway/llmrtc/loopback/turn`: one spoken turn (an utterance in, the reply's
//!   `tts-complete` out) with the reference llmrtc client and the stand-in providers at
//!   their fast pace (the same one-line script on both, so every turn is the same turn;
//!   the pace's waits are most of a turn's time).
//!
//! - idle memory per bus connection (resident-set growth over 200 raw idle WebSockets),
//!   through the gateway and behind the bare server.
//!
//! Ours: the gateway with all five protocols on one listener by path (a `Router`, events
//! logged and counted in the metrics). Baseline: the same app started on a listener of its
//! own (`start`: one `Server`, events to a no-op). Both on one current-thread runtime, so a
//! wake-up never crosses cores. `cargo bench -p agentwire-server --bench gateway`.

use std::path::PathBuf;
use std::time::Duration;

use agentwire::jsonrpc_bus::{BusConfig, ClientConfig as BusClientConfig};
use agentwire::llmrtc::{ClientEvent, ServerConfig, ServerMessage};
use agentwire_server::bus::client_app::{self, BusClientApp};
use agentwire_server::config::{Config, Protocol};
use agentwire_server::gateway::Gateway;
use agentwire_server::llmrtc::audio::utterance_wav;
use agentwire_server::llmrtc::client_app::LlmrtcClientApp;
use agentwire_server::llmrtc::providers::{Providers, ScriptedStt};
use agentwire_server::llmrtc::server_app::{self, Pacing};
use agentwire_testkit::bench::{open_idle_websockets_at, paired, rss_kib, Paired};
use criterion::Criterion;
use serde_json::json;
use tokio::runtime::Runtime;

/// Subscribers in the chain.
const CHAIN: usize = 10;

/// Idle connections opened per server for the memory figure (under the per-address cap of
/// 256 that both apply to 127.0.0.1).
const IDLE: usize = 200;

/// Opens `n` idle WebSockets to `url` (`ws://ADDR/PATH`) with raw upgrade requests and
/// returns them with the growth of the process's resident set, in KiB per connection.
async fn idle_connections(url: &str, n: usize) -> (Vec<tokio::net::TcpStream>, Option<f64>) {
    let rest = url.strip_prefix("ws://").expect("ws url");
    let (addr, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    let addr = addr.parse().expect("a socket address");
    let before = rss_kib();
    let socks = open_idle_websockets_at(addr, path, n).await;
    // Let the owner tasks take every connection in.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let per_conn = match (before, rss_kib()) {
        (Some(b), Some(a)) => Some(a.saturating_sub(b) as f64 / n as f64),
        _ => None,
    };
    (socks, per_conn)
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// What the stand-in speech-to-text hears in every turn: one line, so every turn of both
/// servers is the same turn.
const UTTERANCE: &str = "Hello there, who am I talking to?";

/// All five protocols on one listener on port 0, no admin listener, the relay's study logs
/// under `dir`, llmrtc fast over the WebSocket alone (as the baseline) with the one-line
/// script `transcript`.
fn gateway_config(dir: &std::path::Path, transcript: &std::path::Path) -> Config {
    let text = format!(
        "[admin]\nenabled = false\n\n[[listener]]\nname = \"main\"\nlisten = \"127.0.0.1:0\"\n\n\
         [relay]\nlog_dir = {:?}\n\n[llmrtc]\nfast = true\nwebrtc = false\ntranscript = {:?}\n",
        dir.display().to_string(),
        transcript.display().to_string()
    );
    Config::from_toml_str(&text, "gateway-bench.toml").expect("config")
}

/// A publisher and `CHAIN` intercepting subscribers on the bus at `url`; each subscriber's
/// deliveries are answered `stopPropagation: false` by a task of its own.
async fn chain(url: &str) -> BusClientApp {
    for i in 0..CHAIN {
        let (sub, mut deliveries) = client_app::connect(
            url,
            BusClientConfig::new(format!("sub-{i}")).intercepting(),
            client_app::transport_config(),
            |_| {},
        )
        .expect("subscriber");
        sub.subscribe("chain:*").await.expect("subscribe");
        tokio::spawn(async move {
            let _keep = sub;
            while let Some(d) = deliveries.recv().await {
                d.answer(false).await;
            }
        });
    }
    let (publisher, _) = client_app::connect(
        url,
        BusClientConfig::new("publisher"),
        client_app::transport_config(),
        |_| {},
    )
    .expect("publisher");
    let r = publish(&publisher).await;
    assert_eq!(r, CHAIN, "every subscriber answered");
    publisher
}

/// One publish through the chain; returns how many subscribers it reached.
async fn publish(publisher: &BusClientApp) -> usize {
    let result = publisher
        .publish("chain:x", &json!({"n": 1}))
        .await
        .expect("publish");
    let v = serde_json::to_value(&result).expect("json");
    v["delivered"].as_u64().map_or(0, |n| n as usize)
}

/// One spoken turn: the utterance out, events until `tts-complete`.
async fn turn(client: &mut LlmrtcClientApp) {
    client
        .send_audio(utterance_wav(600))
        .await
        .expect("send audio");
    client
        .wait_for(
            "tts-complete",
            Duration::from_secs(30),
            |_| {},
            |e| matches!(e, ClientEvent::Message(ServerMessage::TtsComplete)),
        )
        .await
        .expect("the turn ends");
}

/// A connected llmrtc client that has its session.
async fn llmrtc_client(url: &str) -> LlmrtcClientApp {
    let mut c = LlmrtcClientApp::start(url, agentwire::llmrtc::ClientConfig::default(), 7)
        .await
        .expect("client");
    c.wait_for(
        "ready",
        Duration::from_secs(30),
        |_| {},
        |e| matches!(e, ClientEvent::Ready { .. }),
    )
    .await
    .expect("ready");
    c
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let rt = runtime();
    let log_dir: PathBuf =
        std::env::temp_dir().join(format!("agentwire-gateway-bench-{}", std::process::id()));
    std::fs::create_dir_all(&log_dir).expect("bench dir");
    let transcript = log_dir.join("transcript.txt");
    std::fs::write(&transcript, format!("{UTTERANCE}\n")).expect("transcript");
    let gw = rt
        .block_on(Gateway::start(&gateway_config(&log_dir, &transcript)))
        .expect("gateway");
    let url = |p| gw.url(p).expect("enabled");

    let mut out: Vec<Paired> = Vec::new();

    let bare_bus = rt
        .block_on(agentwire_server::bus::server_app::start(
            "127.0.0.1:0",
            BusConfig::default(),
            |_| {},
        ))
        .expect("bare bus");

    // Idle memory per connection, first (before anything is freed that the allocator could
    // hand out again), after a warm-up batch kept open on the relay's route (whichever batch
    // comes first also pays the runtime's one-time growth, ~6 KiB per connection here): the
    // bus through the gateway, then behind its bare server.
    let (warm_up, _) = rt.block_on(idle_connections(&url(Protocol::Relay), IDLE));
    let (ours_idle, ours_kib) = rt.block_on(idle_connections(&url(Protocol::Bus), IDLE));
    let (bare_idle, bare_kib) = rt.block_on(idle_connections(&bare_bus.url(), IDLE));
    drop((warm_up, ours_idle, bare_idle));

    // Bus chain of ten.
    let (through_gateway, bare) = rt.block_on(async {
        (
            chain(&url(Protocol::Bus)).await,
            chain(&bare_bus.url()).await,
        )
    });
    let group = "gateway/bus/loopback/chain10";
    let mut g = c.benchmark_group(group);
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    g.bench_function("gateway", |b| {
        b.iter(|| rt.block_on(publish(&through_gateway)))
    });
    g.bench_function("bare_server", |b| b.iter(|| rt.block_on(publish(&bare))));
    g.finish();
    out.push(paired(
        group,
        || {
            rt.block_on(publish(&through_gateway));
        },
        || {
            rt.block_on(publish(&bare));
        },
    ));

    // llmrtc turn.
    let stt = ScriptedStt::from_text(UTTERANCE);
    let bare_llmrtc = rt
        .block_on(server_app::start(
            "127.0.0.1:0",
            ServerConfig::default(),
            Providers::stand_ins(stt),
            Pacing::fast(),
            |_| {},
        ))
        .expect("bare llmrtc");
    let (mut ours, mut base) = rt.block_on(async {
        (
            llmrtc_client(&url(Protocol::Llmrtc)).await,
            llmrtc_client(&bare_llmrtc.url()).await,
        )
    });
    let group = "gateway/llmrtc/loopback/turn";
    let mut g = c.benchmark_group(group);
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(5));
    g.bench_function("gateway", |b| b.iter(|| rt.block_on(turn(&mut ours))));
    g.bench_function("bare_server", |b| b.iter(|| rt.block_on(turn(&mut base))));
    g.finish();
    out.push(paired(
        group,
        || rt.block_on(turn(&mut ours)),
        || rt.block_on(turn(&mut base)),
    ));

    println!();
    if let (Some(o), Some(b)) = (ours_kib, bare_kib) {
        println!(
            "idle memory per bus connection ({IDLE} each): gateway {o:.1} KiB, bare server {b:.1} KiB"
        );
    }
    println!("gateway ratios, paired (ours / bare server; median of per-round ratios)");
    for p in &out {
        println!(
            "  {:<34} gateway {:>10.1} us  bare {:>10.1} us  ratio {:.3}x",
            p.group,
            p.ours_ns / 1e3,
            p.base_ns / 1e3,
            p.ratio
        );
    }
    rt.block_on(gw.shutdown());
    let _ = std::fs::remove_dir_all(&log_dir);
    c.final_summary();
}

//! The admin listener over 127.0.0.1, port 0: `/healthz`, `/readyz` and `/metrics` scraped
//! during a scripted session of all five protocols (each reference server with the metrics
//! observers and its transport counters registered), the metrics text parsed by a real
//! Prometheus parser (Python `prometheus_client`'s OpenMetrics parser, `AGENTWIRE_PYTHON`)
//! and its counters checked against what the session did; `/readyz` turning 503 when the
//! relay's study-log folder stops being writable; the HTTP edges (404, 405, oversize heads,
//! the MCPW example's `--metrics` answering `/metrics` only).

#[allow(dead_code)]
#[path = "../../../tests/support/interop.rs"]
mod interop;
#[allow(dead_code)]
#[path = "../../../tests/support/temp_dir.rs"]
mod temp_dir;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agentwire::agent_relay::RelayConfig;
use agentwire::chopsticks::{AgentConfig, ControllerConfig};
use agentwire::jsonrpc_bus::message::SendMessageResult;
use agentwire::jsonrpc_bus::{BusConfig, ClientConfig as BusClientConfig};
use agentwire::mcpw::orchestrator::{OrchestratorConfig, TaskSpec, UpgradeConfig};
use agentwire::mcpw::Capability;
use agentwire_server::admin::{self, Readiness};
use agentwire_server::bus::client_app::BusClientApp;
use agentwire_server::config::{Config, Protocol};
use agentwire_server::gateway::Gateway;
use agentwire_server::llmrtc::audio::utterance_wav;
use agentwire_server::llmrtc::client_app::LlmrtcClientApp;
use agentwire_server::llmrtc::providers::{Providers, ScriptedStt};
use agentwire_server::llmrtc::server_app::Pacing;
use agentwire_server::mcpw::agent_app::AgentSettings;
use agentwire_server::metrics::{Metrics, CONTENT_TYPE};
use agentwire_server::relay::log_writer::SyncPolicy;
use agentwire_server::{bus, chopsticks, llmrtc, mcpw, relay};
use serde_json::json;
use temp_dir::temp_dir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

/// How long one step may take before the test fails.
const STEP: Duration = Duration::from_secs(30);

async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(STEP, fut)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

/// Sends `request` raw and returns the whole answer (the server closes after one).
async fn http(addr: SocketAddr, request: &[u8]) -> String {
    within("http answer", async {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        s.write_all(request).await.expect("write");
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out).await;
        String::from_utf8_lossy(&out).into_owned()
    })
    .await
}

async fn get(addr: SocketAddr, path: &str) -> String {
    http(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: admin\r\n\r\n").as_bytes(),
    )
    .await
}

fn status(answer: &str) -> u16 {
    answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {answer:?}"))
}

fn body(answer: &str) -> &str {
    answer.split_once("\r\n\r\n").map_or("", |(_, b)| b)
}

/// An observer for one protocol: counts the event in `metrics`, then reports its `Debug`
/// text, so a test that awaits the report knows the metrics already count it.
fn observer<E: std::fmt::Debug + 'static>(
    metrics: &Arc<Metrics>,
    observe: fn(&Metrics, &E),
) -> (
    impl Fn(&E) + Send + Sync + 'static,
    mpsc::UnboundedReceiver<String>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let m = Arc::clone(metrics);
    (
        move |e: &E| {
            observe(&m, e);
            let _ = tx.send(format!("{e:?}"));
        },
        rx,
    )
}

/// Waits for an event whose `Debug` text starts with `prefix`.
async fn event(rx: &mut mpsc::UnboundedReceiver<String>, prefix: &str) -> String {
    within(prefix, async {
        loop {
            let e = rx.recv().await.expect("the event task ended");
            if e.starts_with(prefix) {
                return e;
            }
        }
    })
    .await
}

/// One parsed sample: its name, labels and value.
type Samples = Vec<(String, BTreeMap<String, String>, f64)>;

/// The metrics text parsed by Python `prometheus_client`'s OpenMetrics parser (a real
/// Prometheus parser: it refuses a text that breaks the format), or `None` when
/// `AGENTWIRE_PYTHON` is not set up (a failure under CI).
fn parse_with_prometheus_client(text: &str) -> Option<Samples> {
    let python = interop::peer_from_env("AGENTWIRE_PYTHON", "admin metrics parse")?;
    let script = r#"
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
out = []
for family in text_string_to_metric_families(sys.stdin.read()):
    for s in family.samples:
        out.append([s.name, s.labels, s.value])
print(json.dumps(out))
"#;
    let mut child = std::process::Command::new(python)
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run python");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(text.as_bytes()).expect("write");
    }
    let out = child.wait_with_output().expect("python");
    assert!(
        out.status.success(),
        "prometheus_client refused the metrics text: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let samples: Vec<(String, BTreeMap<String, String>, f64)> =
        serde_json::from_slice(&out.stdout).expect("json from python");
    Some(samples)
}

/// The value of the sample `name` with exactly `labels`.
fn value(samples: &Samples, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let want: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    samples
        .iter()
        .find(|(n, l, _)| n == name && *l == want)
        .map(|(_, _, v)| *v)
}

fn data(file: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/llmrtc/data")
        .join(file)
}

/// Moves `dir` aside and puts a plain file in its place (unwritable for anyone, root
/// included); returns where the folder went.
fn make_unwritable(dir: &Path) -> std::path::PathBuf {
    let aside = dir.with_extension("aside");
    std::fs::rename(dir, &aside).expect("move the folder aside");
    std::fs::write(dir, b"not a folder").expect("file in its place");
    aside
}

fn restore(dir: &Path, aside: &Path) {
    std::fs::remove_file(dir).expect("remove the file");
    std::fs::rename(aside, dir).expect("put the folder back");
}

/// `n` intercepting bus subscribers to `topic`, each letting the publish go on to the next,
/// and a publisher that publishes once; returns them and the chain's result, once every
/// subscriber has answered.
async fn bus_publish(
    url: &str,
    n: usize,
    topic: &str,
) -> (Vec<BusClientApp>, BusClientApp, SendMessageResult) {
    let mut subscribers = Vec::new();
    let mut answers = Vec::new();
    for i in 0..n {
        let (sub, mut deliveries) = bus::client_app::connect(
            url,
            BusClientConfig::new(format!("{topic}-sub-{i}")).intercepting(),
            bus::client_app::transport_config(),
            |_| {},
        )
        .expect("bus subscriber");
        within("subscribe", sub.subscribe(topic))
            .await
            .expect("subscribe");
        subscribers.push(sub);
        answers.push(tokio::spawn(async move {
            let d = deliveries.recv().await.expect("delivery");
            d.answer(false).await
        }));
    }
    let (publisher, _) = bus::client_app::connect(
        url,
        BusClientConfig::new(format!("{topic}-pub")),
        bus::client_app::transport_config(),
        |_| {},
    )
    .expect("bus publisher");
    let result = within("publish", publisher.publish(topic, &json!({"n": 1})))
        .await
        .expect("publish");
    for a in answers {
        assert!(within("answer", a).await.expect("join"));
    }
    (subscribers, publisher, result)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_readiness_and_metrics_during_a_session_of_all_five_protocols() {
    let metrics = Arc::new(Metrics::new());
    let readiness = Arc::new(Readiness::new());
    let log_dir = temp_dir("admin-relay-logs");
    readiness.writable_dir("relay log folder", log_dir.to_path_buf());
    let listeners: Vec<_> = Protocol::ALL
        .iter()
        .map(|p| (*p, readiness.flag(&format!("listener {p}"))))
        .collect();
    let admin = admin::serve("127.0.0.1:0", Arc::clone(&metrics), Arc::clone(&readiness))
        .await
        .expect("admin");
    let addr = admin.local_addr();

    assert_eq!(body(&get(addr, "/healthz").await), "ok\n");
    let not_ready = get(addr, "/readyz").await;
    assert_eq!(status(&not_ready), 503, "{not_ready}");
    assert!(body(&not_ready).contains("listener bus"), "{not_ready}");
    assert!(
        !body(&not_ready).contains("relay log folder"),
        "{not_ready}"
    );

    // The five servers, each counted by the metrics.
    let (on_bus, mut bus_events) = observer(&metrics, Metrics::observe_bus);
    let bus_app = bus::server_app::start("127.0.0.1:0", BusConfig::default(), on_bus)
        .await
        .expect("bus");
    metrics.register_handle(Protocol::Bus, bus_app.handle.clone());
    let (on_chop, mut chop_events) = observer(&metrics, Metrics::observe_chopsticks);
    let chop_app =
        chopsticks::controller_app::start("127.0.0.1:0", ControllerConfig::default(), on_chop)
            .await
            .expect("chopsticks");
    metrics.register_handle(Protocol::Chopsticks, chop_app.handle.clone());
    let (on_mcpw, mut mcpw_events) = observer(&metrics, Metrics::observe_mcpw);
    let mcpw_app = mcpw::server_app::start(
        "127.0.0.1:0",
        None,
        OrchestratorConfig::default(),
        UpgradeConfig::default(),
        on_mcpw,
    )
    .await
    .expect("mcpw");
    metrics.register_handle(Protocol::Mcpw, mcpw_app.handle.clone());
    let (on_llmrtc, mut llmrtc_events) = observer(&metrics, Metrics::observe_llmrtc);
    let stt = ScriptedStt::from_file(&data("transcript.txt")).expect("transcript");
    let llmrtc_app = llmrtc::server_app::start(
        "127.0.0.1:0",
        agentwire::llmrtc::ServerConfig::default(),
        Providers::stand_ins(stt),
        Pacing::fast(),
        on_llmrtc,
    )
    .await
    .expect("llmrtc");
    metrics.register_handle(Protocol::Llmrtc, llmrtc_app.handle.clone());
    let (on_relay, mut relay_events) = observer(&metrics, Metrics::observe_relay);
    let relay_app = relay::server_app::start(
        "127.0.0.1:0",
        RelayConfig::default(),
        log_dir.to_path_buf(),
        SyncPolicy::SessionEnd,
        on_relay,
    )
    .await
    .expect("relay");
    metrics.register_handle(Protocol::Relay, relay_app.handle.clone());
    for (_, flag) in &listeners {
        flag.set(true);
    }
    assert_eq!(body(&get(addr, "/readyz").await), "ready\n");

    // Bus: three intercepting subscribers each let the publish go on; the publisher gets
    // the chain's result.
    const SUBSCRIBERS: usize = 3;
    let (subscribers, publisher, result) = bus_publish(&bus_app.url(), SUBSCRIBERS, "news").await;
    assert!(result.success && !result.stop_propagation, "{result:?}");
    assert_eq!(result.delivered, Some(SUBSCRIBERS as u32), "{result:?}");
    event(&mut bus_events, "Completed").await;

    // Chopsticks: the mock music agent answers one request, which binds a session to it.
    let agent = chopsticks::agent_app::start(
        &chop_app.url(),
        AgentConfig::new("alpha").with_guilds(["g1"]),
        true,
        |_, _| {},
    )
    .expect("chopsticks agent");
    event(&mut chop_events, "AgentRegistered").await;
    let (who, answer) = within("chopsticks play", chop_app.play("g1", "vc1", "take on me")).await;
    assert_eq!(who.as_deref(), Some("alpha"));
    assert_eq!(
        answer.to_json()["data"]["action"],
        "playing",
        "{:?}",
        answer.to_json()
    );
    event(&mut chop_events, "RequestCompleted").await;

    // MCPW: the reference agent registers and completes one task.
    let settings = AgentSettings {
        agent_id: "agent-1".into(),
        agent_type: "tester".into(),
        capabilities: vec![Capability::new("code_review", 0.9)],
        binary: false,
        heartbeat: Duration::from_secs(5),
        steps: 1,
        step: Duration::from_millis(10),
        hmac_secret: None,
    };
    let (mcpw_agent, _agent_events) =
        mcpw::agent_app::connect(&mcpw_app.url(), settings, None).expect("mcpw agent");
    event(&mut mcpw_events, "Registered").await;
    let spec = TaskSpec::new("code_review").with_id("task-1");
    mcpw_app
        .handle
        .call(move |m, now| m.inner.submit_task(spec, now))
        .await
        .expect("call")
        .expect("submitted");
    event(&mut mcpw_events, "TaskCompleted").await;

    // llmrtc: one spoken turn.
    let mut client = LlmrtcClientApp::start(
        &llmrtc_app.url(),
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
    client.send_audio(utterance_wav(600)).await.expect("audio");
    event(&mut llmrtc_events, "TurnEnded").await;

    // Relay: the movie host and the booking agent, whose tool calls go through the relay.
    let quiet: relay::demo::Printer = Arc::new(|_| {});
    let booked = within(
        "relay booking",
        relay::demo::book(&relay_app.url(), &log_dir, &Default::default(), quiet),
    )
    .await
    .expect("booked");
    assert!(booked.tool_calls > 0);
    let mut results = 0;
    while results < booked.tool_calls {
        let e = event(&mut relay_events, "Relay(Forwarded").await;
        if e.contains("\"tool.result\"") {
            results += 1;
        }
    }

    // Scrape while everything is still connected.
    let scraped = get(addr, "/metrics").await;
    assert_eq!(status(&scraped), 200, "{scraped}");
    assert!(
        scraped.contains(&format!("Content-Type: {CONTENT_TYPE}\r\n")),
        "{scraped}"
    );
    let text = body(&scraped).to_owned();
    assert!(text.ends_with("# EOF\n"), "{text}");

    let samples = parse_with_prometheus_client(&text);
    let v = |name: &str, labels: &[(&str, &str)]| -> f64 {
        match &samples {
            Some(s) => {
                value(s, name, labels).unwrap_or_else(|| panic!("no {name} {labels:?} in\n{text}"))
            }
            None => metrics_value_rust(&text, name, labels),
        }
    };
    let n = SUBSCRIBERS as f64;
    // Bus: what the session did, exactly.
    assert_eq!(v("agentwire_bus_subscriptions", &[]), n);
    assert_eq!(v("agentwire_bus_deliveries_in_flight", &[]), 0.0);
    assert_eq!(
        v(
            "agentwire_requests_total",
            &[
                ("protocol", "bus"),
                ("operation", "hop"),
                ("outcome", "continued")
            ]
        ),
        n
    );
    assert_eq!(
        v(
            "agentwire_requests_total",
            &[
                ("protocol", "bus"),
                ("operation", "publish"),
                ("outcome", "completed")
            ]
        ),
        1.0
    );
    assert_eq!(
        v(
            "agentwire_request_duration_seconds_count",
            &[("protocol", "bus"), ("operation", "hop")]
        ),
        n
    );
    assert_eq!(
        v("agentwire_connections_open", &[("protocol", "bus")]),
        n + 1.0
    );
    assert_eq!(
        v(
            "agentwire_connections_accepted_total",
            &[("protocol", "bus")]
        ),
        n + 1.0
    );
    // Each subscriber sent initialize, subscribe and its answer, and got two responses and
    // the delivery; the publisher sent initialize and sendMessage and got two responses.
    assert_eq!(
        v(
            "agentwire_frames_total",
            &[("protocol", "bus"), ("direction", "in")]
        ),
        3.0 * n + 2.0
    );
    assert_eq!(
        v(
            "agentwire_frames_total",
            &[("protocol", "bus"), ("direction", "out")]
        ),
        3.0 * n + 2.0
    );
    assert!(
        v(
            "agentwire_bytes_total",
            &[("protocol", "bus"), ("direction", "in")]
        ) > 0.0
    );
    assert_eq!(
        v(
            "agentwire_drops_total",
            &[("protocol", "bus"), ("reason", "slow_reader")]
        ),
        0.0
    );
    // Chopsticks.
    assert_eq!(v("agentwire_chopsticks_agents", &[]), 1.0);
    assert_eq!(v("agentwire_chopsticks_sessions_bound", &[]), 1.0);
    assert_eq!(
        v(
            "agentwire_requests_total",
            &[
                ("protocol", "chopsticks"),
                ("operation", "request"),
                ("outcome", "ok")
            ]
        ),
        1.0
    );
    assert_eq!(
        v("agentwire_connections_open", &[("protocol", "chopsticks")]),
        1.0
    );
    // MCPW.
    assert_eq!(v("agentwire_mcpw_agents", &[]), 1.0);
    assert_eq!(v("agentwire_mcpw_tasks", &[]), 0.0);
    assert_eq!(
        v(
            "agentwire_requests_total",
            &[
                ("protocol", "mcpw"),
                ("operation", "task"),
                ("outcome", "completed")
            ]
        ),
        1.0
    );
    assert_eq!(
        v(
            "agentwire_request_duration_seconds_count",
            &[("protocol", "mcpw"), ("operation", "task")]
        ),
        1.0
    );
    // llmrtc.
    assert_eq!(v("agentwire_llmrtc_sessions", &[]), 1.0);
    assert_eq!(v("agentwire_llmrtc_turns_in_flight", &[]), 0.0);
    assert_eq!(
        v(
            "agentwire_requests_total",
            &[
                ("protocol", "llmrtc"),
                ("operation", "turn"),
                ("outcome", "completed")
            ]
        ),
        1.0
    );
    // Relay: every tool call the agent made was answered through it.
    assert_eq!(
        v(
            "agentwire_requests_total",
            &[
                ("protocol", "relay"),
                ("operation", "tool_call"),
                ("outcome", "ok")
            ]
        ),
        booked.tool_calls as f64
    );
    assert_eq!(
        v(
            "agentwire_request_duration_seconds_count",
            &[("protocol", "relay"), ("operation", "tool_call")]
        ),
        booked.tool_calls as f64
    );
    assert!(v("agentwire_relay_study_log_bytes_total", &[]) > 0.0);

    // Once the relay has stopped (its event task has seen every record), the study log's
    // bytes on disk are what the metrics counted.
    relay_app.shutdown().await;
    let on_disk: u64 = std::fs::read_dir(&*log_dir)
        .expect("log dir")
        .map(|e| e.expect("entry").metadata().expect("meta").len())
        .sum();
    assert_eq!(
        metrics_value_rust(
            &metrics.render(),
            "agentwire_relay_study_log_bytes_total",
            &[]
        ),
        on_disk as f64
    );

    // The relay's study-log folder stops being writable: not ready, and back.
    let aside = make_unwritable(&log_dir);
    let answer = get(addr, "/readyz").await;
    restore(&log_dir, &aside);
    assert_eq!(status(&answer), 503, "{answer}");
    assert_eq!(body(&answer), "not ready: relay log folder\n");
    assert_eq!(status(&get(addr, "/readyz").await), 200);
    listeners[0].1.set(false);
    assert_eq!(
        body(&get(addr, "/readyz").await),
        "not ready: listener bus\n"
    );

    client.close().await;
    mcpw_agent.shutdown().await;
    agent.stop("done").await;
    for sub in subscribers {
        sub.shutdown().await;
    }
    publisher.shutdown().await;
    bus_app.server.shutdown().await;
    mcpw_app.shutdown().await;
    llmrtc_app.shutdown().await;
    chop_app.server.shutdown().await;
    admin.shutdown().await;
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "the admin listener still accepts after shutdown"
    );
}

/// The value of `name{labels}` read from the text (labels in the order written).
fn metrics_value_rust(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    let key = if labels.is_empty() {
        name.to_owned()
    } else {
        let inner: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
        format!("{name}{{{}}}", inner.join(","))
    };
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{key} ")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in\n{text}"))
}

#[tokio::test]
async fn the_admin_listener_answers_only_get_of_its_paths_and_bounds_the_request_head() {
    let metrics = Arc::new(Metrics::new());
    let admin = admin::serve("127.0.0.1:0", metrics, Arc::new(Readiness::new()))
        .await
        .expect("admin");
    let addr = admin.local_addr();
    assert_eq!(status(&get(addr, "/nowhere").await), 404);
    assert_eq!(status(&get(addr, "/metrics?x=1").await), 200);
    let post = http(
        addr,
        b"POST /metrics HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n",
    )
    .await;
    assert_eq!(status(&post), 405, "{post}");
    assert!(post.contains("Allow: GET\r\n"), "{post}");
    let huge = format!(
        "GET /healthz HTTP/1.1\r\nX-Pad: {}\r\n\r\n",
        "a".repeat(20_000)
    );
    assert_eq!(status(&http(addr, huge.as_bytes()).await), 431);
    assert_eq!(
        status(&http(addr, b"\x16\x03\x01garbage\r\n\r\n").await),
        400
    );
    admin.shutdown().await;
}

#[tokio::test]
async fn one_address_holding_idle_connections_does_not_lock_another_out() {
    let admin = admin::serve(
        "127.0.0.1:0",
        Arc::new(Metrics::new()),
        Arc::new(Readiness::new()),
    )
    .await
    .expect("admin");
    let addr = admin.local_addr();
    let per_address = admin::HttpLimits::default().max_connections_per_address;
    let mut idle = Vec::new();
    for _ in 0..per_address {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        s.write_all(b"GET /healthz HTTP/1.1\r\n")
            .await
            .expect("write"); // never finished
        idle.push(s);
    }
    // One more from the same address is closed at once, unanswered.
    let mut extra = TcpStream::connect(addr).await.expect("connect");
    let mut out = Vec::new();
    within("closed", extra.read_to_end(&mut out))
        .await
        .expect("read");
    assert!(out.is_empty(), "{}", String::from_utf8_lossy(&out));
    // Another address (127.0.0.2, also loopback) is served meanwhile.
    let other = tokio::net::TcpSocket::new_v4().expect("socket");
    other
        .bind("127.0.0.2:0".parse().expect("addr"))
        .expect("bind 127.0.0.2");
    let mut s = within("connect", other.connect(addr))
        .await
        .expect("connect");
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .expect("write");
    let mut answer = String::new();
    within("answer", s.read_to_string(&mut answer))
        .await
        .expect("read");
    assert_eq!(status(&answer), 200, "{answer}");
    drop(idle);
    admin.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_client_that_never_finishes_its_request_gets_408_and_is_let_go() {
    let admin = admin::serve(
        "127.0.0.1:0",
        Arc::new(Metrics::new()),
        Arc::new(Readiness::new()),
    )
    .await
    .expect("admin");
    let mut s = TcpStream::connect(admin.local_addr())
        .await
        .expect("connect");
    s.write_all(b"GET /healthz HTTP/1.1\r\n")
        .await
        .expect("write");
    let mut out = String::new();
    // Paused time: the server's 5 s deadline passes as soon as everything is idle.
    s.read_to_string(&mut out).await.expect("read");
    assert_eq!(status(&out), 408, "{out}");
    admin.shutdown().await;
}

#[tokio::test]
async fn the_mcpw_metrics_endpoint_answers_metrics_only() {
    let app = mcpw::server_app::start(
        "127.0.0.1:0",
        Some("127.0.0.1:0"),
        OrchestratorConfig::default(),
        UpgradeConfig::default(),
        |_| {},
    )
    .await
    .expect("mcpw");
    let addr = app.metrics_addr.expect("metrics address");
    let metrics = get(addr, "/metrics").await;
    assert_eq!(status(&metrics), 200, "{metrics}");
    assert!(body(&metrics).contains("# TYPE"), "{metrics}");
    assert_eq!(status(&get(addr, "/").await), 404);
    assert_eq!(status(&get(addr, "/anything").await), 404);
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateways_admin_listener_reports_all_five_protocols_on_one_listener() {
    let log_dir = temp_dir("admin-gateway-logs");
    let text = format!(
        "[admin]\nlisten = \"127.0.0.1:0\"\n\n[relay]\nlog_dir = {:?}\n\n\
         [llmrtc]\nfast = true\n\n\
         [[listener]]\nname = \"main\"\nlisten = \"127.0.0.1:0\"\n",
        log_dir.display().to_string()
    );
    let config = Config::from_toml_str(&text, "admin-test.toml").expect("config");
    let gw = within("start", Gateway::start(&config))
        .await
        .expect("gateway");
    let admin = gw.admin_addr().expect("admin listener");
    assert_eq!(body(&get(admin, "/healthz").await), "ok\n");
    assert_eq!(body(&get(admin, "/readyz").await), "ready\n");

    // One publish to two subscribers through the gateway's bus route.
    let (subscribers, publisher, result) =
        bus_publish(&gw.url(Protocol::Bus).expect("bus url"), 2, "gw").await;
    assert_eq!(result.delivered, Some(2), "{result:?}");
    // A path no route serves: refused by the listener itself.
    let main = gw.local_addr("main").expect("main listener");
    assert_eq!(status(&get(main, "/nowhere").await), 404);

    // The gateway's event tasks count what they see a moment after the peers see it: read
    // until the publish is in (bounded).
    let deadline = tokio::time::Instant::now() + STEP;
    let text = loop {
        let text = body(&get(admin, "/metrics").await).to_owned();
        if text.contains(
            "agentwire_requests_total{protocol=\"bus\",operation=\"publish\",outcome=\"completed\"} 1\n",
        ) {
            break text;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no publish in\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let samples = parse_with_prometheus_client(&text);
    let v = |name: &str, labels: &[(&str, &str)]| -> f64 {
        match &samples {
            Some(s) => {
                value(s, name, labels).unwrap_or_else(|| panic!("no {name} {labels:?} in\n{text}"))
            }
            None => metrics_value_rust(&text, name, labels),
        }
    };
    // Every protocol's transport counters are registered, in use or not.
    for p in Protocol::ALL {
        let open = v("agentwire_connections_open", &[("protocol", p.name())]);
        let expected = if p == Protocol::Bus { 3.0 } else { 0.0 };
        assert_eq!(open, expected, "{p}");
    }
    assert_eq!(v("agentwire_bus_subscriptions", &[]), 2.0);
    // llmrtc serves WebRTC by default: its UDP socket is counted too.
    assert_eq!(
        v(
            "agentwire_udp_datagrams_total",
            &[("protocol", "llmrtc"), ("direction", "in")]
        ),
        0.0
    );
    assert_eq!(
        v(
            "agentwire_requests_total",
            &[
                ("protocol", "bus"),
                ("operation", "hop"),
                ("outcome", "continued")
            ]
        ),
        2.0
    );
    assert_eq!(
        v(
            "agentwire_listener_drops_total",
            &[("listener", "main"), ("reason", "not_found")]
        ),
        1.0
    );

    // The study-log folder stops being writable: not ready until it is back.
    let aside = make_unwritable(&log_dir);
    let answer = get(admin, "/readyz").await;
    restore(&log_dir, &aside);
    assert_eq!(status(&answer), 503, "{answer}");
    assert!(body(&answer).contains("relay"), "{answer}");
    assert_eq!(status(&get(admin, "/readyz").await), 200);

    for sub in subscribers {
        sub.shutdown().await;
    }
    publisher.shutdown().await;
    gw.shutdown().await;
}

//! The `agentwire` binary as a user runs it: `--version`, `--help` of every subcommand, a
//! client subcommand against a running server, plain errors for a bad URL and an unreachable
//! server, `config defaults` accepted by `serve --check`, and `demo` telling every
//! protocol's story.

use std::path::PathBuf;
use std::process::{Command, Output};

use agentwire::jsonrpc_bus::{BusConfig, ClientConfig};
use agentwire_server::bus::{client_app, server_app};

const BIN: &str = env!("CARGO_BIN_EXE_agentwire");

/// Runs the binary with `args` (stdin empty) and waits for it, off the async runtime.
async fn agentwire(args: &[&str]) -> Output {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        Command::new(BIN)
            .args(&args)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run agentwire")
    })
    .await
    .expect("join")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A folder of this test's own under the system temp dir, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("agentwire-cli-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[tokio::test]
async fn version_names_the_binary_and_the_crate_version() {
    let out = agentwire(&["--version"]).await;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        stdout(&out).trim(),
        format!("agentwire {}", env!("CARGO_PKG_VERSION"))
    );
}

#[tokio::test]
async fn every_subcommand_has_help() {
    let commands: &[&[&str]] = &[
        &[],
        &["serve"],
        &["config"],
        &["config", "defaults"],
        &["demo"],
        &["bus"],
        &["bus", "publish"],
        &["bus", "subscribe"],
        &["bus", "ping"],
        &["bus", "server"],
        &["chopsticks", "agent"],
        &["chopsticks", "server"],
        &["mcpw", "agent"],
        &["mcpw", "server"],
        &["llmrtc", "client"],
        &["llmrtc", "server"],
        &["relay", "agent"],
        &["relay", "host"],
        &["relay", "log"],
        &["relay", "server"],
    ];
    for path in commands {
        let mut args = path.to_vec();
        args.push("--help");
        let out = agentwire(&args).await;
        assert!(out.status.success(), "{args:?}: {out:?}");
        let usage = format!("Usage: agentwire {}", path.join(" "));
        assert!(
            stdout(&out).contains(usage.trim_end()),
            "{args:?}: {}",
            stdout(&out)
        );
    }
    // The bus client's flags are not the bus server's.
    let out = agentwire(&["bus", "server", "--url", "ws://127.0.0.1:1"]).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(stderr(&out).contains("client flags"), "{}", stderr(&out));
    // A command that does not exist is an error, not help.
    let out = agentwire(&["bus", "teleport"]).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(stderr(&out).contains("teleport"), "{}", stderr(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bus_ping_and_publish_reach_a_running_bus() {
    let bus = server_app::start("127.0.0.1:0", BusConfig::default(), |_| {})
        .await
        .expect("bus");
    let url = bus.url();
    // A subscriber in this process sees what the binary publishes.
    let (sub, mut deliveries) = client_app::connect(
        &url,
        ClientConfig::new("watcher"),
        client_app::transport_config(),
        |_| {},
    )
    .expect("client");
    sub.subscribe("news:*").await.expect("subscribe");

    let out = agentwire(&["bus", "ping", "--url", &url]).await;
    assert!(out.status.success(), "{out:?}");
    assert!(!stdout(&out).trim().is_empty(), "no timestamp: {out:?}");

    let out = agentwire(&[
        "bus",
        "publish",
        "--url",
        &url,
        "--client-id",
        "cli-test",
        "news:today",
        r#"{"headline":"it works"}"#,
    ])
    .await;
    assert!(out.status.success(), "{out:?}");
    let result: serde_json::Value =
        serde_json::from_str(stdout(&out).trim()).expect("the result is one JSON line");
    assert_eq!(result["success"], true, "{result}");
    assert_eq!(result["delivered"], 1, "{result}");
    let d = deliveries.recv().await.expect("a delivery");
    assert_eq!(d.topic, "news:today");
    assert_eq!(d.payload_value()["headline"], "it works");

    // The flags may come before the subcommand too, as the example command takes them.
    let out = agentwire(&["bus", "--url", &url, "ping"]).await;
    assert!(out.status.success(), "{out:?}");

    sub.shutdown().await;
    bus.server.shutdown().await;
}

#[tokio::test]
async fn an_unreachable_server_or_a_bad_url_is_a_plain_error_at_once() {
    // A port nothing listens on: bind one, note it, close it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let url = format!("ws://127.0.0.1:{port}");
    // --timeout 600: if the client waited for an answer instead of failing, the test would
    // hang far past any CI patience rather than pass.
    let out = agentwire(&["bus", "ping", "--url", &url, "--timeout", "600"]).await;
    assert!(!out.status.success(), "{out:?}");
    let err = stderr(&out);
    assert!(err.contains(&format!("no connection to {url}")), "{err}");
    assert!(err.contains("Connection refused"), "{err}");

    let out = agentwire(&["bus", "publish", "--url", "not-a-url", "t", "{}"]).await;
    assert!(!out.status.success(), "{out:?}");
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("invalid url \"not-a-url\""), "{err}");

    let out = agentwire(&["relay", "agent", "--url", &format!("{url}/agent/ws")]).await;
    assert!(!out.status.success(), "{out:?}");
    assert!(stderr(&out).contains("Connection refused"), "{out:?}");

    let out = agentwire(&["mcpw", "agent", "--url", "not-a-url"]).await;
    assert!(!out.status.success(), "{out:?}");
    assert!(stderr(&out).contains("invalid url"), "{out:?}");
}

#[tokio::test]
async fn config_defaults_is_accepted_by_serve_check_and_a_bad_file_is_not() {
    let dir = TempDir::new("config");
    let out = agentwire(&["config", "defaults"]).await;
    assert!(out.status.success(), "{out:?}");
    let file = dir.0.join("agentwire.toml");
    std::fs::write(&file, &out.stdout).expect("write");
    let path = file.display().to_string();

    let out = agentwire(&["serve", "--config", &path, "--check"]).await;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(stdout(&out).trim(), "config ok");

    // A key no section knows: exit 2 naming the file, the line and the key.
    let bad = dir.0.join("bad.toml");
    std::fs::write(&bad, "[bus]\nmax_mesage_bytes = 1\n").expect("write");
    let out = agentwire(&["serve", "--config", &bad.display().to_string(), "--check"]).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = stderr(&out);
    assert!(err.contains(&format!("{}:2:", bad.display())), "{err}");
    assert!(err.contains("bus.max_mesage_bytes"), "{err}");

    // A --set with a value of the wrong type names the flag.
    let out = agentwire(&["serve", "--check", "--set", "bus.max_message_bytes=lots"]).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(stderr(&out).contains("bus.max_message_bytes"), "{out:?}");
}

#[tokio::test]
async fn demo_tells_every_protocols_story_on_one_port() {
    let out = agentwire(&["demo"]).await;
    let text = stdout(&out);
    assert!(out.status.success(), "{text}\n{}", stderr(&out));
    let first = text.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("== agentwire demo: five servers on one listener, 127.0.0.1:"),
        "{first}"
    );
    let port = first.rsplit(':').next().unwrap_or_default();
    for path in ["/bus", "/chopsticks", "/ws", "/llmrtc", "/agent/ws"] {
        assert!(
            text.contains(&format!("ws://127.0.0.1:{port}{path}")),
            "{path} not on the one port {port}: {text}"
        );
    }
    for story in [
        // bus: the interceptor chain
        "ok: stopPropagation true, delivered to auth only",
        "ok: disconnected 1 (flaky), timeouts 0, delivered 1 (logger)",
        "bus demo finished: every outcome as expected",
        // chopsticks: selection, answers, a graceful stop, a version refusal
        "[controller] agent registered: agent-alpha",
        "agent-legacy <- close 1008",
        "chopsticks demo finished",
        // mcpw: registration and a routed task
        "[agents] both got registration.confirmed",
        "task-456 completed by agent-alpha",
        "mcpw demo finished",
        // llmrtc: the five scenes over WebRTC
        "== 2. barge-in",
        "== 4. reconnect",
        "heard ",
        // relay: a booking and its study log, checked
        "booked BK-",
        "== agentwire demo finished: all five stories as expected",
    ] {
        assert!(text.contains(story), "missing {story:?} in:\n{text}");
    }
}

/// `agentwire serve --config file`, until dropped; the URL it announces for `protocol`.
struct Serving {
    child: std::process::Child,
}

impl Serving {
    fn start(file: PathBuf, protocol: &str) -> (Self, String) {
        use std::io::BufRead;
        let mut child = Command::new(BIN)
            .args(["serve", "--config", &file.display().to_string()])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn agentwire serve");
        let stdout = child.stdout.take().expect("stdout");
        let serving = Self { child };
        // The announcement comes once every listener is bound; the process's end ends it.
        let prefix = format!("serving protocol={protocol} url=");
        let url = std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .find_map(|line| line.strip_prefix(&prefix).map(str::to_owned))
            .expect("the serving line");
        (serving, url)
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the binary with `args` until a line of its stdout (`stdout`) or stderr containing
/// `wanted` appears (or 20 s pass, or the stream ends); returns that line, then kills it.
async fn first_line(args: &[&str], stdout: bool, wanted: &str) -> String {
    use std::io::BufRead;
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    let wanted = wanted.to_owned();
    tokio::task::spawn_blocking(move || {
        let mut child = Command::new(BIN)
            .args(&args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn agentwire");
        let stream: Box<dyn std::io::Read + Send> = if stdout {
            Box::new(child.stdout.take().expect("stdout"))
        } else {
            Box::new(child.stderr.take().expect("stderr"))
        };
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stream)
                .lines()
                .map_while(Result::ok)
            {
                if line.contains(&wanted) {
                    let _ = tx.send(line);
                    return;
                }
            }
        });
        let line = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .unwrap_or_default();
        let _ = child.kill();
        let _ = child.wait();
        line
    })
    .await
    .expect("join")
}

#[tokio::test]
async fn a_client_subcommand_speaks_wss_with_the_ca_it_is_given() {
    let dir = TempDir::new("tls");
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
        .expect("certificate");
    let (cert, key) = (dir.0.join("cert.pem"), dir.0.join("key.pem"));
    std::fs::write(&cert, ck.cert.pem()).expect("write cert");
    std::fs::write(&key, ck.signing_key.serialize_pem()).expect("write key");
    let config = format!(
        "[admin]\nlisten = \"127.0.0.1:0\"\n\n[relay]\nlog_dir = {:?}\n\n[[listener]]\nname = \"main\"\nlisten = \"127.0.0.1:0\"\n\n[listener.tls]\ncert = {:?}\nkey = {:?}\n",
        dir.0.join("logs").display().to_string(),
        cert.display().to_string(),
        key.display().to_string()
    );
    let file = dir.0.join("serve.toml");
    std::fs::write(&file, config).expect("write config");
    let (serving, url) = tokio::task::spawn_blocking(move || Serving::start(file, "bus"))
        .await
        .expect("join");
    assert!(url.starts_with("wss://127.0.0.1:"), "{url}");
    let ca = cert.display().to_string();

    let out = agentwire(&["bus", "ping", "--url", &url, "--ca", &ca]).await;
    assert!(out.status.success(), "{out:?}");
    assert!(!stdout(&out).trim().is_empty(), "{out:?}");

    // Without the CA the self-signed certificate is refused, plainly and at once.
    let out = agentwire(&["bus", "ping", "--url", &url]).await;
    assert!(!out.status.success(), "{out:?}");
    assert!(stderr(&out).contains("no connection to"), "{out:?}");

    // A CA file that is not there is an error naming it.
    let out = agentwire(&["bus", "ping", "--url", &url, "--ca", "/nonexistent/ca.pem"]).await;
    assert!(!out.status.success(), "{out:?}");
    assert!(stderr(&out).contains("/nonexistent/ca.pem"), "{out:?}");
    // The MCPW agent with the certificate's pin registers; with another pin it is refused.
    let mcpw_url = url.replace("/bus", "/ws");
    let pin = agentwire_server::security::hex(&agentwire_server::security::sha256(ck.cert.der()));
    let line = first_line(
        &[
            "mcpw",
            "agent",
            "--url",
            &mcpw_url,
            "--ca",
            &ca,
            "--pin-sha256",
            &pin,
        ],
        true,
        "registered",
    )
    .await;
    assert!(line.contains("registered"), "{line}");
    let wrong = "00".repeat(32);
    let line = first_line(
        &[
            "mcpw",
            "agent",
            "--url",
            &mcpw_url,
            "--ca",
            &ca,
            "--pin-sha256",
            &wrong,
        ],
        false,
        "could not connect",
    )
    .await;
    assert!(line.contains("certificate"), "{line}");

    // A pin that is not a SHA-256 is refused before anything connects.
    let out = agentwire(&["mcpw", "agent", "--url", &url, "--pin-sha256", "12:34"]).await;
    assert!(!out.status.success(), "{out:?}");
    assert_eq!(stderr(&out).lines().count(), 1, "{out:?}");
    drop(serving);
}

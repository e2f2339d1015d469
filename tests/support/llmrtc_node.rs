//! The real llmrtc peers in Node (`tests/interop/*.mjs`) for the llmrtc interop tests: the
//! check that `node`, the pinned packages and the tools a script needs are there (without
//! them a test skips with the reason printed, under `CI` it fails), bounded script runs,
//! scratch directories, and the real backend (`llmrtc_backend.mjs`).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;

/// How long the backend may take to start listening, and to stop.
const BACKEND_BOUND: Duration = Duration::from_secs(30);

/// `tests/interop`, where the scripts and their `node_modules` are.
pub(crate) fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop")
}

/// `CI` is set, and not `false` or `0`.
fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// `program arg` runs and exits 0.
fn runs(program: &Path, arg: &str) -> bool {
    Command::new(program)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The programs a script runs besides `node`.
#[derive(Clone, Copy, Default)]
pub(crate) struct Tools {
    /// `espeak-ng` (`ESPEAK_NG` names another binary): the harnesses' speech.
    pub(crate) espeak_ng: bool,
    /// Debian's `/usr/bin/chromium` (`CHROMIUM` names another binary): the browser harness.
    pub(crate) chromium: bool,
}

impl Tools {
    /// Each needed binary, and how to get it when it does not run.
    fn binaries(self) -> Vec<(PathBuf, &'static str)> {
        let needed = [
            (
                self.espeak_ng,
                "ESPEAK_NG",
                "espeak-ng",
                "apt-get install espeak-ng",
            ),
            (
                self.chromium,
                "CHROMIUM",
                "/usr/bin/chromium",
                "apt-get install chromium, or set CHROMIUM",
            ),
        ];
        needed
            .into_iter()
            .filter(|(needed, ..)| *needed)
            .map(|(_, var, default, how)| {
                let binary = std::env::var_os(var).map_or_else(|| default.into(), Into::into);
                (binary, how)
            })
            .collect()
    }
}

/// The `node` binary (`AGENTWIRE_NODE`, else `node`) when it, the packages of `pinned`
/// (name, version) in `tests/interop/node_modules` and the `tools` are there. Otherwise
/// `None`, the test named `test` printing why it skips, or a failure under CI.
pub(crate) fn node_peers(test: &str, pinned: &[(&str, &str)], tools: Tools) -> Option<PathBuf> {
    let node: PathBuf =
        std::env::var_os("AGENTWIRE_NODE").map_or_else(|| "node".into(), Into::into);
    let mut missing = Vec::new();
    if !runs(&node, "--version") {
        missing.push(format!("`{}` does not run", node.display()));
    }
    let mut packages_missing = false;
    for (package, version) in pinned {
        let manifest = interop_dir()
            .join("node_modules")
            .join(package)
            .join("package.json");
        let found = std::fs::read(&manifest)
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .and_then(|v| v["version"].as_str().map(str::to_owned));
        match found {
            Some(v) if v == *version => continue,
            Some(v) => missing.push(format!("{package} is {v}, not the pinned {version}")),
            None => missing.push(format!("{package}@{version} is not installed")),
        }
        packages_missing = true;
    }
    if packages_missing {
        missing.push("run `npm ci --ignore-scripts --prefix tests/interop`".to_owned());
    }
    for (binary, how) in tools.binaries() {
        if !runs(&binary, "--version") {
            missing.push(format!("`{}` does not run ({how})", binary.display()));
        }
    }
    if missing.is_empty() {
        return Some(node);
    }
    let why = missing.join("; ");
    assert!(!under_ci(), "{test} needs its peers under CI: {why}");
    eprintln!("skipping {test}: {why}");
    None
}

/// Runs `node tests/interop/<script> <args>` to its end, at most `bound`: (exit status 0,
/// stdout, stderr).
pub(crate) async fn script_outcome(
    node: &Path,
    script: &str,
    args: Vec<String>,
    bound: Duration,
) -> (bool, String, String) {
    let mut cmd = Command::new(node);
    cmd.arg(interop_dir().join(script))
        .args(args)
        .current_dir(interop_dir())
        .stdin(Stdio::null());
    let run = tokio::task::spawn_blocking(move || cmd.output());
    let out = tokio::time::timeout(bound, run)
        .await
        .unwrap_or_else(|_| panic!("{script} did not finish within {bound:?}"))
        .expect("join")
        .expect("node runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// [`script_outcome`] for a script that must succeed: panics with both outputs when it
/// fails, prints its stdout and returns it.
pub(crate) async fn run_script(
    node: &Path,
    script: &str,
    args: Vec<String>,
    bound: Duration,
) -> String {
    let (ok, stdout, stderr) = script_outcome(node, script, args, bound).await;
    assert!(ok, "{script} failed:\n{stdout}\n{stderr}");
    eprintln!("{}", stdout.trim());
    stdout
}

/// A fresh, empty directory `target/tmp/<this test binary>/<name>` (kept after the test:
/// screenshots and frame logs are its artifacts).
pub(crate) fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(env!("CARGO_CRATE_NAME"))
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// `node tests/interop/llmrtc_backend.mjs PORT`: the real backend with offline stand-in
/// providers, stopped by [`stop`](Self::stop) (stdin closed) or killed on drop.
pub(crate) struct Backend {
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    /// The port it listens on (the one asked for, or the one the OS chose for 0).
    pub(crate) port: u16,
}

impl Backend {
    /// Starts it on `port` (0: any free port), with its `streamingTTS` off when
    /// `whole_tts`, and waits until it listens.
    pub(crate) async fn start(node: &Path, port: u16, whole_tts: bool) -> Self {
        let mut child = Command::new(node)
            .arg(interop_dir().join("llmrtc_backend.mjs"))
            .arg(port.to_string())
            .args(whole_tts.then_some("whole-tts"))
            .current_dir(interop_dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("node runs");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout");
        let (tx, mut rx) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let port = tokio::time::timeout(BACKEND_BOUND, async {
            while let Some(line) = rx.recv().await {
                if let Some(p) = line.strip_prefix("listening ") {
                    return p.trim().parse::<u16>().expect("port");
                }
            }
            panic!("the backend exited before listening");
        })
        .await
        .expect("the backend listens in time");
        Self {
            child: Some(child),
            stdin,
            port,
        }
    }

    /// Its WebSocket URL.
    pub(crate) fn url(&self) -> String {
        format!("ws://127.0.0.1:{}/", self.port)
    }

    /// Closes its stdin (it stops its server and exits) and waits for it to exit 0.
    pub(crate) async fn stop(mut self) {
        drop(self.stdin.take());
        let mut child = self.child.take().expect("running");
        let exited = tokio::task::spawn_blocking(move || child.wait());
        match tokio::time::timeout(BACKEND_BOUND, exited).await {
            Ok(Ok(status)) => assert!(status.expect("wait").success(), "backend exit"),
            _ => panic!("the backend did not stop in time"),
        }
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// How many history entries (user and assistant messages) our server holds for the session a
/// harness named in its output (its `session <id>` line).
pub(crate) async fn history_of_named_session(
    app: &agentwire_server::llmrtc::server_app::LlmrtcApp,
    out: &str,
) -> usize {
    let session = out
        .lines()
        .find_map(|l| l.strip_prefix("session "))
        .expect("the harness names its session")
        .trim()
        .to_owned();
    app.handle
        .call(move |m, _| m.history(&session).map_or(0, Iterator::count))
        .await
        .expect("call")
}

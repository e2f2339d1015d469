//! The outside peers of the interop tests: a Python or Node script from `tests/interop` run
//! against one of our servers, skipped when its runtime is not set up (a failure under CI).

use std::ffi::OsString;
use std::time::Duration;

/// How long an outside peer may take to run its whole script.
const PEER_BOUND: Duration = Duration::from_secs(90);

/// The value of `var`, which names what an outside peer needs: `AGENTWIRE_PYTHON` (a
/// python with `websockets`) or `AGENTWIRE_NODE_WS_DIR` (where `ws` is installed). When it
/// is unset the test named `test` skips, saying how to set it up; under CI (`CI` set, and
/// not `false` or `0`) it fails instead.
pub(crate) fn peer_from_env(var: &str, test: &str) -> Option<OsString> {
    if let Some(value) = std::env::var_os(var) {
        return Some(value);
    }
    let (ci_sets_it, how) = match var {
        "AGENTWIRE_PYTHON" => (
            ".ci/run creates .venv-interop and sets it",
            "set AGENTWIRE_PYTHON to a python with `websockets` \
             (python3 -m venv .venv-interop && .venv-interop/bin/pip install websockets==13.1)",
        ),
        "AGENTWIRE_NODE_WS_DIR" => (
            ".ci/run installs ws there and sets it",
            "set AGENTWIRE_NODE_WS_DIR to a directory where \
             `npm install --prefix <dir> ws@8` was run",
        ),
        _ => ("", "set it"),
    };
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
    assert!(!ci, "{var} is unset under CI: {ci_sets_it}");
    eprintln!("skipping {test}: {how}");
    None
}

/// Runs `program tests/interop/<script> <url>` (with `envs` added to its environment) to
/// its end, at most [`PEER_BOUND`]; asserts that it exits 0 and that its stdout contains
/// `ok`, and prints its stdout. `peer` names it in failures ("python client").
pub(crate) async fn run_peer(
    peer: &str,
    program: OsString,
    script: &str,
    url: String,
    envs: Vec<(&'static str, OsString)>,
    ok: &str,
) {
    let script = format!("{}/tests/interop/{script}", env!("CARGO_MANIFEST_DIR"));
    let run = tokio::task::spawn_blocking(move || {
        std::process::Command::new(program)
            .arg(script)
            .arg(url)
            .envs(envs)
            // The Python peers import tests/interop/checks.py: no __pycache__ beside it.
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .output()
    });
    let out = tokio::time::timeout(PEER_BOUND, run)
        .await
        .unwrap_or_else(|_| panic!("the {peer} did not finish within {PEER_BOUND:?}"))
        .expect("join")
        .unwrap_or_else(|e| panic!("the {peer} does not run: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{peer} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(stdout.contains(ok), "{stdout}");
    eprintln!("{}", stdout.trim());
}

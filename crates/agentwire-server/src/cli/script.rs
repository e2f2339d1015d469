//! What the scripted demos share: the bound on each step, and the error a demo ends with.
//!
//! A demo's script runs against a server that is already running (its own, in the demo
//! example commands, or one route of the shared listener of `agentwire demo`), prints its
//! story on stdout, and returns an error at the first outcome that is not the expected one.

use std::future::Future;
use std::process::ExitCode;
use std::time::Duration;

/// Why a demo did not finish as expected.
pub type DemoError = Box<dyn std::error::Error + Send + Sync>;

/// The longest one step of a script may take (the demos run in CI: none may hang).
pub const STEP_TIMEOUT: Duration = Duration::from_secs(10);

/// Awaits `fut`, or fails after [`STEP_TIMEOUT`] naming the step.
pub async fn step<T>(what: &str, fut: impl Future<Output = T>) -> Result<T, DemoError> {
    tokio::time::timeout(STEP_TIMEOUT, fut)
        .await
        .map_err(|_| format!("step '{what}' did not finish within {STEP_TIMEOUT:?}").into())
}

/// Prints `ok: expected` if `ok`, else fails with `expected ...`.
pub fn check(ok: bool, expected: &str) -> Result<(), DemoError> {
    if ok {
        println!("  ok: {expected}");
        Ok(())
    } else {
        Err(format!("expected {expected}").into())
    }
}

/// The exit code of a demo: 0, or 1 after printing why it failed.
pub fn exit_code(program: &str, outcome: Result<(), DemoError>) -> ExitCode {
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{program}: {e}");
            ExitCode::FAILURE
        }
    }
}

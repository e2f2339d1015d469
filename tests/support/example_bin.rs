//! Builds an example program for the end-to-end tests that run it as a user would.

use std::path::PathBuf;

/// Builds example `name` into the target directory this test was built in (same profile)
/// and returns its path. Cargo builds examples for `cargo test` of the whole package, but
/// not for `--test NAME` alone.
pub(crate) fn example(name: &str) -> PathBuf {
    build(&["--example", name], name)
        .join("examples")
        .join(name)
}

/// Builds the `agentwire` binary (package `agentwire-server`) into the target directory
/// this test was built in (same profile) and returns its path.
#[allow(dead_code)] // not every test that includes this file runs the binary
pub(crate) fn agentwire() -> PathBuf {
    build(
        &["-p", "agentwire-server", "--bin", "agentwire"],
        "agentwire",
    )
    .join("agentwire")
}

/// Runs `cargo build --quiet ARGS` into this test's target directory and profile; returns
/// the profile directory. `what` names the program in the failure.
fn build(args: &[&str], what: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps")
        .to_path_buf();
    let target_dir = profile_dir.parent().expect("target dir").to_path_buf();
    let mut build = std::process::Command::new(env!("CARGO"));
    build
        .args(["build", "--quiet"])
        .args(args)
        .arg("--manifest-path")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir);
    if profile_dir.file_name().is_some_and(|p| p == "release") {
        build.arg("--release");
    }
    let status = build.status().expect("cargo build");
    assert!(status.success(), "building {what} failed");
    profile_dir
}

/// Sends `child` SIGINT, as Ctrl-C in its terminal would, and waits (at most 10 s) for it to
/// exit with its stdin still open, as a user's terminal keeps it. Asserts a clean exit, not
/// death by the signal: the program's handler ran and shut it down. `what` names it.
#[cfg(unix)]
pub(crate) async fn interrupt(mut child: std::process::Child, what: &str) {
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let exit = tokio::task::spawn_blocking(move || {
        let _stdin = child.stdin.take(); // still open while we wait
        child.wait()
    });
    let exit = tokio::time::timeout(std::time::Duration::from_secs(10), exit)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what} to exit after Ctrl-C"))
        .expect("join")
        .expect("wait");
    assert!(exit.success(), "{what}: {exit:?}");
}

/// Lines of a child's pipe (its stdout or stderr), as they come, read on a thread of their
/// own so the child never blocks on a full pipe.
pub(crate) fn lines_of(
    pipe: impl std::io::Read + Send + 'static,
) -> tokio::sync::mpsc::UnboundedReceiver<String> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

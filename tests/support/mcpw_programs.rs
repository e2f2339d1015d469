//! The `mcpw_server` and `mcpw_agent` programs run as a user runs them, for the end-to-end
//! tests: built, started on 127.0.0.1 with flags, their output read line by line.

use std::io::Write as _;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use tokio::sync::mpsc::UnboundedReceiver;

use super::example_bin::{self, example};

/// The next line of `lines` that `pick` accepts, within 20 s (`what` names it).
pub(crate) async fn next_line(
    lines: &mut UnboundedReceiver<String>,
    what: &str,
    mut pick: impl FnMut(&str) -> bool,
) -> String {
    let wait = async {
        loop {
            let line = lines
                .recv()
                .await
                .unwrap_or_else(|| panic!("the output ended: {what}"));
            if pick(&line) {
                return line;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(20), wait)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

/// Builds example `name` ([`example`]) off the runtime's threads and returns its path.
pub(crate) async fn binary(name: &'static str) -> std::path::PathBuf {
    tokio::task::spawn_blocking(move || example(name))
        .await
        .expect("build")
}

/// A running `mcpw_server`: its stdin (task lines), stdout and stderr lines, and its URL.
pub(crate) struct ServerProcess {
    child: Child,
    stdin: ChildStdin,
    /// What it prints on stdout (its answers to the commands).
    pub(crate) out: UnboundedReceiver<String>,
    /// What it logs on stderr.
    pub(crate) err: UnboundedReceiver<String>,
    /// Where agents connect.
    pub(crate) url: String,
}

impl ServerProcess {
    /// Starts `mcpw_server` on a free port with `flags`.
    pub(crate) async fn start(flags: &[&str]) -> Self {
        let mut child = Command::new(binary("mcpw_server").await)
            .args(["--listen", "127.0.0.1:0"])
            .args(flags)
            .env("RUST_LOG", "info")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn mcpw_server");
        let stdin = child.stdin.take().expect("stdin");
        let out = example_bin::lines_of(child.stdout.take().expect("stdout"));
        let mut err = example_bin::lines_of(child.stderr.take().expect("stderr"));
        let listening =
            next_line(&mut err, "listening", |l| l.contains("listening on ws://")).await;
        let url = listening
            .split_whitespace()
            .find(|w| w.starts_with("ws://"))
            .expect("url")
            .to_owned();
        Self {
            child,
            stdin,
            out,
            err,
            url,
        }
    }

    /// Types `line` on the server's stdin and returns what it printed back (`submitted
    /// <id>`, ...).
    pub(crate) async fn command(&mut self, line: &str) -> String {
        writeln!(self.stdin, "{line}").expect("write");
        next_line(&mut self.out, line, |_| true).await
    }

    /// Submits a task line and returns its id.
    pub(crate) async fn submit(&mut self, line: &str) -> String {
        let said = self.command(line).await;
        said.strip_prefix("submitted ")
            .unwrap_or_else(|| panic!("{line:?} was answered {said:?}"))
            .to_owned()
    }

    /// Kills the server and waits for it.
    pub(crate) async fn stop(mut self) {
        let _ = self.child.kill();
        let _ = tokio::task::spawn_blocking(move || self.child.wait()).await;
    }
}

/// A running `mcpw_agent` with its stdout lines.
pub(crate) struct AgentProcess {
    child: Child,
    /// What it prints on stdout, one sentence per event.
    pub(crate) out: UnboundedReceiver<String>,
}

impl AgentProcess {
    /// Starts `mcpw_agent` against `url` with `flags`.
    pub(crate) async fn start(url: &str, flags: &[&str]) -> Self {
        let mut child = Command::new(binary("mcpw_agent").await)
            .args(["--url", url])
            .args(flags)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn mcpw_agent");
        let out = example_bin::lines_of(child.stdout.take().expect("stdout"));
        Self { child, out }
    }

    /// Kills the agent and waits for it.
    pub(crate) async fn stop(mut self) {
        let _ = self.child.kill();
        let _ = tokio::task::spawn_blocking(move || self.child.wait()).await;
    }
}

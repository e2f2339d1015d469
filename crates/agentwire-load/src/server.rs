//! The servers a run starts: the agentwire server (the `agentwire serve` command, in a
//! process of its own), `nats-server` and `redis-server`, each on a free 127.0.0.1 port and
//! killed when its [`ServerProcess`] is dropped (also when a run fails or panics).

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::error::LoadError;

/// How long a started server may take to answer.
const READY_SECS: u64 = 20;

/// Which server a scenario drives.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum ServerKind {
    /// The agentwire server, serving `protocol` (as `agentwire serve` names it: `bus`,
    /// `chopsticks`, `mcpw`, `llmrtc`, `relay`); `settings` are extra `--set KEY=VALUE`
    /// entries (a scenario's limits), applied after the load generator's own.
    Agentwire {
        /// The protocol whose URL the scenario gets.
        protocol: &'static str,
        /// Extra `--set` entries.
        settings: &'static [&'static str],
    },
    /// `nats-server` (Debian package `nats-server`); the scenario gets `127.0.0.1:PORT`.
    Nats,
    /// `redis-server` (Debian package `redis-server`); the scenario gets `127.0.0.1:PORT`.
    Redis,
    /// A reference server the scenario starts in this process itself, on a runtime whose
    /// threads are named `threads` ([`InProcess`](crate::in_process::InProcess)): for load
    /// that starts in the server's own application, which `agentwire serve` does not take
    /// from outside. Its CPU is those threads'; the scenario gets no address.
    InProcess {
        /// The name of the server runtime's threads (at most 15 bytes).
        threads: &'static str,
    },
}

impl ServerKind {
    /// The server's name in reports: `agentwire`, `nats-server`, `redis-server`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Agentwire { .. } => "agentwire",
            Self::Nats => "nats-server",
            Self::Redis => "redis-server",
            Self::InProcess { .. } => "agentwire (in-process)",
        }
    }
}

/// Which program runs the agentwire server.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub enum AgentwireProgram {
    /// This executable (`agentwire-load agentwire serve ...` runs the `agentwire` command
    /// tree of agentwire-server, the same code as the `agentwire` binary): the default, so a
    /// release build of this crate measures a release build of the server.
    #[default]
    ThisExecutable,
    /// An `agentwire-load` binary at this path (run as `PATH agentwire serve ...`; what the
    /// tests use, whose own executable is the test harness).
    Load(PathBuf),
    /// An `agentwire` binary at this path.
    Binary(PathBuf),
    /// `program` started with `settings` as well (`KEY=VALUE`, each passed as `--set`), after
    /// the load generator's and the scenario's own so that they win: `--server-set`. Built
    /// with [`with_settings`](Self::with_settings).
    Configured {
        /// The program.
        program: Box<Self>,
        /// The extra `--set` entries, in order.
        settings: Vec<String>,
    },
}

impl AgentwireProgram {
    /// This program started with `settings` (`KEY=VALUE` each, as `agentwire serve --set`
    /// takes them) after every other setting; none: the program unchanged.
    pub fn with_settings(self, settings: Vec<String>) -> Self {
        if settings.is_empty() {
            return self;
        }
        match self {
            Self::Configured {
                program,
                settings: mut first,
            } => {
                first.extend(settings);
                Self::Configured {
                    program,
                    settings: first,
                }
            }
            program => Self::Configured {
                program: Box::new(program),
                settings,
            },
        }
    }

    /// The command that runs `agentwire` (`agentwire serve ...` follows), and the extra
    /// settings this program adds.
    fn command(&self) -> Result<(Command, &[String]), LoadError> {
        match self {
            Self::ThisExecutable => {
                let exe = std::env::current_exe().map_err(|e| LoadError::Spawn {
                    what: "agentwire (this executable)".into(),
                    source: e,
                })?;
                let mut c = Command::new(exe);
                c.arg("agentwire");
                Ok((c, &[]))
            }
            Self::Load(path) => {
                let mut c = Command::new(path);
                c.arg("agentwire");
                Ok((c, &[]))
            }
            Self::Binary(path) => Ok((Command::new(path), &[])),
            Self::Configured { program, settings } => {
                // `with_settings` never nests them; a hand-built nesting adds only its own.
                let (c, _) = program.command()?;
                Ok((c, settings))
            }
        }
    }
}

/// The protocols `agentwire serve` serves, by their configuration section names.
const PROTOCOLS: [&str; 5] = ["bus", "chopsticks", "mcpw", "llmrtc", "relay"];

/// Settings every spawned agentwire server gets: one listener on a free loopback port, no
/// admin listener, warnings only in the log, and connection caps high enough for a load
/// generator that connects everything from 127.0.0.1.
const AGENTWIRE_SETTINGS: &[&str] = &[
    "listener.0.listen=127.0.0.1:0",
    "listener.0.max_pending_handshakes_per_address=100000",
    "admin.enabled=false",
    "log.level=warn",
    "bus.max_connections=200000",
    "bus.transport.max_connections_per_address=200000",
    "chopsticks.transport.max_connections_per_address=200000",
    "mcpw.transport.max_connections_per_address=200000",
    "llmrtc.transport.max_connections_per_address=200000",
    "relay.transport.max_connections_per_address=200000",
];

/// A running server started by the load generator; dropping it kills the process.
#[derive(Debug)]
pub struct ServerProcess {
    child: Child,
    name: &'static str,
    address: String,
}

impl ServerProcess {
    /// Starts the server of `kind` and waits (at most 20 s) until it answers.
    pub fn start(kind: &ServerKind, program: &AgentwireProgram) -> Result<Self, LoadError> {
        match kind {
            ServerKind::Agentwire { protocol, settings } => {
                start_agentwire(program, protocol, settings)
            }
            ServerKind::Nats => {
                let exe = find_program("nats-server", "nats-server")?;
                let port = free_port()?;
                let mut cmd = Command::new(exe);
                cmd.args(["-a", "127.0.0.1", "-p", &port.to_string()]);
                start_tcp(cmd, "nats-server", port)
            }
            ServerKind::Redis => {
                let exe = find_program("redis-server", "redis-server")?;
                let port = free_port()?;
                let mut cmd = Command::new(exe);
                cmd.args(["--bind", "127.0.0.1", "--port", &port.to_string()])
                    .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
                    // No output-buffer cap on subscribers: a fan-out burst is delivered, not
                    // cut off (the bus and NATS deliver theirs in full too).
                    .args(["--client-output-buffer-limit", "pubsub 0 0 0"]);
                start_tcp(cmd, "redis-server", port)
            }
            ServerKind::InProcess { .. } => Err(LoadError::Usage(
                "an in-process server is started by its scenario, not as a process".into(),
            )),
        }
    }

    /// The process id (for `/proc`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The server's name: `agentwire`, `nats-server`, `redis-server`.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Where a scenario connects: the protocol's `ws://` URL, or `127.0.0.1:PORT`.
    pub fn address(&self) -> &str {
        &self.address
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `agentwire serve` for `protocol`: the load generator's settings, the scenario's
/// `settings`, the other protocols disabled, then the program's own settings (which win).
fn serve_command(
    program: &AgentwireProgram,
    protocol: &str,
    settings: &[&str],
) -> Result<Command, LoadError> {
    let (mut cmd, own) = program.command()?;
    cmd.arg("serve");
    for s in AGENTWIRE_SETTINGS.iter().chain(settings) {
        cmd.args(["--set", s]);
    }
    // Only the protocol under test runs: the others would cost nothing measurable but the
    // relay would write its study-log folder into the working directory.
    for other in PROTOCOLS.iter().filter(|p| **p != protocol) {
        cmd.args(["--set", &format!("{other}.enabled=false")]);
    }
    for s in own {
        cmd.args(["--set", s]);
    }
    Ok(cmd)
}

fn start_agentwire(
    program: &AgentwireProgram,
    protocol: &str,
    settings: &[&str],
) -> Result<ServerProcess, LoadError> {
    let mut cmd = serve_command(program, protocol, settings)?;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let what = format!("agentwire serve ({protocol})");
    let mut child = cmd.spawn().map_err(|e| LoadError::Spawn {
        what: what.clone(),
        source: e,
    })?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut server = ServerProcess {
        child,
        name: "agentwire",
        address: String::new(),
    };
    // A thread reads the announcement and then drains stdout until the process ends.
    let (tx, rx) = mpsc::channel();
    let wanted = format!("serving protocol={protocol} url=");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(url) = line.strip_prefix(&wanted) {
                let _ = tx.send(url.to_owned());
            }
        }
    });
    match rx.recv_timeout(Duration::from_secs(READY_SECS)) {
        Ok(url) => {
            server.address = url;
            Ok(server)
        }
        Err(_) => Err(LoadError::NotReady {
            what,
            secs: READY_SECS,
        }),
    }
}

fn start_tcp(mut cmd: Command, name: &'static str, port: u16) -> Result<ServerProcess, LoadError> {
    // Their start-up banners would bury the table; a failure to start shows as NotReady.
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let child = cmd.spawn().map_err(|e| LoadError::Spawn {
        what: name.into(),
        source: e,
    })?;
    let mut server = ServerProcess {
        child,
        name,
        address: format!("127.0.0.1:{port}"),
    };
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    // Wait until the server accepts: a bounded poll (the process gives no other signal).
    let deadline = Instant::now() + Duration::from_secs(READY_SECS);
    loop {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(server);
        }
        if Instant::now() >= deadline || matches!(server.child.try_wait(), Ok(Some(_))) {
            return Err(LoadError::NotReady {
                what: name.into(),
                secs: READY_SECS,
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A port that was free a moment ago on 127.0.0.1.
fn free_port() -> Result<u16, LoadError> {
    let l =
        TcpListener::bind("127.0.0.1:0").map_err(|e| LoadError::io("finding a free port", e))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| LoadError::io("finding a free port", e))
}

/// `program` on PATH or in the sbin folders (Debian installs `nats-server` in /usr/sbin,
/// which a normal user's PATH may lack).
pub fn find_program(program: &'static str, package: &'static str) -> Result<PathBuf, LoadError> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/local/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(program))
        .find(|p| is_executable(p))
        .ok_or(LoadError::MissingProgram { program, package })
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::{serve_command, AgentwireProgram};

    fn args(program: &AgentwireProgram) -> Vec<String> {
        let cmd = serve_command(program, "bus", &["bus.max_batch_len=7"]).expect("command");
        cmd.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn server_settings_follow_every_other_setting_so_they_win() {
        let plain = AgentwireProgram::Binary("/bin/agentwire".into());
        let configured = plain.clone().with_settings(vec![
            "runtime.flavor=current-thread".into(),
            "log.level=info".into(),
        ]);
        let configured = configured.with_settings(vec!["bus.enabled=true".into()]);
        let (before, after) = (args(&plain), args(&configured));
        assert_eq!(before[0], "serve");
        assert!(before.contains(&"bus.max_batch_len=7".to_owned()));
        assert!(!before.iter().any(|a| a.starts_with("runtime.")));
        assert_eq!(
            &after[..before.len()],
            &before[..],
            "the same command first"
        );
        assert_eq!(
            &after[before.len()..],
            [
                "--set",
                "runtime.flavor=current-thread",
                "--set",
                "log.level=info",
                "--set",
                "bus.enabled=true"
            ]
        );
    }

    #[test]
    fn no_settings_leave_the_program_unchanged() {
        let program = AgentwireProgram::Load("/x/agentwire-load".into()).with_settings(Vec::new());
        assert!(matches!(program, AgentwireProgram::Load(_)));
        assert_eq!(
            args(&program),
            args(&AgentwireProgram::Load("/x/agentwire-load".into()))
        );
    }
}

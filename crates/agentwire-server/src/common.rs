//! What every reference program needs the same way: tracing to stderr (re-exported from
//! [`logging`](crate::logging)), the two clocks a machine is anchored to, and the
//! per-address connection limits every reference server takes as flags, shared by every
//! protocol module of this crate.

use std::io::BufRead;
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use agentwire::tokio::{ClientConfig as TransportClientConfig, Limits, Refusal, ServerConfig};
use tokio::sync::mpsc;

pub use crate::logging::{colour, init_tracing, subscriber};

/// The per-address connection limits of a reference server, as the same two flags in all
/// five servers. Loopback is not exempt.
#[derive(clap::Args, Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddressLimits {
    /// Open connections one client address (IPv6: one /64) may hold; the next one is refused
    /// the way the protocol refuses a connection when it is full
    #[arg(long, default_value_t = ServerConfig::default().max_connections_per_address)]
    pub max_connections_per_address: usize,
    /// WebSocket handshakes one client address may have in progress; more are refused at once
    /// (established connections are never dropped for them)
    #[arg(long, default_value_t = ServerConfig::default().max_pending_handshakes_per_address)]
    pub max_pending_handshakes_per_address: usize,
}

impl Default for AddressLimits {
    fn default() -> Self {
        let d = ServerConfig::default();
        Self {
            max_connections_per_address: d.max_connections_per_address,
            max_pending_handshakes_per_address: d.max_pending_handshakes_per_address,
        }
    }
}

/// The limits a server program's flags asked for; every reference server started afterwards
/// in this process uses them ([`protect`]).
static ADDRESS_LIMITS: Mutex<Option<AddressLimits>> = Mutex::new(None);

impl AddressLimits {
    /// Makes these the limits of the servers this process starts from now on (a program
    /// calls it once, from its flags, before starting its server).
    pub fn install(self) {
        *ADDRESS_LIMITS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(self);
    }

    /// The installed limits, or the transport's defaults.
    pub fn installed() -> Self {
        ADDRESS_LIMITS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .unwrap_or_default()
    }
}

/// The TLS settings of every client this process starts for `wss://` URLs (a client
/// command's `--ca` and `--pin-sha256`), once installed; until then the transport's default
/// (the Mozilla roots).
static CLIENT_TLS: Mutex<Option<std::sync::Arc<rustls::ClientConfig>>> = Mutex::new(None);

/// Makes `tls` the `wss://` settings of the clients this process starts from now on (a
/// client command calls it once, from its flags, before it connects).
pub fn install_client_tls(tls: std::sync::Arc<rustls::ClientConfig>) {
    *CLIENT_TLS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(tls);
}

/// The installed client TLS settings ([`install_client_tls`]), if any.
pub fn installed_client_tls() -> Option<std::sync::Arc<rustls::ClientConfig>> {
    CLIENT_TLS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
}

/// `config` with the installed client TLS settings, if any: what every reference client
/// connects with.
pub fn client_transport(config: TransportClientConfig) -> TransportClientConfig {
    match installed_client_tls() {
        Some(tls) => config.with_tls(tls),
        None => config,
    }
}

/// Reads lines from `reader` on a plain thread and hands them over one by one.
///
/// Unlike `tokio::io::stdin` (a blocking read on the runtime's blocking pool, which the
/// runtime waits for when it shuts down), the thread is never waited for: a program can
/// return from `main` (on Ctrl-C) while the read is still blocked. The thread ends at end of
/// input, on a read error, or once the receiver is gone and another line arrives.
pub fn spawn_line_reader<R: BufRead + Send + 'static>(reader: R) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel(16);
    std::thread::spawn(move || {
        for line in reader.lines() {
            let Ok(line) = line else { break };
            if tx.blocking_send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The exit code of a program whose run ended with `outcome`: success, or failure after
/// printing the error to stderr as one sentence after `program: ` (not the `Debug` form
/// `main` would print for an `Err`).
pub fn exit_code(program: &str, outcome: Result<(), Box<dyn std::error::Error>>) -> ExitCode {
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{program}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Transport headroom above a protocol machine's own message limit: a body a little over the
/// machine's `max_message_bytes` still reaches the machine, which answers it the protocol's
/// way (bus -32005, relay `LIMIT_EXCEEDED`, llmrtc an error message); only far larger ones
/// are cut by the transport (close 1009).
pub const TRANSPORT_HEADROOM: usize = 64 << 10;

/// Transport limits whose message and frame caps are a machine's `max_message_bytes` plus
/// [`TRANSPORT_HEADROOM`].
pub fn message_limits(max_message_bytes: usize) -> Limits {
    let max = max_message_bytes.saturating_add(TRANSPORT_HEADROOM);
    Limits::default()
        .with_max_message_size(max)
        .with_max_frame_size(max)
}

/// Transport settings for a server machine that enforces `max_message_bytes` and
/// `max_connections` itself: [`message_limits`], and room for at least one connection more
/// than `max_connections`, so the machine, not the transport, refuses the one too many.
pub fn machine_sized(max_message_bytes: usize, max_connections: usize) -> ServerConfig {
    let defaults = ServerConfig::default();
    let room = defaults
        .max_connections
        .max(max_connections.saturating_add(1));
    defaults
        .with_limits(message_limits(max_message_bytes))
        .with_max_connections(room)
}

/// What every reference server's transport settings share: the installed
/// [`AddressLimits`], the protocol's own `refusal` of a connection over the per-address
/// cap, and the `426 Upgrade Required` body naming `protocol` and `path` for plain HTTP.
pub fn protect(config: ServerConfig, protocol: &str, path: &str, refusal: Refusal) -> ServerConfig {
    let limits = AddressLimits::installed();
    config
        .with_max_connections_per_address(limits.max_connections_per_address)
        .with_max_pending_handshakes_per_address(limits.max_pending_handshakes_per_address)
        .with_address_refusal(refusal)
        .with_endpoint(protocol, path)
}

/// The transport's monotonic clock (tokio's, so paused-time tests agree with the driver) and
/// the wall clock in Unix milliseconds, read together once: machines read no clock, so the
/// program hands them the wall-clock time at `now` (bus `ping`, relay study log).
pub fn clocks() -> (Instant, u64) {
    let now = tokio::time::Instant::now().into_std();
    #[allow(clippy::disallowed_methods)]
    let wall = SystemTime::now();
    let unix_ms = wall
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    (now, unix_ms)
}

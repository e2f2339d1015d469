//! Timing helpers for the workspace's criterion benches (`benches/*.rs`).
//!
//! Criterion measures one function after the other, so on a shared machine two medians can
//! drift apart while another process runs. [`paired`] times ours and a baseline alternately
//! in short rounds instead and reports the median per-round ratio, which holds.

use std::path::PathBuf;
use std::time::Instant;

/// One figure measured as interleaved pairs: per iteration, our time and the baseline's.
#[derive(Debug, Clone, PartialEq)]
pub struct Paired {
    /// The figure's name (`bus/decode/sendMessage/1KiB`).
    pub group: String,
    /// Median of our per-iteration times over the rounds, in nanoseconds.
    pub ours_ns: f64,
    /// Median of the baseline's per-iteration times over the rounds, in nanoseconds.
    pub base_ns: f64,
    /// Median over rounds of (baseline time / our time) within the round: above 1 when ours
    /// is faster.
    pub speedup: f64,
    /// Median over rounds of (our time / baseline time) within the round: below 1 when ours
    /// is faster.
    pub ratio: f64,
}

/// The number of interleaved rounds [`paired`] runs (odd, so the median is one round's).
pub const ROUNDS: usize = 41;

/// The median of `v` (the upper one for an even length), sorting `v` in place.
///
/// # Panics
///
/// If `v` is empty.
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Times `ours` and `base` alternately, [`ROUNDS`] rounds of about 2 ms each (the iteration
/// count doubles until `ours` takes 2 ms), and returns the median per-iteration times and the
/// medians of the per-round ratios. Another process slowing the machine for a while then
/// slows both sides of a round, so the ratio holds on a shared machine.
#[allow(clippy::disallowed_methods)] // a bench reads the clock
pub fn paired(group: impl Into<String>, mut ours: impl FnMut(), mut base: impl FnMut()) -> Paired {
    let time = |n: u64, f: &mut dyn FnMut()| {
        let start = Instant::now();
        for _ in 0..n {
            f();
        }
        start.elapsed().as_nanos() as f64
    };
    let mut n = 1u64;
    while time(n, &mut ours) < 2e6 && n < 1 << 30 {
        n *= 2;
    }
    let (mut a, mut b, mut up, mut down) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let (x, y) = if round % 2 == 0 {
            let x = time(n, &mut ours);
            (x, time(n, &mut base))
        } else {
            let y = time(n, &mut base);
            (time(n, &mut ours), y)
        };
        a.push(x / n as f64);
        b.push(y / n as f64);
        up.push(y / x);
        down.push(x / y);
    }
    Paired {
        group: group.into(),
        ours_ns: median(&mut a),
        base_ns: median(&mut b),
        speedup: median(&mut up),
        ratio: median(&mut down),
    }
}

/// The median estimate (ns) of one benchmark from criterion's output, if present: read from
/// `$CRITERION_HOME`, else `$CARGO_TARGET_DIR/criterion`, else `target/criterion`.
pub fn median_ns(group: &str, function: &str) -> Option<f64> {
    let root = std::env::var_os("CRITERION_HOME")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("CARGO_TARGET_DIR").map(|d| PathBuf::from(d).join("criterion"))
        })
        .unwrap_or_else(|| PathBuf::from("target/criterion"));
    let dir = root.join(group.replace('/', "_")).join(function);
    let text = std::fs::read_to_string(dir.join("new/estimates.json")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["median"]["point_estimate"].as_f64()
}

/// Which bench families the command line asks for: `cargo bench --bench bus -- bus/fanout`
/// runs the families whose name contains an argument or that an argument narrows down
/// (`bus/fanout/in_memory/100` selects `bus/fanout/in_memory`; criterion then filters its
/// own timings by the same argument). No argument: every family.
pub fn family_filter() -> impl Fn(&str) -> bool {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    move |family: &str| {
        args.is_empty()
            || args
                .iter()
                .any(|a| family.contains(a.as_str()) || a.starts_with(family))
    }
}

/// The process's resident set size in KiB (`VmRSS` of `/proc/self/status`); `None` where
/// that file does not exist (not Linux).
pub fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Opens `n` WebSocket connections to `addr` by hand (a raw upgrade request each, read up to
/// the end of the `101` response) and returns the idle sockets, for memory-per-connection
/// figures. Panics if the server refuses an upgrade or hangs up.
pub async fn open_idle_websockets(
    addr: std::net::SocketAddr,
    n: usize,
) -> Vec<tokio::net::TcpStream> {
    open_idle_websockets_at(addr, "/", n).await
}

/// [`open_idle_websockets`] with the upgrade request for `path` (a server that routes by
/// path).
pub async fn open_idle_websockets_at(
    addr: std::net::SocketAddr,
    path: &str,
    n: usize,
) -> Vec<tokio::net::TcpStream> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    );
    let mut socks = Vec::with_capacity(n);
    let mut buf = [0u8; 1024];
    for _ in 0..n {
        let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
        s.write_all(request.as_bytes()).await.expect("write");
        let mut got = Vec::new();
        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
            let read = s.read(&mut buf).await.expect("read");
            assert!(read > 0, "server hung up during the upgrade");
            got.extend_from_slice(&buf[..read]);
        }
        assert!(got.starts_with(b"HTTP/1.1 101"), "upgrade refused");
        socks.push(s);
    }
    socks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_is_the_middle_after_sorting() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 3.0);
        assert_eq!(median(&mut [f64::NAN, 1.0, 0.5]), 1.0);
    }

    #[test]
    fn paired_sees_which_side_is_slower() {
        let spin = |n: u32| {
            let mut x = 0u64;
            for i in 0..n {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(u64::from(i)));
            }
            x
        };
        let p = paired(
            "test/paired",
            || {
                std::hint::black_box(spin(100));
            },
            || {
                std::hint::black_box(spin(2_000));
            },
        );
        assert_eq!(p.group, "test/paired");
        assert!(p.speedup > 2.0 && p.ratio < 0.5, "{p:?}");
        assert!(p.base_ns > p.ours_ns, "{p:?}");
    }

    #[test]
    fn no_estimate_without_criterion_output() {
        assert_eq!(median_ns("no/such/group", "nothing"), None);
    }
}

//! [`check_timer_contract`]: the timer rules of the [`Machine`] contract, checked on one
//! machine over an arbitrary input sequence.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use crate::{ConnId, Disconnect, FrameBuf, Machine, PeerInfo};

/// One input of [`check_timer_contract`].
#[derive(Debug, Clone)]
pub enum TimerInput {
    /// Open a new connection (ids are never reused).
    Connect,
    /// A frame on the `n % open`-th connection ever opened (closed ones included: must be a no-op).
    Frame(usize, FrameBuf),
    /// Disconnect the `n % open`-th connection ever opened (again: must be a no-op), with
    /// [`Disconnect::Ended`].
    Disconnect(usize),
    /// A WebSocket pong on the `n % open`-th connection ever opened (closed ones included:
    /// must be a no-op), at the latest time the machine has seen: the default
    /// `handle_pong` ignores its time, so a later one would leave the check unsure what
    /// the machine clamps to.
    Pong(usize),
    /// Advance the driver's clock.
    Advance(Duration),
    /// Move the driver's clock backwards (the machine must clamp).
    Rewind(Duration),
    /// Call `handle_timeout(now)` whatever `poll_timeout` says.
    Timeout,
    /// Jump to `poll_timeout()` (if any) and call `handle_timeout` there.
    FireDue,
}

/// Drives `m` through `inputs` and checks the timer rules of the [`Machine`] contract:
///
/// - after `handle_timeout(t)`, `poll_timeout()` is `None` or later than the latest time seen;
/// - a second `handle_timeout` at the same time produces no output and leaves
///   `poll_timeout` unchanged (idempotent);
/// - `handle_timeout` before the deadline produces no output and leaves `poll_timeout`
///   unchanged (an early call is a no-op), also when time went backwards.
///
/// Outputs are drained after every input. Returns a description of the first violation.
pub fn check_timer_contract<M: Machine>(
    m: &mut M,
    start: Instant,
    inputs: &[TimerInput],
) -> Result<(), String> {
    let mut driver_now = start;
    // The latest time the machine has been given (what it clamps to), not the driver's clock.
    let mut latest: Option<Instant> = None;
    let mut conns: Vec<ConnId> = Vec::new();
    let drain = |m: &mut M| {
        let mut n = 0usize;
        while m.poll_output().is_some() {
            n += 1;
        }
        n
    };
    for (i, input) in inputs.iter().enumerate() {
        match input {
            TimerInput::Connect => {
                let conn = ConnId::new(conns.len() as u64 + 1);
                conns.push(conn);
                let port = 50_000u16.wrapping_add(conns.len() as u16);
                let peer = PeerInfo::new(Some(SocketAddr::from((Ipv4Addr::LOCALHOST, port))));
                m.handle_connect(conn, &peer, driver_now);
                latest = latest.max(Some(driver_now));
            }
            TimerInput::Frame(n, f) => {
                if !conns.is_empty() {
                    m.handle_frame(conns[n % conns.len()], f.as_frame(), driver_now);
                    latest = latest.max(Some(driver_now));
                }
            }
            TimerInput::Disconnect(n) => {
                if !conns.is_empty() {
                    let conn = conns[n % conns.len()];
                    m.handle_disconnect_with(conn, &Disconnect::Ended, driver_now);
                    latest = latest.max(Some(driver_now));
                }
            }
            TimerInput::Pong(n) => {
                if let Some(seen) = latest.filter(|_| !conns.is_empty()) {
                    m.handle_pong(conns[n % conns.len()], seen);
                }
            }
            TimerInput::Advance(d) => driver_now += *d,
            TimerInput::Rewind(d) => {
                driver_now = driver_now.checked_sub(*d).unwrap_or(driver_now);
            }
            TimerInput::Timeout | TimerInput::FireDue => {
                drain(m);
                if matches!(input, TimerInput::FireDue) {
                    if let Some(t) = m.poll_timeout() {
                        driver_now = driver_now.max(t);
                    }
                }
                let before = m.poll_timeout();
                m.handle_timeout(driver_now);
                latest = latest.max(Some(driver_now));
                let produced = drain(m);
                let after = m.poll_timeout();
                let latest = latest.unwrap_or(driver_now);
                if let Some(d) = before {
                    if d > latest && (produced > 0 || after != before) {
                        return Err(format!(
                            "input {i}: early handle_timeout (deadline {:?} after now) was not a no-op: {produced} outputs, poll_timeout {:?} -> {:?}",
                            d - latest, before.map(|b| b - start), after.map(|a| a - start)
                        ));
                    }
                }
                if let Some(a) = after {
                    if a <= latest {
                        return Err(format!(
                            "input {i}: poll_timeout {:?} did not move past now {:?} after handle_timeout",
                            a - start,
                            latest - start
                        ));
                    }
                }
                m.handle_timeout(driver_now);
                let again = drain(m);
                if again > 0 || m.poll_timeout() != after {
                    return Err(format!(
                        "input {i}: handle_timeout is not idempotent: second call gave {again} outputs"
                    ));
                }
            }
        }
        drain(m);
    }
    Ok(())
}

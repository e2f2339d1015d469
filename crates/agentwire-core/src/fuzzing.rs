//! What the crates' fuzz bodies share (feature `fuzzing`).
//!
//! A fuzz body drives a machine through a run of operations, moving its clock forward,
//! backward (which the machine must clamp) and to the machine's next deadline
//! ([`FuzzClock`]), checking the timer contract at each `handle_timeout`
//! ([`checked_timeout`]) and building inputs from the fuzzer's bytes ([`json_value`],
//! [`pick`], [`pick_or_any`], [`maybe_set`]). These live here, not in the publish = false
//! `agentwire-testkit` (which re-exports the clock), because each protocol crate's `fuzzing`
//! module is published with the crate and can only depend on published crates.

use std::time::{Duration, Instant};

use arbitrary::Unstructured;
use serde_json::{Map, Number, Value};

use crate::Machine;

/// The base time of a run: the real clock read once, plus a day. Only differences from it
/// matter, so every run is deterministic; the day keeps rewinding (a run rewinds at most a
/// few hours) from ever reaching the clock's origin, where `checked_sub` would fail and make
/// a run depend on the machine's uptime.
#[allow(clippy::disallowed_methods)] // the one clock read of a run
fn base_time() -> Instant {
    Instant::now() + Duration::from_secs(86_400)
}

/// A fuzz driver's clock. `now` may go backwards; [`seen`](Self::seen) is the latest time
/// actually passed to the machine, which is what the machine clamps to (a time the driver
/// moved to but never passed does not count).
///
/// ```
/// use std::time::Duration;
/// use agentwire_core::fuzzing::FuzzClock;
///
/// let mut clock = FuzzClock::new();
/// let t0 = clock.t();                        // pass to handle_*
/// clock.advance(Duration::from_secs(5));
/// clock.rewind(Duration::from_secs(7));      // the machine must clamp this
/// assert!(clock.now() < t0 && clock.seen() == t0);
/// assert_eq!(clock.since(Some(t0)), Some(Duration::ZERO));
/// ```
#[derive(Debug, Clone)]
pub struct FuzzClock {
    base: Instant,
    now: Instant,
    seen: Option<Instant>,
    wall: WallJumps,
}

impl Default for FuzzClock {
    fn default() -> Self {
        Self::new()
    }
}

impl FuzzClock {
    /// A clock at the run's base time, nothing passed yet.
    pub fn new() -> Self {
        Self::at(base_time())
    }

    /// A clock starting at `base` (for a driver that already has its base time).
    pub fn at(base: Instant) -> Self {
        Self {
            base,
            now: base,
            seen: None,
            wall: WallJumps::default(),
        }
    }

    /// Counts one timeout step; every [`WallJumps::EVERY`]th returns the wall-clock value
    /// (Unix ms) to re-anchor the machine to before it ([`WallJumps::tick`]).
    pub fn wall_jump(&mut self) -> Option<u64> {
        self.wall.tick()
    }

    /// The time to pass to the machine now; records it as passed.
    pub fn t(&mut self) -> Instant {
        self.seen = Some(self.seen.map_or(self.now, |s| s.max(self.now)));
        self.now
    }

    /// The driver's current time, not recorded as passed.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The base time the clock started at.
    pub fn base(&self) -> Instant {
        self.base
    }

    /// The latest time passed to the machine ([`now`](Self::now) before the first
    /// [`t`](Self::t)).
    pub fn seen(&self) -> Instant {
        self.seen.unwrap_or(self.now)
    }

    /// `t` as an offset from the base time (zero for times before it), for messages.
    pub fn since(&self, t: Option<Instant>) -> Option<Duration> {
        t.map(|t| t.saturating_duration_since(self.base))
    }

    /// Moves forward by `d`.
    pub fn advance(&mut self, d: Duration) {
        self.now += d;
    }

    /// Moves backward by `d` (stays put if that would pass the clock's origin).
    pub fn rewind(&mut self, d: Duration) {
        self.now = self.now.checked_sub(d).unwrap_or(self.now);
    }

    /// Moves to `t` if that is later than now (a deadline after a rewind may still be
    /// earlier than the time passed last).
    pub fn jump_to(&mut self, t: Instant) {
        self.now = self.now.max(t);
    }

    /// Moves to `t`, but never earlier than now or than the latest time passed
    /// ([`seen`](Self::seen)): a deadline jump that also undoes a pending rewind.
    pub fn jump_past_seen_to(&mut self, t: Instant) {
        self.now = self.now.max(self.seen()).max(t);
    }
}

/// Wall-clock jumps for a fuzz body (contract rule 9): counts the body's timeout steps and,
/// at every [`EVERY`](Self::EVERY)th, gives a Unix time to pass to
/// [`Machine::handle_wall_clock`], cycling through [`WallJumps::value`]'s jumps (forward a
/// day, back an hour, to 0, to `u64::MAX` and other huge values). It reads no fuzzer bytes,
/// so a body that calls it at steps it already takes keeps its seeds' meaning.
///
/// ```
/// use agentwire_core::fuzzing::WallJumps;
///
/// let mut w = WallJumps::default();
/// let got: Vec<_> = (0..WallJumps::EVERY * 3).filter_map(|_| w.tick()).collect();
/// assert_eq!(got, [WallJumps::value(0), WallJumps::value(1), WallJumps::value(2)]);
/// ```
#[derive(Debug, Clone, Default)]
pub struct WallJumps {
    steps: u64,
}

impl WallJumps {
    /// Every how many timeout steps the wall clock jumps.
    pub const EVERY: u64 = 3;

    /// The `k`th wall-clock value of the cycle, in Unix ms: a 2025 time moved forward by a
    /// day per lap, an hour back from it, 0, `u64::MAX`, `i64::MAX`, year 10000, just under
    /// `u64::MAX`, and back to the ordinary time.
    pub fn value(k: u64) -> u64 {
        const BASE: u64 = 1_735_689_600_000; // 2025-01-01T00:00:00Z
        const DAY: u64 = 86_400_000;
        let lap = (k / 8).min(1_000_000);
        let ordinary = BASE + DAY * (lap + 1);
        match k % 8 {
            0 => ordinary,
            1 => ordinary - 3_600_000,
            2 => 0,
            3 => u64::MAX,
            4 => i64::MAX as u64,
            5 => 253_402_300_800_000, // 10000-01-01T00:00:00Z
            6 => u64::MAX - DAY,
            _ => ordinary - DAY,
        }
    }

    /// Counts one timeout step; every [`EVERY`](Self::EVERY)th returns the next value of
    /// the cycle.
    pub fn tick(&mut self) -> Option<u64> {
        self.steps += 1;
        (self.steps % Self::EVERY == 0).then(|| Self::value(self.steps / Self::EVERY - 1))
    }
}

/// [`Machine::handle_wall_clock`] with rule 9 checked: the machine's deadline
/// (`poll_timeout`) does not move with the wall clock.
///
/// # Panics
///
/// When the deadline moved (that is the fuzz finding).
pub fn checked_wall_clock<M: Machine>(m: &mut M, now: Instant, unix_ms: u64) {
    let before = m.poll_timeout();
    m.handle_wall_clock(now, unix_ms);
    assert_eq!(
        m.poll_timeout(),
        before,
        "handle_wall_clock({unix_ms}) moved the deadline"
    );
}

/// A fuzz driver around one machine: what [`checked_timeout`] needs of it.
pub trait FuzzDriver {
    /// The machine driven.
    type M: Machine;

    /// The driver's clock.
    fn clock(&mut self) -> &mut FuzzClock;

    /// Drains every output of `m` (checking each as the body sees fit); returns how many
    /// there were.
    fn drain(&mut self, m: &mut Self::M) -> usize;
}

/// `handle_timeout(now)` with the timer contract checked: outputs are drained first; an
/// early call (before the deadline `poll_timeout` gave) is a no-op; afterwards
/// `poll_timeout()` is `None` or later than the latest time passed; a second call at the same
/// time produces nothing and leaves `poll_timeout` unchanged. Every
/// [`WallJumps::EVERY`]th call first re-anchors the machine's wall clock
/// ([`FuzzClock::wall_jump`], [`checked_wall_clock`]).
///
/// # Panics
///
/// When the machine breaks one of those rules (that is the fuzz finding).
pub fn checked_timeout<D: FuzzDriver>(d: &mut D, m: &mut D::M) {
    d.drain(m);
    if let Some(unix_ms) = d.clock().wall_jump() {
        let now = d.clock().t();
        checked_wall_clock(m, now, unix_ms);
        d.drain(m);
    }
    let before = m.poll_timeout();
    let now = d.clock().t();
    m.handle_timeout(now);
    let produced = d.drain(m);
    let after = m.poll_timeout();
    let seen = d.clock().seen();
    if let Some(deadline) = before {
        if deadline > seen {
            assert!(
                produced == 0 && after == before,
                "early handle_timeout was not a no-op"
            );
        }
    }
    if let Some(a) = after {
        assert!(
            a > seen,
            "poll_timeout did not move past now ({:?} before it)",
            seen.saturating_duration_since(a)
        );
    }
    let now = d.clock().t();
    m.handle_timeout(now);
    assert_eq!(d.drain(m), 0, "handle_timeout is not idempotent");
    assert_eq!(m.poll_timeout(), after, "handle_timeout is not idempotent");
}

/// One of `items`, chosen by the fuzzer's bytes.
pub fn pick<'a>(u: &mut Unstructured<'_>, items: &[&'a str]) -> arbitrary::Result<&'a str> {
    u.choose(items).copied()
}

/// A string that is usually (7 in 8) one of `items` and sometimes arbitrary.
pub fn pick_or_any(u: &mut Unstructured<'_>, items: &[&str]) -> arbitrary::Result<String> {
    if u.ratio(7u8, 8u8)? {
        Ok(pick(u, items)?.to_owned())
    } else {
        u.arbitrary::<String>()
    }
}

/// Sets `obj[key] = value`, or (1 in 16) leaves the member out, so a template object
/// sometimes lacks a required member.
pub fn maybe_set(
    value: Value,
    u: &mut Unstructured<'_>,
    obj: &mut Map<String, Value>,
    key: &str,
) -> arbitrary::Result<()> {
    if u.ratio(15u8, 16u8)? {
        obj.insert(key.to_owned(), value);
    }
    Ok(())
}

/// A small arbitrary JSON value, nested at most `depth` levels: null, a bool, an integer, a
/// float (`null` when not finite), a string, or (above depth 0) an array or object of up to
/// three members.
pub fn json_value(u: &mut Unstructured<'_>, depth: u8) -> arbitrary::Result<Value> {
    let kind = u.int_in_range(0..=if depth == 0 { 4 } else { 6 })?;
    Ok(match kind {
        0 => Value::Null,
        1 => Value::Bool(u.arbitrary()?),
        2 => Value::from(u.arbitrary::<i64>()?),
        3 => Number::from_f64(u.arbitrary::<f64>()?).map_or(Value::Null, Value::Number),
        4 => Value::String(u.arbitrary()?),
        5 => {
            let n = u.int_in_range(0..=3)?;
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                items.push(json_value(u, depth - 1)?);
            }
            Value::Array(items)
        }
        _ => {
            let n = u.int_in_range(0..=3)?;
            let mut obj = Map::new();
            for _ in 0..n {
                let k: String = u.arbitrary()?;
                obj.insert(k, json_value(u, depth - 1)?);
            }
            Value::Object(obj)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seen_is_the_latest_time_passed() {
        let mut c = FuzzClock::new();
        let t0 = c.now();
        assert_eq!(c.seen(), t0);
        assert_eq!(c.t(), t0);
        c.advance(Duration::from_secs(10));
        assert_eq!(c.seen(), t0, "moved but not passed");
        let t1 = c.t();
        assert_eq!(t1, t0 + Duration::from_secs(10));
        c.rewind(Duration::from_secs(30));
        assert_eq!(c.t(), t0 - Duration::from_secs(20));
        assert_eq!(c.seen(), t1, "an earlier time does not lower seen");
        assert_eq!(c.since(Some(t1)), Some(Duration::from_secs(10)));
        assert_eq!(
            c.since(Some(t0 - Duration::from_secs(1))),
            Some(Duration::ZERO)
        );
        assert_eq!(c.since(None), None);
        assert_eq!(c.base(), t0);
    }

    #[test]
    fn the_two_jumps_differ_after_a_rewind() {
        let mut c = FuzzClock::new();
        let t0 = c.t();
        c.rewind(Duration::from_secs(5));
        let mut d = c.clone();
        c.jump_to(t0 - Duration::from_secs(2));
        assert_eq!(c.now(), t0 - Duration::from_secs(2));
        d.jump_past_seen_to(t0 - Duration::from_secs(2));
        assert_eq!(d.now(), t0);
        d.jump_past_seen_to(t0 + Duration::from_secs(1));
        assert_eq!(d.now(), t0 + Duration::from_secs(1));
        let mut e = FuzzClock::at(t0);
        e.jump_to(t0 - Duration::from_secs(1));
        assert_eq!(e.now(), t0, "never backwards");
    }

    fn depth(v: &Value) -> usize {
        match v {
            Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
            Value::Object(o) => 1 + o.values().map(depth).max().unwrap_or(0),
            _ => 0,
        }
    }

    #[test]
    fn inputs_come_from_the_bytes_within_their_bounds() {
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let bytes: Vec<u8> = (0..20_000)
            .map(|_| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng as u8
            })
            .collect();
        let mut u = Unstructured::new(&bytes);
        let mut kinds = std::collections::BTreeSet::new();
        for _ in 0..200 {
            let v = json_value(&mut u, 2).expect("bytes left");
            assert!(depth(&v) <= 2, "{v}");
            kinds.insert(match v {
                Value::Null => 0,
                Value::Bool(_) => 1,
                Value::Number(_) => 2,
                Value::String(_) => 3,
                Value::Array(_) => 4,
                Value::Object(_) => 5,
            });
        }
        assert_eq!(kinds.len(), 6, "every kind of value shows up");
        assert!(matches!(
            json_value(&mut Unstructured::new(&[]), 3),
            Ok(Value::Null)
        ));
        let items = ["a", "b"];
        for _ in 0..50 {
            assert!(items.contains(&pick(&mut u, &items).expect("pick")));
        }
        assert!(pick(&mut u, &[]).is_err());
        let same = json_value(&mut Unstructured::new(&bytes), 3).expect("value");
        assert_eq!(
            same,
            json_value(&mut Unstructured::new(&bytes), 3).expect("value")
        );
        let picked: Vec<String> = (0..64)
            .map(|_| pick_or_any(&mut u, &items).expect("pick"))
            .collect();
        assert!(picked.iter().any(|p| items.contains(&p.as_str())));
    }

    /// A machine with one deadline that `handle_timeout` moves 1 s on, or (when `broken`)
    /// leaves where it is.
    struct Ticker {
        next: Instant,
        out: crate::Outbox<()>,
        broken: bool,
    }

    impl Machine for Ticker {
        type Event = ();
        fn handle_connect(&mut self, _: crate::ConnId, _: &crate::PeerInfo, _: Instant) {}
        fn handle_frame(&mut self, _: crate::ConnId, _: crate::Frame<'_>, _: Instant) {}
        fn handle_disconnect(&mut self, _: crate::ConnId, _: Instant) {}
        fn handle_timeout(&mut self, now: Instant) {
            if now >= self.next {
                if !self.broken {
                    self.next = now + Duration::from_secs(1);
                }
                self.out.event(());
            }
        }
        fn poll_timeout(&self) -> Option<Instant> {
            Some(self.next)
        }
        fn poll_output(&mut self) -> Option<crate::Output<()>> {
            self.out.pop()
        }
    }

    struct Driver {
        clock: FuzzClock,
    }

    impl FuzzDriver for Driver {
        type M = Ticker;
        fn clock(&mut self) -> &mut FuzzClock {
            &mut self.clock
        }
        fn drain(&mut self, m: &mut Ticker) -> usize {
            std::iter::from_fn(|| m.poll_output()).count()
        }
    }

    #[test]
    fn checked_timeout_passes_a_good_machine_and_catches_a_stuck_deadline() {
        let mut d = Driver {
            clock: FuzzClock::new(),
        };
        let start = d.clock.now();
        let mut good = Ticker {
            next: start + Duration::from_secs(1),
            out: crate::Outbox::default(),
            broken: false,
        };
        checked_timeout(&mut d, &mut good); // early: a no-op
        d.clock.advance(Duration::from_secs(1));
        checked_timeout(&mut d, &mut good);
        assert_eq!(good.next, start + Duration::from_secs(2));
        let mut stuck = Ticker {
            next: start,
            out: crate::Outbox::default(),
            broken: true,
        };
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            checked_timeout(&mut d, &mut stuck);
        }));
        assert!(caught.is_err(), "a deadline that does not move is caught");
    }
}

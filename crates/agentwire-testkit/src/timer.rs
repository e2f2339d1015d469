//! Inputs for the timer-contract property tests (`agentwire_core::sim::check_timer_contract`).

use std::time::{Duration, Instant};

use agentwire_core::sim::TimerInput;
use agentwire_core::FrameBuf;
use proptest::prelude::*;

/// The one base time of a test: the real clock, read once. Only differences from it matter.
#[allow(clippy::disallowed_methods)] // the one base time of a test
pub fn t0() -> Instant {
    Instant::now()
}

/// How a run of [`timer_inputs`] mixes its inputs: the knobs the crates' timer-contract tests
/// turn. The other weights are fixed: connect 2, disconnect 1, advance 3, rewind 1,
/// `handle_timeout` 2, fire the due deadline 3.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimerMix {
    /// Weight of a frame among the inputs.
    pub frame_weight: u32,
    /// Frames and disconnects pick one of this many connections (`n % open`).
    pub conns: usize,
    /// Longest single clock advance (exclusive).
    pub max_advance: Duration,
    /// Longest single clock rewind (exclusive).
    pub max_rewind: Duration,
}

impl Default for TimerMix {
    /// Frame weight 8, 4 connections, advances below 40 s, rewinds below 20 s.
    fn default() -> Self {
        Self {
            frame_weight: 8,
            conns: 4,
            max_advance: Duration::from_secs(40),
            max_rewind: Duration::from_secs(20),
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Runs of 1 to 79 timer inputs: connects, `frames` on a connection, disconnects, clock moves
/// and timeouts, mixed as `mix` says.
///
/// ```
/// use agentwire_core::FrameBuf;
/// use agentwire_testkit::timer::{timer_inputs, TimerMix};
/// use proptest::prelude::*;
///
/// let frames = prop_oneof![Just("{}".to_owned()), ".{0,40}"].prop_map(FrameBuf::text);
/// let _inputs = timer_inputs(frames, TimerMix { frame_weight: 6, ..TimerMix::default() });
/// ```
pub fn timer_inputs(
    frames: impl Strategy<Value = FrameBuf> + 'static,
    mix: TimerMix,
) -> impl Strategy<Value = Vec<TimerInput>> {
    let conns = mix.conns.max(1);
    let one = prop_oneof![
        2 => Just(TimerInput::Connect),
        mix.frame_weight => (0usize..conns, frames).prop_map(|(n, f)| TimerInput::Frame(n, f)),
        1 => (0usize..conns).prop_map(TimerInput::Disconnect),
        1 => (0usize..conns).prop_map(TimerInput::Pong),
        3 => (0u64..millis(mix.max_advance).max(1))
            .prop_map(|ms| TimerInput::Advance(Duration::from_millis(ms))),
        1 => (0u64..millis(mix.max_rewind).max(1))
            .prop_map(|ms| TimerInput::Rewind(Duration::from_millis(ms))),
        2 => Just(TimerInput::Timeout),
        3 => Just(TimerInput::FireDue),
    ];
    proptest::collection::vec(one, 1..80)
}

#[cfg(test)]
mod tests {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    use super::*;

    #[test]
    fn inputs_stay_within_the_mix() {
        let mix = TimerMix {
            frame_weight: 5,
            conns: 3,
            max_advance: Duration::from_millis(500),
            max_rewind: Duration::from_millis(100),
        };
        let strategy = timer_inputs(Just(FrameBuf::text("x")), mix);
        let mut runner = TestRunner::deterministic();
        let mut frames = 0;
        for _ in 0..200 {
            let run = strategy.new_tree(&mut runner).expect("tree").current();
            assert!((1..80).contains(&run.len()));
            for input in run {
                match input {
                    TimerInput::Frame(n, f) => {
                        assert!(n < 3 && f.as_text() == Some("x"));
                        frames += 1;
                    }
                    TimerInput::Disconnect(n) | TimerInput::Pong(n) => assert!(n < 3),
                    TimerInput::Advance(d) => assert!(d < Duration::from_millis(500)),
                    TimerInput::Rewind(d) => assert!(d < Duration::from_millis(100)),
                    _ => {}
                }
            }
        }
        assert!(frames > 0);
        assert!(t0() <= t0());
    }
}

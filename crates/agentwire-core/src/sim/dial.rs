//! Dialing for client machines that own their reconnect policy ([`Dialer`]).

use std::time::Duration;

use super::{Sim, SimError};
use crate::{Dial, Dialer, Machine};

impl<S: Machine, C: Dialer> Sim<S, C> {
    /// Dials for every client whose [`Dialer::poll_dial`] says [`Dial::Now`] and that has
    /// no connection: connects it if `reachable(idx)`, else reports
    /// [`Dialer::handle_dial_failed`] ("unreachable"). Returns how many attempts were made.
    pub fn dial_pending(&mut self, reachable: &mut impl FnMut(usize) -> bool) -> usize {
        let mut attempts = 0;
        for idx in 0..self.clients.len() {
            // A refused attempt may ask for another one at once; bound the retries per call.
            for _ in 0..16 {
                if self.clients[idx].link.is_some()
                    || self.clients[idx].machine.poll_dial() != Dial::Now
                {
                    break;
                }
                attempts += 1;
                if reachable(idx) {
                    self.connect(idx);
                } else {
                    let now = self.now;
                    self.clients[idx]
                        .machine
                        .handle_dial_failed("unreachable", now);
                    self.flush();
                }
            }
        }
        attempts
    }

    /// As [`try_run_for`](Self::try_run_for), dialing the way a client driver does:
    /// after every step, [`dial_pending`](Self::dial_pending) with `reachable`.
    pub fn try_run_dialing_for(
        &mut self,
        d: Duration,
        mut reachable: impl FnMut(usize) -> bool,
    ) -> Result<usize, SimError> {
        self.run_until(self.now + d, |sim| {
            sim.flush();
            sim.dial_pending(&mut reachable);
        })
    }

    /// [`try_run_dialing_for`](Self::try_run_dialing_for), panicking on livelock or a
    /// stuck timer.
    pub fn run_dialing_for(&mut self, d: Duration, reachable: impl FnMut(usize) -> bool) -> usize {
        match self.try_run_dialing_for(d, reachable) {
            Ok(steps) => steps,
            Err(e) => panic!("simulation failed: {e}"),
        }
    }
}

//! The measuring window of a run ([`Window`]): where the clock, the server's CPU time and its
//! context switches stood when the scenario opened it and when it closed it, and, with
//! `--syscalls`, the syscalls perf counted in between.

use std::time::{Duration, Instant};

use crate::switches::{context_switches, ContextSwitches};
use crate::syscalls::{SyscallCountError, SyscallCounter};
use crate::threads::Subject;

/// What the window read at one of its ends.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Mark {
    /// The clock.
    pub(crate) at: Instant,
    /// The server's CPU time (user + system), when it could be read.
    pub(crate) cpu: Option<Duration>,
    /// The server's context switches, when they could be read.
    pub(crate) switches: Option<ContextSwitches>,
}

impl Mark {
    /// Reads the clock and `subject`'s figures (none without a subject).
    fn read(subject: Option<Subject>) -> Self {
        let cpu = subject.and_then(|s| match s {
            Subject::Process(pid) => crate::cpu::cpu_time(pid).ok(),
            Subject::Threads(name) => crate::in_process::threads_cpu_time(name).ok(),
        });
        Self {
            at: Instant::now(),
            cpu,
            switches: subject.and_then(|s| context_switches(s).ok()),
        }
    }
}

/// What a closed window measured: both ends and the syscalls counted in between.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Marks {
    /// When the scenario opened the window.
    pub(crate) start: Option<Mark>,
    /// When it closed it.
    pub(crate) stop: Option<Mark>,
    /// The server's syscalls over the window (with `--syscalls`, when perf counted them).
    pub(crate) syscalls: Option<u64>,
}

impl Marks {
    /// The server's CPU time over the window.
    pub(crate) fn cpu(&self) -> Option<Duration> {
        Some(self.stop?.cpu?.saturating_sub(self.start?.cpu?))
    }

    /// The server's context switches over the window.
    pub(crate) fn switches(&self) -> Option<ContextSwitches> {
        Some(self.stop?.switches?.since(&self.start?.switches?))
    }
}

/// The window of one run; opening it with `--syscalls` starts perf, closing it stops perf,
/// dropping it kills a perf still running.
#[derive(Debug, Default)]
pub(crate) struct Window {
    marks: Marks,
    counter: Option<SyscallCounter>,
}

impl Window {
    /// Opens the window on `subject` (and, when `syscalls`, first attaches perf to it, so
    /// the count covers the whole window); returns when it opened.
    pub(crate) fn open(&mut self, subject: Option<Subject>, syscalls: bool) -> Instant {
        self.counter = None;
        if syscalls {
            self.counter = subject.and_then(|s| {
                let perf = crate::syscalls::usable()?;
                SyscallCounter::start(perf, s)
                    .map_err(|e| left_out(&e))
                    .ok()
            });
        }
        let mark = Mark::read(subject);
        self.marks = Marks {
            start: Some(mark),
            ..Marks::default()
        };
        mark.at
    }

    /// Closes the window: reads `subject`'s figures, then stops perf.
    pub(crate) fn close(&mut self, subject: Option<Subject>) {
        self.marks.stop = Some(Mark::read(subject));
        if let Some(counter) = self.counter.take() {
            self.marks.syscalls = counter.stop().map_err(|e| left_out(&e)).ok();
        }
    }

    /// What the window measured so far.
    pub(crate) fn marks(&self) -> Marks {
        self.marks
    }
}

/// Says on stderr why this run's syscalls are left out.
fn left_out(e: &SyscallCountError) {
    eprintln!("agentwire-load: counting the server's syscalls: {e}; left out of this scenario");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_measures_this_process_between_its_ends() {
        let me = Some(Subject::Process(std::process::id()));
        let mut window = Window::default();
        assert!(window.marks().cpu().is_none());
        let opened = window.open(me, false);
        std::thread::sleep(Duration::from_millis(1));
        window.close(me);
        let marks = window.marks();
        assert_eq!(marks.start.map(|m| m.at), Some(opened));
        assert!(marks.stop.unwrap().at > opened);
        assert!(marks.cpu().is_some());
        assert!(marks.switches().unwrap().voluntary > 0);
        assert_eq!(marks.syscalls, None);
    }

    #[test]
    fn without_a_subject_only_the_clock_is_read() {
        let mut window = Window::default();
        window.open(None, true);
        window.close(None);
        let marks = window.marks();
        assert!(marks.start.is_some() && marks.stop.is_some());
        assert_eq!(marks.cpu(), None);
        assert_eq!(marks.switches(), None);
        assert_eq!(marks.syscalls, None);
    }
}

//! A server's context switches (its wake-ups), from `voluntary_ctxt_switches` and
//! `nonvoluntary_ctxt_switches` of each thread's `/proc/.../task/<tid>/status`, summed over
//! the threads of a [`Subject`]. A thread that ends inside the measuring window takes its
//! count with it: the window's difference misses what it did there.

use std::io;

use serde::Serialize;

use crate::threads::Subject;

/// Context switches of one thread or a sum of threads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ContextSwitches {
    /// The thread gave up the CPU itself (it blocked: waiting for input, a lock, a sleep).
    pub voluntary: u64,
    /// The scheduler took the CPU from it (its time slice ended, another thread woke).
    pub involuntary: u64,
}

impl ContextSwitches {
    /// Voluntary plus involuntary.
    pub fn total(&self) -> u64 {
        self.voluntary.saturating_add(self.involuntary)
    }

    /// What happened between `earlier` and `self`, each count at least zero (a thread that
    /// ended in between can make a sum smaller).
    pub fn since(&self, earlier: &Self) -> Self {
        Self {
            voluntary: self.voluntary.saturating_sub(earlier.voluntary),
            involuntary: self.involuntary.saturating_sub(earlier.involuntary),
        }
    }

    /// The two counts in the text of a `/proc/<pid>/status` (or `task/<tid>/status`) file.
    pub fn from_status(status: &str) -> io::Result<Self> {
        let field = |key: &str| -> io::Result<u64> {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
                .and_then(|v| v.trim().parse().ok())
                .ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("no number for {key} in /proc status"),
                    )
                })
        };
        Ok(Self {
            voluntary: field("voluntary_ctxt_switches")?,
            involuntary: field("nonvoluntary_ctxt_switches")?,
        })
    }
}

impl std::ops::Add for ContextSwitches {
    type Output = Self;

    fn add(self, other: Self) -> Self {
        Self {
            voluntary: self.voluntary.saturating_add(other.voluntary),
            involuntary: self.involuntary.saturating_add(other.involuntary),
        }
    }
}

/// The context switches so far of every thread of `subject`. A thread that ends between the
/// listing and its read is left out.
pub fn context_switches(subject: Subject) -> io::Result<ContextSwitches> {
    let mut total = ContextSwitches::default();
    for thread in subject.threads()? {
        if let Ok(status) = std::fs::read_to_string(thread.dir.join("status")) {
            total = total + ContextSwitches::from_status(&status)?;
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines of a real `/proc/<pid>/task/<tid>/status` around the two counts.
    const STATUS: &str = "Name:\tagentwire-load\nUmask:\t0022\nState:\tS (sleeping)\n\
        Tgid:\t4242\nPid:\t4243\nVmRSS:\t   10240 kB\nThreads:\t5\n\
        Cpus_allowed_list:\t0-1\nvoluntary_ctxt_switches:\t15321\n\
        nonvoluntary_ctxt_switches:\t208\n";

    #[test]
    fn reads_both_counts_of_a_status_file() {
        let s = ContextSwitches::from_status(STATUS).unwrap();
        assert_eq!(
            s,
            ContextSwitches {
                voluntary: 15321,
                involuntary: 208
            }
        );
        assert_eq!(s.total(), 15529);
    }

    #[test]
    fn a_status_without_the_counts_is_an_error() {
        for bad in [
            "Name:\tx\n",
            "voluntary_ctxt_switches:\t12\n",
            "voluntary_ctxt_switches:\tmany\nnonvoluntary_ctxt_switches:\t1\n",
            "voluntary_ctxt_switches:\t-3\nnonvoluntary_ctxt_switches:\t1\n",
        ] {
            let e = ContextSwitches::from_status(bad).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{bad:?}");
        }
    }

    #[test]
    fn a_window_never_goes_below_zero() {
        let before = ContextSwitches {
            voluntary: 10,
            involuntary: 5,
        };
        let after = ContextSwitches {
            voluntary: 14,
            involuntary: 3,
        };
        assert_eq!(
            after.since(&before),
            ContextSwitches {
                voluntary: 4,
                involuntary: 0
            }
        );
    }

    #[test]
    fn this_process_switches_when_it_blocks() {
        let me = Subject::Process(std::process::id());
        let before = context_switches(me).unwrap();
        // A sleeping thread gives up the CPU: a voluntary switch.
        std::thread::sleep(std::time::Duration::from_millis(1));
        let after = context_switches(me).unwrap();
        assert!(after.since(&before).voluntary > 0);
    }
}

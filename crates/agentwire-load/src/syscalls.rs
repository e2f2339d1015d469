//! A server's syscalls over the measuring window, counted by `perf stat -x, -e
//! raw_syscalls:sys_enter` attached to its threads ([`SyscallCounter`]): started when the
//! window opens (the window waits until perf has opened a counter on each thread), stopped
//! with SIGINT when it closes, its CSV line parsed ([`parse_count`]). Only with `--syscalls`:
//! it needs `perf` (Debian package `linux-perf`) and a `perf_event_paranoid` that lets this
//! user count a tracepoint on the server, and each counted syscall costs the server the
//! tracepoint's time. [`usable`] tries perf once per process and says once why it cannot.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::threads::Subject;

/// The tracepoint counted: one hit per syscall entry.
pub const EVENT: &str = "raw_syscalls:sys_enter";

/// How long perf may take to attach to the server's threads, and to stop after SIGINT.
const WAIT: Duration = Duration::from_secs(5);

/// How often a bounded wait on perf looks again.
const POLL: Duration = Duration::from_millis(1);

/// How long the count of perf's open counters must stay the same, once it has opened one,
/// before the counter takes perf as attached when the server has fewer threads than it listed
/// (one ended in between).
const SETTLE: Duration = Duration::from_millis(50);

/// Why syscalls could not be counted (the column is then left out, never zero).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SyscallCountError {
    /// `perf` is not installed.
    #[error(
        "`perf` was not found on PATH (nor in /usr/sbin, /usr/local/sbin, /sbin): install the \
         Debian package `linux-perf`"
    )]
    NotInstalled,
    /// perf could not be started, or signalled.
    #[error("running {what}: {source}")]
    Run {
        /// What was run.
        what: &'static str,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// perf ended before counting, saying why (no permission, no such tracepoint, ...).
    #[error("perf stat refused to count {EVENT}: {0}")]
    Refused(String),
    /// perf neither attached nor ended within the bound.
    #[error("perf stat did not attach to the server within {} s", WAIT.as_secs())]
    AttachTimeout,
    /// perf did not end within the bound after SIGINT (it is killed).
    #[error("perf stat did not stop within {} s of SIGINT", WAIT.as_secs())]
    StopTimeout,
    /// perf printed `<not supported>` for the event.
    #[error("perf stat reports {EVENT} as <not supported> on this kernel")]
    NotSupported,
    /// perf printed `<not counted>`: the counter never ran (the threads never ran while it
    /// was enabled).
    #[error("perf stat reports {EVENT} as <not counted>")]
    NotCounted,
    /// perf's output had no count for the event.
    #[error("no {EVENT} count in perf stat's output: {0:?}")]
    NoCount(String),
    /// The server's threads could not be listed.
    #[error("listing the server's threads: {0}")]
    Threads(#[source] std::io::Error),
    /// The server has no thread to count (an in-process server whose runtime has not
    /// started, or a process that ended).
    #[error("the server has no thread to count")]
    NoThreads,
}

/// The count of [`EVENT`] in the CSV output of `perf stat -x,` (`COUNT,UNIT,EVENT,RUN TIME,
/// PERCENT,...`); the other lines (errors, comments, other events) are skipped.
pub fn parse_count(output: &str) -> Result<u64, SyscallCountError> {
    let mut fields = output
        .lines()
        .map(|l| l.split(',').map(str::trim).collect::<Vec<_>>())
        .filter(|f| f.get(2) == Some(&EVENT));
    let Some(line) = fields.next() else {
        return Err(SyscallCountError::NoCount(excerpt(output)));
    };
    match line[0] {
        "<not supported>" => Err(SyscallCountError::NotSupported),
        "<not counted>" => Err(SyscallCountError::NotCounted),
        count => count
            .parse()
            .map_err(|_| SyscallCountError::NoCount(excerpt(output))),
    }
}

/// The first lines of perf's output, for an error message.
fn excerpt(output: &str) -> String {
    let text: Vec<&str> = output
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(3)
        .collect();
    let mut text = text.join(" / ");
    if let Some((cut, _)) = text.char_indices().nth(300) {
        text.truncate(cut);
    }
    text
}

/// The `perf` program when it can count [`EVENT`]: found and tried once per process (`perf
/// stat` of `true`); when it cannot, says why once on stderr and returns `None`.
pub fn usable() -> Option<&'static Path> {
    static PERF: OnceLock<Option<PathBuf>> = OnceLock::new();
    PERF.get_or_init(|| match try_perf() {
        Ok(perf) => Some(perf),
        Err(e) => {
            eprintln!("agentwire-load: --syscalls: {e}; the syscalls column is left out");
            None
        }
    })
    .as_deref()
}

/// Finds perf and counts the syscalls of `true` with it.
fn try_perf() -> Result<PathBuf, SyscallCountError> {
    let perf = crate::server::find_program("perf", "linux-perf")
        .map_err(|_| SyscallCountError::NotInstalled)?;
    // A counter of its own, so that a perf that does not end is killed on the way out.
    let mut trial = SyscallCounter {
        child: perf_stat(&perf, &["--".into(), "true".into()])?,
    };
    if !wait_bounded(&mut trial.child) {
        return Err(SyscallCountError::StopTimeout);
    }
    parse_count(&stderr_of(&mut trial.child, true)).map_err(|e| match e {
        SyscallCountError::NoCount(text) => SyscallCountError::Refused(text),
        other => other,
    })?;
    Ok(perf)
}

/// A `perf stat` counting [`EVENT`] on a server's threads; dropping it kills perf.
#[derive(Debug)]
pub struct SyscallCounter {
    child: Child,
}

impl SyscallCounter {
    /// Starts `perf` on `subject`'s threads (`-p PID` for a process, `-t TID,...` for named
    /// threads) and waits, at most 5 s, until it has opened a counter on each of them.
    pub fn start(perf: &Path, subject: Subject) -> Result<Self, SyscallCountError> {
        let threads = subject.threads().map_err(SyscallCountError::Threads)?;
        if threads.is_empty() {
            return Err(SyscallCountError::NoThreads);
        }
        let target = match subject {
            Subject::Process(pid) => ["-p".into(), pid.to_string()],
            Subject::Threads(_) => {
                let tids: Vec<String> = threads.iter().map(|t| t.tid.to_string()).collect();
                ["-t".into(), tids.join(",")]
            }
        };
        let mut counter = Self {
            child: perf_stat(perf, &target)?,
        };
        counter.attached(threads.len())?;
        Ok(counter)
    }

    /// Waits until perf has `threads` counters open (or, once it has one, until their
    /// number stays the same for [`SETTLE`]), or has ended, or [`WAIT`] has passed.
    fn attached(&mut self, threads: usize) -> Result<(), SyscallCountError> {
        let deadline = Instant::now() + WAIT;
        let fds = PathBuf::from(format!("/proc/{}/fd", self.child.id()));
        let mut seen = (0, Instant::now());
        loop {
            if let Ok(Some(_)) = self.child.try_wait() {
                let output = stderr_of(&mut self.child, true);
                return Err(SyscallCountError::Refused(excerpt(&output)));
            }
            let open = perf_events(&fds);
            if open >= threads {
                return Ok(());
            }
            if open != seen.0 {
                seen = (open, Instant::now());
            } else if open > 0 && seen.1.elapsed() >= SETTLE {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(SyscallCountError::AttachTimeout);
            }
            std::thread::sleep(POLL);
        }
    }

    /// Stops perf with SIGINT and returns the syscalls it counted; waits at most 5 s for it
    /// to end.
    pub fn stop(mut self) -> Result<u64, SyscallCountError> {
        let signalled = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|source| SyscallCountError::Run {
                what: "kill -INT (stopping perf stat)",
                source,
            })?;
        if !signalled.success() {
            return Err(SyscallCountError::Run {
                what: "kill -INT (stopping perf stat)",
                source: std::io::Error::other(format!("{signalled}")),
            });
        }
        if !wait_bounded(&mut self.child) {
            return Err(SyscallCountError::StopTimeout);
        }
        parse_count(&stderr_of(&mut self.child, true))
    }
}

impl Drop for SyscallCounter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `perf stat -x, -e EVENT` with `target` (its threads, or a command to run), its
/// CSV output on a piped stderr.
fn perf_stat(perf: &Path, target: &[String]) -> Result<Child, SyscallCountError> {
    Command::new(perf)
        .args(["stat", "-x,", "-e", EVENT])
        .args(target)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| SyscallCountError::Run {
            what: "perf stat",
            source,
        })
}

/// Waits at most [`WAIT`] for `child` to end; whether it did.
fn wait_bounded(child: &mut Child) -> bool {
    let deadline = Instant::now() + WAIT;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => return true,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(POLL),
            _ => return false,
        }
    }
}

/// What `child` wrote on its piped stderr, read only once it has `ended` (the pipe is then
/// at its end; a running child could keep a read waiting).
fn stderr_of(child: &mut Child, ended: bool) -> String {
    let mut text = String::new();
    if ended {
        if let Some(mut err) = child.stderr.take() {
            let _ = err.read_to_string(&mut text);
        }
    }
    text
}

/// How many perf event counters the process whose fd folder is `fds` has open.
fn perf_events(fds: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(fds) else {
        return 0;
    };
    entries
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.as_os_str() == "anon_inode:[perf_event]")
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_count_of_perf_stat_csv() {
        let out = "129146,,raw_syscalls:sys_enter,1300731,100.00,,\n";
        assert_eq!(parse_count(out).unwrap(), 129_146);
        // Other lines around it (a comment, an empty line, another event) are skipped.
        let out = "# started on Wed Nov 25 12:22:01 2026\n\n\
                   1415,,raw_syscalls:sys_exit,10573922,100.00,,\n\
                   1416,,raw_syscalls:sys_enter,10573922,100.00,,\n";
        assert_eq!(parse_count(out).unwrap(), 1416);
    }

    #[test]
    fn not_supported_and_not_counted_are_not_zero() {
        let out = "<not supported>,,raw_syscalls:sys_enter,0,100.00,,\n";
        assert!(matches!(
            parse_count(out),
            Err(SyscallCountError::NotSupported)
        ));
        let out = "<not counted>,,raw_syscalls:sys_enter,0,100.00,,\n";
        assert!(matches!(
            parse_count(out),
            Err(SyscallCountError::NotCounted)
        ));
    }

    #[test]
    fn an_error_or_garbage_has_no_count() {
        for out in [
            "",
            "event syntax error: 'raw_syscalls:sys_enter'\n \\___ unknown tracepoint\n",
            "Error:\nNo permission to enable raw_syscalls:sys_enter event.\n",
            "12x,,raw_syscalls:sys_enter,100,100.00,,\n",
            "-5,,raw_syscalls:sys_enter,100,100.00,,\n",
            "raw_syscalls:sys_enter\n",
        ] {
            assert!(
                matches!(parse_count(out), Err(SyscallCountError::NoCount(_))),
                "{out:?}"
            );
        }
        let long = "x".repeat(10_000);
        let Err(SyscallCountError::NoCount(text)) = parse_count(&long) else {
            panic!("no count expected");
        };
        assert!(text.len() <= 300);
    }

    /// Only where perf works (it is optional, and CI does not install it).
    #[test]
    fn counts_the_syscalls_of_named_threads_when_perf_works() {
        let Some(perf) = usable() else {
            eprintln!("skipping: perf cannot count syscalls here");
            return;
        };
        let (go, wait) = std::sync::mpsc::channel::<u32>();
        let (done, finished) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::Builder::new()
            .name("aw-test-sysc".into())
            .spawn(move || {
                // The thread names itself when it starts: say so, then wait for the count.
                let _ = done.send(());
                let n = wait.recv().unwrap_or(0);
                // Each read of /proc/self/stat is several syscalls (open, read, close).
                for _ in 0..n {
                    let _ = std::fs::read_to_string("/proc/self/stat");
                }
                let _ = done.send(());
            })
            .unwrap();
        finished.recv().unwrap();
        let counter = SyscallCounter::start(perf, Subject::Threads("aw-test-sysc")).unwrap();
        go.send(200).unwrap();
        finished.recv().unwrap();
        let count = counter.stop().unwrap();
        worker.join().unwrap();
        assert!(count >= 600, "{count}");
    }
}

//! Whose figures are the server's ([`Subject`]): every thread of a server process, or the
//! threads of this process with one name (an in-process server's runtime), as `/proc` lists
//! them.

use std::io;
use std::path::PathBuf;

/// The threads a measuring window reads the CPU time, context switches and syscalls of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Subject {
    /// Every thread of the server process with this id.
    Process(u32),
    /// The threads of this process named so (`/proc/self/task/*/comm`): an in-process
    /// server's runtime.
    Threads(&'static str),
}

/// One thread of a [`Subject`]: its id and its `/proc/.../task/<tid>` folder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Thread {
    /// The thread id (what `perf stat -t` takes).
    pub tid: u32,
    /// Its `/proc` folder (`stat`, `status`, `comm`).
    pub dir: PathBuf,
}

impl Subject {
    /// The subject's threads now. A thread that ends while they are listed is left out.
    pub fn threads(&self) -> io::Result<Vec<Thread>> {
        let (tasks, name) = match self {
            Self::Process(pid) => (format!("/proc/{pid}/task"), None),
            Self::Threads(name) => ("/proc/self/task".to_owned(), Some(*name)),
        };
        let mut threads = Vec::new();
        for task in std::fs::read_dir(tasks)? {
            let dir = task?.path();
            let Some(tid) = dir
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.parse().ok())
            else {
                continue;
            };
            if let Some(name) = name {
                // A thread may end between the listing and this read: skip it.
                let Ok(comm) = std::fs::read_to_string(dir.join("comm")) else {
                    continue;
                };
                if comm.trim_end() != name {
                    continue;
                }
            }
            threads.push(Thread { tid, dir });
        }
        Ok(threads)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_lists_its_threads_and_a_name_only_its_own() {
        let (done, wait) = std::sync::mpsc::channel::<()>();
        let (started, running) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::Builder::new()
            .name("aw-test-list".into())
            .spawn(move || {
                // The thread names itself when it starts: say so once named.
                let _ = started.send(());
                let _ = wait.recv();
            })
            .unwrap();
        running.recv().unwrap();
        let all = Subject::Process(std::process::id()).threads().unwrap();
        assert!(all.len() >= 2, "{all:?}");
        assert!(all.iter().any(|t| t.tid == std::process::id()));
        let named = Subject::Threads("aw-test-list").threads().unwrap();
        assert_eq!(named.len(), 1, "{named:?}");
        assert_ne!(named[0].tid, std::process::id());
        assert!(all.iter().any(|t| t.tid == named[0].tid));
        assert!(Subject::Threads("no-such-thread")
            .threads()
            .unwrap()
            .is_empty());
        drop(done);
        worker.join().unwrap();
    }

    #[test]
    fn a_missing_process_is_an_error() {
        // Pids are below 2^22 on Linux.
        assert!(Subject::Process(u32::MAX).threads().is_err());
    }
}

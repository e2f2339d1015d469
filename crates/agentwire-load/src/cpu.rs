//! A server process's CPU time and resident memory, read from `/proc/<pid>/stat` and
//! `/proc/<pid>/status` (Linux).

use std::io;
use std::time::Duration;

/// Clock ticks per second of `/proc/<pid>/stat`'s `utime` and `stime` (Linux's `USER_HZ`,
/// 100 on every architecture Linux ships; the resolution of the CPU figures is 10 ms).
const TICKS_PER_SEC: u64 = 100;

/// User plus system CPU time used so far by every thread of process `pid`.
pub fn cpu_time(pid: u32) -> io::Result<Duration> {
    stat_cpu_time(&std::fs::read_to_string(format!("/proc/{pid}/stat"))?)
}

/// User plus system CPU time in the text of a `/proc/<pid>/stat` (or
/// `/proc/<pid>/task/<tid>/stat`, one thread's) file.
pub fn stat_cpu_time(stat: &str) -> io::Result<Duration> {
    // The command name (field 2) is in parentheses and may hold spaces: count from the last ')'.
    let rest = stat
        .rfind(')')
        .map(|at| &stat[at + 1..])
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no ')' in /proc stat"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state is field 3, utime field 14, stime field 15.
    let field = |n: usize| -> io::Result<u64> {
        fields
            .get(n - 3)
            .and_then(|f| f.parse().ok())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad /proc stat field"))
    };
    let ticks = field(14)? + field(15)?;
    Ok(Duration::from_millis(ticks * 1000 / TICKS_PER_SEC))
}

/// Resident set size of process `pid`, in bytes (`VmRSS`).
pub fn rss_bytes(pid: u32) -> io::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no VmRSS in /proc status"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let pid = std::process::id();
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        assert!(x != 1);
        cpu_time(pid).unwrap();
        assert!(rss_bytes(pid).unwrap() > 0);
    }
}

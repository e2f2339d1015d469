//! The transport's clock reads: monotonic time (tokio's) and, for re-anchoring machines'
//! wall clocks, the system's wall clock.

/// The current time, from tokio's clock.
///
/// Every `now` handed to a machine and every deadline the transport computes comes from
/// here, so tests that run with `#[tokio::test(start_paused = true)]` drive the machines'
/// time too.
pub(crate) fn now() -> std::time::Instant {
    tokio::time::Instant::now().into_std()
}

/// Converts a machine deadline into tokio's clock.
pub(crate) fn to_tokio(at: std::time::Instant) -> tokio::time::Instant {
    tokio::time::Instant::from_std(at)
}

/// The system's wall clock in milliseconds after the Unix epoch (0 before it, saturating):
/// the default [`WallSource`](crate::WallSource), the transport's one wall-clock read.
pub(crate) fn system_unix_ms() -> u64 {
    #[allow(clippy::disallowed_methods)] // the transport's one wall-clock read
    let wall = std::time::SystemTime::now();
    wall.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

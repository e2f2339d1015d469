//! The transport's one clock read.

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

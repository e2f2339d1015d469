//! Connection identifiers.

use std::collections::HashMap;
use std::fmt;
use std::hash::BuildHasherDefault;

use crate::Id128Hasher;

/// A `HashMap` keyed by [`ConnId`] with the multiplicative [`Id128Hasher`]: connection ids
/// come from the driver's counter, never from a peer, so SipHash's flooding resistance
/// buys nothing on a table every frame looks up.
pub type ConnMap<V> = HashMap<ConnId, V, BuildHasherDefault<Id128Hasher>>;

/// Identifies one connection (one WebSocket) for the lifetime of a driver.
///
/// Assigned by the driver (the tokio transport or the simulation harness), never reused:
/// a client machine that reconnects sees a new `ConnId` for every attempt, so outputs
/// addressed to a stale connection can be recognised and dropped.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(u64);

impl ConnId {
    /// Wraps a raw id. Drivers allocate these from a counter.
    pub const fn new(raw: u64) -> Self {
        Self(raw)
    }

    /// The raw id, e.g. for logs and tracing spans.
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Debug for ConnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "conn#{}", self.0)
    }
}

impl fmt::Display for ConnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_show_the_raw_id() {
        let c = ConnId::new(7);
        assert_eq!(c.get(), 7);
        assert_eq!(format!("{c:?}"), "conn#7");
        assert_eq!(c.to_string(), "7");
    }
}

//! [`BusStats`]: the counters a test or a metrics exporter reads.

/// Counters a test or a metrics exporter can read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BusStats {
    /// Publishes accepted.
    pub publishes: u64,
    /// `sendMessage` params blobs encoded: one per publish however many subscribers it has.
    pub params_encoded: u64,
    /// Requests sent to subscribers.
    pub hops_sent: u64,
    /// Deliveries finished.
    pub completed: u64,
    /// Subscribers skipped because their delivery queue was full
    /// ([`DropReason::SubscriberOverloaded`](crate::DropReason::SubscriberOverloaded)).
    pub dropped_subscriber_overloaded: u64,
    /// Publishes refused because their publisher had too many in flight
    /// ([`DropReason::PublisherOverloaded`](crate::DropReason::PublisherOverloaded)).
    pub dropped_publisher_overloaded: u64,
    /// Times the bus paused reading a publisher (flow control,
    /// [`Limits::max_backlog_per_publisher`](crate::Limits::max_backlog_per_publisher)).
    pub pauses: u64,
    /// Most deliveries in flight at once.
    pub peak_deliveries: usize,
    /// Bytes of `sendMessage` params the deliveries in flight hold now.
    pub queued_bytes: usize,
    /// Most bytes of params held at once.
    pub peak_queued_bytes: usize,
}

//! Publishes in flight: each one's chain of subscribers, every subscriber's inbox and
//! in-flight window, the requests sent to subscribers, and the hop timers.
//!
//! The deliveries live in a slab (a vector of slots and a list of the free ones), named by
//! a [`Key`]: the slot and the delivery's id, so a key outliving its delivery (a hop timer,
//! a late reply) finds nothing once the slot is reused. An ended delivery's params and hop
//! buffers are kept for the next publish, at most [`SPARE_BUFFERS`] of each and only while
//! small ([`SPARE_PARAMS_BYTES`], [`SPARE_HOPS`]), so a busy bus allocates neither per publish
//! and an idle one holds little.

use std::collections::hash_map::Entry;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

use agentwire_core::{ConnId, ConnMap, DeadlineQueue, FrameBuf, Id128, Id128Map, IdGen, Outbox};

use super::flow::Flow;
use super::stats::BusStats;
use crate::config::BusConfig;
use crate::error::ProtocolError;
use crate::event::{BusEvent, DeliveryId, HopOutcome};
use crate::message::{Id, SendMessageResult};

/// Ended deliveries' buffers kept for reuse, of each kind.
const SPARE_BUFFERS: usize = 64;
/// Params buffers larger than this are freed, not kept.
const SPARE_PARAMS_BYTES: usize = 4096;
/// Hop lists longer than this are freed, not kept.
const SPARE_HOPS: usize = 256;

/// Lanes an inbox keeps when they empty (a lane past this many is dropped once empty).
const KEPT_LANES: usize = 8;

/// A delivery in flight as the bus names it internally: its slot and its id. Slots are
/// reused, ids never, so a key whose delivery ended finds nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Key {
    slot: usize,
    /// The delivery's id, as its events report it.
    pub(super) id: DeliveryId,
}

/// A hop's timeout: live while delivery `.0` is still at hop `.1`.
type HopTimer = (Key, usize);

/// Who gets the aggregated result.
#[derive(Debug, Clone)]
pub(super) enum Origin {
    /// A notification or [`Bus::publish`](super::Bus::publish): nobody is answered.
    Silent,
    /// A request on the publisher's connection.
    Request(Id),
    /// Entry `slot` of batch `batch`, answering request `id`.
    Batch { batch: u64, slot: usize, id: Id },
}

impl Origin {
    /// The origin of a message on its own (not in a batch) with this id.
    pub(super) fn direct(id: Option<Id>) -> Self {
        id.map_or(Self::Silent, Self::Request)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HopState {
    Reserved,
    Overloaded,
}

#[derive(Debug)]
struct Hop {
    conn: ConnId,
    state: HopState,
}

/// One publish in flight: the explicit record of its chain (STYLE.md 5.8).
#[derive(Debug)]
pub(super) struct Delivery {
    id: DeliveryId,
    pub(super) publisher: Option<ConnId>,
    pub(super) origin: Origin,
    /// `{"topic":..,"payload":..}`, encoded once and reused for every subscriber.
    pub(super) params: Vec<u8>,
    hops: Vec<Hop>,
    /// Index of the current hop (`hops.len()` once past the end).
    pos: usize,
    /// The current hop's subscriber, kept beside `pos` so that a pump, which asks this of
    /// every delivery it scans, does not read the hop list (one cache miss per delivery).
    current: Option<ConnId>,
    /// The request id of the current hop, once sent.
    sent: Option<Id128>,
    pub(super) result: SendMessageResult,
}

impl Delivery {
    /// Whether the current hop is `conn`'s.
    fn at(&self, conn: ConnId) -> bool {
        self.current == Some(conn)
    }

    /// Moves to the next hop.
    fn advance(&mut self) {
        self.pos += 1;
        self.current = self.hops.get(self.pos).map(|h| h.conn);
    }
}

/// One subscriber's deliveries, in one lane per publisher.
#[derive(Debug, Default)]
struct Inbox {
    /// Each publisher's deliveries reserved for this subscriber, in publish order (a lane's
    /// publisher `None`: [`Bus::publish`](super::Bus::publish)). A pump looks at each lane's first delivery not
    /// yet sent, so it never walks past a blocked publisher's backlog.
    lanes: Vec<Lane>,
    /// Deliveries reserved, in every lane.
    len: usize,
    /// Requests sent to it and not yet answered.
    in_flight: usize,
}

/// One publisher's deliveries in an inbox. The ones sent (in flight to this subscriber) are
/// a prefix: a lane is sent in order, and only its first unsent delivery may go next.
#[derive(Debug)]
struct Lane {
    publisher: Option<ConnId>,
    keys: VecDeque<Key>,
    /// How many of `keys`, from the front, are in flight.
    sent: usize,
}

impl Lane {
    /// The first delivery not yet sent.
    fn next(&self) -> Option<Key> {
        self.keys.get(self.sent).copied()
    }
}

impl Inbox {
    /// The lane of `publisher`: a short list searched from the newest (an inbox holds the
    /// lanes of the publishers with deliveries queued here, few in practice).
    fn lane(&mut self, publisher: Option<ConnId>) -> Option<usize> {
        self.lanes.iter().rposition(|l| l.publisher == publisher)
    }

    fn push(&mut self, key: Key, publisher: Option<ConnId>) {
        let at = match self.lane(publisher) {
            Some(at) => at,
            None => match self.lanes.iter().position(|l| l.keys.is_empty()) {
                // A kept empty lane takes the new publisher, with its buffer.
                Some(at) => {
                    self.lanes[at].publisher = publisher;
                    self.lanes[at].sent = 0;
                    at
                }
                None => {
                    self.lanes.push(Lane {
                        publisher,
                        keys: VecDeque::new(),
                        sent: 0,
                    });
                    self.lanes.len() - 1
                }
            },
        };
        self.lanes[at].keys.push_back(key);
        self.len += 1;
    }

    fn remove(&mut self, key: Key, publisher: Option<ConnId>) -> bool {
        let Some(at) = self.lane(publisher) else {
            return false;
        };
        let lane = &mut self.lanes[at];
        let Some(i) = lane.keys.iter().position(|k| *k == key) else {
            return false;
        };
        lane.keys.remove(i);
        if i < lane.sent {
            lane.sent -= 1;
        }
        self.len -= 1;
        // An emptied lane is kept (with its buffer) while the inbox has few, so a steady
        // publisher allocates nothing per delivery; beyond that it goes.
        if lane.keys.is_empty() && self.lanes.len() > KEPT_LANES {
            self.lanes.swap_remove(at);
        }
        true
    }
}

/// Where [`Deliveries::step`] left a delivery.
// `Done` carries the whole delivery out of the slab once per finished chain; boxing it would
// allocate once per publish to save a copy of a few hundred bytes.
#[allow(clippy::large_enum_variant)]
pub(super) enum Step {
    /// Its current hop awaits subscriber `.0`, whose inbox should be pumped.
    Waiting(ConnId),
    /// Its chain ended: the delivery, removed, for its publisher to be answered.
    Done(Delivery),
    /// No such delivery.
    Gone,
}

/// Deliveries in flight, by slot; a free slot is `None` and listed in `free`.
#[derive(Debug, Default)]
struct Slab {
    slots: Vec<Option<Delivery>>,
    free: Vec<usize>,
    live: usize,
}

impl Slab {
    fn get(&self, key: Key) -> Option<&Delivery> {
        self.slots
            .get(key.slot)?
            .as_ref()
            .filter(|d| d.id == key.id)
    }

    fn get_mut(&mut self, key: Key) -> Option<&mut Delivery> {
        self.slots
            .get_mut(key.slot)?
            .as_mut()
            .filter(|d| d.id == key.id)
    }

    fn insert(&mut self, d: Delivery) -> Key {
        let id = d.id;
        self.live += 1;
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot] = Some(d);
                slot
            }
            None => {
                self.slots.push(Some(d));
                self.slots.len() - 1
            }
        };
        Key { slot, id }
    }

    fn remove(&mut self, key: Key) -> Option<Delivery> {
        let entry = self.slots.get_mut(key.slot)?;
        if entry.as_ref().is_none_or(|d| d.id != key.id) {
            return None;
        }
        self.live -= 1;
        self.free.push(key.slot);
        entry.take()
    }
}

/// Every publish in flight, every subscriber's inbox, the requests sent to subscribers and
/// their timers.
#[derive(Debug)]
pub(super) struct Deliveries {
    by_key: Slab,
    next: u64,
    /// Requests sent to subscribers: id → (subscriber, delivery).
    requests: Id128Map<(ConnId, Key)>,
    /// Per open connection.
    inboxes: ConnMap<Inbox>,
    /// Hop deadlines: one timeout length from a monotonic clock, so they come in order.
    hop_timers: DeadlineQueue<HopTimer>,
    timeout: Duration,
    /// Deliveries in flight per subscriber (at least 1).
    window: usize,
    /// Deliveries reserved per subscriber.
    max_inbox: usize,
    /// A pump's candidates: each lane's next delivery whose hop is this one.
    scratch_heads: Vec<(DeliveryId, usize)>,
    /// Ended deliveries' params buffers, cleared, for the next publishes.
    spare_params: Vec<Vec<u8>>,
    /// Ended deliveries' hop lists, cleared, for the next publishes.
    spare_hops: Vec<Vec<Hop>>,
}

impl Deliveries {
    pub(super) fn new(config: &BusConfig) -> Self {
        Self {
            by_key: Slab::default(),
            next: 0,
            requests: Id128Map::default(),
            inboxes: ConnMap::default(),
            hop_timers: DeadlineQueue::new(),
            timeout: config.delivery_timeout,
            window: config.max_in_flight_per_subscriber.max(1),
            max_inbox: config.limits.max_pending_per_subscriber,
            scratch_heads: Vec::new(),
            spare_params: Vec::new(),
            spare_hops: Vec::new(),
        }
    }

    /// Deliveries whose chain has not ended.
    pub(super) fn len(&self) -> usize {
        self.by_key.live
    }

    /// An empty buffer for a publish's params (an ended delivery's, when one is kept).
    pub(super) fn params_buffer(&mut self) -> Vec<u8> {
        self.spare_params.pop().unwrap_or_default()
    }

    /// Keeps the buffers of an ended delivery for the next publishes, while few and small.
    pub(super) fn recycle(&mut self, d: Delivery) {
        let Delivery {
            mut params,
            mut hops,
            ..
        } = d;
        if self.spare_params.len() < SPARE_BUFFERS && params.capacity() <= SPARE_PARAMS_BYTES {
            params.clear();
            self.spare_params.push(params);
        }
        if self.spare_hops.len() < SPARE_BUFFERS && hops.capacity() <= SPARE_HOPS {
            hops.clear();
            self.spare_hops.push(hops);
        }
    }

    /// A new connection, with an empty inbox.
    pub(super) fn open(&mut self, conn: ConnId) {
        self.inboxes.insert(conn, Inbox::default());
    }

    /// The connection is gone: the deliveries whose current hop is its own, to be skipped.
    pub(super) fn close(&mut self, conn: ConnId) -> Vec<Key> {
        let Some(inbox) = self.inboxes.remove(&conn) else {
            return Vec::new();
        };
        inbox
            .lanes
            .into_iter()
            .flat_map(|lane| lane.keys)
            .filter(|key| self.by_key.get(*key).is_some_and(|d| d.at(conn)))
            .collect()
    }

    /// Requests sent to `conn` and not yet answered.
    pub(super) fn in_flight(&self, conn: ConnId) -> usize {
        self.inboxes.get(&conn).map_or(0, |i| i.in_flight)
    }

    /// Deliveries reserved in `conn`'s inbox, how many publishers they come from, and how
    /// many of those have deliveries not yet sent to it.
    #[cfg(test)]
    pub(super) fn inbox_publishers(&self, conn: ConnId) -> (usize, usize, usize) {
        self.inboxes.get(&conn).map_or((0, 0, 0), |i| {
            let publishers = i.lanes.iter().filter(|l| !l.keys.is_empty()).count();
            let unsent = i.lanes.iter().filter(|l| l.next().is_some()).count();
            (i.len, publishers, unsent)
        })
    }

    /// Records a publish whose chain is `chain` and reserves its place in every
    /// subscriber's inbox; returns its key and how many subscribers were skipped because
    /// their inbox was full. [`Deliveries::step`] starts it.
    pub(super) fn start(
        &mut self,
        publisher: Option<ConnId>,
        origin: Origin,
        params: Vec<u8>,
        chain: &[ConnId],
    ) -> (Key, usize) {
        let id = DeliveryId(self.next);
        self.next += 1;
        // The slot it will take: the last free one, else a new one at the end.
        let slot = self
            .by_key
            .free
            .last()
            .copied()
            .unwrap_or(self.by_key.slots.len());
        let key = Key { slot, id };
        let mut hops = self.spare_hops.pop().unwrap_or_default();
        hops.reserve_exact(chain.len());
        let mut overloaded = 0;
        for &conn in chain {
            let state = match self.inboxes.get_mut(&conn) {
                Some(inbox) if inbox.len < self.max_inbox => {
                    inbox.push(key, publisher);
                    HopState::Reserved
                }
                _ => {
                    overloaded += 1;
                    HopState::Overloaded
                }
            };
            hops.push(Hop { conn, state });
        }
        let inserted = self.by_key.insert(Delivery {
            id,
            publisher,
            origin,
            params,
            hops,
            pos: 0,
            current: chain.first().copied(),
            sent: None,
            result: SendMessageResult {
                success: true,
                stop_propagation: false,
                delivered: Some(0),
                errors: Some(0),
                timeouts: Some(0),
                disconnected: Some(0),
                overloaded: Some(0),
            },
        });
        debug_assert_eq!(inserted, key);
        (key, overloaded)
    }

    /// Moves delivery `key` to its first live hop at or after its current one (starting that
    /// hop's timer), skipping overloaded and disconnected subscribers, or ends its chain.
    pub(super) fn step(&mut self, key: Key, now: Instant, out: &mut Outbox<BusEvent>) -> Step {
        let Some(d) = self.by_key.get_mut(key) else {
            return Step::Gone;
        };
        while d.pos < d.hops.len() && !d.result.stop_propagation {
            let hop = &d.hops[d.pos];
            let outcome = match hop.state {
                HopState::Overloaded => HopOutcome::Overloaded,
                HopState::Reserved if !self.inboxes.contains_key(&hop.conn) => {
                    HopOutcome::Disconnected
                }
                HopState::Reserved => {
                    let conn = hop.conn;
                    self.hop_timers.push(now + self.timeout, (key, d.pos));
                    self.compact_hop_timers();
                    return Step::Waiting(conn);
                }
            };
            count(&mut d.result, &outcome);
            let subscriber = hop.conn;
            d.advance();
            out.event(BusEvent::Hop {
                delivery: key.id,
                subscriber,
                outcome,
            });
        }
        match self.by_key.remove(key) {
            Some(d) => Step::Done(d),
            None => Step::Gone,
        }
    }

    /// Sends subscriber `conn` every delivery whose turn it is, up to the in-flight window,
    /// earliest published first, never passing an earlier message of the same publisher.
    /// One inbox lookup, one delivery lookup per lane and per delivery sent.
    pub(super) fn pump(
        &mut self,
        conn: ConnId,
        ids: &mut dyn IdGen,
        flow: &mut Flow,
        out: &mut Outbox<BusEvent>,
        stats: &mut BusStats,
    ) {
        let Some(inbox) = self.inboxes.get_mut(&conn) else {
            return;
        };
        if inbox.in_flight >= self.window {
            return;
        }
        let mut room = self.window - inbox.in_flight;
        // Each lane's next delivery, if its hop is this one; the earliest published goes
        // first. A lane whose next delivery is elsewhere is blocked: nothing after it may pass.
        let mut heads = std::mem::take(&mut self.scratch_heads);
        heads.clear();
        for (at, lane) in inbox.lanes.iter().enumerate() {
            if let Some(key) = lane.next() {
                if self.by_key.get(key).is_some_and(|d| d.at(conn)) {
                    heads.push((key.id, at));
                }
            }
        }
        while room > 0 {
            let Some(at) = (0..heads.len()).min_by_key(|&i| heads[i].0) else {
                break;
            };
            let lane_at = heads[at].1;
            let Some(lane) = inbox.lanes.get_mut(lane_at) else {
                heads.swap_remove(at);
                continue;
            };
            let Some(key) = lane.next() else {
                heads.swap_remove(at);
                continue;
            };
            if let Some(d) = self.by_key.get_mut(key) {
                let request = ids.next_id();
                let frame = hop_request(&d.params, request);
                d.sent = Some(request);
                self.requests.insert(request, (conn, key));
                inbox.in_flight += 1;
                flow.awaited(conn, out);
                stats.hops_sent += 1;
                out.send(conn, FrameBuf::json_from_vec(frame));
                room -= 1;
            }
            lane.sent += 1;
            match lane.next() {
                Some(next) if self.by_key.get(next).is_some_and(|d| d.at(conn)) => {
                    heads[at] = (next.id, lane_at);
                }
                _ => {
                    heads.swap_remove(at);
                }
            }
        }
        self.scratch_heads = heads;
    }

    /// Ends the current hop of `key` with `outcome` (its request, inbox place and window
    /// slot are freed; `answered`: [`Deliveries::answered`] already freed the request);
    /// returns the subscriber. [`Deliveries::step`] moves the chain on.
    pub(super) fn end_hop(
        &mut self,
        key: Key,
        outcome: HopOutcome,
        answered: bool,
        out: &mut Outbox<BusEvent>,
    ) -> Option<ConnId> {
        let d = self.by_key.get_mut(key)?;
        let subscriber = d.hops.get(d.pos)?.conn;
        let sent = d.sent.take();
        if let Some(request) = sent.filter(|_| !answered) {
            self.requests.remove(&request);
        }
        if let Some(inbox) = self.inboxes.get_mut(&subscriber) {
            if sent.is_some() {
                inbox.in_flight = inbox.in_flight.saturating_sub(1);
            }
            inbox.remove(key, d.publisher);
        }
        count(&mut d.result, &outcome);
        if outcome == HopOutcome::Stopped {
            d.result.stop_propagation = true;
        }
        d.advance();
        out.event(BusEvent::Hop {
            delivery: key.id,
            subscriber,
            outcome,
        });
        Some(subscriber)
    }

    /// Frees the inbox places a finished delivery still holds (a stopped chain's later
    /// subscribers); returns the subscribers whose inbox moved.
    #[inline]
    pub(super) fn release(&mut self, key: Key, d: &Delivery) -> Vec<ConnId> {
        if d.pos >= d.hops.len() {
            // A chain that ran to its end holds none (the common case).
            return Vec::new();
        }
        self.release_rest(key, d)
    }

    /// [`Deliveries::release`] for a stopped chain.
    #[cold]
    fn release_rest(&mut self, key: Key, d: &Delivery) -> Vec<ConnId> {
        let mut unblocked = Vec::new();
        for hop in d.hops.iter().skip(d.pos) {
            if let Some(inbox) = self.inboxes.get_mut(&hop.conn) {
                if inbox.remove(key, d.publisher) {
                    unblocked.push(hop.conn);
                }
            }
        }
        unblocked
    }

    /// The delivery whose hop request `request` answers, if `conn` may answer it; the
    /// request is then no longer awaited (pass `answered: true` to [`Deliveries::end_hop`]).
    pub(super) fn answered(
        &mut self,
        conn: ConnId,
        request: Option<Id128>,
    ) -> Result<Key, ProtocolError> {
        let Some(request) = request else {
            return Err(ProtocolError::UnknownResponse);
        };
        match self.requests.entry(request) {
            Entry::Occupied(e) if e.get().0 == conn => Ok(e.remove().1),
            Entry::Occupied(_) => Err(ProtocolError::WrongResponder),
            Entry::Vacant(_) => Err(ProtocolError::UnknownResponse),
        }
    }

    /// The next delivery whose current hop timed out by `now`.
    pub(super) fn pop_expired(&mut self, now: Instant) -> Option<Key> {
        while let Some(timer) = self.hop_timers.pop_expired(now) {
            if hop_timer_live(&self.by_key, &timer) {
                return Some(timer.0);
            }
        }
        None
    }

    /// The earliest hop deadline.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.hop_timers.next_deadline()
    }

    /// Drops timers of finished hops from the front, so the next deadline is exact.
    pub(super) fn drop_stale_hop_timers(&mut self) {
        let by_key = &self.by_key;
        self.hop_timers
            .drop_stale_front(|t| !hop_timer_live(by_key, t));
    }

    /// Removes timers of finished hops stuck behind a live one once they outnumber the
    /// deliveries (each has at most one live hop timer) twice over: memory stays
    /// proportional to the deliveries in flight, at amortized O(1) per hop.
    fn compact_hop_timers(&mut self) {
        if self.hop_timers.len() > 2 * self.by_key.live + 64 {
            self.retain_live_hop_timers();
        }
    }

    /// Keeps only the live hop timers (rarely needed: kept out of the hot path).
    #[cold]
    fn retain_live_hop_timers(&mut self) {
        let by_key = &self.by_key;
        self.hop_timers.retain(|t| hop_timer_live(by_key, t));
    }

    /// Hop timers held, live or stale.
    #[cfg(test)]
    pub(super) fn hop_timer_count(&self) -> usize {
        self.hop_timers.len()
    }
}

/// A hop's `sendMessage` request: `params` as encoded once for the publish, and the id
/// `request`. Sized exactly, so the frame's buffer becomes `Bytes` without another
/// allocation.
fn hop_request(params: &[u8], request: Id128) -> Vec<u8> {
    const HEAD: &[u8] = b"{\"jsonrpc\":\"2.0\",\"method\":\"sendMessage\",\"params\":";
    const ID: &[u8] = b",\"id\":\"";
    let mut frame = Vec::with_capacity(HEAD.len() + params.len() + ID.len() + 36 + 2);
    frame.extend_from_slice(HEAD);
    frame.extend_from_slice(params);
    frame.extend_from_slice(ID);
    frame.extend_from_slice(request.hyphenated().as_bytes());
    frame.extend_from_slice(b"\"}");
    frame
}

/// Whether a hop timer still times a hop: its delivery is at that hop.
fn hop_timer_live(by_key: &Slab, (key, pos): &HopTimer) -> bool {
    by_key.get(*key).is_some_and(|d| d.pos == *pos)
}

fn count(result: &mut SendMessageResult, outcome: &HopOutcome) {
    let field = match outcome {
        HopOutcome::Continued | HopOutcome::Stopped => &mut result.delivered,
        HopOutcome::Error(_) => &mut result.errors,
        HopOutcome::TimedOut => &mut result.timeouts,
        HopOutcome::Disconnected => &mut result.disconnected,
        HopOutcome::Overloaded => &mut result.overloaded,
    };
    *field = Some(field.unwrap_or(0) + 1);
}

//! Requests awaiting a `resp`: their `req` frames, their timeouts, and matching answers to
//! them.

use std::time::{Duration, Instant};

use agentwire_core::{ConnId, DeadlineQueue, FrameBuf, Id128, Id128Map, IdGen, Utf8Bytes};
use bytes::BytesMut;
use serde::Serialize;

use super::sessions::SessionKey;
use crate::error::CommandError;
use crate::id::AgentId;
use crate::message::ReqRef;

/// Where a `req`'s id starts in its encoding: `ReqRef` writes its tag, then its id.
const REQ_ID_AT: usize = r#"{"type":"req","id":""#.len();
/// Stands in for the id while a `req` is encoded (36 bytes, like every hyphenated id).
const ID_PLACEHOLDER: &str = "00000000-0000-0000-0000-000000000000";

/// Size of the blocks `req` frames are encoded into (a compact `req` is about 200 bytes).
const REQ_BUF_BLOCK: usize = 4096;

/// One request awaiting its `resp`.
#[derive(Debug)]
pub(crate) struct Pending {
    /// The agent it went to.
    pub(crate) agent_id: AgentId,
    /// The connection it went out on (only a `resp` from there answers it).
    pub(crate) conn: ConnId,
    /// Its op.
    pub(crate) op: String,
    /// The session this request starts (sent by `request_for_session` with a start op);
    /// boxed, so that the common request without one stays small in the pending map.
    pub(crate) starts: Option<Box<SessionKey>>,
}

/// What a `resp` id matched.
#[derive(Debug)]
pub(crate) enum Answer {
    /// Not one of ours, unknown, or late: dropped silently.
    Unknown,
    /// A request that went out on another connection: it keeps waiting.
    WrongConn,
    /// The request it answers, no longer pending.
    Answered(Id128, Pending),
}

/// The requests in flight: ids, `req` encoding, pending records and their deadlines.
pub(crate) struct Requests {
    ids: Box<dyn IdGen>,
    timeout: Duration,
    scratch: Vec<u8>,
    /// Where `req` frames are built: each frame is split off and frozen without a copy, and
    /// once the driver has dropped every frame of a block its space is reused, so a request
    /// normally costs no allocation for its frame.
    req_buf: BytesMut,
    /// Requests awaiting a `resp`, by id. Ids are ours (never chosen by a peer), so a
    /// cheap hasher is safe; nothing iterates this map (see `fail_on`).
    pending: Id128Map<Pending>,
    /// Request deadlines in issue order (one timeout, a monotonic clock). Its front is
    /// always a pending request: answered entries are dropped from the front at once, and
    /// the rest compacted when they dominate.
    deadlines: DeadlineQueue<Id128>,
}

impl std::fmt::Debug for Requests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Requests")
            .field("pending", &self.pending.len())
            .finish_non_exhaustive()
    }
}

impl Requests {
    /// No requests; ids from `ids`, each timing out `timeout` after it is sent.
    pub(crate) fn new(ids: Box<dyn IdGen>, timeout: Duration) -> Self {
        Self {
            ids,
            timeout,
            scratch: Vec::with_capacity(512),
            req_buf: BytesMut::with_capacity(REQ_BUF_BLOCK),
            pending: Id128Map::default(),
            deadlines: DeadlineQueue::new(),
        }
    }

    /// Requests awaiting a `resp`.
    pub(crate) fn len(&self) -> usize {
        self.pending.len()
    }

    /// Makes the `req{op, data}` frame for `agent_id` on `conn` and records the request as
    /// pending from `now`; fails if `data` is not JSON.
    pub(crate) fn issue(
        &mut self,
        conn: ConnId,
        agent_id: AgentId,
        op: &str,
        data: impl Serialize,
        now: Instant,
    ) -> Result<(Id128, FrameBuf), CommandError> {
        let id = self.ids.next_id();
        // Encoded with a placeholder id of the same length, which is then overwritten in
        // place with the id's digits: the id is never turned into a `&str` (a UTF-8 check).
        let req = ReqRef {
            id: ID_PLACEHOLDER,
            op,
            data,
            agent_id: agent_id.as_str(),
        };
        self.scratch.clear();
        serde_json::to_writer(&mut self.scratch, &req)
            .map_err(|e| CommandError::InvalidData(e.to_string()))?;
        if let Some(slot) = self
            .scratch
            .get_mut(REQ_ID_AT..REQ_ID_AT + ID_PLACEHOLDER.len())
        {
            debug_assert_eq!(slot, ID_PLACEHOLDER.as_bytes());
            slot.copy_from_slice(id.hyphenated().as_bytes());
        }
        // One copy into the frame block (serde_json's many small writes go to the plain
        // `Vec`, which is cheaper per write than `BytesMut`).
        debug_assert!(self.req_buf.is_empty(), "every frame is split off");
        self.req_buf.extend_from_slice(&self.scratch);
        // serde_json writes UTF-8 only, and the id's digits are ASCII (see
        // `Utf8Bytes::from_encoder`).
        let frame = FrameBuf::Text(Utf8Bytes::from_encoder(self.req_buf.split().freeze()));
        let pending = Pending {
            agent_id,
            conn,
            op: op.to_owned(),
            starts: None,
        };
        self.pending.insert(id, pending);
        self.deadlines.push(now + self.timeout, id);
        Ok((id, frame))
    }

    /// Records that request `id` starts the session `key`.
    pub(crate) fn mark_start(&mut self, id: Id128, key: SessionKey) {
        if let Some(p) = self.pending.get_mut(&id) {
            p.starts = Some(Box::new(key));
        }
    }

    /// Matches a `resp` with id `resp_id` that arrived on `conn`.
    pub(crate) fn answer(&mut self, conn: ConnId, resp_id: &str) -> Answer {
        let Some(id) = Id128::parse(resp_id) else {
            return Answer::Unknown;
        };
        let Some(p) = self.pending.remove(&id) else {
            return Answer::Unknown;
        };
        if p.conn != conn {
            // Nothing iterates the map, so taking it out and back in changes no output.
            self.pending.insert(id, p);
            return Answer::WrongConn;
        }
        // Answers usually come in issue order: the front deadline is this request's, and
        // is dropped without a map lookup.
        self.deadlines.drop_stale_front(|front| *front == id);
        self.trim();
        Answer::Answered(id, p)
    }

    /// The earliest request deadline.
    pub(crate) fn next_timer(&self) -> Option<(Instant, Id128)> {
        self.deadlines.front().map(|(t, id)| (t, *id))
    }

    /// Removes and returns the first request whose deadline is at or before `now`.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<(Id128, Pending)> {
        let id = self.deadlines.pop_expired(now)?;
        let timed_out = self.pending.remove(&id).map(|p| (id, p));
        self.trim();
        timed_out
    }

    /// Takes every request that went out on `conn`, in the order they were sent.
    pub(crate) fn fail_on(&mut self, conn: ConnId) -> Vec<(Id128, Pending)> {
        // The deadline queue holds every pending id in issue order: walk it, not the hash
        // map, so that the failures come out in a deterministic order.
        let mut failed = Vec::new();
        let pending = &mut self.pending;
        self.deadlines.retain(|id| match pending.get(id) {
            Some(p) if p.conn == conn => {
                if let Some(p) = pending.remove(id) {
                    failed.push((*id, p));
                }
                false
            }
            Some(_) => true,
            None => false,
        });
        failed
    }

    /// Drops answered requests from the front of the deadline queue, and compacts it when
    /// answered entries dominate, so it never holds much more than the pending requests.
    fn trim(&mut self) {
        let pending = &self.pending;
        self.deadlines
            .drop_stale_front(|id| !pending.contains_key(id));
        if self.deadlines.len() > 2 * self.pending.len() + 64 {
            self.deadlines.retain(|id| pending.contains_key(id));
        }
    }

    /// Entries in the deadline queue, answered ones included.
    #[cfg(test)]
    pub(crate) fn deadline_entries(&self) -> usize {
        self.deadlines.len()
    }
}

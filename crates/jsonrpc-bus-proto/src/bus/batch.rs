//! Batches being answered: one slot per entry, filled now or when an entry's chain ends,
//! sent as one array once every slot is filled.

use std::collections::BTreeMap;

use agentwire_core::ConnId;

#[derive(Debug)]
struct Batch {
    conn: ConnId,
    slots: Vec<Option<Vec<u8>>>,
    pending: usize,
    open: bool,
}

/// What a request handler produced.
pub(super) enum Handled {
    /// The encoded response.
    Now(Vec<u8>),
    /// A `sendMessage` whose result comes when its chain ends.
    Later,
    /// Nothing to send (a notification).
    Nothing,
}

/// Every batch not yet answered, by the bus's own counter.
#[derive(Debug, Default)]
pub(super) struct Batches {
    open: BTreeMap<u64, Batch>,
    next: u64,
}

impl Batches {
    /// A new batch from `conn`, open until [`Batches::close`].
    pub(super) fn open(&mut self, conn: ConnId) -> u64 {
        let batch = self.next;
        self.next += 1;
        self.open.insert(
            batch,
            Batch {
                conn,
                slots: Vec::new(),
                pending: 0,
                open: true,
            },
        );
        batch
    }

    /// Reserves the next entry's slot; `None` if the batch is gone.
    pub(super) fn reserve(&mut self, batch: u64) -> Option<usize> {
        let b = self.open.get_mut(&batch)?;
        b.slots.push(None);
        b.pending += 1;
        Some(b.slots.len() - 1)
    }

    /// Records how entry `slot` was handled: answered now, later ([`Batches::fill`]), or
    /// never (a notification: its slot is dropped). Returns `false` if the batch is gone.
    pub(super) fn handled(&mut self, batch: u64, slot: usize, handled: Handled) -> bool {
        let Some(b) = self.open.get_mut(&batch) else {
            return false;
        };
        match handled {
            Handled::Now(bytes) => {
                if let Some(s) = b.slots.get_mut(slot) {
                    *s = Some(bytes);
                }
                b.pending = b.pending.saturating_sub(1);
            }
            Handled::Later => {}
            Handled::Nothing => {
                b.slots.truncate(slot);
                b.pending = b.pending.saturating_sub(1);
            }
        }
        true
    }

    /// Fills entry `slot` with the answer that came later.
    pub(super) fn fill(&mut self, batch: u64, slot: usize, bytes: Vec<u8>) {
        if let Some(b) = self.open.get_mut(&batch) {
            if let Some(s) = b.slots.get_mut(slot) {
                *s = Some(bytes);
            }
            b.pending = b.pending.saturating_sub(1);
        }
    }

    /// Every entry of `batch` has been read.
    pub(super) fn close(&mut self, batch: u64) {
        if let Some(b) = self.open.get_mut(&batch) {
            b.open = false;
        }
    }

    /// The answer to `batch` once it is closed and every slot is filled: its connection and
    /// the array (`None` for a batch of notifications only, which gets nothing).
    pub(super) fn take_ready(&mut self, batch: u64) -> Option<(ConnId, Vec<u8>)> {
        if !self
            .open
            .get(&batch)
            .is_some_and(|b| !b.open && b.pending == 0)
        {
            return None;
        }
        let b = self.open.remove(&batch)?;
        let parts: Vec<Vec<u8>> = b.slots.into_iter().flatten().collect();
        if parts.is_empty() {
            return None; // only notifications: nothing is sent
        }
        let mut out = Vec::with_capacity(parts.iter().map(|p| p.len() + 1).sum::<usize>() + 2);
        out.push(b'[');
        for (i, p) in parts.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(p);
        }
        out.push(b']');
        Some((b.conn, out))
    }

    /// The connection is gone: its batches are never answered.
    pub(super) fn forget_conn(&mut self, conn: ConnId) {
        self.open.retain(|_, b| b.conn != conn);
    }
}

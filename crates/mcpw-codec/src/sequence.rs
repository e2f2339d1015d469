//! Sequence ids of one connection (the crate's spec decision 38): the ids this side gives
//! the messages it starts, and the check of the ids the peer gives its own.
//!
//! Only messages a side starts are numbered: requests, notifications, progress and pings
//! (types 0, 2, 7, 4) in the 24-byte form with a sequence id other than 0. Responses,
//! errors, pongs and batches echo the sequence id of what they answer (or carry 0), so
//! they are neither numbered nor checked.

use crate::header::MessageType;

/// Whether a message of type `kind` with sequence id `seq` is numbered (see the module
/// docs).
pub(crate) fn is_numbered(kind: MessageType, seq: u64) -> bool {
    seq != 0
        && matches!(
            kind,
            MessageType::REQUEST
                | MessageType::NOTIFICATION
                | MessageType::PROGRESS
                | MessageType::PING
        )
}

/// What a received sequence id says about the messages before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SeqCheck {
    /// The next one (or the first of the connection): handle it.
    InOrder,
    /// Messages were lost: `missing` ids before this one never arrived. Handle it.
    Gap {
        /// The id that was due.
        expected: u64,
        /// How many ids were skipped.
        missing: u64,
    },
    /// This id, or a later one, was seen already: a duplicate (or a replay), not handled.
    Duplicate {
        /// The last id received.
        last: u64,
    },
}

/// One connection's sequence ids, both ways.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sequence {
    /// The last id this side gave (0: none yet).
    sent: u64,
    /// The last numbered id received.
    received: Option<u64>,
}

impl Sequence {
    /// The id of the next message this side starts on the connection: 1, 2, 3, ...
    pub(crate) fn next(&mut self) -> u64 {
        self.sent = self.sent.saturating_add(1);
        self.sent
    }

    /// Checks a numbered id received. The first one of a connection is taken as it comes
    /// (a peer may number across connections); after it, each must be the last plus one.
    pub(crate) fn receive(&mut self, seq: u64) -> SeqCheck {
        match self.received {
            Some(last) if seq <= last => SeqCheck::Duplicate { last },
            Some(last) if seq > last.saturating_add(1) => {
                self.received = Some(seq);
                SeqCheck::Gap {
                    expected: last + 1,
                    missing: seq - last - 1,
                }
            }
            _ => {
                self.received = Some(seq);
                SeqCheck::InOrder
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_count_up_and_gaps_and_duplicates_are_told_apart() {
        let mut s = Sequence::default();
        assert_eq!((s.next(), s.next()), (1, 2));
        assert_eq!(s.receive(7), SeqCheck::InOrder);
        assert_eq!(s.receive(8), SeqCheck::InOrder);
        assert_eq!(s.receive(8), SeqCheck::Duplicate { last: 8 });
        assert_eq!(s.receive(3), SeqCheck::Duplicate { last: 8 });
        assert_eq!(
            s.receive(11),
            SeqCheck::Gap {
                expected: 9,
                missing: 2
            }
        );
        assert_eq!(s.receive(12), SeqCheck::InOrder);
        assert_eq!(
            s.receive(u64::MAX),
            SeqCheck::Gap {
                expected: 13,
                missing: u64::MAX - 13
            }
        );
        assert_eq!(s.receive(u64::MAX), SeqCheck::Duplicate { last: u64::MAX });
        assert!(is_numbered(MessageType::REQUEST, 1));
        assert!(!is_numbered(MessageType::REQUEST, 0));
        assert!(!is_numbered(MessageType::RESPONSE, 5));
        assert!(!is_numbered(MessageType::BATCH, 5));
    }
}

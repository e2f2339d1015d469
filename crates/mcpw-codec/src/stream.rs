//! Streamed messages (flag [`Flags::STREAMING`](crate::Flags::STREAMING); the crate's spec
//! decision 50): a message too large for one frame travels as `stream.part` notifications,
//! each carrying a slice of the message's JSON form, and is handled once its last part
//! arrived, as if it had come whole.
//!
//! A part's params: `{"stream_id": "...", "index": 0, "final": false, "data": "..."}`. Parts
//! of one stream come in order on one connection, numbered from 0; the last has `final:
//! true` and carries the whole message's id (JSON and 12-byte forms) or sequence id
//! (24-byte form), so the answer to the whole message names it; the others carry no id and
//! sequence id 0. The concatenated `data` is the JSON form of exactly one message (not a
//! batch, not a part).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use crate::error::StreamError;

/// The method of a part of a streamed message.
pub const STREAM_PART: &str = "stream.part";

/// The params of a `stream.part` notification.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamPart {
    /// Names the stream among the sender's streams on the connection.
    pub stream_id: String,
    /// The part's place in the stream, from 0.
    pub index: u32,
    /// Whether it is the last part.
    #[serde(rename = "final")]
    pub last: bool,
    /// A slice of the whole message's JSON form.
    pub data: String,
}

/// `text` cut into slices of at most `part_bytes` bytes (at least 1), each ending on a
/// character boundary.
pub fn split(text: &str, part_bytes: usize) -> Vec<&str> {
    let part_bytes = part_bytes.max(4);
    let mut parts = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut end = rest.len().min(part_bytes);
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        let (head, tail) = rest.split_at(end);
        parts.push(head);
        rest = tail;
    }
    parts
}

/// The streams being reassembled on one connection, bounded in number and in bytes.
#[derive(Debug, Default)]
pub(crate) struct Reassembly {
    /// Per stream id: the next index due and the text so far.
    streams: BTreeMap<String, (u32, String)>,
    /// Bytes held over all streams.
    held: usize,
}

impl Reassembly {
    /// Takes one part. `Ok(Some(text))` when it was the last: the whole message's JSON form.
    /// On an error the stream is dropped (its bytes freed); a new stream starts at index 0.
    pub(crate) fn push(
        &mut self,
        part: StreamPart,
        max_streams: usize,
        max_bytes: usize,
    ) -> Result<Option<String>, StreamError> {
        let expected = self
            .streams
            .get(&part.stream_id)
            .map_or(0, |(next, _)| *next);
        if part.index != expected {
            self.drop_stream(&part.stream_id);
            return Err(StreamError::OutOfOrder {
                expected,
                received: part.index,
            });
        }
        if expected == 0 && self.streams.len() >= max_streams {
            return Err(StreamError::TooMany { limit: max_streams });
        }
        if self.held.saturating_add(part.data.len()) > max_bytes {
            self.drop_stream(&part.stream_id);
            return Err(StreamError::TooLarge { limit: max_bytes });
        }
        self.held += part.data.len();
        let entry = self
            .streams
            .entry(part.stream_id.clone())
            .or_insert_with(|| (0, String::new()));
        entry.0 = entry.0.saturating_add(1);
        entry.1.push_str(&part.data);
        if !part.last {
            return Ok(None);
        }
        let (_, text) = self.streams.remove(&part.stream_id).unwrap_or_default();
        self.held -= text.len();
        Ok(Some(text))
    }

    /// Streams in progress.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.streams.len()
    }

    fn drop_stream(&mut self, stream_id: &str) {
        if let Some((_, text)) = self.streams.remove(stream_id) {
            self.held -= text.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(id: &str, index: u32, last: bool, data: &str) -> StreamPart {
        StreamPart {
            stream_id: id.into(),
            index,
            last,
            data: data.into(),
        }
    }

    #[test]
    fn parts_join_in_order_and_each_bound_holds() {
        let mut r = Reassembly::default();
        assert_eq!(r.push(part("a", 0, false, "{\"x\":"), 2, 100), Ok(None));
        assert_eq!(r.push(part("b", 0, false, "{"), 2, 100), Ok(None));
        assert_eq!(
            r.push(part("c", 0, false, "{"), 2, 100),
            Err(StreamError::TooMany { limit: 2 })
        );
        assert_eq!(
            r.push(part("a", 1, true, "1}"), 2, 100),
            Ok(Some("{\"x\":1}".to_owned()))
        );
        assert_eq!(
            r.push(part("b", 2, false, "}"), 2, 100),
            Err(StreamError::OutOfOrder {
                expected: 1,
                received: 2
            })
        );
        assert_eq!(r.len(), 0, "a broken stream is dropped");
        assert_eq!(
            r.push(part("d", 0, false, &"x".repeat(101)), 2, 100),
            Err(StreamError::TooLarge { limit: 100 })
        );
        assert_eq!((r.len(), r.held), (0, 0));
    }

    #[test]
    fn split_keeps_characters_whole() {
        let text = "ab\u{e9}cd\u{1F600}e";
        for n in 1..12 {
            let parts = split(text, n);
            assert_eq!(parts.concat(), text);
            assert!(parts.iter().all(|p| !p.is_empty() && p.len() <= n.max(4)));
        }
        assert!(split("", 8).is_empty());
    }
}

//! The chat timeline a host shows and sends to agents as `messageHistory`.

use serde::{Deserialize, Serialize};

use crate::error::HistoryFull;
use crate::message::RawJson;

/// Who wrote a chat entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatRole {
    /// The participant (the host's chat input, sent to agents as `user.message`).
    User,
    /// An external agent (`agent.message`, or a tool such as `postMessage`).
    Agent,
    /// The host application itself (notices such as "booking confirmed").
    System,
}

/// One entry of `messageHistory`: `{"role":"agent","text":"..."}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatEntry {
    /// Who wrote it.
    pub role: ChatRole,
    /// The text.
    pub text: String,
}

/// The chat timeline of the current session, oldest first, bounded.
///
/// The [`Host`](crate::Host) owns it: `agent.message` and the participant's messages are
/// appended, tools may append through [`ToolContext`](crate::ToolContext), and it is cleared
/// when a session ends. Its JSON is encoded once per change and reused by every
/// `snapshot.state`, `tool.result` and `state.updated` until the next change.
#[derive(Debug, Clone)]
pub struct History {
    entries: Vec<ChatEntry>,
    max: usize,
    revision: u64,
    json: Option<RawJson>,
}

impl History {
    /// An empty timeline holding at most `max_entries` entries.
    pub fn new(max_entries: usize) -> Self {
        Self {
            entries: Vec::new(),
            max: max_entries,
            revision: 0,
            json: None,
        }
    }

    /// The entries, oldest first.
    pub fn entries(&self) -> &[ChatEntry] {
        &self.entries
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Counts changes: it moves whenever an entry is appended or the timeline is cleared.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// Appends an entry; refused when the timeline is full.
    pub fn push(&mut self, role: ChatRole, text: impl Into<String>) -> Result<(), HistoryFull> {
        if self.entries.len() >= self.max {
            return Err(HistoryFull);
        }
        self.entries.push(ChatEntry {
            role,
            text: text.into(),
        });
        self.changed();
        Ok(())
    }

    /// Removes every entry (at session end).
    pub(crate) fn clear(&mut self) {
        self.entries.clear();
        self.changed();
    }

    fn changed(&mut self) {
        self.revision += 1;
        self.json = None;
    }

    /// The `messageHistory` JSON array (encoded at most once per change).
    pub(crate) fn json(&mut self) -> &RawJson {
        let entries = &self.entries;
        self.json.get_or_insert_with(|| {
            // A Vec of plain structs always serializes.
            RawJson::from_serialize(entries).unwrap_or_else(|_| RawJson::empty_array())
        })
    }

    /// The `messageHistory` JSON array.
    pub fn to_json(&self) -> RawJson {
        match &self.json {
            Some(j) => j.clone(),
            None => {
                RawJson::from_serialize(&self.entries).unwrap_or_else(|_| RawJson::empty_array())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_encode_as_role_and_text_and_the_bound_holds() {
        let mut h = History::new(2);
        assert_eq!(h.json().get(), "[]");
        h.push(ChatRole::User, "hi").unwrap();
        h.push(ChatRole::Agent, "hello").unwrap();
        assert_eq!(h.push(ChatRole::System, "x"), Err(HistoryFull));
        assert_eq!(
            h.json().get(),
            r#"[{"role":"user","text":"hi"},{"role":"agent","text":"hello"}]"#
        );
        assert_eq!(h.to_json(), h.json().clone());
        let r = h.revision();
        h.clear();
        assert!(h.is_empty() && h.revision() > r);
        assert_eq!(h.to_json().get(), "[]");
    }
}

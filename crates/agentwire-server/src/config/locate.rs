//! Where each key of a TOML text is: key paths (`bus.max_message_bytes`,
//! `listener[0].allow[1]`) mapped to byte spans, to turn the spans of parse errors into key
//! names and lines.

use std::ops::Range;

use toml::de::{DeTable, DeValue};

/// The keys of one TOML text with their spans.
#[derive(Debug, Default)]
pub(crate) struct KeyIndex {
    /// `(path, whole span: key start to value end, key span)`, in document order.
    entries: Vec<(String, Range<usize>, Range<usize>)>,
    /// Byte offsets at which lines start.
    line_starts: Vec<usize>,
}

impl KeyIndex {
    /// The index of `text` (empty if it is not valid TOML).
    pub(crate) fn new(text: &str) -> Self {
        let mut index = Self {
            entries: Vec::new(),
            line_starts: std::iter::once(0)
                .chain(text.match_indices('\n').map(|(i, _)| i + 1))
                .collect(),
        };
        if let Ok(doc) = DeTable::parse(text) {
            index.walk_table("", doc.get_ref());
        }
        index
    }

    fn walk_table(&mut self, prefix: &str, table: &DeTable<'_>) {
        for (key, value) in table.iter() {
            let path = if prefix.is_empty() {
                key.get_ref().to_string()
            } else {
                format!("{prefix}.{}", key.get_ref())
            };
            let key_span = key.span();
            let value_span = value.span();
            let whole = key_span.start.min(value_span.start)..key_span.end.max(value_span.end);
            self.entries.push((path.clone(), whole, key_span));
            self.walk_value(&path, value.get_ref());
        }
    }

    fn walk_value(&mut self, path: &str, value: &DeValue<'_>) {
        match value {
            DeValue::Table(t) => self.walk_table(path, t),
            DeValue::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let item_path = format!("{path}[{i}]");
                    let span = item.span();
                    self.entries.push((item_path.clone(), span.clone(), span));
                    self.walk_value(&item_path, item.get_ref());
                }
            }
            _ => {}
        }
    }

    /// The 1-based line of byte `offset`.
    pub(crate) fn line_of(&self, offset: usize) -> usize {
        self.line_starts
            .partition_point(|&start| start <= offset)
            .max(1)
    }

    /// The innermost key whose key or value covers `offset`.
    pub(crate) fn key_at(&self, offset: usize) -> Option<&str> {
        self.entries
            .iter()
            .filter(|(_, whole, _)| whole.contains(&offset) || whole.start == offset)
            .min_by_key(|(_, whole, _)| whole.len())
            .map(|(path, _, _)| path.as_str())
    }

    /// The 1-based line where `path` (or, failing that, its nearest enclosing key) is set.
    pub(crate) fn line_of_key(&self, path: &str) -> Option<usize> {
        let mut path = path;
        loop {
            if let Some((_, _, key)) = self.entries.iter().find(|(p, _, _)| p == path) {
                return Some(self.line_of(key.start));
            }
            path = parent(path)?;
        }
    }
}

/// `a.b[2].c` → `a.b[2]` → `a.b` → `a` → none.
pub(crate) fn parent(path: &str) -> Option<&str> {
    let cut = path.rfind(['.', '['])?;
    Some(&path[..cut])
}

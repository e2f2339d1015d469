//! A byte cursor for the bus's one-pass reader of a subscriber's hop reply.
//!
//! It is not a JSON parser: it reads only plain forms (strings without escapes, the three
//! literals) and returns `None` at the first byte outside them, so that a reader built on
//! it can leave anything unusual to the general path (serde_json) and never accept what
//! serde_json would read differently.

use crate::codec::is_json_space;

#[cfg(test)]
pub(crate) mod near;

/// A member name read by [`Scan::key`].
pub(crate) enum Key {
    /// The name at this index of the names the reader expects.
    Known(usize),
    /// Any other name (read, and plain: no escape).
    Other,
    /// The end of the object.
    End,
}

/// A cursor over a message's text.
pub(crate) struct Scan<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Scan<'a> {
    /// A cursor just inside the object that `text` is, if `text` starts with its `{` (as
    /// `classify` requires: `split_text` trims what comes before).
    pub(crate) fn object(text: &'a str) -> Option<Self> {
        text.starts_with('{').then_some(Self { text, at: 1 })
    }

    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    /// Skips JSON whitespace.
    fn skip_ws(&mut self) {
        while self.bytes().get(self.at).is_some_and(|&b| is_json_space(b)) {
            self.at += 1;
        }
    }

    /// The next byte after whitespace, consumed.
    pub(crate) fn next(&mut self) -> Option<u8> {
        self.skip_ws();
        let b = *self.bytes().get(self.at)?;
        self.at += 1;
        Some(b)
    }

    /// Consumes `byte` after whitespace.
    pub(crate) fn eat(&mut self, byte: u8) -> Option<()> {
        (self.next()? == byte).then_some(())
    }

    /// Whether only whitespace is left.
    pub(crate) fn at_end(&mut self) -> bool {
        self.skip_ws();
        self.at == self.bytes().len()
    }

    /// The next member of an object whose `{` is consumed, with its `:` consumed too: its
    /// name's index in `names` (compared in place, without a string scan), [`Key::Other`] for
    /// any other plain name, [`Key::End`] at the object's `}`. `first` is true until the first
    /// call returns.
    pub(crate) fn key(&mut self, first: &mut bool, names: &[&str]) -> Option<Key> {
        match (self.next()?, *first) {
            (b'}', _) => return Some(Key::End),
            (b'"', true) => {}
            (b',', false) => self.eat(b'"')?,
            _ => return None,
        }
        *first = false;
        let key = match names.iter().position(|name| self.word_rest(name)) {
            Some(i) => Key::Known(i),
            None => self.string_rest().map(|_| Key::Other)?,
        };
        self.eat(b':')?;
        Some(key)
    }

    /// Consumes `word` and its closing quote if they come next: the rest of a string whose
    /// opening quote is consumed, when the reader expects that string (a member name or a
    /// fixed value) and wants to skip the general string scan.
    fn word_rest(&mut self, word: &str) -> bool {
        let end = self.at + word.len();
        // Byte by byte: the words are short, and a slice comparison calls `memcmp`.
        let hit = self
            .bytes()
            .get(self.at..end)
            .is_some_and(|here| here.iter().zip(word.as_bytes()).all(|(a, b)| a == b))
            && self.bytes().get(end) == Some(&b'"');
        if hit {
            self.at = end + 1;
        }
        hit
    }

    /// Consumes the plain string `"word"` after whitespace; `None` for any other value.
    pub(crate) fn exact(&mut self, word: &str) -> Option<()> {
        self.eat(b'"')?;
        self.word_rest(word).then_some(())
    }

    /// The rest of a string whose opening quote is consumed: its contents, if it has no
    /// escape and no control character.
    pub(crate) fn string_rest(&mut self) -> Option<&'a str> {
        const ONES: u64 = u64::from_le_bytes([1; 8]);
        const HIGHS: u64 = ONES << 7;
        let start = self.at;
        // Eight bytes at a time (as serde_json does) up to the first that may end the string:
        // the lowest byte flagged is the first quote, backslash or control byte, if any.
        while let Some(chunk) = self.bytes().get(self.at..self.at + 8) {
            let w = u64::from_le_bytes(chunk.try_into().ok()?);
            let quote = w ^ (ONES * u64::from(b'"'));
            let backslash = w ^ (ONES * u64::from(b'\\'));
            let flags = (quote.wrapping_sub(ONES) & !quote)
                | (backslash.wrapping_sub(ONES) & !backslash)
                | (w.wrapping_sub(ONES * 0x20) & !w);
            if flags & HIGHS != 0 {
                self.at += (flags & HIGHS).trailing_zeros() as usize / 8;
                break;
            }
            self.at += 8;
        }
        loop {
            match *self.bytes().get(self.at)? {
                b'"' => break,
                b'\\' | 0..=0x1f => return None,
                _ => self.at += 1,
            }
        }
        // Both ends are at an ASCII quote, so on character boundaries.
        let s = self.text.get(start..self.at)?;
        self.at += 1;
        Some(s)
    }

    /// A string (see [`Scan::string_rest`]).
    pub(crate) fn string(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        self.string_rest()
    }

    /// The rest of a literal whose first byte `first` is consumed: `true`, `false` or
    /// `null` (as `None`).
    pub(crate) fn literal_rest(&mut self, first: u8) -> Option<Option<bool>> {
        let (rest, value): (&[u8], _) = match first {
            b't' => (b"rue", Some(true)),
            b'f' => (b"alse", Some(false)),
            b'n' => (b"ull", None),
            _ => return None,
        };
        let end = self.at + rest.len();
        (self.bytes().get(self.at..end)? == rest).then(|| {
            self.at = end;
            value
        })
    }
}

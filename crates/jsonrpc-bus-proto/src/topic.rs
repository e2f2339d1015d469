//! Topic patterns: which subscriptions match a published topic.
//!
//! Over 700 lines with its unit tests (about 80): the pattern compiler, the matcher and the
//! index that must agree with it live together.
//!
//! The reference Python bus matches a subscription pattern against a topic with
//! `fnmatch.fnmatchcase`: an anchored, case-sensitive glob over Unicode scalars.
//! [`Pattern`] reproduces it exactly (Python 3.11 `fnmatch.translate`), and [`TopicIndex`]
//! answers "which keys' patterns match this topic" without scanning every pattern.
//!
//! | pattern   | matches                                                                  |
//! |-----------|--------------------------------------------------------------------------|
//! | `*`       | any run of characters, including none and including `:` and `/`          |
//! | `?`       | exactly one character (a Unicode scalar, not a byte)                     |
//! | `[seq]`   | one character in `seq`; `a-z` is a range, `-` first or last is literal   |
//! | `[!seq]`  | one character not in `seq`                                               |
//! | other     | itself; there is no escaping, `\` is an ordinary character               |
//!
//! Bracket details follow `fnmatch.translate`: a `]` right after `[` or `[!` is a member, an
//! unclosed `[` is a literal `[`, and a range whose start is above its end matches nothing.
//!
//! The spec also promises prefix matching (`inbound:chat-` matches `inbound:chat-1`);
//! [`MatchMode::GlobOrPrefix`] adds it.
//!
//! ```
//! use jsonrpc_bus_proto::topic::{MatchMode, Pattern, TopicIndex};
//!
//! let p = Pattern::new("inbound:*", MatchMode::Glob);
//! assert!(p.matches("inbound:chat-1"));
//! assert!(!p.matches("outbound:x"));
//!
//! let mut index = TopicIndex::new(MatchMode::Glob);
//! index.insert("inbound:*", 2_u64);
//! index.insert("inbound:chat-1", 1);
//! index.insert("agent:?", 3);
//! let mut hits = Vec::new();
//! index.matches_into("inbound:chat-1", &mut hits);
//! assert_eq!(hits, [1, 2]);
//! ```

/// How a subscription pattern is matched against a topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MatchMode {
    /// Anchored glob, exactly as the reference bus (`fnmatch.fnmatchcase`). Default.
    #[default]
    Glob,
    /// Glob, and a pattern also matches every topic it is a prefix of (the spec's "prefix"
    /// rule): pattern `P` matches `T` iff glob(`P`) matches `T` or glob(`P*`) matches `T`,
    /// which is the same as glob(`P*`) matching `T`.
    GlobOrPrefix,
}

/// One compiled pattern.
///
/// Every string is a valid pattern, so construction is infallible. Matching never allocates
/// and takes at most O(pattern length × topic length) steps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    src: Box<str>,
    mode: MatchMode,
    tokens: Box<[Token]>,
    /// Byte length of the literal prefix of `src`.
    prefix_len: usize,
    /// Index of the first token after the literal prefix (0 or 1).
    body: usize,
}

impl Pattern {
    /// Compiles `src` for matching in `mode`.
    pub fn new(src: &str, mode: MatchMode) -> Self {
        let mut tokens = compile(src);
        if mode == MatchMode::GlobOrPrefix && tokens.last() != Some(&Token::Star) {
            tokens.push(Token::Star);
        }
        let prefix_len = literal_prefix_len(src);
        let body = usize::from(prefix_len > 0);
        Self {
            src: src.into(),
            mode,
            tokens: tokens.into_boxed_slice(),
            prefix_len,
            body,
        }
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.src
    }

    /// The mode this pattern was compiled for.
    pub fn mode(&self) -> MatchMode {
        self.mode
    }

    /// Whether `topic` matches this pattern. Does not allocate.
    pub fn matches(&self, topic: &str) -> bool {
        match_tokens(&self.tokens, topic)
    }

    /// The characters before the first metacharacter: `*`, `?`, or a `[` that opens a
    /// closed bracket expression. Every topic this pattern matches starts with it.
    pub fn literal_prefix(&self) -> &str {
        self.src.get(..self.prefix_len).unwrap_or_default()
    }

    /// Whether the pattern has no metacharacter at all (its literal prefix is all of it).
    ///
    /// In [`MatchMode::Glob`] a literal pattern matches only the topic equal to it; in
    /// [`MatchMode::GlobOrPrefix`] it matches every topic it is a prefix of.
    pub fn is_literal(&self) -> bool {
        self.prefix_len == self.src.len()
    }

    /// Whether `rest` matches the part of the pattern after its literal prefix, i.e. whether
    /// `prefix + rest` matches the whole pattern.
    fn body_matches(&self, rest: &str) -> bool {
        match_tokens(self.tokens.get(self.body..).unwrap_or_default(), rest)
    }

    /// What the pattern requires of the topic after its literal prefix.
    fn tail(&self) -> Tail {
        match self.tokens.get(self.body..).unwrap_or_default() {
            [] => Tail::Exact,
            [Token::Star] => Tail::Anything,
            _ => Tail::Glob,
        }
    }
}

/// One step of a compiled pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// A run of literal characters.
    Lit(Box<str>),
    /// `?`: any one character.
    Any,
    /// `*` (runs collapsed): any run of characters.
    Star,
    /// `[...]`: one character in (or, negated, not in) a set.
    Class(Class),
}

/// A bracket expression as a set of inclusive character ranges.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Class {
    negated: bool,
    ranges: Box<[(char, char)]>,
}

impl Class {
    fn contains(&self, c: char) -> bool {
        self.ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != self.negated
    }
}

/// Splits `src` into tokens following `fnmatch.translate`.
fn compile(src: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut lit_start: Option<usize> = None;
    let mut i = 0;
    while let Some(c) = src.get(i..).and_then(|s| s.chars().next()) {
        let at = i;
        i += c.len_utf8();
        let token = match c {
            '*' => Token::Star,
            '?' => Token::Any,
            '[' => match src.get(i..).and_then(class_end) {
                Some(end) => {
                    let class = parse_class(src.get(i..i + end).unwrap_or_default());
                    i += end + 1;
                    Token::Class(class)
                }
                None => {
                    lit_start.get_or_insert(at);
                    continue;
                }
            },
            _ => {
                lit_start.get_or_insert(at);
                continue;
            }
        };
        if let Some(start) = lit_start.take() {
            tokens.push(Token::Lit(src.get(start..at).unwrap_or_default().into()));
        }
        if !(token == Token::Star && tokens.last() == Some(&Token::Star)) {
            tokens.push(token);
        }
    }
    if let Some(start) = lit_start {
        tokens.push(Token::Lit(src.get(start..).unwrap_or_default().into()));
    }
    tokens
}

/// Byte length of the literal prefix of `src` (see [`Pattern::literal_prefix`]).
fn literal_prefix_len(src: &str) -> usize {
    for (at, c) in src.char_indices() {
        let meta = match c {
            '*' | '?' => true,
            '[' => src.get(at + 1..).and_then(class_end).is_some(),
            _ => false,
        };
        if meta {
            return at;
        }
    }
    src.len()
}

/// Given the text after a `[`, the byte offset of the `]` closing it, if any: an optional
/// `!`, then a `]` right after is a member, then the first `]` closes.
fn class_end(after: &str) -> Option<usize> {
    let bytes = after.as_bytes();
    let mut j = 0;
    if bytes.get(j) == Some(&b'!') {
        j += 1;
    }
    if bytes.get(j) == Some(&b']') {
        j += 1;
    }
    let close = bytes.get(j..)?.iter().position(|&b| b == b']')?;
    Some(j + close)
}

/// One element of the regex class body `fnmatch.translate` builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Item {
    /// A character that stands for itself.
    Char(char),
    /// An unescaped `-` joining two chunks (a range operator).
    Dash,
}

/// Builds the set for the bracket contents `stuff` (between `[` and the closing `]`),
/// emulating `fnmatch.translate` and then Python's `re` class parser, quirks included
/// (e.g. `[z-a!x]` drops the empty range and then reads the leading `!` as negation).
fn parse_class(stuff: &str) -> Class {
    let chars: Vec<char> = stuff.chars().collect();
    let mut items = Vec::with_capacity(chars.len());
    if chars.contains(&'-') {
        // Split at range hyphens, exactly as `translate` does.
        let mut chunks: Vec<Vec<char>> = Vec::new();
        let mut start = 0;
        let mut k = if chars.first() == Some(&'!') { 2 } else { 1 };
        while let Some(h) = chars
            .get(k..)
            .and_then(|s| s.iter().position(|&c| c == '-'))
            .map(|p| p + k)
        {
            chunks.push(chars.get(start..h).unwrap_or_default().to_vec());
            start = h + 1;
            k = h + 3;
        }
        let last = chars.get(start..).unwrap_or_default();
        if !last.is_empty() {
            chunks.push(last.to_vec());
        } else if let Some(prev) = chunks.last_mut() {
            prev.push('-');
        }
        // Remove empty ranges (start > end) together with their endpoints.
        for k in (1..chunks.len()).rev() {
            let empty = matches!(
                (chunks[k - 1].last(), chunks[k].first()),
                (Some(lo), Some(hi)) if lo > hi
            );
            if empty {
                let next = chunks.remove(k);
                let prev = &mut chunks[k - 1];
                prev.pop();
                prev.extend(next.iter().skip(1));
            }
        }
        for (n, chunk) in chunks.iter().enumerate() {
            if n > 0 {
                items.push(Item::Dash);
            }
            items.extend(chunk.iter().map(|&c| Item::Char(c)));
        }
    } else {
        items.extend(chars.iter().map(|&c| Item::Char(c)));
    }
    let (negated, body) = match items.as_slice() {
        [] => (false, &[][..]),
        [Item::Char('!'), rest @ ..] => (true, rest),
        all => (false, all),
    };
    // `re`'s reading of the class body: `x-y` is a range, anything else is a member.
    let char_of = |item: &Item| match *item {
        Item::Char(c) => c,
        Item::Dash => '-',
    };
    let mut ranges = Vec::new();
    let mut i = 0;
    while let Some(item) = body.get(i) {
        let lo = char_of(item);
        match (body.get(i + 1), body.get(i + 2)) {
            (Some(Item::Dash), Some(hi)) => {
                // `translate` removed empty ranges, so `lo > hi` cannot happen here.
                let hi = char_of(hi);
                if lo <= hi {
                    ranges.push((lo, hi));
                }
                i += 3;
            }
            _ => {
                ranges.push((lo, lo));
                i += 1;
            }
        }
    }
    Class {
        negated,
        ranges: ranges.into_boxed_slice(),
    }
}

/// Matches `topic` against `tokens`: the two-pointer glob algorithm with backtracking to the
/// last `*` only (enough, since a later `*` can absorb anything an earlier one could).
fn match_tokens(tokens: &[Token], topic: &str) -> bool {
    let mut rest = topic;
    let mut pi = 0;
    // The last `*` seen and the topic suffix at which the tokens after it were last tried.
    let mut backtrack: Option<(usize, &str)> = None;
    loop {
        let advanced = match tokens.get(pi) {
            None => {
                if rest.is_empty() {
                    return true;
                }
                false
            }
            Some(Token::Star) => match tokens.get(pi + 1) {
                None => return true,
                Some(Token::Lit(lit)) => {
                    // Jump straight to the next place the following literal occurs.
                    let Some(at) = rest.find(&**lit) else {
                        return false;
                    };
                    rest = rest.get(at..).unwrap_or_default();
                    backtrack = Some((pi, rest));
                    pi += 1;
                    true
                }
                Some(_) => {
                    backtrack = Some((pi, rest));
                    pi += 1;
                    true
                }
            },
            Some(Token::Lit(lit)) => match rest.strip_prefix(&**lit) {
                Some(after) => {
                    rest = after;
                    pi += 1;
                    true
                }
                None => false,
            },
            Some(Token::Any) => {
                let mut chars = rest.chars();
                match chars.next() {
                    Some(_) => {
                        rest = chars.as_str();
                        pi += 1;
                        true
                    }
                    None => false,
                }
            }
            Some(Token::Class(class)) => {
                let mut chars = rest.chars();
                match chars.next() {
                    Some(c) if class.contains(c) => {
                        rest = chars.as_str();
                        pi += 1;
                        true
                    }
                    _ => false,
                }
            }
        };
        if !advanced {
            // Let the last `*` absorb one more character and retry after it.
            let Some((star, tried)) = backtrack else {
                return false;
            };
            let mut chars = tried.chars();
            if chars.next().is_none() {
                return false;
            }
            rest = chars.as_str();
            pi = star;
        }
    }
}

/// What a stored pattern requires of the topic after its literal prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tail {
    /// Nothing: the topic must end there.
    Exact,
    /// Anything (the rest of the pattern is `*`).
    Anything,
    /// Something only the matcher can decide.
    Glob,
}

/// An index from patterns to keys, answering "which keys' patterns match this topic" without
/// scanning every pattern.
///
/// Patterns live at the node of a byte trie reached by their literal prefix. A lookup walks
/// the topic's bytes down the trie and runs the matcher only on patterns stored at the nodes
/// it visits, i.e. patterns whose literal prefix is a prefix of the topic (patterns whose rest
/// is empty or `*` need no matcher at all). Patterns with an empty literal prefix, such as
/// `*` or `?x`, are checked on every lookup.
///
/// Everything is kept in sorted `Vec`s, so behaviour is deterministic.
#[derive(Debug, Clone)]
pub struct TopicIndex<K> {
    mode: MatchMode,
    /// Trie arena; `nodes[0]` is the root. Pruned nodes go to `free`.
    nodes: Vec<Node<K>>,
    free: Vec<usize>,
    len: usize,
}

#[derive(Debug, Clone)]
struct Node<K> {
    parent: usize,
    byte: u8,
    /// Sorted by byte.
    children: Vec<(u8, usize)>,
    /// Patterns whose literal prefix is this node's path, sorted by pattern text.
    entries: Vec<Entry<K>>,
}

impl<K> Node<K> {
    fn new(parent: usize, byte: u8) -> Self {
        Self {
            parent,
            byte,
            children: Vec::new(),
            entries: Vec::new(),
        }
    }

    fn child(&self, byte: u8) -> Option<usize> {
        let i = self
            .children
            .binary_search_by_key(&byte, |&(b, _)| b)
            .ok()?;
        self.children.get(i).map(|&(_, child)| child)
    }
}

#[derive(Debug, Clone)]
struct Entry<K> {
    pattern: Pattern,
    tail: Tail,
    /// Sorted, without duplicates.
    keys: Vec<K>,
}

impl<K: Copy + Ord> Default for TopicIndex<K> {
    fn default() -> Self {
        Self::new(MatchMode::default())
    }
}

impl<K: Copy + Ord> TopicIndex<K> {
    /// An empty index whose patterns match in `mode`.
    pub fn new(mode: MatchMode) -> Self {
        Self {
            mode,
            nodes: vec![Node::new(0, 0)],
            free: Vec::new(),
            len: 0,
        }
    }

    /// The mode patterns are matched in.
    pub fn mode(&self) -> MatchMode {
        self.mode
    }

    /// Adds `key` under `pattern`. Many keys may share a pattern; inserting the same
    /// `(pattern, key)` pair again is a no-op.
    pub fn insert(&mut self, pattern: &str, key: K) {
        let prefix = pattern
            .get(..literal_prefix_len(pattern))
            .unwrap_or_default();
        let mut node = 0;
        for &b in prefix.as_bytes() {
            node = self.child_or_create(node, b);
        }
        let mode = self.mode;
        let Some(entries) = self.nodes.get_mut(node).map(|n| &mut n.entries) else {
            return;
        };
        match entries.binary_search_by(|e| e.pattern.as_str().cmp(pattern)) {
            Ok(i) => {
                let keys = &mut entries[i].keys;
                if let Err(at) = keys.binary_search(&key) {
                    keys.insert(at, key);
                    self.len += 1;
                }
            }
            Err(i) => {
                let pattern = Pattern::new(pattern, mode);
                let tail = pattern.tail();
                entries.insert(
                    i,
                    Entry {
                        pattern,
                        tail,
                        keys: vec![key],
                    },
                );
                self.len += 1;
            }
        }
    }

    /// Removes `key` from under `pattern`; returns whether it was there.
    pub fn remove(&mut self, pattern: &str, key: K) -> bool {
        let prefix = pattern
            .get(..literal_prefix_len(pattern))
            .unwrap_or_default();
        let mut node = 0;
        for &b in prefix.as_bytes() {
            match self.nodes.get(node).and_then(|n| n.child(b)) {
                Some(child) => node = child,
                None => return false,
            }
        }
        let Some(entries) = self.nodes.get_mut(node).map(|n| &mut n.entries) else {
            return false;
        };
        let Ok(i) = entries.binary_search_by(|e| e.pattern.as_str().cmp(pattern)) else {
            return false;
        };
        let keys = &mut entries[i].keys;
        let Ok(at) = keys.binary_search(&key) else {
            return false;
        };
        keys.remove(at);
        if keys.is_empty() {
            entries.remove(i);
            self.prune(node);
        }
        self.len -= 1;
        true
    }

    /// Number of `(pattern, key)` pairs stored.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Removes everything.
    pub fn clear(&mut self) {
        *self = Self::new(self.mode);
    }

    /// Appends to `out` the key of every pattern matching `topic`, in ascending key order and
    /// each key once; `out` is cleared first. Allocates nothing beyond `out`'s growth.
    pub fn matches_into(&self, topic: &str, out: &mut Vec<K>) {
        out.clear();
        let bytes = topic.as_bytes();
        let mut node = 0;
        let mut depth = 0;
        while let Some(n) = self.nodes.get(node) {
            if !n.entries.is_empty() {
                // Entries sit only at ends of literal prefixes, which are char boundaries.
                if let Some(rest) = topic.get(depth..) {
                    for entry in &n.entries {
                        let hit = match entry.tail {
                            Tail::Exact => rest.is_empty(),
                            Tail::Anything => true,
                            Tail::Glob => entry.pattern.body_matches(rest),
                        };
                        if hit {
                            out.extend_from_slice(&entry.keys);
                        }
                    }
                }
            }
            match bytes.get(depth).and_then(|&b| n.child(b)) {
                Some(child) => {
                    node = child;
                    depth += 1;
                }
                None => break,
            }
        }
        out.sort_unstable();
        out.dedup();
    }

    fn child_or_create(&mut self, node: usize, byte: u8) -> usize {
        let slot = match self.nodes.get(node) {
            Some(n) => n.children.binary_search_by_key(&byte, |&(b, _)| b),
            None => return node,
        };
        match slot {
            Ok(i) => self.nodes[node].children[i].1,
            Err(i) => {
                let fresh = Node::new(node, byte);
                let child = match self.free.pop() {
                    Some(free) => {
                        self.nodes[free] = fresh;
                        free
                    }
                    None => {
                        self.nodes.push(fresh);
                        self.nodes.len() - 1
                    }
                };
                self.nodes[node].children.insert(i, (byte, child));
                child
            }
        }
    }

    /// Unlinks `node` and its ancestors while they hold nothing.
    fn prune(&mut self, mut node: usize) {
        while node != 0 {
            let Some(n) = self.nodes.get(node) else {
                return;
            };
            if !n.entries.is_empty() || !n.children.is_empty() {
                return;
            }
            let (parent, byte) = (n.parent, n.byte);
            let siblings = &mut self.nodes[parent].children;
            if let Ok(i) = siblings.binary_search_by_key(&byte, |&(b, _)| b) {
                siblings.remove(i);
            }
            self.nodes[node] = Node::new(0, 0);
            self.free.push(node);
            node = parent;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(src: &str) -> Vec<Token> {
        compile(src)
    }

    #[test]
    fn compile_collapses_stars_and_merges_literals() {
        assert_eq!(
            tokens("a**b[c"),
            [
                Token::Lit("a".into()),
                Token::Star,
                Token::Lit("b[c".into())
            ]
        );
    }

    #[test]
    fn literal_prefix_stops_at_first_metachar() {
        let cases = [
            ("inbound:chat-1", "inbound:chat-1", true),
            ("inbound:*", "inbound:", false),
            ("a?b", "a", false),
            ("ab[cd]e", "ab", false),
            ("ab[cd", "ab[cd", true),
            ("a[]b", "a[]b", true),
            ("a[]]b", "a", false),
            ("a[!]b", "a[!]b", true),
            ("é[z-a]", "é", false),
            ("", "", true),
        ];
        for (src, prefix, literal) in cases {
            let p = Pattern::new(src, MatchMode::Glob);
            assert_eq!(p.literal_prefix(), prefix, "{src}");
            assert_eq!(p.is_literal(), literal, "{src}");
        }
    }

    #[test]
    fn tails() {
        let tail = |src, mode| Pattern::new(src, mode).tail();
        assert_eq!(tail("a:b", MatchMode::Glob), Tail::Exact);
        assert_eq!(tail("a:b", MatchMode::GlobOrPrefix), Tail::Anything);
        assert_eq!(tail("a:*", MatchMode::Glob), Tail::Anything);
        assert_eq!(tail("a:**", MatchMode::GlobOrPrefix), Tail::Anything);
        assert_eq!(tail("", MatchMode::GlobOrPrefix), Tail::Anything);
        assert_eq!(tail("a:?", MatchMode::Glob), Tail::Glob);
    }

    #[test]
    fn class_quirks() {
        let class = |s| parse_class(s);
        assert_eq!(class("z-a").ranges.len(), 0);
        assert!(!class("z-a").negated);
        assert!(class("!z-a").negated);
        // `translate` turns `[z-a!x]` into `[^x]`.
        assert!(class("z-a!x").negated);
        assert!(class("z-a!x").contains('!'));
        assert!(!class("z-a!x").contains('x'));
    }

    #[test]
    fn prune_reuses_nodes() {
        let mut index = TopicIndex::new(MatchMode::Glob);
        index.insert("abc*", 1_u32);
        let nodes = index.nodes.len();
        assert!(index.remove("abc*", 1));
        assert!(index.nodes[0].children.is_empty());
        index.insert("xyz*", 2);
        assert_eq!(index.nodes.len(), nodes);
        assert!(!index.remove("xyz*", 1));
        assert!(!index.remove("xy*", 2));
        assert_eq!(index.len(), 1);
    }
}

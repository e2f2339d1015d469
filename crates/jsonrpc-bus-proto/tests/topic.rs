//! Topic patterns against Python's `fnmatch.fnmatchcase`, and the index against a naive scan.

use jsonrpc_bus_proto::topic::{MatchMode, Pattern, TopicIndex};
use proptest::prelude::*;

/// `(pattern, topic, fnmatch.fnmatchcase(topic, pattern))`, expectations from Python 3.11.
const FNMATCH_CASES: &[(&str, &str, bool)] = &[
    ("inbound:*", "inbound:chat-1", true),
    ("inbound:*", "outbound:x", false),
    ("inbound:*", "inbound:", true),
    ("inbound:*", "inbound", false),
    ("*", "", true),
    ("*", "anything:at/all", true),
    ("*", "é\n", true),
    ("", "", true),
    ("", "a", false),
    ("a?c", "aéc", true),
    ("a?c", "abc", true),
    ("a?c", "ac", false),
    ("a?c", "abbc", false),
    ("?", "\n", true),
    ("??", "é", false),
    ("?", "€", true),
    ("?", "😀", true),
    ("[abc]", "a", true),
    ("[abc]", "c", true),
    ("[abc]", "d", false),
    ("[abc]", "", false),
    ("[abc]", "ab", false),
    ("[!abc]", "d", true),
    ("[!abc]", "a", false),
    ("[!abc]", "é", true),
    ("[!abc]", "", false),
    ("[a-c]", "b", true),
    ("[a-c]", "d", false),
    ("[a-c]", "-", false),
    ("[]]", "]", true),
    ("[]]", "a", false),
    ("[!]]", "]", false),
    ("[!]]", "a", true),
    ("[]-]", "]", true),
    ("[]-]", "-", true),
    ("[]-]", "a", false),
    ("[a-]", "a", true),
    ("[a-]", "-", true),
    ("[a-]", "b", false),
    ("[-a]", "-", true),
    ("[!-a]", "-", false),
    ("[!-a]", "b", true),
    ("[abc", "[abc", true),
    ("[abc", "a", false),
    ("[abc*", "[abcd", true),
    ("[", "[", true),
    ("[]", "[]", true),
    ("[!]", "[!]", true),
    ("[!]", "!", false),
    ("[z-a]", "z", false),
    ("[z-a]", "a", false),
    ("[z-a]", "m", false),
    ("[z-a]", "-", false),
    ("[!z-a]", "m", true),
    ("[!z-a]", "z", true),
    ("[a-c-e]", "-", true),
    ("[a-c-e]", "d", false),
    ("[a-c-e]", "e", true),
    ("[--0]", ".", true),
    ("[a-a]", "a", true),
    ("[a-c-a]", "b", true),
    ("[a-c-a]", "-", true),
    ("[a-c-a]", "d", false),
    // `translate` drops the empty range, leaving `!x`, which `re` reads as `[^x]`.
    ("[z-a!x]", "!", true),
    ("[z-a!x]", "x", false),
    ("[z-a!x]", "q", true),
    ("[z-a!]", "q", true),
    ("[z-a!-#]", "-", false),
    ("[z-a!-#]", "\"", true),
    ("[]-!!x]", "!", true),
    ("[]-!!x]", "x", false),
    ("[é-ë]", "ê", true),
    ("[é-ë]", "e", false),
    ("[^a]", "^", true),
    ("[^a]", "b", false),
    ("[\\]", "\\", true),
    ("a\\*", "a\\bc", true),
    ("a\\*", "a*", false),
    ("\\?", "\\x", true),
    ("[[]", "[", true),
    ("[a&&b]", "&", true),
    ("[a|b]", "|", true),
    ("Inbound:*", "inbound:x", false),
    ("inbound:*", "INBOUND:X", false),
    ("[A-Z]", "a", false),
    ("**", "", true),
    ("**", "abc", true),
    ("a**b", "ab", true),
    ("a**b", "axxb", true),
    ("a*b*c", "abc", true),
    ("a*b*c", "axbxcx", false),
    ("a*b*c", "aXbYc", true),
    ("*.txt", "a.txt.txt", true),
    ("*.txt", "a.txt.bak", false),
    ("*a", "aaa", true),
    ("*a*", "bab", true),
    ("*?", "", false),
    ("*?", "é", true),
    ("?*?", "a", false),
    ("?*?", "ab", true),
    ("agent:*:status", "agent:42:status", true),
    ("agent:*:status", "agent:42:status:x", false),
    ("agent:?:*", "agent:1:", true),
    ("agent:?:*", "agent:12:", false),
];

#[test]
fn glob_agrees_with_fnmatchcase() {
    for &(pattern, topic, expected) in FNMATCH_CASES {
        let p = Pattern::new(pattern, MatchMode::Glob);
        assert_eq!(p.matches(topic), expected, "{pattern:?} vs {topic:?}");
        assert_eq!(
            reference::matches(pattern, topic),
            expected,
            "reference: {pattern:?}"
        );
    }
}

#[test]
fn pathological_patterns_terminate_quickly() {
    let long = "a".repeat(10_000);
    assert!(!Pattern::new("a*a*a*a*a*b", MatchMode::Glob).matches(&long));
    assert!(Pattern::new("a*a*a*a*a*b", MatchMode::Glob).matches(&format!("{long}b")));
    let stars = "*a".repeat(50) + "*c";
    assert!(!Pattern::new(&stars, MatchMode::Glob).matches(&long));
    let questions = "*?a".repeat(50) + "*b";
    assert!(!Pattern::new(&questions, MatchMode::Glob).matches(&long));
    assert!(!Pattern::new(&format!("*{}b", "?".repeat(20)), MatchMode::Glob).matches(&long));
}

#[test]
fn glob_or_prefix_mode() {
    let cases = [
        ("inbound:chat-", "inbound:chat-1", true),
        ("inbound:chat-", "inbound:chat-", true),
        ("inbound:chat-", "inbound:chat", false),
        ("inbound:chat-", "outbound:chat-1", false),
        ("in*:x", "inbound:xyz", true),
        ("in*:x", "inbound:y", false),
        ("agent:?", "agent:1:status", true),
        ("agent:?", "agent:", false),
        ("", "anything", true),
        ("[z-a]", "z", false),
    ];
    for (pattern, topic, expected) in cases {
        let p = Pattern::new(pattern, MatchMode::GlobOrPrefix);
        assert_eq!(p.matches(topic), expected, "{pattern:?} vs {topic:?}");
    }
}

#[test]
fn accessors() {
    let p = Pattern::new("agent:[0-9]*", MatchMode::GlobOrPrefix);
    assert_eq!(p.as_str(), "agent:[0-9]*");
    assert_eq!(p.mode(), MatchMode::GlobOrPrefix);
    assert_eq!(p.literal_prefix(), "agent:");
    assert!(!p.is_literal());
    let p = Pattern::new("agent:[0-9", MatchMode::Glob);
    assert_eq!(p.literal_prefix(), "agent:[0-9");
    assert!(p.is_literal());
}

#[test]
fn index_basics() {
    let mut index = TopicIndex::new(MatchMode::Glob);
    assert!(index.is_empty());
    index.insert("inbound:chat-1", 5_u64);
    index.insert("inbound:chat-1", 3);
    index.insert("inbound:chat-1", 3);
    index.insert("inbound:*", 9);
    index.insert("inbound:chat-1-*", 1);
    index.insert("*", 7);
    index.insert("agent:?:x", 2);
    assert_eq!(index.len(), 6);
    let mut out = vec![42];
    index.matches_into("inbound:chat-1", &mut out);
    assert_eq!(out, [3, 5, 7, 9]);
    index.matches_into("inbound:chat-1-a", &mut out);
    assert_eq!(out, [1, 7, 9]);
    index.matches_into("agent:é:x", &mut out);
    assert_eq!(out, [2, 7]);
    assert!(index.remove("inbound:chat-1", 3));
    assert!(!index.remove("inbound:chat-1", 3));
    assert!(!index.remove("inbound:chat-2", 5));
    assert!(index.remove("*", 7));
    index.matches_into("inbound:chat-1", &mut out);
    assert_eq!(out, [5, 9]);
    assert_eq!(index.len(), 4);
    index.clear();
    assert!(index.is_empty());
    index.matches_into("inbound:chat-1", &mut out);
    assert!(out.is_empty());
}

#[test]
fn index_prefix_mode() {
    let mut index = TopicIndex::new(MatchMode::GlobOrPrefix);
    assert_eq!(index.mode(), MatchMode::GlobOrPrefix);
    index.insert("inbound:chat-", 1_u64);
    index.insert("inbound:chat-1", 2);
    index.insert("in*:x", 3);
    let mut out = Vec::new();
    index.matches_into("inbound:chat-12", &mut out);
    assert_eq!(out, [1, 2]);
    index.matches_into("inbound:xyz", &mut out);
    assert_eq!(out, [3]);
}

/// A straightforward second implementation: transcribes `fnmatch.translate` into a list of
/// elements (building the regex class text the way Python does and reading it back the way
/// `re` does), then matches with a dynamic-programming table over characters.
mod reference {
    #[derive(Debug)]
    enum Elem {
        Star,
        Any,
        Char(char),
        /// `re` class text without the brackets (`^` first means negated); `None` = `(?!)`.
        Set(Option<String>),
    }

    fn translate(pat: &str) -> Vec<Elem> {
        let pat: Vec<char> = pat.chars().collect();
        let n = pat.len();
        let mut res = Vec::new();
        let mut i = 0;
        while i < n {
            let c = pat[i];
            i += 1;
            match c {
                '*' => res.push(Elem::Star),
                '?' => res.push(Elem::Any),
                '[' => {
                    let mut j = i;
                    if j < n && pat[j] == '!' {
                        j += 1;
                    }
                    if j < n && pat[j] == ']' {
                        j += 1;
                    }
                    while j < n && pat[j] != ']' {
                        j += 1;
                    }
                    if j >= n {
                        res.push(Elem::Char('['));
                        continue;
                    }
                    let raw: String = pat[i..j].iter().collect();
                    let mut stuff = if !raw.contains('-') {
                        raw.replace('\\', "\\\\")
                    } else {
                        let mut chunks: Vec<String> = Vec::new();
                        let mut k = if pat[i] == '!' { i + 2 } else { i + 1 };
                        loop {
                            let found = (k..j).find(|&x| pat[x] == '-');
                            let Some(h) = found else { break };
                            chunks.push(pat[i..h].iter().collect());
                            i = h + 1;
                            k = h + 3;
                        }
                        let chunk: String = pat[i..j].iter().collect();
                        if chunk.is_empty() {
                            chunks.last_mut().unwrap().push('-');
                        } else {
                            chunks.push(chunk);
                        }
                        for k in (1..chunks.len()).rev() {
                            let last = chunks[k - 1].chars().last().unwrap();
                            let first = chunks[k].chars().next().unwrap();
                            if last > first {
                                let mut merged: Vec<char> = chunks[k - 1].chars().collect();
                                merged.pop();
                                merged.extend(chunks[k].chars().skip(1));
                                chunks[k - 1] = merged.into_iter().collect();
                                chunks.remove(k);
                            }
                        }
                        chunks
                            .iter()
                            .map(|s| s.replace('\\', "\\\\").replace('-', "\\-"))
                            .collect::<Vec<_>>()
                            .join("-")
                    };
                    stuff = stuff
                        .chars()
                        .flat_map(|c| {
                            let esc = matches!(c, '&' | '~' | '|').then_some('\\');
                            esc.into_iter().chain([c])
                        })
                        .collect();
                    i = j + 1;
                    res.push(if stuff.is_empty() {
                        Elem::Set(None)
                    } else if stuff == "!" {
                        Elem::Any
                    } else if let Some(rest) = stuff.strip_prefix('!') {
                        Elem::Set(Some(format!("^{rest}")))
                    } else if stuff.starts_with(['^', '[']) {
                        Elem::Set(Some(format!("\\{stuff}")))
                    } else {
                        Elem::Set(Some(stuff))
                    });
                }
                c => res.push(Elem::Char(c)),
            }
        }
        res
    }

    /// Python `re`'s reading of a class body, applied to one character.
    fn set_contains(body: &str, c: char) -> bool {
        let mut it: Vec<char> = body.chars().collect();
        it.push(']');
        let mut p = 0;
        let negate = it[0] == '^';
        if negate {
            p += 1;
        }
        let mut hit = false;
        let mut first = true;
        loop {
            let mut this = it[p];
            p += 1;
            if this == ']' && !first {
                break;
            }
            first = false;
            if this == '\\' {
                this = it[p];
                p += 1;
            }
            if it[p] == '-' {
                let mut that = it[p + 1];
                p += 2;
                if that == ']' {
                    hit |= c == this || c == '-';
                    break;
                }
                if that == '\\' {
                    that = it[p];
                    p += 1;
                }
                assert!(this <= that, "bad character range in {body:?}");
                hit |= this <= c && c <= that;
            } else {
                hit |= c == this;
            }
        }
        hit != negate
    }

    pub(crate) fn matches(pattern: &str, topic: &str) -> bool {
        let elems = translate(pattern);
        let t: Vec<char> = topic.chars().collect();
        // dp[i][j]: elems[i..] matches t[j..].
        let mut dp = vec![vec![false; t.len() + 1]; elems.len() + 1];
        dp[elems.len()][t.len()] = true;
        for i in (0..elems.len()).rev() {
            for j in (0..=t.len()).rev() {
                dp[i][j] = match &elems[i] {
                    Elem::Star => dp[i + 1][j] || (j < t.len() && dp[i][j + 1]),
                    Elem::Any => j < t.len() && dp[i + 1][j + 1],
                    Elem::Char(c) => j < t.len() && t[j] == *c && dp[i + 1][j + 1],
                    Elem::Set(None) => false,
                    Elem::Set(Some(body)) => {
                        j < t.len() && set_contains(body, t[j]) && dp[i + 1][j + 1]
                    }
                };
            }
        }
        dp[0][0]
    }
}

fn text(alphabet: &'static [char], max: usize) -> impl Strategy<Value = String> {
    proptest::collection::vec(proptest::sample::select(alphabet), 0..max)
        .prop_map(|chars| chars.into_iter().collect())
}

const PATTERN_CHARS: &[char] = &[
    'a', 'b', 'z', ':', '*', '?', '[', ']', '!', '-', '^', '\\', 'é', '😀',
];
const TOPIC_CHARS: &[char] = &['a', 'b', 'z', ':', '[', ']', '!', '-', '^', '\\', 'é', '😀'];

fn mode() -> impl Strategy<Value = MatchMode> {
    prop_oneof![Just(MatchMode::Glob), Just(MatchMode::GlobOrPrefix)]
}

/// The naive scan the index must agree with.
fn naive(patterns: &[(Pattern, u32)], topic: &str) -> Vec<u32> {
    let mut keys: Vec<u32> = patterns
        .iter()
        .filter(|(p, _)| p.matches(topic))
        .map(|&(_, k)| k)
        .collect();
    keys.sort_unstable();
    keys
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn pattern_matches_reference(pattern in text(PATTERN_CHARS, 10), topic in text(TOPIC_CHARS, 12)) {
        let expected = reference::matches(&pattern, &topic);
        prop_assert_eq!(Pattern::new(&pattern, MatchMode::Glob).matches(&topic), expected);
        let prefixed = reference::matches(&format!("{pattern}*"), &topic);
        prop_assert_eq!(Pattern::new(&pattern, MatchMode::GlobOrPrefix).matches(&topic), prefixed);
        prop_assert!(!expected || topic.starts_with(Pattern::new(&pattern, MatchMode::Glob).literal_prefix()));
    }

    #[test]
    fn pattern_matches_its_own_literal_instances(pattern in text(PATTERN_CHARS, 10)) {
        // A pattern without metacharacters matches exactly itself.
        let p = Pattern::new(&pattern, MatchMode::Glob);
        if p.is_literal() {
            prop_assert!(p.matches(&pattern));
            prop_assert_eq!(p.literal_prefix(), pattern.as_str());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn index_agrees_with_naive_scan(
        mode in mode(),
        patterns in proptest::collection::vec(text(PATTERN_CHARS, 7), 0..40),
        topics in proptest::collection::vec(text(TOPIC_CHARS, 9), 1..12),
        removals in proptest::collection::vec(any::<bool>(), 40),
    ) {
        let mut index = TopicIndex::new(mode);
        let mut live: Vec<(Pattern, u32)> = Vec::new();
        for (key, src) in (0..).zip(&patterns) {
            index.insert(src, key);
            live.push((Pattern::new(src, mode), key));
        }
        prop_assert_eq!(index.len(), live.len());
        let mut out = Vec::new();
        let check = |index: &TopicIndex<u32>, live: &[(Pattern, u32)], out: &mut Vec<u32>| {
            for topic in &topics {
                index.matches_into(topic, out);
                assert_eq!(*out, naive(live, topic), "topic {topic:?}");
            }
        };
        check(&index, &live, &mut out);

        // Remove some, then add them back under new keys.
        let mut removed = Vec::new();
        live.retain(|(p, key)| {
            if removals[*key as usize] {
                assert!(index.remove(p.as_str(), *key));
                assert!(!index.remove(p.as_str(), *key));
                removed.push(p.as_str().to_owned());
                false
            } else {
                true
            }
        });
        prop_assert_eq!(index.len(), live.len());
        check(&index, &live, &mut out);

        for (key, src) in (1000..).zip(&removed) {
            index.insert(src, key);
            live.push((Pattern::new(src, mode), key));
        }
        prop_assert_eq!(index.len(), live.len());
        check(&index, &live, &mut out);
    }
}

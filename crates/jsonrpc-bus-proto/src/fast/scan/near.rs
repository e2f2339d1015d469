//! Generators of messages near a given shape, for the proptests that hold each one-pass
//! reader to the general path: members in any order, some dropped, renamed, repeated or
//! added, values from per-member lists, JSON whitespace (and sometimes a form feed) between
//! tokens, and sometimes one character deleted or inserted.

use proptest::prelude::*;

/// What may stand at each `~` of a template: JSON whitespace, and last a form feed (which
/// is not JSON whitespace).
pub(crate) const SPACES: &[&str] = &["", "", " ", "\n", "\t", "\r\n  ", "\u{c}"];

/// Indexes of JSON whitespace in [`SPACES`]; a quarter of the cases may also hold a form
/// feed.
pub(crate) fn spaces() -> impl Strategy<Value = Vec<usize>> {
    prop_oneof![
        3 => proptest::collection::vec(0..SPACES.len() - 1, 1..40),
        1 => proptest::collection::vec(0..SPACES.len(), 1..40),
    ]
}

/// Indexes of JSON whitespace only.
pub(crate) fn json_spaces() -> impl Strategy<Value = Vec<usize>> {
    proptest::collection::vec(0..SPACES.len() - 1, 1..40)
}

/// A one-character edit (position, and a character to insert or `None` to delete) drawn
/// from `chars`, in 30% of the cases.
pub(crate) fn edit(chars: Vec<char>) -> impl Strategy<Value = Option<(usize, Option<char>)>> {
    proptest::option::weighted(
        0.3,
        (
            0usize..400,
            proptest::option::of(proptest::sample::select(chars)),
        ),
    )
}

/// Members `(key, value)` near a message of `n` members (keys `0..n`): the `n` in some
/// order, half the values each member's first (valid) one, and in 30% of the cases one
/// member dropped, renamed to any of `keys`, repeated, or one extra member added.
pub(crate) fn members(n: usize, keys: usize) -> impl Strategy<Value = Vec<(usize, usize)>> {
    (
        Just((0..n).collect::<Vec<usize>>()).prop_shuffle(),
        proptest::collection::vec(prop_oneof![Just(0usize), 0usize..16], n),
        proptest::option::weighted(0.3, (0usize..4, 0usize..keys, 0usize..16)),
    )
        .prop_map(|(order, values, change)| {
            let mut members: Vec<(usize, usize)> = order.iter().map(|&k| (k, values[k])).collect();
            if let Some((what, key, value)) = change {
                let at = key % members.len();
                match what {
                    0 => drop(members.remove(at)),
                    1 => members[at].0 = key,
                    2 => members.insert(at, members[at]),
                    _ => members.insert(at, (key, value)),
                }
            }
            members
        })
}

/// An object of `members`, each written by `member` as a template (`~"name"~:~value`), with
/// the whitespace of `spaces` at every `~` and then `edit` applied.
pub(crate) fn render(
    members: &[(usize, usize)],
    member: fn(&(usize, usize)) -> String,
    spaces: &[usize],
    edit: Option<(usize, Option<char>)>,
) -> String {
    let members: Vec<String> = members.iter().map(member).collect();
    let text = format!("{{{}~}}~", members.join("~,"));
    let mut spaces = spaces.iter().cycle();
    let mut out: String = text
        .split('~')
        .enumerate()
        .flat_map(|(i, part)| {
            let space = match i {
                0 => "",
                _ => SPACES[*spaces.next().unwrap_or(&0)],
            };
            [space, part]
        })
        .collect();
    if let Some((at, ch)) = edit {
        let at = out
            .char_indices()
            .map(|(i, _)| i)
            .nth(at % out.chars().count());
        match (at, ch) {
            (Some(at), Some(ch)) => out.insert(at, ch),
            (Some(at), None) => {
                out.remove(at);
            }
            _ => {}
        }
    }
    out
}

//! Shared secrets (API keys, runner secrets) that rotate with an overlap.

use std::fmt;
use std::time::{Duration, Instant};

use subtle::ConstantTimeEq;

/// The secrets a server accepts (MCPW API keys, Chopsticks runner secrets), rotated without
/// a restart: after [`rotate`](Self::rotate), a secret that left the set stays valid until
/// `now + overlap`, so clients can move to the new one, and is refused after.
///
/// Whether a secret is required at all is fixed by the first non-empty configuration:
/// [`is_required`](Self::is_required) turns on when any secret is configured (an empty
/// string included) and never turns off, so emptying a key file refuses everyone once the
/// overlap ends instead of opening the server. An empty string never matches. Comparisons
/// are constant-time per byte and look at every secret. Time comes in as `now`; expired
/// secrets are forgotten at the next rotation and never matched after their deadline.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct RotatingSecrets {
    required: bool,
    /// Each secret with the instant from which it is refused (`None`: current).
    entries: Vec<(String, Option<Instant>)>,
}

impl fmt::Debug for RotatingSecrets {
    /// Counts only: secrets never reach a log.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RotatingSecrets")
            .field("required", &self.required)
            .field("current", &self.current().count())
            .field("retiring", &self.retiring().count())
            .finish()
    }
}

impl RotatingSecrets {
    /// The set of `secrets`, all current. Empty strings are kept out (they never match) but
    /// still make a secret required.
    pub fn new<S: Into<String>>(secrets: impl IntoIterator<Item = S>) -> Self {
        let mut set = Self::default();
        for s in secrets {
            set.required = true;
            set.add(s.into());
        }
        set
    }

    fn add(&mut self, secret: String) {
        if !secret.is_empty() && !self.entries.iter().any(|(s, _)| *s == secret) {
            self.entries.push((secret, None));
        }
    }

    /// Replaces the current set with `secrets`: a secret that is no longer listed is refused
    /// from `now + overlap` on (one already retiring keeps its deadline), a listed one is
    /// current again, and secrets whose deadline has passed are forgotten.
    pub fn rotate<S: Into<String>>(
        &mut self,
        secrets: impl IntoIterator<Item = S>,
        overlap: Duration,
        now: Instant,
    ) {
        let new: Vec<String> = secrets.into_iter().map(Into::into).collect();
        if !new.is_empty() {
            self.required = true;
        }
        let until = now.checked_add(overlap);
        for (secret, deadline) in &mut self.entries {
            if new.contains(secret) {
                *deadline = None;
            } else if deadline.is_none() {
                // An overlap too long to represent never ends: the secret stays current.
                *deadline = until;
            }
        }
        self.entries
            .retain(|(_, deadline)| deadline.is_none_or(|d| now < d));
        for s in new {
            self.add(s);
        }
    }

    /// Whether a secret must be presented.
    pub fn is_required(&self) -> bool {
        self.required
    }

    /// The position (in [`secrets`](Self::secrets) order) of the secret equal to
    /// `presented` that is still valid at `now`.
    pub fn find(&self, presented: &str, now: Instant) -> Option<usize> {
        let mut found = None;
        for (i, (secret, deadline)) in self.entries.iter().enumerate() {
            // `subtle`: a length difference is not secret, bytes are.
            let equal = bool::from(secret.as_bytes().ct_eq(presented.as_bytes()));
            if equal && deadline.is_none_or(|d| now < d) {
                found = found.or(Some(i));
            }
        }
        found
    }

    /// Whether `presented` is accepted at `now`: no secret is required, or it is a valid one.
    pub fn accepts(&self, presented: Option<&str>, now: Instant) -> bool {
        !self.required || presented.is_some_and(|p| self.find(p, now).is_some())
    }

    /// Every secret kept (current and retiring), in order, with its deadline (`None`:
    /// current).
    pub fn secrets(&self) -> impl Iterator<Item = (&str, Option<Instant>)> {
        self.entries.iter().map(|(s, d)| (s.as_str(), *d))
    }

    /// The current secrets.
    pub fn current(&self) -> impl Iterator<Item = &str> {
        self.secrets().filter(|(_, d)| d.is_none()).map(|(s, _)| s)
    }

    /// The retiring secrets and when each stops being accepted.
    pub fn retiring(&self) -> impl Iterator<Item = (&str, Instant)> {
        self.secrets().filter_map(|(s, d)| d.map(|d| (s, d)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(clippy::disallowed_methods)] // test base time
    fn t0() -> Instant {
        Instant::now()
    }

    #[test]
    fn a_removed_secret_stays_valid_for_the_overlap_only() {
        let t = t0();
        let overlap = Duration::from_secs(300);
        let mut s = RotatingSecrets::new(["old"]);
        assert!(s.accepts(Some("old"), t));
        s.rotate(["new"], overlap, t);
        assert!(s.accepts(Some("new"), t));
        assert!(s.accepts(Some("old"), t + overlap - Duration::from_millis(1)));
        assert!(!s.accepts(Some("old"), t + overlap));
        assert_eq!(s.retiring().count(), 1);
        // A later rotation does not extend a retiring secret's deadline...
        s.rotate(["newer"], overlap, t + Duration::from_secs(100));
        assert!(!s.accepts(Some("old"), t + overlap));
        assert!(s.accepts(Some("new"), t + overlap));
        // ...and forgets it once its deadline has passed.
        s.rotate(["newer"], overlap, t + overlap);
        assert_eq!(
            s.secrets().map(|(k, _)| k).collect::<Vec<_>>(),
            ["new", "newer"]
        );
        // Listing a retiring secret again makes it current.
        s.rotate(["new", "newer"], overlap, t + overlap);
        assert!(s.accepts(Some("new"), t + overlap * 10));
    }

    #[test]
    fn no_secret_configured_accepts_anything_until_one_is() {
        let t = t0();
        let mut s = RotatingSecrets::new(Vec::<String>::new());
        assert!(!s.is_required());
        assert!(s.accepts(None, t) && s.accepts(Some("x"), t));
        s.rotate(Vec::<String>::new(), Duration::ZERO, t);
        assert!(!s.is_required());
        s.rotate(["k"], Duration::ZERO, t);
        assert!(s.is_required());
        assert!(!s.accepts(None, t) && s.accepts(Some("k"), t));
        // Emptying the set never turns the check off.
        s.rotate(Vec::<String>::new(), Duration::from_secs(5), t);
        assert!(s.accepts(Some("k"), t + Duration::from_secs(4)));
        assert!(!s.accepts(Some("k"), t + Duration::from_secs(5)));
        assert!(!s.accepts(None, t + Duration::from_secs(5)));
    }

    #[test]
    fn empty_secrets_never_match_and_are_not_printed() {
        let t = t0();
        let s = RotatingSecrets::new([""]);
        assert!(s.is_required());
        assert!(!s.accepts(Some(""), t) && !s.accepts(None, t));
        let s = RotatingSecrets::new(["abc", "xyz"]);
        assert_eq!(s.find("xyz", t), Some(1));
        assert_eq!(s.find("ab", t), None);
        assert_eq!(s.find("abcd", t), None);
        assert!(!format!("{s:?}").contains("abc"));
    }
}

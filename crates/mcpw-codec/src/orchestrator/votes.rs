//! Tallying `voting` and `consensus` collaborations: what a vote is, the rule a request's
//! `context.criteria` sets, and the decision.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::{ParamError, ProtocolError};
use crate::params::{CollaborationRequest, CoordinationPattern, VoteOutcome};

/// The request's pattern (`broadcast` when it names none) and, for `voting` and
/// `consensus`, the rule its `context.criteria` sets: `quorum` (votes of any kind needed, 1
/// to the number of agents asked; default a majority of them for `voting`, all of them for
/// `consensus`) and `threshold` (`voting` only: approvals must be more than this share of
/// approve and reject votes, 0 to below 1; default 0.5). Other criteria are the voters'.
/// An unknown pattern is 4000; a bad quorum or threshold 4005.
pub(crate) fn rule_of(
    p: &CollaborationRequest,
) -> Result<(CoordinationPattern, Option<VoteRule>), ProtocolError> {
    let pattern = match p.coordination_pattern.as_deref() {
        None => CoordinationPattern::Broadcast,
        Some(name) => CoordinationPattern::parse(name)
            .ok_or_else(|| ProtocolError::UnknownPattern(name.to_owned()))?,
    };
    if !pattern.is_vote() {
        return Ok((pattern, None));
    }
    let mut asked: Vec<&str> = p.required_agents.iter().map(String::as_str).collect();
    asked.sort_unstable();
    asked.dedup();
    let asked = asked.len() as u64;
    let criteria = p.context.as_ref().and_then(|c| c.get("criteria"));
    let bad = |field: &str, expected: &'static str| {
        ProtocolError::InvalidParams(ParamError::new(
            format!("context.criteria.{field}"),
            "Out of range",
            expected,
            "number",
        ))
    };
    let quorum = match criteria.and_then(|c| c.get("quorum")) {
        None => None,
        Some(q) => Some(
            q.as_u64()
                .filter(|q| (1..=asked).contains(q))
                .ok_or_else(|| bad("quorum", "integer from 1 to the agents asked"))?,
        ),
    };
    let threshold = match criteria.and_then(|c| c.get("threshold")) {
        None => None,
        Some(t) => Some(
            t.as_f64()
                .filter(|t| (0.0..1.0).contains(t))
                .ok_or_else(|| bad("threshold", "number from 0 to below 1"))?,
        ),
    };
    let rule = match pattern {
        CoordinationPattern::Consensus => VoteRule {
            pattern,
            quorum: quorum.unwrap_or(asked),
            threshold: 1.0,
        },
        _ => VoteRule {
            pattern,
            quorum: quorum.unwrap_or(asked / 2 + 1),
            threshold: threshold.unwrap_or(0.5),
        },
    };
    Ok((pattern, Some(rule)))
}

/// One agent's vote, read from its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Vote {
    Approve,
    Reject,
    Abstain,
}

impl Vote {
    /// The vote in an answer: its `vote` member, `approve`/`approved`/`yes`/`true`,
    /// `reject`/`rejected`/`no`/`false` or `abstain` (any case). Anything else is no vote.
    pub(crate) fn of(answer: &Value) -> Option<Self> {
        match answer.get("vote")? {
            Value::Bool(true) => Some(Self::Approve),
            Value::Bool(false) => Some(Self::Reject),
            Value::String(s) => match s.to_ascii_lowercase().as_str() {
                "approve" | "approved" | "yes" => Some(Self::Approve),
                "reject" | "rejected" | "no" => Some(Self::Reject),
                "abstain" => Some(Self::Abstain),
                _ => None,
            },
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Approve => "approve",
            Self::Reject => "reject",
            Self::Abstain => "abstain",
        }
    }
}

/// How the votes of one collaboration decide.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct VoteRule {
    pub(crate) pattern: CoordinationPattern,
    /// Votes of any kind needed for a decision.
    pub(crate) quorum: u64,
    /// `voting`: approvals must be more than this share of approve and reject votes.
    pub(crate) threshold: f64,
}

impl VoteRule {
    /// The decision for these counts: `approved`, `rejected` or `no_quorum`. `asked` is
    /// how many agents were asked.
    fn decide(&self, (approve, reject, abstain): (u64, u64, u64), asked: u64) -> &'static str {
        match self.pattern {
            CoordinationPattern::Consensus => {
                if reject > 0 || abstain > 0 {
                    "rejected"
                } else if approve >= asked {
                    "approved"
                } else {
                    "no_quorum"
                }
            }
            _ => {
                let decided = approve + reject;
                if approve + reject + abstain < self.quorum {
                    "no_quorum"
                } else if decided > 0 && approve as f64 > self.threshold * decided as f64 {
                    "approved"
                } else {
                    "rejected"
                }
            }
        }
    }

    fn counts(votes: &BTreeMap<String, Vote>) -> (u64, u64, u64) {
        let n = |v: Vote| votes.values().filter(|x| **x == v).count() as u64;
        (n(Vote::Approve), n(Vote::Reject), n(Vote::Abstain))
    }

    /// Whether the decision is certain already, whatever the `waiting` agents vote (or if
    /// they never do).
    pub(crate) fn is_decided(
        &self,
        votes: &BTreeMap<String, Vote>,
        waiting: u64,
        asked: u64,
    ) -> bool {
        let (a, r, ab) = Self::counts(votes);
        let now = self.decide((a, r, ab), asked);
        now == self.decide((a + waiting, r, ab), asked)
            && now == self.decide((a, r + waiting, ab), asked)
            && now == self.decide((a, r, ab + waiting), asked)
    }

    /// The tally of `votes` among `asked` agents.
    pub(crate) fn outcome(&self, votes: &BTreeMap<String, Vote>, asked: u64) -> VoteOutcome {
        let counts = Self::counts(votes);
        VoteOutcome {
            decision: self.decide(counts, asked).to_owned(),
            approve: counts.0,
            reject: counts.1,
            abstain: counts.2,
            quorum: self.quorum,
            threshold: self.threshold,
            votes: votes
                .iter()
                .map(|(a, v)| (a.clone(), v.as_str().to_owned()))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn votes(v: &[(&str, Vote)]) -> BTreeMap<String, Vote> {
        v.iter().map(|(a, v)| ((*a).to_owned(), *v)).collect()
    }

    #[test]
    fn votes_are_read_from_the_answers_vote_member() {
        assert_eq!(Vote::of(&json!({"vote": "Approve"})), Some(Vote::Approve));
        assert_eq!(Vote::of(&json!({"vote": false})), Some(Vote::Reject));
        assert_eq!(Vote::of(&json!({"vote": "abstain"})), Some(Vote::Abstain));
        assert_eq!(Vote::of(&json!({"vote": "maybe"})), None);
        assert_eq!(Vote::of(&json!({"error": {"code": 4003}})), None);
    }

    #[test]
    fn voting_needs_the_quorum_and_more_than_the_threshold() {
        let rule = VoteRule {
            pattern: CoordinationPattern::Voting,
            quorum: 2,
            threshold: 0.5,
        };
        use Vote::*;
        let one = votes(&[("a", Approve)]);
        assert_eq!(rule.outcome(&one, 3).decision, "no_quorum");
        assert!(!rule.is_decided(&one, 2, 3));
        let tie = votes(&[("a", Approve), ("b", Reject)]);
        assert_eq!(rule.outcome(&tie, 3).decision, "rejected");
        let two = votes(&[("a", Approve), ("b", Approve)]);
        assert_eq!(rule.outcome(&two, 3).decision, "approved");
        assert!(rule.is_decided(&two, 1, 3), "a third vote cannot change it");
        let consensus = VoteRule {
            pattern: CoordinationPattern::Consensus,
            quorum: 3,
            threshold: 1.0,
        };
        assert_eq!(consensus.outcome(&two, 3).decision, "no_quorum");
        let no = votes(&[("a", Approve), ("b", Reject)]);
        assert!(consensus.is_decided(&no, 1, 3));
        assert_eq!(consensus.outcome(&no, 3).decision, "rejected");
    }
}

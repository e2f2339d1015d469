//! Capability-based task routing: which agent gets a task, and who else could have.

pub use crate::config::RoutingWeights;

/// One capability of an agent, as routing sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct CapabilityProfile {
    /// The capability's name (a task's `type` must equal it).
    pub name: String,
    /// The agent's confidence in it, 0..=1 (clamped).
    pub confidence: f64,
    /// What it is especially good at (`specialties`, and `languages`, lowercased).
    pub specialties: Vec<String>,
}

/// One agent that could take a task.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate<'a> {
    /// The agent's id.
    pub agent_id: &'a str,
    /// Its capabilities.
    pub capabilities: &'a [CapabilityProfile],
    /// Tasks it holds now.
    pub active_tasks: usize,
    /// Tasks it may hold at once (`resources.max_concurrent_tasks`; 0 = no limit given).
    pub max_concurrent: usize,
    /// Its last reported `workload.current_load`, 0..=1 (clamped).
    pub reported_load: f64,
}

/// The routing decision for one task.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    /// The chosen agent.
    pub agent_id: String,
    /// Its score, 0..=1.
    pub score: f64,
    /// The next best agents, best first (at most `max_alternatives`).
    pub alternatives: Vec<String>,
}

/// The load of a candidate, 0..=1: the larger of its reported load and its share of
/// `max_concurrent` in use.
pub fn load(c: &Candidate<'_>) -> f64 {
    let reported = clamp01(c.reported_load);
    if c.max_concurrent == 0 {
        return reported;
    }
    #[allow(clippy::cast_precision_loss)] // task counts are small
    let used = c.active_tasks as f64 / c.max_concurrent as f64;
    reported.max(clamp01(used))
}

/// The score of `c` for a task of type `task_type` with `focus` areas; `None` when it has
/// no such capability or no free slot.
///
/// The score is `w.confidence * confidence + w.specialty * matched_focus_share +
/// w.capacity * (1 - load)`, divided by the sum of the weights, so it stays in 0..=1.
/// With no focus areas the specialty term counts as a full match.
pub fn score(
    c: &Candidate<'_>,
    task_type: &str,
    focus: &[String],
    w: &RoutingWeights,
) -> Option<f64> {
    if c.max_concurrent > 0 && c.active_tasks >= c.max_concurrent {
        return None;
    }
    let cap = c.capabilities.iter().find(|k| k.name == task_type)?;
    let specialty = if focus.is_empty() {
        1.0
    } else {
        let hit = focus
            .iter()
            .filter(|f| {
                cap.specialties
                    .iter()
                    .any(|s| s.eq_ignore_ascii_case(f.as_str()))
            })
            .count();
        #[allow(clippy::cast_precision_loss)] // focus lists are short
        let share = hit as f64 / focus.len() as f64;
        share
    };
    let total = w.confidence + w.specialty + w.capacity;
    if total <= 0.0 || !total.is_finite() {
        return Some(clamp01(cap.confidence));
    }
    let raw = w.confidence * clamp01(cap.confidence)
        + w.specialty * specialty
        + w.capacity * (1.0 - load(c));
    Some(clamp01(raw / total))
}

/// Picks the best candidate for a task (highest score; ties by agent id), recording the
/// runners-up. `None` when nobody can take it.
pub fn route(
    candidates: &[Candidate<'_>],
    task_type: &str,
    focus: &[String],
    w: &RoutingWeights,
) -> Option<Route> {
    let mut scored: Vec<(f64, &str)> = candidates
        .iter()
        .filter_map(|c| score(c, task_type, focus, w).map(|s| (s, c.agent_id)))
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    let mut it = scored.into_iter();
    let (best, agent) = it.next()?;
    Some(Route {
        agent_id: agent.to_owned(),
        // Two decimals, as in the spec's example (`"score": 0.92`).
        score: (best * 100.0).round() / 100.0,
        alternatives: it
            .take(w.max_alternatives)
            .map(|(_, a)| a.to_owned())
            .collect(),
    })
}

fn clamp01(x: f64) -> f64 {
    if x.is_nan() {
        0.0
    } else {
        x.clamp(0.0, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cap(name: &str, confidence: f64, specialties: &[&str]) -> CapabilityProfile {
        CapabilityProfile {
            name: name.into(),
            confidence,
            specialties: specialties.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    fn cand<'a>(id: &'a str, caps: &'a [CapabilityProfile], active: usize) -> Candidate<'a> {
        Candidate {
            agent_id: id,
            capabilities: caps,
            active_tasks: active,
            max_concurrent: 4,
            reported_load: 0.0,
        }
    }

    #[test]
    fn capability_confidence_and_load_decide() {
        let strong = [cap("code_review", 0.95, &["security"])];
        let weak = [cap("code_review", 0.6, &["security"])];
        let other = [cap("bug_detection", 0.99, &[])];
        let w = RoutingWeights::default();
        let focus = vec!["security".to_owned()];
        let all = [
            cand("a-strong", &strong, 0),
            cand("b-weak", &weak, 0),
            cand("c-other", &other, 0),
        ];
        let r = route(&all, "code_review", &focus, &w).unwrap();
        assert_eq!(r.agent_id, "a-strong");
        assert_eq!(r.alternatives, ["b-weak"]);
        // 0.5*0.95 + 0.2*1 + 0.3*1 = 0.975 -> 0.98
        assert_eq!(r.score, 0.98);
        // Busy enough, the strong agent loses to the idle weak one.
        let busy = [cand("a-strong", &strong, 3), cand("b-weak", &weak, 0)];
        assert_eq!(
            route(&busy, "code_review", &focus, &w).unwrap().agent_id,
            "b-weak"
        );
        // A full agent is not a candidate; nobody has the capability: no route.
        let full = [cand("a-strong", &strong, 4)];
        assert_eq!(route(&full, "code_review", &focus, &w), None);
        assert_eq!(route(&all, "translation", &[], &w), None);
    }

    #[test]
    fn specialties_count_and_ties_go_by_id() {
        let sec = [cap("code_review", 0.8, &["Security"])];
        let perf = [cap("code_review", 0.8, &["performance"])];
        let w = RoutingWeights::default();
        let focus = vec!["security".to_owned()];
        let both = [cand("z-sec", &sec, 0), cand("a-perf", &perf, 0)];
        assert_eq!(
            route(&both, "code_review", &focus, &w).unwrap().agent_id,
            "z-sec"
        );
        assert_eq!(
            route(&both, "code_review", &[], &w).unwrap().agent_id,
            "a-perf"
        );
    }

    #[test]
    fn reported_load_and_odd_numbers() {
        let caps = [cap("t", f64::NAN, &[])];
        let mut c = cand("a", &caps, 1);
        c.reported_load = 7.0;
        assert_eq!(load(&c), 1.0);
        c.max_concurrent = 0;
        c.reported_load = 0.25;
        assert_eq!(load(&c), 0.25);
        let s = score(&c, "t", &[], &RoutingWeights::default()).unwrap();
        assert!((0.0..=1.0).contains(&s));
    }
}

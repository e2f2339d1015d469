//! Every scenario by name: the agentwire protocols' ([`crate::scenario`]) and the baselines
//! ([`crate::baseline`]). A module of its own, so the scenarios and the baselines both use
//! [`crate::scenario`] without it using them.

use crate::error::LoadError;
use crate::scenario::Scenario;

/// Every scenario, in the order `all` runs them.
pub fn all() -> Vec<Scenario> {
    let mut v = Vec::new();
    v.extend(crate::scenario::bus::scenarios());
    v.extend(crate::scenario::chopsticks::scenarios());
    v.extend(crate::scenario::mcpw::scenarios());
    v.extend(crate::scenario::llmrtc::scenarios());
    v.extend(crate::scenario::relay::scenarios());
    v.extend(crate::baseline::scenarios());
    v
}

/// The scenario called `name`.
pub fn find(name: &str) -> Result<Scenario, LoadError> {
    all()
        .into_iter()
        .find(|s| s.name == name)
        .ok_or_else(|| LoadError::UnknownScenario(name.to_owned()))
}

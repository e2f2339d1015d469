//! Helpers shared by the criterion benches.

use std::path::PathBuf;

/// The median estimate (ns) of one benchmark from criterion's output, if present.
pub(crate) fn median_ns(group: &str, function: &str) -> Option<f64> {
    let root = std::env::var_os("CRITERION_HOME")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("CARGO_TARGET_DIR").map(|d| PathBuf::from(d).join("criterion"))
        })
        .unwrap_or_else(|| PathBuf::from("target/criterion"));
    let dir = root.join(group.replace('/', "_")).join(function);
    let text = std::fs::read_to_string(dir.join("new/estimates.json")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["median"]["point_estimate"].as_f64()
}

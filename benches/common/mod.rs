//! Helpers shared by the criterion benches.

use std::path::PathBuf;

/// The median estimate (ns) of one benchmark from criterion's output, if present.
#[allow(dead_code)] // not every bench reads criterion's files
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

/// Which bench families the command line asks for: `cargo bench --bench bus -- bus/fanout`
/// runs the families whose name contains an argument or that an argument narrows down
/// (`bus/fanout/in_memory/100` selects `bus/fanout/in_memory`; criterion then filters its
/// own timings by the same argument). No argument: every family.
#[allow(dead_code)] // not every bench has families
pub(crate) fn family_filter() -> impl Fn(&str) -> bool {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    move |family: &str| {
        args.is_empty()
            || args
                .iter()
                .any(|a| family.contains(a.as_str()) || a.starts_with(family))
    }
}

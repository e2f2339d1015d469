//! Builds an example program for the end-to-end tests that run it as a user would.

use std::path::PathBuf;

/// Builds example `name` into the target directory this test was built in (same profile)
/// and returns its path. Cargo builds examples for `cargo test` of the whole package, but
/// not for `--test NAME` alone.
pub(crate) fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps")
        .to_path_buf();
    let target_dir = profile_dir.parent().expect("target dir").to_path_buf();
    let mut build = std::process::Command::new(env!("CARGO"));
    build
        .args(["build", "--quiet", "--example", name, "--manifest-path"])
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir);
    if profile_dir.file_name().is_some_and(|p| p == "release") {
        build.arg("--release");
    }
    let status = build.status().expect("cargo build");
    assert!(status.success(), "building example {name} failed");
    profile_dir.join("examples").join(name)
}

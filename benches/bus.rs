//! Placeholder: replaced by the bus benches.
fn main() {}

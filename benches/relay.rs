//! Placeholder: this bench is written on its protocol branch.
fn main() {}

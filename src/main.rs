//! The mnemo CLI.
fn main() {}

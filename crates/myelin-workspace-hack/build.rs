//! Empty: present so that cargo resolves this crate's `[build-dependencies]`
//! (the host-side half of the feature union; see Cargo.toml).
fn main() {}

//! No code: this crate exists for its dependencies' features, so that
//! every build in the workspace that includes `myelin-core` compiles each
//! dependency once, with one set of features (see its Cargo.toml).

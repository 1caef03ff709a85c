//! Links myelin's hot text (the per-message paths' functions, in
//! `.text.hot.myelin`) into one run of pages in the extension module:
//! GNU ld groups `.text.hot.*` by itself, lld and mold when asked. See
//! `myelin_sync::hot`.
fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo::rustc-link-arg=-Wl,-z,keep-text-section-prefix");
    }
}

//! Decode arbitrary bytes as messages from another process: an error,
//! never a panic. Run: `cargo +nightly fuzz run wire` (in `fuzz/`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use myelin_core::{Blob, Message, SharedBytes};

fuzz_target!(|data: &[u8]| {
    let b = || SharedBytes::copy_from(data);
    let _ = String::wire_decode(b());
    let _ = Vec::<u8>::wire_decode(b());
    let _ = bool::wire_decode(b());
    let _ = u64::wire_decode(b());
    let _ = f64::wire_view(data);
    let _ = Blob::wire_decode(b());
});

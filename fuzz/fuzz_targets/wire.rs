//! Decode arbitrary bytes as messages from another process: an error,
//! never a panic, for built-in types, the standard ROS 2 messages (derived
//! CDR: nested structs, strings, sequences, arrays) and derived POD and CDR
//! types of a user's own. Run: `cargo +nightly fuzz run wire` (in `fuzz/`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use myelin_core::{Blob, Message, SharedBytes};
use myelin_msgs::{geometry_msgs, sensor_msgs, std_msgs};

/// A user's POD type (read in place from shared memory).
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable, myelin::Message)]
#[repr(C)]
#[message(pod)]
struct Pose {
    x: f64,
    y: f64,
    seq: u64,
}

/// A user's CDR type with everything that has a length on the wire.
#[derive(Clone, serde::Serialize, serde::Deserialize, myelin::Message)]
#[message(cdr, name = "fuzz_msgs/msg/Nested")]
struct Nested {
    name: String,
    values: Vec<f32>,
    inner: Vec<Inner>,
    fixed: [u16; 3],
    flag: bool,
}

#[derive(Clone, serde::Serialize, serde::Deserialize)]
struct Inner {
    label: String,
    bytes: Vec<u8>,
}

fuzz_target!(|data: &[u8]| {
    let b = || SharedBytes::copy_from(data);
    let _ = String::wire_decode(b());
    let _ = Vec::<u8>::wire_decode(b());
    let _ = bool::wire_decode(b());
    let _ = u64::wire_decode(b());
    let _ = f64::wire_view(data);
    let _ = Blob::wire_decode(b());
    let _ = std_msgs::String::wire_decode(b());
    let _ = geometry_msgs::Twist::wire_decode(b());
    let _ = sensor_msgs::Image::wire_decode(b());
    let _ = sensor_msgs::PointCloud2::wire_decode(b());
    let _ = Pose::wire_decode(b());
    let _ = Pose::wire_view(data);
    let _ = Nested::wire_decode(b());
});

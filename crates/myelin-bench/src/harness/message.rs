//! The benchmark message most runs send: a publish timestamp, a sequence
//! number and a payload.

/// The benchmark message: a publish timestamp, a sequence number and a
/// payload. Its size is `16 + data.len()` bytes.
#[derive(Clone, Debug, myelin::Message)]
#[message(name = "myelin_bench/msg/Stamped")]
pub struct Stamped {
    /// [`now_ns`](super::now_ns) just before publish.
    pub stamp_ns: u64,
    /// 0, 1, 2, ...
    pub seq: u64,
    /// Payload.
    pub data: Vec<u8>,
}

/// Bytes of [`Stamped`] besides its payload.
pub const STAMPED_HEADER: usize = 16;

impl Stamped {
    /// A message of `size` bytes in total (at least the header).
    pub fn with_size(seq: u64, size: usize) -> Self {
        Stamped {
            stamp_ns: 0,
            seq,
            data: vec![0xA5; size.saturating_sub(STAMPED_HEADER)],
        }
    }
}

//! The message types of the cases: CDR types, so that every transport can
//! carry them (in one process they are moved, never encoded).

/// A numbered message.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize, myelin::Message)]
#[message(cdr, name = "conformance_msgs/msg/Seq")]
pub struct Seq {
    /// The number the cases check.
    pub seq: u64,
    /// Text of varying length, so the encoding is not a fixed layout.
    pub label: String,
}

impl Seq {
    /// Message number `seq`.
    pub fn new(seq: u64) -> Seq {
        Seq {
            seq,
            label: format!("n{seq}"),
        }
    }
}

/// Another type, for type mismatches.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize, myelin::Message)]
#[message(cdr, name = "conformance_msgs/msg/Other")]
pub struct Other {
    /// Anything.
    pub x: i32,
}

/// The type names as endpoints report them.
pub const SEQ_TYPE: &str = "conformance_msgs/msg/Seq";
/// See [`SEQ_TYPE`].
pub const OTHER_TYPE: &str = "conformance_msgs/msg/Other";

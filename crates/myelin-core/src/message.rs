//! Message types.
//!
//! Every topic carries one type implementing [`Message`]. The trait is the
//! contract that lets a type travel, now and later across processes:
//! * `Clone + Send + Sync + 'static`: within a process a message is moved,
//!   shared through an `Arc`, or cloned for a subscription that wants its own
//!   copy (the copy rules of the intra-process manager need `Clone`);
//! * [`Message::TYPE_NAME`] and [`Message::TYPE_HASH`]: every endpoint
//!   advertises them, and a topic refuses an endpoint whose name or hash
//!   differs (within a process too), so foreign bytes are never
//!   reinterpreted.
//!
//! A user type needs one derive line; the derive computes the name from the
//! module path and the hash from the declaration, so editing a field changes
//! the hash:
//!
//! ```ignore
//! #[derive(Clone, myelin::Message)]
//! struct Odometry { x: f64, y: f64, theta: f64 }
//! ```
//!
//! `bool`, the integer and float primitives, `String` and `Vec<u8>` implement
//! it out of the box.
//!
//! Crossing a process boundary (the shared-memory and zenoh transports) adds
//! one of two encodings, chosen by the type: plain old data read in place
//! (zero-copy), or serde into CDR, the encoding ROS 2 uses on the wire. Those
//! arrive with the transports; the identity above is what they build on.

use std::fmt;

/// A 64-bit hash of a message type's schema (field names, types and order).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TypeHash(pub u64);

impl TypeHash {
    /// Hash a schema description with FNV-1a (usable in `const` context).
    pub const fn of_schema(schema: &str) -> TypeHash {
        let bytes = schema.as_bytes();
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut i = 0;
        while i < bytes.len() {
            h ^= bytes[i] as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
            i += 1;
        }
        TypeHash(h)
    }
}

impl fmt::Debug for TypeHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TypeHash({:016x})", self.0)
    }
}

impl fmt::Display for TypeHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// A type that can be published on a topic. See the [module docs](self).
pub trait Message: Clone + Send + Sync + 'static {
    /// The type's name as advertised on topics (e.g. `std_msgs/msg/String`).
    const TYPE_NAME: &'static str;
    /// The hash of the type's schema; endpoints with different hashes never
    /// connect.
    const TYPE_HASH: TypeHash;
}

macro_rules! builtin_message {
    ($($t:ty => $name:literal),* $(,)?) => {
        $(
            impl Message for $t {
                const TYPE_NAME: &'static str = $name;
                const TYPE_HASH: TypeHash = TypeHash::of_schema(concat!("builtin:", $name));
            }
        )*
    };
}

builtin_message! {
    bool => "bool",
    u8 => "uint8", i8 => "int8",
    u16 => "uint16", i16 => "int16",
    u32 => "uint32", i32 => "int32",
    u64 => "uint64", i64 => "int64",
    f32 => "float32", f64 => "float64",
    () => "empty",
    String => "string",
    Vec<u8> => "bytes",
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_differ_by_schema() {
        assert_ne!(TypeHash::of_schema("a:i32"), TypeHash::of_schema("a:i64"));
        assert_ne!(<u8 as Message>::TYPE_HASH, <i8 as Message>::TYPE_HASH);
        assert_eq!(TypeHash::of_schema(""), TypeHash(0xcbf2_9ce4_8422_2325));
    }
}

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
//! Crossing a process boundary (the shared-memory transport) needs one of
//! the encodings of [`Wire`], chosen by the type: plain
//! old data read in place (zero-copy, `#[message(pod)]`), a [`Blob`](crate::Blob)
//! of bytes, or serde into CDR, the encoding ROS 2 uses on the wire
//! (`#[message(cdr)]`). A type without one stays in its process.

use std::fmt;

use crate::wire::{SharedBytes, Wire, WireError};

pub mod description;
use description::Described;

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

    /// The schema hash of a type that mirrors a ROS 2 `.msg`: derived from
    /// its REP-2011 hash (`RIHS01_...`), which already covers the type's
    /// name and every field, so every program that knows the ROS type by
    /// name and hash (a derive with `ros_hash`, a bag player) agrees.
    ///
    /// ```
    /// use myelin_core::TypeHash;
    /// let h = "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18";
    /// assert_eq!(TypeHash::of_ros_hash(h), TypeHash::of_ros_hash(h));
    /// assert_ne!(TypeHash::of_ros_hash(h), TypeHash::of_schema("struct String{data:String}"));
    /// ```
    pub const fn of_ros_hash(ros_hash: &str) -> TypeHash {
        TypeHash::of_schema(ros_hash)
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

    /// How the type crosses a process boundary (default: it does not).
    const WIRE: Wire = Wire::Local;

    /// The ROS 2 type hash (REP 2011, `RIHS01_<64 hex>`) of a type that
    /// mirrors a ROS 2 `.msg` definition. The zenoh transport puts it in the
    /// key expression, as rmw_zenoh does, so ROS 2 nodes match the topic;
    /// `None` (the default) uses myelin's own [`TYPE_HASH`](Self::TYPE_HASH).
    const ROS_TYPE_HASH: Option<&'static str> = None;

    /// Bytes [`wire_encode`](Self::wire_encode) will write.
    fn wire_len(&self) -> Result<usize, WireError> {
        Err(WireError::Local(Self::TYPE_NAME))
    }

    /// Encode into `out` (exactly [`wire_len`](Self::wire_len) bytes),
    /// writing every byte of it: `out` may hold an earlier message's bytes
    /// (buffers are reused), so padding must be written too.
    fn wire_encode(&self, out: &mut [u8]) -> Result<(), WireError> {
        let _ = out;
        Err(WireError::Local(Self::TYPE_NAME))
    }

    /// Decode from bytes another process wrote (untrusted: a bad encoding
    /// is an error, never a panic).
    fn wire_decode(bytes: SharedBytes) -> Result<Self, WireError> {
        let _ = bytes;
        Err(WireError::Local(Self::TYPE_NAME))
    }

    /// Decode from the parts of one message, in order, read where they lie:
    /// what a network transport hands over (the one slice of its receive
    /// buffer, or the fragments of a message larger than its batches). The
    /// default gathers the parts into one buffer and calls
    /// [`wire_decode`](Self::wire_decode); CDR types decode across the
    /// parts, gathering only a field that spans two (a camera frame's
    /// pixels, straight into the vector the message keeps).
    fn wire_decode_parts(parts: &[&[u8]]) -> Result<Self, WireError> {
        let len = parts.iter().map(|p| p.len()).sum();
        Self::wire_decode(SharedBytes::copy_from_parts(parts.iter().copied(), len))
    }

    /// View bytes in place as this type (plain old data only): the
    /// zero-copy path. `None` if the type cannot, or size or alignment do
    /// not fit.
    fn wire_view(bytes: &[u8]) -> Option<&Self> {
        let _ = bytes;
        None
    }

    /// The type's description (REP 2016), for the `~/get_type_description`
    /// service of the nodes that use it: the message crate's types give
    /// theirs (from their `.msg` files); `None` (the default) leaves the
    /// type out.
    fn ros_type_description() -> Option<Described> {
        None
    }
}

/// A service type: the pair of messages a service takes and returns, with
/// the service's own name and ROS 2 type hash (what ROS 2 names a `.srv`:
/// `example_interfaces/srv/AddTwoInts`). rmw_zenoh puts the service's name
/// and hash, not its request's, in the key expression of its queryable, so
/// a ROS 2 peer finds a service by this type.
///
/// The message crate implements it for its services (`myelin_msgs::
/// example_interfaces::AddTwoInts`, ...); a service of your own:
///
/// ```
/// use myelin_core::{Message, ServiceType};
///
/// /// Doubles a number.
/// struct Double;
/// impl ServiceType for Double {
///     type Request = i64;
///     type Response = i64;
///     const TYPE_NAME: &'static str = "my_pkg/srv/Double";
/// }
/// assert_eq!(<Double as ServiceType>::Request::TYPE_NAME, i64::TYPE_NAME);
/// ```
pub trait ServiceType: 'static {
    /// What a client sends.
    type Request: Message;
    /// What the server answers.
    type Response: Message;
    /// The service type's name (`pkg/srv/Name`).
    const TYPE_NAME: &'static str;
    /// The ROS 2 type hash (REP 2011) of the service type, when it mirrors
    /// a ROS 2 `.srv`: the hash of its request, response and event
    /// messages together (see `myelin_msgs::idl::srv_type_hash`).
    const ROS_TYPE_HASH: Option<&'static str> = None;

    /// The service type's description (REP 2016), as
    /// [`Message::ros_type_description`].
    fn ros_type_description() -> Option<Described> {
        None
    }

    /// The ROS 2 type hash of the service's event message
    /// (`pkg/srv/Name_Event`, what service introspection publishes; see
    /// [`crate::introspection`]). `None` (the default): the service
    /// cannot be introspected.
    fn ros_event_type_hash() -> Option<String> {
        None
    }
}

/// `impl_cdr_message!(Type, "pkg/msg/Name", "RIHS01_...")`: the
/// [`Message`] of a serde type that mirrors a ROS 2 message, sent as CDR
/// and identified by its ROS hash (the core's own ROS types: time, clock,
/// parameters).
macro_rules! impl_cdr_message {
    ($t:ty, $ros:literal, $hash:literal) => {
        impl $crate::message::Message for $t {
            const TYPE_NAME: &'static str = $ros;
            const ROS_TYPE_HASH: Option<&'static str> = Some($hash);
            const TYPE_HASH: $crate::message::TypeHash =
                $crate::message::TypeHash::of_ros_hash($hash);
            const WIRE: $crate::wire::Wire = $crate::wire::Wire::Cdr;
            fn wire_len(&self) -> Result<usize, $crate::wire::WireError> {
                $crate::wire::cdr_codec::len(self)
            }
            fn wire_encode(&self, out: &mut [u8]) -> Result<(), $crate::wire::WireError> {
                $crate::wire::cdr_codec::encode(self, out, Self::TYPE_NAME)
            }
            fn wire_decode(
                bytes: $crate::wire::SharedBytes,
            ) -> Result<Self, $crate::wire::WireError> {
                $crate::wire::cdr_codec::decode(&bytes, Self::TYPE_NAME)
            }
            fn wire_decode_parts(parts: &[&[u8]]) -> Result<Self, $crate::wire::WireError> {
                $crate::wire::cdr_codec::decode_parts(parts, Self::TYPE_NAME)
            }
        }
    };
}
pub(crate) use impl_cdr_message;

/// `ros_msg!(Name = "pkg/msg/Name", "RIHS01_..." { fields })`: a CDR
/// message with its ROS name and hash.
macro_rules! ros_msg {
    ($(#[$doc:meta])* $name:ident = $ros:literal, $hash:literal { $($(#[$fdoc:meta])* $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(default, deny_unknown_fields)]
        pub struct $name {
            $($(#[$fdoc])* pub $field: $ty,)*
        }

        crate::message::impl_cdr_message!($name, $ros, $hash);
    };
}

/// `ros_srv!(Name = "pkg/srv/Name", "RIHS01_..." { Req = ..., "..." {..}
/// Resp = ..., "..." {..} })`: a service's request and response messages
/// and the service type.
macro_rules! ros_srv {
    ($(#[$doc:meta])* $name:ident = $ros:literal, $hash:literal {
        $req:ident = $req_ros:literal, $req_hash:literal { $($(#[$qdoc:meta])* $qf:ident : $qt:ty),* $(,)? }
        $resp:ident = $resp_ros:literal, $resp_hash:literal { $($(#[$rdoc:meta])* $rf:ident : $rt:ty),* $(,)? }
    }) => {
        ros_msg!(
            #[doc = concat!("The request of [`", stringify!($name), "`].")]
            $req = $req_ros, $req_hash { $($(#[$qdoc])* $qf: $qt),* }
        );
        ros_msg!(
            #[doc = concat!("The response of [`", stringify!($name), "`].")]
            $resp = $resp_ros, $resp_hash { $($(#[$rdoc])* $rf: $rt),* }
        );
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $name;
        impl crate::ServiceType for $name {
            type Request = $req;
            type Response = $resp;
            const TYPE_NAME: &'static str = $ros;
            const ROS_TYPE_HASH: Option<&'static str> = Some($hash);
        }
    };
}

pub(crate) use {ros_msg, ros_srv};

macro_rules! builtin_pod {
    ($($t:ty => $name:literal),* $(,)?) => {
        $(
            impl Message for $t {
                const TYPE_NAME: &'static str = $name;
                const TYPE_HASH: TypeHash = TypeHash::of_schema(concat!("builtin:", $name));
                const WIRE: Wire = Wire::Pod;
                fn wire_len(&self) -> Result<usize, WireError> {
                    Ok(std::mem::size_of::<$t>())
                }
                fn wire_encode(&self, out: &mut [u8]) -> Result<(), WireError> {
                    crate::wire::pod_codec::encode(self, out)
                }
                fn wire_decode(bytes: SharedBytes) -> Result<Self, WireError> {
                    crate::wire::pod_codec::decode(bytes, $name)
                }
                fn wire_view(bytes: &[u8]) -> Option<&Self> {
                    crate::wire::pod_codec::view(bytes)
                }
            }
        )*
    };
}

macro_rules! builtin_cdr {
    ($($t:ty => $name:literal),* $(,)?) => {
        $(
            impl Message for $t {
                const TYPE_NAME: &'static str = $name;
                const TYPE_HASH: TypeHash = TypeHash::of_schema(concat!("builtin:", $name));
                const WIRE: Wire = Wire::Cdr;
                fn wire_len(&self) -> Result<usize, WireError> {
                    crate::wire::cdr_codec::len(self)
                }
                fn wire_encode(&self, out: &mut [u8]) -> Result<(), WireError> {
                    crate::wire::cdr_codec::encode(self, out, $name)
                }
                fn wire_decode(bytes: SharedBytes) -> Result<Self, WireError> {
                    crate::wire::cdr_codec::decode(&bytes, $name)
                }
                fn wire_decode_parts(parts: &[&[u8]]) -> Result<Self, WireError> {
                    crate::wire::cdr_codec::decode_parts(parts, $name)
                }
            }
        )*
    };
}

builtin_pod! {
    u8 => "uint8", i8 => "int8",
    u16 => "uint16", i16 => "int16",
    u32 => "uint32", i32 => "int32",
    u64 => "uint64", i64 => "int64",
    f32 => "float32", f64 => "float64",
}

builtin_cdr! {
    bool => "bool",
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

    fn round_trip<T: Message + PartialEq + std::fmt::Debug>(v: T) {
        let mut buf = vec![0u8; v.wire_len().unwrap()];
        v.wire_encode(&mut buf).unwrap();
        assert_eq!(T::wire_decode(SharedBytes::copy_from(&buf)).unwrap(), v);
    }

    #[test]
    fn builtins_round_trip_on_the_wire() {
        round_trip(7u8);
        round_trip(-3i64);
        round_trip(1.5f64);
        round_trip(true);
        round_trip(());
        round_trip(String::from("héllo"));
        round_trip(vec![1u8, 2, 3]);
        // CDR: encapsulation header (CDR_LE), length incl. NUL, bytes, NUL.
        let mut buf = vec![0u8; "hi".to_string().wire_len().unwrap()];
        "hi".to_string().wire_encode(&mut buf).unwrap();
        assert_eq!(buf, [0, 1, 0, 0, 3, 0, 0, 0, b'h', b'i', 0]);
    }

    #[test]
    fn bad_bytes_are_an_error_not_a_panic() {
        assert!(String::wire_decode(SharedBytes::copy_from(&[0, 1, 0, 0, 200, 0])).is_err());
        assert!(u64::wire_decode(SharedBytes::copy_from(&[1, 2, 3])).is_err());
        assert!(u64::wire_view(&[0u8; 3]).is_none());
    }
}

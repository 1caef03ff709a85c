//! How messages cross a process boundary.
//!
//! A [`Message`](crate::Message) type says how with [`Message::WIRE`](crate::Message::WIRE):
//!
//! * [`Wire::Pod`]: plain old data (`#[repr(C)]`, `bytemuck::Pod`: no
//!   padding, every bit pattern valid). Read **in place** from shared
//!   memory: zero copies, whatever the size. `#[message(pod)]` in the derive.
//! * [`Wire::Bytes`]: [`Blob`], a byte buffer handed around by reference
//!   count; loaned with `Publisher::<Blob>::loan_slice`, read in place.
//! * [`Wire::Cdr`]: any serde type, serialised into CDR (the OMG Common Data
//!   Representation, little endian, with its 4-byte encapsulation header:
//!   what ROS 2 puts on the wire). `#[message(cdr)]` in the derive.
//! * [`Wire::Local`]: the type never leaves its process (the default for a
//!   type that says nothing): remote endpoints of its topic are not
//!   connected.

use std::any::Any;
use std::ops::Deref;
use std::sync::Arc;

/// How a message type crosses a process boundary. See the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// Stays in its process.
    Local,
    /// Plain old data, read in place.
    Pod,
    /// A [`Blob`]'s bytes, read in place.
    Bytes,
    /// Serialised with serde into CDR.
    Cdr,
}

/// Encoding or decoding a message failed.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The type has no wire encoding ([`Wire::Local`]).
    #[error(
        "message type {0} cannot leave its process (no wire encoding; derive it with #[message(pod)] or #[message(cdr)])"
    )]
    Local(&'static str),
    /// The bytes do not decode as the type.
    #[error("cannot decode a {type_name} from {len} bytes: {why}")]
    Decode {
        /// The type.
        type_name: &'static str,
        /// How many bytes came.
        len: usize,
        /// What went wrong.
        why: String,
    },
    /// The value does not encode.
    #[error("cannot encode a {type_name}: {why}")]
    Encode {
        /// The type.
        type_name: &'static str,
        /// What went wrong.
        why: String,
    },
}

/// Immutable bytes shared by reference count: a heap buffer, or a chunk
/// of shared memory that returns to its pool when the last holder drops it.
#[derive(Clone)]
pub struct SharedBytes {
    ptr: *const u8,
    len: usize,
    _owner: Owner,
}

/// What keeps shared bytes alive: anything behind an `Arc`, or a lease in
/// a slab (a chunk another process wrote, read in place here: no
/// allocation per message). 16 bytes, as the `Arc` alone (the lease fits
/// beside the `Arc`'s non-null pointers).
#[derive(Clone)]
pub(crate) enum Owner {
    /// A heap buffer, a loan, or a chunk whose slab slot was taken.
    Heap(Arc<dyn Any + Send + Sync>),
    /// A slot of a reader's lease slab.
    #[cfg(feature = "shm")]
    Lease(
        // Held for its drop: the last lease gives the chunk back.
        #[allow(dead_code)] myelin_sync::Lease,
    ),
}

// SAFETY: the bytes are immutable while any `SharedBytes` refers to them
// (a chunk is rewritten only after its last reference is gone), and the
// owner that keeps them alive is `Send + Sync`.
unsafe impl Send for SharedBytes {}
// SAFETY: as above; only shared (`&[u8]`) access is ever given out.
unsafe impl Sync for SharedBytes {}

impl SharedBytes {
    /// What keeps the bytes alive (a view into them stays valid while it
    /// lives).
    pub(crate) fn into_owner(self) -> Owner {
        self._owner
    }

    /// What keeps the bytes alive, by reference, when it is on the heap: a
    /// link that lent them recognises its own memory by it (see
    /// `PubLink::send_bytes`). `None` for a reader's lease (never a
    /// publisher's own memory).
    pub(crate) fn owner(&self) -> Option<&(dyn Any + Send + Sync)> {
        match &self._owner {
            Owner::Heap(a) => Some(&**a),
            #[cfg(feature = "shm")]
            Owner::Lease(_) => None,
        }
    }

    /// Bytes copied into a fresh heap buffer aligned to 16 bytes (so POD
    /// types up to that alignment can be viewed in place).
    pub fn copy_from(bytes: &[u8]) -> SharedBytes {
        SharedBytes::copy_from_parts(std::iter::once(bytes), bytes.len())
    }

    /// [`copy_from`](Self::copy_from) of bytes that come in `parts` (a
    /// network message reassembled from fragments), `len` bytes in all,
    /// copied once into the aligned buffer rather than joined first.
    /// Parts beyond `len` bytes are cut off; fewer leave zeros.
    pub(crate) fn copy_from_parts<'a>(
        parts: impl Iterator<Item = &'a [u8]>,
        len: usize,
    ) -> SharedBytes {
        // Gathered into a vector that is not zeroed first (for a camera
        // frame, zeroing costs as much as the copy). The allocator aligns
        // blocks to 16 bytes on the targets myelin runs on (glibc and musl
        // on x86_64 and aarch64); anywhere it did not, the bytes are copied
        // once more into an aligned buffer.
        let mut v = Vec::with_capacity(len);
        for part in parts {
            let n = part.len().min(len - v.len());
            v.extend_from_slice(&part[..n]);
        }
        v.resize(len, 0);
        if v.as_ptr().align_offset(16) == 0 {
            return SharedBytes::from_vec(v);
        }
        SharedBytes::copy_aligned(&v)
    }

    /// `bytes` copied into a zeroed buffer of `u128`s (aligned to 16).
    fn copy_aligned(bytes: &[u8]) -> SharedBytes {
        let len = bytes.len();
        let mut buf = vec![0u128; len.div_ceil(16)];
        bytemuck::cast_slice_mut::<u128, u8>(&mut buf)[..len].copy_from_slice(bytes);
        let buf: Arc<Vec<u128>> = Arc::new(buf);
        let ptr = buf.as_ptr() as *const u8;
        SharedBytes {
            ptr,
            len,
            _owner: Owner::Heap(buf),
        }
    }

    /// Take ownership of a vector (no copy).
    pub fn from_vec(v: Vec<u8>) -> SharedBytes {
        let v = Arc::new(v);
        SharedBytes {
            ptr: v.as_ptr(),
            len: v.len(),
            _owner: Owner::Heap(v),
        }
    }

    /// Bytes owned by `owner`.
    ///
    /// # Safety
    /// `ptr..ptr+len` must stay valid and unmodified for as long as `owner`
    /// is alive.
    pub(crate) unsafe fn from_raw(
        ptr: *const u8,
        len: usize,
        owner: Arc<dyn Any + Send + Sync>,
    ) -> SharedBytes {
        SharedBytes {
            ptr,
            len,
            _owner: Owner::Heap(owner),
        }
    }

    /// Bytes kept by a lease (a chunk read in place: its slab slot).
    ///
    /// # Safety
    /// `ptr..ptr+len` must stay valid and unmodified for as long as the
    /// lease (or a clone of it) is alive.
    #[cfg(feature = "shm")]
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    pub(crate) unsafe fn from_lease(
        ptr: *const u8,
        len: usize,
        lease: myelin_sync::Lease,
    ) -> SharedBytes {
        SharedBytes {
            ptr,
            len,
            _owner: Owner::Lease(lease),
        }
    }

    /// The bytes from `start` on, sharing the same owner (no copy).
    pub fn slice_from(&self, start: usize) -> SharedBytes {
        let start = start.min(self.len);
        SharedBytes {
            // SAFETY: `start <= len`, so the pointer stays inside (or one
            // past the end of) the owned bytes.
            ptr: unsafe { self.ptr.add(start) },
            len: self.len - start,
            _owner: self._owner.clone(),
        }
    }

    /// The number of bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Deref for SharedBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `ptr..ptr+len` is valid and immutable while `_owner` lives
        // (constructor contracts).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl AsRef<[u8]> for SharedBytes {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl std::fmt::Debug for SharedBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedBytes")
            .field("len", &self.len)
            .finish()
    }
}

/// A byte buffer message, cheap to clone (reference counted) and read in
/// place across processes: the type for camera frames, point clouds and
/// anything you lay out yourself. Loan one in shared memory with
/// [`Publisher::loan_slice`](crate::Publisher::loan_slice).
///
/// ```
/// use myelin_core::Blob;
/// let b = Blob::from(vec![1u8, 2, 3]);
/// assert_eq!(&b[..], &[1, 2, 3]);
/// ```
#[derive(Clone, Debug)]
pub struct Blob(pub(crate) SharedBytes);

impl Blob {
    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.0
    }

    /// The shared bytes behind this blob.
    pub fn shared_bytes(&self) -> &SharedBytes {
        &self.0
    }
}

impl Deref for Blob {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl From<SharedBytes> for Blob {
    /// No copy: the blob shares the bytes.
    fn from(v: SharedBytes) -> Blob {
        Blob(v)
    }
}

impl From<Vec<u8>> for Blob {
    fn from(v: Vec<u8>) -> Blob {
        Blob(SharedBytes::from_vec(v))
    }
}

impl From<&[u8]> for Blob {
    fn from(v: &[u8]) -> Blob {
        Blob(SharedBytes::copy_from(v))
    }
}

impl PartialEq for Blob {
    fn eq(&self, other: &Blob) -> bool {
        self[..] == other[..]
    }
}

impl crate::Message for Blob {
    const TYPE_NAME: &'static str = "myelin/msg/Blob";
    const TYPE_HASH: crate::TypeHash = crate::TypeHash::of_schema("builtin:blob");
    const WIRE: Wire = Wire::Bytes;
    fn wire_len(&self) -> Result<usize, WireError> {
        Ok(self.len())
    }
    fn wire_encode(&self, out: &mut [u8]) -> Result<(), WireError> {
        out.copy_from_slice(self);
        Ok(())
    }
    fn wire_decode(bytes: SharedBytes) -> Result<Self, WireError> {
        Ok(Blob(bytes))
    }
}

/// Any message's bytes, whatever its type: a subscription of `AnyMessage`
/// in another process than the publisher receives every message of its
/// topic as the publisher's wire bytes (POD bytes or CDR). For tools
/// (`myelin topic echo`, `hz`, `bw`); publishing one is not supported.
#[derive(Clone, Debug)]
pub struct AnyMessage(pub Blob);

impl AnyMessage {
    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl crate::Message for AnyMessage {
    const TYPE_NAME: &'static str = "*";
    const TYPE_HASH: crate::TypeHash = crate::TypeHash(0);
    const WIRE: Wire = Wire::Bytes;
    fn wire_len(&self) -> Result<usize, WireError> {
        Ok(self.0.len())
    }
    fn wire_encode(&self, out: &mut [u8]) -> Result<(), WireError> {
        out.copy_from_slice(&self.0);
        Ok(())
    }
    fn wire_decode(bytes: SharedBytes) -> Result<Self, WireError> {
        Ok(AnyMessage(Blob(bytes)))
    }
}

/// A message type known by name at run time, for programs that carry
/// messages they do not decode: a bag player republishing recorded bytes,
/// a bridge. [`Node::create_raw_publisher`](crate::Node::create_raw_publisher)
/// publishes [`AnyMessage`] bytes as this type.
///
/// ```
/// use myelin_core::{Message, RawType, TypeHash};
///
/// let h = "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18";
/// let t = RawType::ros("std_msgs/msg/String", h).unwrap();
/// assert_eq!(t.name(), "std_msgs/msg/String");
/// assert_eq!(t.hash(), TypeHash::of_ros_hash(h));
/// assert!(RawType::ros("std_msgs/String", h).is_err());
/// assert!(RawType::ros("std_msgs/msg/String", "RIHS01_00").is_err());
/// assert_eq!(RawType::of::<u32>().name(), u32::TYPE_NAME);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawType {
    name: &'static str,
    ros_hash: Option<&'static str>,
    hash: crate::TypeHash,
    wire: Wire,
}

/// A [`RawType`] that cannot name a ROS 2 type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RawTypeError {
    /// The name is not `package/msg/Name` (or `package/srv/Name_Request`).
    #[error("{0:?} is not a ROS 2 type name (package/msg/Name)")]
    Name(String),
    /// The hash is not `RIHS01_` and 64 lowercase hex digits.
    #[error("{0:?} is not a ROS 2 type hash (RIHS01_ and 64 lowercase hex digits)")]
    Hash(String),
}

impl RawType {
    /// The ROS 2 type `name` (`package/msg/Name`) with its REP-2011 hash,
    /// CDR on the wire: what a ROS 2 node or a myelin type with the same
    /// `ros_hash` sends.
    pub fn ros(name: &str, ros_hash: &str) -> Result<RawType, RawTypeError> {
        let part_ok = |p: &str| {
            !p.is_empty()
                && p.len() <= 255
                && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        };
        let parts: Vec<&str> = name.split('/').collect();
        if parts.len() != 3
            || !parts.iter().all(|p| part_ok(p))
            || !matches!(parts[1], "msg" | "srv" | "action")
        {
            return Err(RawTypeError::Name(name.chars().take(300).collect()));
        }
        let hex = ros_hash.strip_prefix("RIHS01_").unwrap_or("");
        if hex.len() != 64 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(RawTypeError::Hash(ros_hash.chars().take(80).collect()));
        }
        Ok(RawType {
            name: intern(name),
            ros_hash: Some(intern(ros_hash)),
            hash: crate::TypeHash::of_ros_hash(ros_hash),
            wire: Wire::Cdr,
        })
    }

    /// The type `T` is, as a raw type.
    pub fn of<T: crate::Message>() -> RawType {
        RawType {
            name: T::TYPE_NAME,
            ros_hash: T::ROS_TYPE_HASH,
            hash: T::TYPE_HASH,
            wire: T::WIRE,
        }
    }

    /// The type name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The ROS 2 type hash, if the type is a ROS type.
    pub fn ros_hash(&self) -> Option<&'static str> {
        self.ros_hash
    }

    /// myelin's schema hash (what endpoints compare).
    pub fn hash(&self) -> crate::TypeHash {
        self.hash
    }

    /// The wire encoding.
    pub fn wire(&self) -> Wire {
        self.wire
    }
}

/// A service type known by name at run time (a Python node's): its ROS
/// name and REP-2011 hash, and its request and response types.
/// [`Node::create_raw_service`](crate::Node::create_raw_service) and
/// [`Node::create_raw_client`](crate::Node::create_raw_client) carry
/// [`AnyMessage`] CDR as this type, meeting Rust servers and clients of
/// the service type it names in other processes and ROS 2 nodes.
///
/// ```
/// use myelin_core::{RawServiceType, RawType};
///
/// let h = |s: &str| format!("RIHS01_{}", s.repeat(64));
/// let t = RawServiceType::ros(
///     "example_interfaces/srv/AddTwoInts",
///     &h("1"),
///     RawType::ros("example_interfaces/srv/AddTwoInts_Request", &h("2")).unwrap(),
///     RawType::ros("example_interfaces/srv/AddTwoInts_Response", &h("3")).unwrap(),
/// )
/// .unwrap();
/// assert_eq!(t.name(), "example_interfaces/srv/AddTwoInts");
/// assert!(RawServiceType::ros("pkg/msg/Name", &h("1"), t.request(), t.response()).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawServiceType {
    name: &'static str,
    ros_hash: Option<&'static str>,
    request: RawType,
    response: RawType,
}

impl RawServiceType {
    /// The ROS 2 service type `name` (`package/srv/Name`, or an action's
    /// `package/action/Name_SendGoal` and `..._GetResult`) with its
    /// REP-2011 hash and its request and response types.
    pub fn ros(
        name: &str,
        ros_hash: &str,
        request: RawType,
        response: RawType,
    ) -> Result<RawServiceType, RawTypeError> {
        // The same checks as a message type's, and the service kind.
        let checked = RawType::ros(name, ros_hash)?;
        let kind_ok = match name.split('/').nth(1) {
            Some("srv") => true,
            Some("action") => name.ends_with("_SendGoal") || name.ends_with("_GetResult"),
            _ => false,
        };
        if !kind_ok {
            return Err(RawTypeError::Name(name.chars().take(300).collect()));
        }
        Ok(RawServiceType {
            name: checked.name,
            ros_hash: checked.ros_hash,
            request,
            response,
        })
    }

    /// The service type `S` is, as a raw type.
    pub fn of<S: crate::ServiceType>() -> RawServiceType {
        RawServiceType {
            name: S::TYPE_NAME,
            ros_hash: S::ROS_TYPE_HASH,
            request: RawType::of::<S::Request>(),
            response: RawType::of::<S::Response>(),
        }
    }

    /// The service type name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The ROS 2 service type hash, if it is a ROS type.
    pub fn ros_hash(&self) -> Option<&'static str> {
        self.ros_hash
    }

    /// The request type.
    pub fn request(&self) -> RawType {
        self.request
    }

    /// The response type.
    pub fn response(&self) -> RawType {
        self.response
    }
}

/// A string that lives as long as the process, stored once however often
/// it is asked for: type names of [`RawType`]s are few (one per type a
/// program meets), and transports keep `&'static str` names.
fn intern(s: &str) -> &'static str {
    use std::collections::HashSet;
    use std::sync::{Mutex, OnceLock};
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(n) = names.get(s) {
        return n;
    }
    let leaked: &'static str = Box::leak(s.to_owned().into_boxed_str());
    names.insert(leaked);
    leaked
}

/// Whether `T` is [`AnyMessage`] (matches every type).
pub(crate) fn is_any<T: crate::Message>() -> bool {
    T::TYPE_NAME == "*" && T::TYPE_HASH.0 == 0
}

/// The [`Message`](crate::Message) methods of a [`Wire::Cdr`] type (what
/// `#[message(cdr)]` expands to).
pub mod cdr_codec {
    use super::WireError;

    /// CDR size including the encapsulation header.
    pub fn len<T: serde::Serialize>(v: &T) -> Result<usize, WireError> {
        Ok(cdr::calc_serialized_size(v) as usize)
    }

    /// Serialise into `out` (exactly [`len`] bytes).
    pub fn encode<T: serde::Serialize>(
        v: &T,
        out: &mut [u8],
        type_name: &'static str,
    ) -> Result<(), WireError> {
        let mut w: &mut [u8] = out;
        cdr::serialize_into::<_, _, _, cdr::CdrLe>(&mut w, v, cdr::Infinite).map_err(|e| {
            WireError::Encode {
                type_name,
                why: e.to_string(),
            }
        })
    }

    /// Deserialise.
    pub fn decode<T: serde::de::DeserializeOwned>(
        bytes: &[u8],
        type_name: &'static str,
    ) -> Result<T, WireError> {
        // Our own decoder: lengths are checked before allocating (see
        // `cdr_de`).
        crate::cdr_de::from_bytes::<T>(bytes).map_err(|e| WireError::Decode {
            type_name,
            len: bytes.len(),
            why: e.to_string(),
        })
    }

    /// Deserialise from the parts of one message, in order, where they lie
    /// (see [`Message::wire_decode_parts`](crate::Message::wire_decode_parts)).
    pub fn decode_parts<T: serde::de::DeserializeOwned>(
        parts: &[&[u8]],
        type_name: &'static str,
    ) -> Result<T, WireError> {
        crate::cdr_de::from_parts::<T>(parts).map_err(|e| WireError::Decode {
            type_name,
            len: parts.iter().map(|p| p.len()).sum(),
            why: e.to_string(),
        })
    }
}

/// The [`Message`](crate::Message) methods of a [`Wire::Pod`] type (what
/// `#[message(pod)]` expands to).
pub mod pod_codec {
    use super::{SharedBytes, WireError};

    /// Copy the value's bytes into `out`.
    pub fn encode<T: bytemuck::Pod>(v: &T, out: &mut [u8]) -> Result<(), WireError> {
        out.copy_from_slice(bytemuck::bytes_of(v));
        Ok(())
    }

    /// Read a value (copy) from `bytes`.
    pub fn decode<T: bytemuck::Pod>(
        bytes: SharedBytes,
        type_name: &'static str,
    ) -> Result<T, WireError> {
        bytemuck::try_pod_read_unaligned(&bytes).map_err(|e| WireError::Decode {
            type_name,
            len: bytes.len(),
            why: format!("{e:?}"),
        })
    }

    /// View `bytes` as a `T` in place (right size and alignment).
    pub fn view<T: bytemuck::Pod>(bytes: &[u8]) -> Option<&T> {
        bytemuck::try_from_bytes(bytes).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::SharedBytes;

    #[test]
    fn parts_are_copied_once_into_one_aligned_buffer() {
        let parts: [&[u8]; 3] = [b"abc", b"", b"defgh"];
        let b = SharedBytes::copy_from_parts(parts.iter().copied(), 8);
        assert_eq!(&b[..], b"abcdefgh");
        assert_eq!(b.as_ptr() as usize % 16, 0);
        // More parts than `len`: cut off; fewer: zeros.
        let cut = SharedBytes::copy_from_parts(parts.iter().copied(), 5);
        assert_eq!(&cut[..], b"abcde");
        let short = SharedBytes::copy_from_parts([&b"ab"[..]].into_iter(), 4);
        assert_eq!(&short[..], b"ab\0\0");
        // Every size is aligned, a camera frame's too, whichever way it was
        // gathered.
        for len in [1usize, 17, 4096 + 3, 1 << 20, 4_665_600] {
            let frame: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let (a, b) = frame.split_at(len / 3);
            let joined = SharedBytes::copy_from_parts([a, b].into_iter(), len);
            assert_eq!(joined.as_ptr() as usize % 16, 0, "{len} bytes");
            assert_eq!(&joined[..], &frame[..]);
            let fallback = SharedBytes::copy_aligned(&frame);
            assert_eq!(fallback.as_ptr() as usize % 16, 0);
            assert_eq!(&fallback[..], &frame[..]);
        }
        assert!(SharedBytes::copy_from_parts(std::iter::empty(), 0).is_empty());
    }
}

//! Payloads over bytes the caller already owns: no copy on the way into
//! zenoh.
//!
//! zenoh sends a [`ZBytes`] by reference until it writes it into a batch
//! (or hands it to a subscriber in the same session), so a message whose
//! bytes already exist (a byte buffer, a loaned chunk) needs no copy of
//! its own: [`shared`] wraps the owner, which zenoh drops when it is done.
//!
//! ```
//! use myelin_zenoh::payload;
//! let frame: std::sync::Arc<[u8]> = vec![7u8; 4096].into();
//! let p = payload::shared(frame.clone());
//! assert_eq!(p.len(), 4096);
//! // The payload reads the same memory: nothing was copied.
//! assert_eq!(p.slices().next().unwrap().as_ptr(), frame.as_ptr());
//! ```

use zenoh::bytes::ZBytes;

/// A payload that reads `owner`'s bytes in place; `owner` is dropped when
/// zenoh (and any subscriber in the same session) has let go of it.
pub fn shared<T: AsRef<[u8]> + Send + 'static>(owner: T) -> ZBytes {
    bytes::Bytes::from_owner(owner).into()
}

//! The attachment rmw_zenoh puts on every message (and every service
//! request and reply): sequence number, source timestamp, source gid,
//! serialized with zenoh-ext's serializer:
//!
//! ```text
//! i64 LE   sequence number (1 for a publisher's first message)
//! i64 LE   source timestamp (ns)
//! u8       16 (the gid's length, a LEB128 varint)
//! 16 bytes source gid
//! ```

use crate::Error;
use crate::gid::Gid;

/// The encoded length.
pub const LEN: usize = 33;

/// One message's attachment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attachment {
    /// The publisher's sequence number, from 1.
    pub sequence_number: i64,
    /// When it was published (ns; myelin uses CLOCK_REALTIME as ROS does).
    pub source_timestamp: i64,
    /// The publisher's gid.
    pub source_gid: Gid,
}

impl Attachment {
    /// The bytes.
    pub fn encode(&self) -> [u8; LEN] {
        let mut b = [0u8; LEN];
        b[0..8].copy_from_slice(&self.sequence_number.to_le_bytes());
        b[8..16].copy_from_slice(&self.source_timestamp.to_le_bytes());
        b[16] = 16;
        b[17..33].copy_from_slice(&self.source_gid);
        b
    }

    /// Read an attachment (untrusted bytes).
    pub fn decode(b: &[u8]) -> Result<Attachment, Error> {
        let bad = |why| Error::Attachment { len: b.len(), why };
        if b.len() != LEN {
            return Err(bad("expected 33 bytes"));
        }
        if b[16] != 16 {
            return Err(bad("the gid length is not 16"));
        }
        Ok(Attachment {
            sequence_number: i64::from_le_bytes(b[0..8].try_into().expect("8 bytes")),
            source_timestamp: i64::from_le_bytes(b[8..16].try_into().expect("8 bytes")),
            source_gid: b[17..33].try_into().expect("16 bytes"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes() {
        let a = Attachment {
            sequence_number: 1,
            source_timestamp: 0x0102_0304_0506_0708,
            source_gid: [0xAA; 16],
        };
        let mut want = vec![1, 0, 0, 0, 0, 0, 0, 0, 8, 7, 6, 5, 4, 3, 2, 1, 16];
        want.extend([0xAA; 16]);
        assert_eq!(a.encode().to_vec(), want);
        assert_eq!(Attachment::decode(&want).unwrap(), a);
        assert!(Attachment::decode(&want[..32]).is_err());
        let mut bad = want.clone();
        bad[16] = 17;
        assert!(Attachment::decode(&bad).is_err());
    }

    proptest::proptest! {
        #[test]
        fn decode_never_panics(b in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
            let _ = Attachment::decode(&b);
        }
    }
}

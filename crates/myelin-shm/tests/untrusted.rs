//! Shared-memory contents are untrusted input: random corruption of any
//! byte of a segment, before or after a reader opens it, makes the reader
//! report errors or lose messages, never panic or read out of bounds.

use std::os::unix::fs::FileExt;

use myelin_shm::{RingReader, RingWriter, SegmentName, ShmError, TypeId};
use proptest::prelude::*;

fn ty() -> TypeId {
    TypeId {
        name: "fuzz/msg/Bytes".into(),
        hash: 42,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]
    #[test]
    fn corruption_never_breaks_a_reader(
        before in proptest::collection::vec((0usize..2048, any::<u8>()), 0..16),
        after in proptest::collection::vec((0usize..2048, any::<u8>()), 0..16),
        msgs in 0u64..20,
        case in any::<u32>(),
    ) {
        let name = SegmentName::new(230, &format!("fuzz_{}_{case}", std::process::id())).unwrap();
        let mut w = RingWriter::create(&name, &ty(), 4, 200).unwrap();
        let len = std::fs::metadata(name.path()).unwrap().len() as usize;
        let file = std::fs::OpenOptions::new().write(true).open(name.path()).unwrap();
        for s in 0..msgs {
            w.publish(&vec![s as u8; (s as usize * 13) % 200]).unwrap();
        }
        for (off, b) in &before {
            file.write_all_at(&[*b], (*off % len) as u64).unwrap();
        }
        let reader = RingReader::open(&name, &ty());
        let Ok(reader) = reader else {
            // A damaged header may be refused; it must be a clean error.
            let clean = matches!(reader, Err(ShmError::BadHeader { .. } | ShmError::TypeMismatch { .. }));
            prop_assert!(clean, "damaged header gave {:?}", reader.err());
            return Ok(());
        };
        let mut reader = reader.from_oldest();
        for (off, b) in &after {
            file.write_all_at(&[*b], (*off % len) as u64).unwrap();
        }
        for s in msgs..msgs + 6 {
            w.publish(&[s as u8; 50]).unwrap();
        }
        let mut buf = Vec::new();
        for _ in 0..64 {
            match reader.try_recv(&mut buf) {
                Ok(Some(_)) => prop_assert!(buf.len() <= 200),
                Ok(None) => break,
                Err(ShmError::Corrupt { .. }) => {}
                Err(e) => prop_assert!(false, "unexpected error {e}"),
            }
        }
    }
}

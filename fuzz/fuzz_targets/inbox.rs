//! Corrupt a live inbox with arbitrary writes, then drive both sides: the
//! reader and the writer must report and skip, never panic or read out of
//! bounds. Run: `cargo +nightly fuzz run inbox` (in `fuzz/`).
#![no_main]

use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};

use libfuzzer_sys::fuzz_target;
use myelin_shm::endpoint::{EndpointInfo, EndpointKind, QOS_BYTES};
use myelin_shm::inbox::{Desc, Inbox, InboxWriter};

static NEXT: AtomicU64 = AtomicU64::new(1);
const DOMAIN: u32 = 231;

fuzz_target!(|data: &[u8]| {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    let info = EndpointInfo {
        kind: EndpointKind::Subscription,
        pid: std::process::id(),
        context: 1,
        id,
        topic: "/fuzz".into(),
        type_name: "fuzz/msg/T".into(),
        type_hash: 1,
        node: "/fuzz".into(),
        qos: [0; QOS_BYTES],
        wake_tag: 0,
    };
    let Ok(inbox) = Inbox::create(DOMAIN, &info, 4, 8) else {
        return;
    };
    // The name the inbox was created under (kind, pid, id and topic bucket).
    let name = info.key().segment_name(DOMAIN).unwrap();
    let mut writer = InboxWriter::connect(&name, 9, 1).ok().flatten();
    if let Some(w) = writer.as_mut() {
        for c in 0..3 {
            w.push(
                Desc {
                    pool: 0,
                    chunk: c,
                    len: 8,
                },
                true,
            );
        }
    }
    // Apply the input as (offset: u16, byte) writes.
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(name.path())
        .unwrap();
    let len = std::fs::metadata(name.path()).unwrap().len();
    for w in data.chunks_exact(3) {
        let off = u64::from(u16::from_le_bytes([w[0], w[1]])) % len;
        let _ = file.write_all_at(&[w[2]], off);
    }
    // The inbox's own block count: indices past it are a caller's bug
    // (asserted), not something another process's writes can cause.
    for i in 0..inbox.connections() {
        let _ = inbox.state(i);
        for _ in 0..8 {
            if !matches!(inbox.pop(i), Ok(Some(_)) | Err(_)) {
                break;
            }
        }
        let _ = inbox.give_back(i, 1, 0);
        let _ = inbox.lost(i);
    }
    if let Some(w) = writer.as_mut() {
        let _ = w.push(
            Desc {
                pool: 0,
                chunk: 1,
                len: 8,
            },
            true,
        );
        w.drain_returns(|_| {});
        let _ = w.wake_slot();
    }
    let _ = std::fs::remove_file(name.path());
});

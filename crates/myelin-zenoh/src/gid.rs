//! Publisher identities (the 16-byte "gid" of ROS 2) and the shared-memory
//! island they were sent from.
//!
//! A message reaches each subscription exactly once: a publisher on this
//! host whose context uses shared memory already delivers to every
//! shared-memory subscription of the host, so those subscriptions drop the
//! zenoh copy. To tell, myelin gids are laid out as
//!
//! ```text
//! bytes 0..8    the island key (see `island_key`): which /dev/shm, on which boot
//! bytes 8..12   the publisher's pid (little endian)
//! bytes 12..15  a process-unique endpoint number (24 bits, little endian)
//! byte  15      0xA0 | 1 if the publisher's context uses shared memory
//! ```
//!
//! A gid written by another ROS 2 implementation (rmw_zenoh hashes its
//! token key) matches an island key only by a 2^-64 accident.

/// A 16-byte publisher (or client) identity.
pub type Gid = [u8; 16];

const MAGIC: u8 = 0xA0;

/// A myelin gid.
pub fn myelin_gid(island: u64, pid: u32, serial: u64, shared_memory: bool) -> Gid {
    let mut g = [0u8; 16];
    g[0..8].copy_from_slice(&island.to_le_bytes());
    g[8..12].copy_from_slice(&pid.to_le_bytes());
    g[12..15].copy_from_slice(&serial.to_le_bytes()[..3]);
    g[15] = MAGIC | shared_memory as u8;
    g
}

/// Whether a sample with this gid already reached a subscription on
/// `island` that uses shared memory (so its zenoh copy must be dropped).
pub fn delivered_by_shared_memory(gid: &Gid, island: u64) -> bool {
    gid[15] == MAGIC | 1 && gid[0..8] == island.to_le_bytes()
}

/// The pid in a myelin gid (`None` for another implementation's gid).
pub fn pid_of(gid: &Gid) -> Option<u32> {
    (gid[15] & 0xF0 == MAGIC).then(|| u32::from_le_bytes(gid[8..12].try_into().expect("4 bytes")))
}

/// The island, pid and endpoint number in a myelin gid (`None` for
/// another implementation's gid): with the session's island and pid, the
/// endpoint number names the publisher's liveliness token (its entity id,
/// modulo 2^24).
pub fn endpoint_of(gid: &Gid) -> Option<(u64, u32, u32)> {
    let island = u64::from_le_bytes(gid[0..8].try_into().expect("8 bytes"));
    let serial = u32::from_le_bytes([gid[12], gid[13], gid[14], 0]);
    pid_of(gid).map(|pid| (island, pid, serial))
}

fn fnv(h: &mut u64, bytes: &[u8]) {
    for b in bytes {
        *h ^= u64::from(*b);
        *h = h.wrapping_mul(0x100_0000_01b3);
    }
}

/// This host's shared-memory island: the boot (kernel boot id) and the
/// `/dev/shm` file system (device and inode). Two processes share shared
/// memory exactly when their keys are equal: a container with its own
/// `/dev/shm` is a different island on the same host.
pub fn island_key() -> u64 {
    use std::os::unix::fs::MetadataExt;
    static KEY: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *KEY.get_or_init(|| {
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        let boot = std::fs::read("/proc/sys/kernel/random/boot_id").unwrap_or_default();
        fnv(&mut h, &boot);
        if let Ok(m) = std::fs::metadata("/dev/shm") {
            fnv(&mut h, &m.dev().to_le_bytes());
            fnv(&mut h, &m.ino().to_le_bytes());
        }
        if boot.is_empty() {
            // No boot id: fall back to the host name (never equal to a
            // real island by accident of an empty hash).
            fnv(
                &mut h,
                &std::fs::read("/proc/sys/kernel/hostname").unwrap_or_default(),
            );
        }
        h
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout() {
        let g = myelin_gid(0x1122_3344_5566_7788, 4242, 0xABCDEF12, true);
        assert_eq!(
            g,
            [
                0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x92, 0x10, 0, 0, 0x12, 0xEF, 0xCD,
                0xA1
            ]
        );
        assert!(delivered_by_shared_memory(&g, 0x1122_3344_5566_7788));
        assert!(!delivered_by_shared_memory(&g, 1));
        let no_shm = myelin_gid(0x1122_3344_5566_7788, 4242, 1, false);
        assert!(!delivered_by_shared_memory(&no_shm, 0x1122_3344_5566_7788));
        assert_eq!(pid_of(&g), Some(4242));
        assert_eq!(pid_of(&[0u8; 16]), None);
        assert_eq!(island_key(), island_key());
    }
}

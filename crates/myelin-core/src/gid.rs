//! Endpoint identities: the 16-byte "gid" of ROS 2 (`rmw_gid_t`), and the
//! shared-memory island a publisher sends from.
//!
//! Every publisher and subscription has a [`Gid`], fixed when it is
//! created; a message's [`MessageInfo`](crate::MessageInfo) names its
//! publisher's. myelin gids are laid out as
//!
//! ```text
//! bytes 0..8    the island key (see `island_key`): which /dev/shm, on which boot
//! bytes 8..12   the endpoint's pid (little endian)
//! bytes 12..15  a process-unique endpoint number (24 bits, little endian)
//! byte  15      0xA0 | 1 if the endpoint's context uses shared memory
//! ```
//!
//! so that a message reaches each subscription exactly once: a publisher on
//! this host whose context uses shared memory already delivers to every
//! shared-memory subscription of the host, and those subscriptions drop the
//! zenoh copy of a sample whose gid says so. A gid written by another ROS 2
//! implementation (rmw_zenoh hashes its token key) matches an island key
//! only by a 2^-64 accident.

/// A publisher's or subscription's 16-byte identity (ROS 2's gid).
///
/// Equal gids name the same endpoint, in this process or any other (a
/// process's gids wrap after 16,777,216 endpoints: see the layout above);
/// [`MessageInfo::publisher_gid`](crate::MessageInfo::publisher_gid) is
/// the sending [`Publisher::gid`](crate::Publisher::gid).
///
/// ```
/// use myelin_core::{Context, QoS};
/// let ctx = Context::builder().shared_memory(false).network(false).build()?;
/// let node = ctx.create_node("gids")?;
/// let a = node.create_publisher::<u64>("a", QoS::default())?;
/// let b = node.create_publisher::<u64>("a", QoS::default())?;
/// assert_ne!(a.gid(), b.gid());
/// println!("{}", a.gid()); // 32 hex digits
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// The 16 bytes.
    pub const fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// The process that created the endpoint, when a myelin process did
    /// (`None` for another implementation's gid).
    pub fn pid(&self) -> Option<u32> {
        pid_of(&self.0)
    }
}

impl From<[u8; 16]> for Gid {
    fn from(b: [u8; 16]) -> Gid {
        Gid(b)
    }
}

impl std::fmt::Display for Gid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for b in &self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl std::fmt::Debug for Gid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Gid({self})")
    }
}

const MAGIC: u8 = 0xA0;

/// A myelin gid's bytes.
pub(crate) fn myelin_gid(island: u64, pid: u32, serial: u64, shared_memory: bool) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[0..8].copy_from_slice(&island.to_le_bytes());
    g[8..12].copy_from_slice(&pid.to_le_bytes());
    g[12..15].copy_from_slice(&serial.to_le_bytes()[..3]);
    g[15] = MAGIC | shared_memory as u8;
    g
}

/// The gid of an endpoint of process `pid` (this one) numbered `serial`
/// (see [`next_serial`]).
pub(crate) fn own(pid: u32, serial: u64, shared_memory: bool) -> Gid {
    Gid(myelin_gid(island_key(), pid, serial, shared_memory))
}

/// A new endpoint number for a gid: counted per process from 1, and the
/// gid keeps its low 24 bits, so gids of one process are unique while it
/// has made fewer than 16,777,216 endpoints (publishers, subscriptions,
/// services and clients); past that they wrap.
pub(crate) fn next_serial() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Whether a sample with this gid already reached a subscription on
/// `island` that uses shared memory (so its zenoh copy must be dropped).
#[cfg_attr(not(feature = "zenoh"), allow(dead_code))]
pub(crate) fn delivered_by_shared_memory(gid: &[u8; 16], island: u64) -> bool {
    gid[15] == MAGIC | 1 && gid[0..8] == island.to_le_bytes()
}

/// The pid in a myelin gid (`None` for another implementation's gid).
pub(crate) fn pid_of(gid: &[u8; 16]) -> Option<u32> {
    (gid[15] & 0xF0 == MAGIC).then(|| u32::from_le_bytes(gid[8..12].try_into().expect("4 bytes")))
}

/// The island, pid and endpoint number in a myelin gid (`None` for
/// another implementation's gid): with the session's island and pid, the
/// endpoint number names the publisher's liveliness token (its entity id,
/// modulo 2^24).
#[cfg_attr(not(feature = "zenoh"), allow(dead_code))]
pub(crate) fn endpoint_of(gid: &[u8; 16]) -> Option<(u64, u32, u32)> {
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
pub(crate) fn island_key() -> u64 {
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
        assert_eq!(
            endpoint_of(&g),
            Some((0x1122_3344_5566_7788, 4242, 0xEF12 | 0xCD_0000))
        );
        assert_eq!(island_key(), island_key());
        assert_eq!(Gid(g).to_string(), "88776655443322119210000012efcda1");
        assert_eq!(
            own(std::process::id(), 5, false).pid(),
            Some(std::process::id())
        );
    }
}

/// Who asked: the calling client's gid and the request's number (rmw's
/// request id; service introspection's `client_gid` and
/// `sequence_number`). Every path a request takes carries it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RequestId {
    pub(crate) gid: [u8; 16],
    pub(crate) seq: i64,
}

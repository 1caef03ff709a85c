//! What a subscription knows about a message besides its contents:
//! [`MessageInfo`] (rclcpp's `rclcpp::MessageInfo`, rmw's
//! `rmw_message_info_t`), kept beside each buffered message.

use crate::gid::Gid;

/// Where a message came from and when, as
/// [`Subscription::take_with_info`](crate::Subscription::take_with_info)
/// and a callback taking `(msg, &MessageInfo)` see it.
///
/// What each path fills in (rmw leaves unknown fields zero; here they are
/// `None`):
///
/// | accessor | in-process | shared memory | zenoh (myelin or rmw_zenoh) |
/// |---|---|---|---|
/// | `publisher_gid` | yes | yes | yes (the sample's attachment) |
/// | `source_timestamp` | no (as rclcpp) | yes (not for transient-local history) | yes (the attachment) |
/// | `received_timestamp` | no | no | yes (on arrival) |
/// | `publication_sequence_number` | no | no | yes (the attachment) |
/// | `from_intra_process` | `true` | `false` | `false` |
///
/// In-process delivery reads no clock, as rclcpp's intra-process path:
/// a timestamp the user needs goes in the message (`std_msgs/Header`).
///
/// ```
/// use myelin_core::{Context, MessageInfo, QoS};
/// let ctx = Context::builder().shared_memory(false).network(false).build()?;
/// let node = ctx.create_node("info")?;
/// let sub = node.create_polling_subscription::<u64>("n", QoS::default(), Default::default())?;
/// let publisher = node.create_publisher::<u64>("n", QoS::default())?;
/// publisher.publish(7)?;
/// let (msg, info) = sub.take_with_info().expect("delivered in publish");
/// assert_eq!(*msg, 7);
/// assert_eq!(info.publisher_gid(), publisher.gid());
/// assert!(info.from_intra_process());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct MessageInfo {
    gid: [u8; 16],
    /// 0: unknown.
    source_ns: i64,
    /// 0: unknown.
    received_ns: i64,
    /// 0: unknown.
    seq: u64,
    intra: bool,
}

/// Where a buffered message came from, as compact as a buffer entry can
/// carry it (16 bytes: a subscription's buffer moves it with every
/// message, and a small message's entry then fits one cache line): the
/// [`MessageInfo`] is made of it only for a reader that asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Origin {
    /// A publisher of this context, in-process: its gid's serial (low 24
    /// bits) and shared-memory flag (bit 31); the island and the pid are
    /// the context's.
    Local(u32),
    /// A publisher on this shared-memory island (shared memory).
    #[cfg_attr(not(feature = "shm"), allow(dead_code))]
    Island(Island),
    /// Anything else (the network): everything, boxed (the network path
    /// allocates per message anyway).
    #[cfg_attr(not(feature = "zenoh"), allow(dead_code))]
    Network(Box<MessageInfo>),
}

/// A publisher on this shared-memory island and when it sent: 16 bytes,
/// one of them a niche that tells [`Origin`]'s variants apart (so the
/// enum takes no tag of its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Island {
    /// When it was sent (ns since the epoch; 0: unknown).
    sent_ns: i64,
    pid: u32,
    /// The gid's serial (24 bits, little-endian).
    serial: [u8; 3],
    _niche: Niche,
}

/// A byte that is always 0: the other 255 values are free for the
/// compiler to tag [`Origin`]'s other variants with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Niche {
    Zero = 0,
}

impl Origin {
    /// A message of process `pid`'s publisher with gid serial `serial`
    /// (its low 24 bits), sent at `sent_ns` (0: unknown).
    #[cfg_attr(not(feature = "shm"), allow(dead_code))]
    pub(crate) const fn island(pid: u32, serial: u32, sent_ns: i64) -> Origin {
        let [a, b, c, _] = serial.to_le_bytes();
        Origin::Island(Island {
            sent_ns,
            pid,
            serial: [a, b, c],
            _niche: Niche::Zero,
        })
    }

    /// The [`Origin::Local`] word of a publisher of this context with
    /// this gid.
    pub(crate) const fn local_word(gid: Gid) -> u32 {
        let g = gid.0;
        u32::from_le_bytes([g[12], g[13], g[14], 0]) | ((g[15] & 1) as u32) << 31
    }

    /// What the user sees; `pid`: the context's (see `ContextInner::pid`).
    pub(crate) fn info(&self, pid: u32) -> MessageInfo {
        match *self {
            Origin::Local(w) => MessageInfo {
                gid: crate::gid::own(pid, u64::from(w & 0xff_ffff), w >> 31 != 0).0,
                source_ns: 0,
                received_ns: 0,
                seq: 0,
                intra: true,
            },
            Origin::Island(Island {
                pid,
                serial: [a, b, c],
                sent_ns,
                ..
            }) => MessageInfo::remote(
                crate::gid::myelin_gid(
                    crate::gid::island_key(),
                    pid,
                    u64::from(u32::from_le_bytes([a, b, c, 0])),
                    true,
                ),
                sent_ns,
                0,
                0,
            ),
            Origin::Network(ref info) => **info,
        }
    }
}

impl MessageInfo {
    /// A message from another process: its publisher, when it was
    /// published and received (ns since the epoch, 0: unknown), and its
    /// sequence number (0: unknown).
    pub(crate) const fn remote(
        gid: [u8; 16],
        source_ns: i64,
        received_ns: i64,
        seq: u64,
    ) -> MessageInfo {
        MessageInfo {
            gid,
            source_ns,
            received_ns,
            seq,
            intra: false,
        }
    }

    /// The publisher's [`Gid`] (all zeros only where no transport said:
    /// never for a message from myelin or rmw_zenoh).
    pub const fn publisher_gid(&self) -> Gid {
        Gid(self.gid)
    }

    /// When the publisher published it: ns since the Unix epoch on the
    /// publisher's system clock (`CLOCK_REALTIME`, as ROS 2's).
    pub const fn source_timestamp(&self) -> Option<i64> {
        known(self.source_ns)
    }

    /// When it arrived in this process, on this host's system clock.
    pub const fn received_timestamp(&self) -> Option<i64> {
        known(self.received_ns)
    }

    /// The publisher's count of messages it sent, from 1.
    pub const fn publication_sequence_number(&self) -> Option<u64> {
        if self.seq == 0 { None } else { Some(self.seq) }
    }

    /// Whether a publisher of this context delivered it in-process.
    pub const fn from_intra_process(&self) -> bool {
        self.intra
    }
}

const fn known(ns: i64) -> Option<i64> {
    if ns == 0 { None } else { Some(ns) }
}

impl std::fmt::Debug for MessageInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MessageInfo")
            .field("publisher_gid", &self.publisher_gid())
            .field("source_timestamp", &self.source_timestamp())
            .field("received_timestamp", &self.received_timestamp())
            .field(
                "publication_sequence_number",
                &self.publication_sequence_number(),
            )
            .field("from_intra_process", &self.intra)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_is_unknown() {
        let i = Origin::Network(Box::new(MessageInfo::remote([3; 16], 0, 5, 0))).info(1);
        assert_eq!(i.source_timestamp(), None);
        assert_eq!(i.received_timestamp(), Some(5));
        assert_eq!(i.publication_sequence_number(), None);
        assert_eq!(i.publisher_gid(), Gid([3; 16]));
        assert!(!i.from_intra_process());
        let g = crate::gid::own(42, 9, true);
        let l = Origin::Local(Origin::local_word(g)).info(42);
        assert!(l.from_intra_process());
        assert_eq!(l.source_timestamp(), None);
        assert_eq!(l.publisher_gid(), g);
        let s = Origin::island(77, 0x0a_0b0c, 12).info(1);
        assert_eq!(s.publisher_gid().pid(), Some(77));
        assert_eq!(
            s.publisher_gid(),
            Gid(crate::gid::myelin_gid(
                crate::gid::island_key(),
                77,
                0x0a_0b0c,
                true
            )),
            "the serial's 24 bits survive the packing"
        );
        assert_eq!(s.source_timestamp(), Some(12));
        assert!(!s.from_intra_process());
    }
}

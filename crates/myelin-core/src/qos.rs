//! Quality of service: history, reliability, durability, and how a publisher
//! and a subscription are matched.
//!
//! A [`QoS`] is built from a history and refined with builder methods:
//!
//! ```
//! use myelin_core::QoS;
//! let latched_map = QoS::keep_last(1).reliable().transient_local();
//! let camera = QoS::sensor_data();
//! assert!(latched_map.compatible_with(&camera).is_err() || true);
//! ```
//!
//! # History and depth
//! * `keep_last(depth)`: each subscription buffers at most `depth` messages;
//!   a new message overwrites the oldest, and the overwritten one is counted
//!   in [`Subscription::lost`](crate::Subscription::lost). **Depth 0** is not
//!   an error: it means a one-message mailbox (only the newest message is kept,
//!   exactly like depth 1). DDS requires a depth of at least one and rclcpp
//!   refuses 0 for intra-process; we pick the only useful meaning.
//! * `keep_all()`: a FIFO that keeps every message until taken, bounded by
//!   [`QoS::max_samples`] (default [`DEFAULT_MAX_SAMPLES`]). A push into a full
//!   FIFO is refused for that subscription, counted as lost there, and
//!   reported to the publisher as
//!   [`PublishError::ResourceLimit`](crate::PublishError::ResourceLimit):
//!   never a silent drop.
//!
//! # Blocking: a reliable keep_all reader sets the writer's pace
//! A reliable publisher whose message finds a reliable keep_all
//! subscription full (in this process or another) waits for room, up to
//! [`QoS::max_blocking_time`] per publish (default
//! [`DEFAULT_MAX_BLOCKING_TIME`], 100 ms, DDS's default), then refuses it
//! with `ResourceLimit`. So a slow reliable reader slows the writer down to
//! its own rate instead of losing messages; a best-effort or keep_last
//! subscription never slows the writer, and neither does a reader that died
//! (its connection goes with it). `max_blocking_time(Duration::ZERO)` never
//! waits. A publisher that waits for a subscription its own thread serves
//! (a single-threaded executor publishing from a callback into a full
//! subscription of the same executor) waits the whole time, then gets the
//! error: give such a subscription a deeper limit or its own executor.
//!
//! # Compatibility (requested by the subscription vs offered by the publisher)
//!
//! | publisher offers \ subscription requests | best effort | reliable |
//! |---|---|---|
//! | best effort | ✓ | ✗ (`Reliability`) |
//! | reliable | ✓ | ✓ |
//!
//! | publisher offers \ subscription requests | volatile | transient local |
//! |---|---|---|
//! | volatile | ✓ | ✗ (`Durability`) |
//! | transient local | ✓ (no history replay) | ✓ (history replayed) |
//!
//! | policy | compatible when |
//! |---|---|
//! | deadline | publisher's period <= subscription's (none = infinite) |
//! | liveliness kind | publisher's kind >= subscription's (`Automatic` < `ManualByTopic`) |
//! | liveliness lease | publisher's lease <= subscription's (none = infinite) |
//!
//! History, depth and lifespan never affect compatibility. An incompatible pair never
//! connects; both sides' [`IncompatibleQosStatus`] is incremented with the
//! policy named, and a `tracing` warning names the topic and the policy.
//!
//! Within one process, reliability only decides matching: the per-subscription
//! buffers deliver every message that fits (nothing is retransmitted, so
//! nothing needs to be).

use std::fmt;
use std::time::Duration;

/// The keep-all resource limit used unless [`QoS::max_samples`] says otherwise.
pub const DEFAULT_MAX_SAMPLES: usize = 65_536;

/// The largest history depth (and keep-all bound) an endpoint takes:
/// buffers of that many slots are made when the endpoint is, so a larger
/// one is refused ([`QoS::validate`]) rather than exhausting memory.
pub const MAX_DEPTH: usize = 1 << 20;

/// How long a reliable publish waits for room in a full keep_all
/// subscription unless [`QoS::max_blocking_time`] says otherwise (DDS's
/// default).
pub const DEFAULT_MAX_BLOCKING_TIME: Duration = Duration::from_millis(100);

/// How many messages a buffer keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum History {
    /// Keep the newest `depth` messages (depth 0 behaves as depth 1).
    KeepLast(usize),
    /// Keep every message, up to the resource limit.
    KeepAll,
}

/// Whether delivery is guaranteed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reliability {
    /// Messages may be dropped.
    BestEffort,
    /// Messages are delivered (within the history's limits).
    Reliable,
}

/// Whether late joiners get messages published before they existed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Durability {
    /// Only messages published after the subscription exists.
    Volatile,
    /// The publisher keeps its last `depth` messages for late joiners.
    TransientLocal,
}

/// How a publisher shows it is alive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LivelinessKind {
    /// Alive while its context is alive (the infrastructure asserts it).
    Automatic,
    /// Alive only while it publishes or calls
    /// [`Publisher::assert_liveliness`](crate::Publisher::assert_liveliness)
    /// at least once per lease.
    ManualByTopic,
}

/// Liveliness: a kind and a lease (none = infinite).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Liveliness {
    /// The kind.
    pub kind: LivelinessKind,
    /// The lease: how long a publisher stays alive without asserting.
    pub lease: Option<Duration>,
}

/// A QoS policy, as named in incompatibility reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QosPolicy {
    /// [`Reliability`].
    Reliability,
    /// [`Durability`].
    Durability,
    /// [`History`].
    History,
    /// [`QoS::deadline`].
    Deadline,
    /// [`Liveliness`].
    Liveliness,
    /// [`QoS::lifespan`].
    Lifespan,
    /// Not a ROS 2 policy: the subscription's resource limit was reached,
    /// every connection block of its shared-memory inbox taken
    /// ([`SubscriptionOptions::max_publishers`](crate::SubscriptionOptions::max_publishers)),
    /// so a publisher in another process could not connect. The
    /// subscription reports it as incompatible QoS (the pair does not
    /// match) and its process logs an error saying what to raise; the
    /// publisher's logs a warning.
    ResourceLimits,
}

impl fmt::Display for QosPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            QosPolicy::Reliability => "reliability",
            QosPolicy::Durability => "durability",
            QosPolicy::History => "history",
            QosPolicy::Deadline => "deadline",
            QosPolicy::Liveliness => "liveliness",
            QosPolicy::Lifespan => "lifespan",
            QosPolicy::ResourceLimits => "resource limits (max_publishers)",
        })
    }
}

/// Why a publisher and a subscription do not match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incompatibility {
    /// The first policy that failed.
    pub policy: QosPolicy,
    /// A sentence naming what was offered and what was requested.
    pub reason: String,
}

impl fmt::Display for Incompatibility {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "incompatible {}: {}", self.policy, self.reason)
    }
}

/// A quality-of-service profile for a publisher or a subscription.
///
/// ```
/// use std::time::Duration;
/// use myelin_core::QoS;
///
/// // A camera stream: the newest frames matter, losing one is fine.
/// let images = QoS::keep_last(2).best_effort();
/// // A map published once: reliable, kept for late joiners.
/// let map = QoS::keep_last(1).transient_local();
/// // Commands that must arrive at 100 Hz or be reported missing.
/// let cmd = QoS::keep_last(1).deadline(Duration::from_millis(10));
/// assert!(map.compatible_with(&images).is_ok());
/// # let _ = cmd;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QoS {
    /// History kind and depth.
    pub history: History,
    /// Reliability.
    pub reliability: Reliability,
    /// Durability.
    pub durability: Durability,
    /// Keep-all bound on buffered messages per subscription.
    pub max_samples: usize,
    /// Expected maximum period between messages (none = no deadline).
    pub deadline: Option<Duration>,
    /// How long a message stays valid after publication (none = forever).
    pub lifespan: Option<Duration>,
    /// Liveliness kind and lease.
    pub liveliness: Liveliness,
    /// How long a reliable publish waits for room in a full reliable
    /// keep_all subscription before refusing (publisher side; see the
    /// [module docs](self)).
    pub max_blocking_time: Duration,
}

impl QoS {
    /// Keep the newest `depth` messages, reliable, volatile (ROS 2's default
    /// with another depth).
    pub const fn keep_last(depth: usize) -> Self {
        QoS {
            history: History::KeepLast(depth),
            reliability: Reliability::Reliable,
            durability: Durability::Volatile,
            max_samples: DEFAULT_MAX_SAMPLES,
            deadline: None,
            lifespan: None,
            liveliness: Liveliness {
                kind: LivelinessKind::Automatic,
                lease: None,
            },
            max_blocking_time: DEFAULT_MAX_BLOCKING_TIME,
        }
    }

    /// Keep every message (up to [`QoS::max_samples`]), reliable, volatile.
    pub const fn keep_all() -> Self {
        QoS {
            history: History::KeepAll,
            ..QoS::keep_last(1)
        }
    }

    /// Make it reliable.
    pub const fn reliable(mut self) -> Self {
        self.reliability = Reliability::Reliable;
        self
    }

    /// Make it best effort.
    pub const fn best_effort(mut self) -> Self {
        self.reliability = Reliability::BestEffort;
        self
    }

    /// Make it volatile.
    pub const fn volatile(mut self) -> Self {
        self.durability = Durability::Volatile;
        self
    }

    /// Make it transient local (latched).
    pub const fn transient_local(mut self) -> Self {
        self.durability = Durability::TransientLocal;
        self
    }

    /// Set the keep-all resource limit (messages buffered per subscription).
    /// 0 is treated as 1.
    pub const fn max_samples(mut self, n: usize) -> Self {
        self.max_samples = if n == 0 { 1 } else { n };
        self
    }

    /// How long a reliable publish may wait for room in a full reliable
    /// keep_all subscription (`Duration::ZERO`: never wait; refuse at
    /// once). Default [`DEFAULT_MAX_BLOCKING_TIME`].
    ///
    /// ```
    /// use myelin_core::QoS;
    /// use std::time::Duration;
    /// let log = QoS::keep_all().max_blocking_time(Duration::from_millis(500));
    /// assert_eq!(log.max_blocking_time, Duration::from_millis(500));
    /// ```
    pub const fn max_blocking_time(mut self, wait: Duration) -> Self {
        self.max_blocking_time = wait;
        self
    }

    /// Whether a publisher offering `self` waits for room in a subscription
    /// requesting `sub` (both reliable, the subscription keep_all, and a
    /// nonzero wait).
    pub(crate) fn waits_for(&self, sub: &QoS) -> bool {
        self.reliability == Reliability::Reliable
            && sub.reliability == Reliability::Reliable
            && sub.history == History::KeepAll
            && !self.max_blocking_time.is_zero()
    }

    /// Expect a message at least every `period` (a publisher promises it, a
    /// subscription requests it); misses are reported as deadline events.
    pub const fn deadline(mut self, period: Duration) -> Self {
        self.deadline = Some(period);
        self
    }

    /// Messages older than `age` are never delivered (dropped at take time
    /// and counted in `lost()` and `expired()`).
    pub const fn lifespan(mut self, age: Duration) -> Self {
        self.lifespan = Some(age);
        self
    }

    /// Set the liveliness kind and lease.
    pub const fn liveliness(mut self, kind: LivelinessKind, lease: Duration) -> Self {
        self.liveliness = Liveliness {
            kind,
            lease: Some(lease),
        };
        self
    }

    /// ROS 2's `rmw_qos_profile_default`: keep last 10, reliable, volatile.
    pub const fn default_profile() -> Self {
        QoS::keep_last(10)
    }

    /// ROS 2's `rmw_qos_profile_sensor_data`: keep last 5, best effort, volatile.
    pub const fn sensor_data() -> Self {
        QoS::keep_last(5).best_effort()
    }

    /// ROS 2's `rmw_qos_profile_services_default`: keep last 10, reliable, volatile.
    pub const fn services() -> Self {
        QoS::keep_last(10)
    }

    /// ROS 2's `rmw_qos_profile_parameters`: keep last 1000, reliable, volatile.
    pub const fn parameters() -> Self {
        QoS::keep_last(1000)
    }

    /// Check the numbers a buffer or a timer will be built from: a depth
    /// (or keep-all bound) above [`MAX_DEPTH`] would allocate more than a
    /// process can hold, and a duration beyond ROS 2's infinite (`i64::MAX`
    /// nanoseconds, about 292 years) cannot be a timer period.
    ///
    /// ```
    /// use myelin_core::{QoS, QosPolicy};
    /// use std::time::Duration;
    ///
    /// assert!(QoS::keep_last(10).validate().is_ok());
    /// assert_eq!(QoS::keep_last(1 << 40).validate().unwrap_err().0, QosPolicy::History);
    /// let far = QoS::keep_last(1).deadline(Duration::from_secs(u64::MAX));
    /// assert_eq!(far.validate().unwrap_err().0, QosPolicy::Deadline);
    /// ```
    pub fn validate(&self) -> Result<(), (QosPolicy, &'static str)> {
        if let History::KeepLast(d) = self.history
            && d > MAX_DEPTH
        {
            return Err((QosPolicy::History, "depth is above MAX_DEPTH (1 048 576)"));
        }
        if self.max_samples > MAX_DEPTH {
            return Err((
                QosPolicy::History,
                "max_samples is above MAX_DEPTH (1 048 576)",
            ));
        }
        let finite = |d: Option<Duration>| d.is_none_or(|d| d.as_nanos() <= i64::MAX as u128);
        if !finite(self.deadline) {
            return Err((
                QosPolicy::Deadline,
                "the deadline is beyond ROS 2's infinite (about 292 years)",
            ));
        }
        if !finite(self.lifespan) {
            return Err((
                QosPolicy::Lifespan,
                "the lifespan is beyond ROS 2's infinite (about 292 years)",
            ));
        }
        if !finite(self.liveliness.lease) {
            return Err((
                QosPolicy::Liveliness,
                "the lease is beyond ROS 2's infinite (about 292 years)",
            ));
        }
        Ok(())
    }

    /// The depth a buffer really has: `keep_last(0)` keeps one message;
    /// `keep_all` is bounded by `max_samples`.
    pub fn effective_depth(&self) -> usize {
        match self.history {
            History::KeepLast(d) => d.max(1),
            History::KeepAll => self.max_samples.max(1),
        }
    }

    /// Check whether a publisher offering `self` can serve a subscription
    /// requesting `requested` (DDS requested-vs-offered rules).
    pub fn compatible_with(&self, requested: &QoS) -> Result<(), Incompatibility> {
        if self.reliability < requested.reliability {
            return Err(Incompatibility {
                policy: QosPolicy::Reliability,
                reason: format!(
                    "publisher offers {:?} but subscription requests {:?}",
                    self.reliability, requested.reliability
                ),
            });
        }
        fn finite_le(offered: Option<Duration>, requested: Option<Duration>) -> bool {
            match (offered, requested) {
                (_, None) => true,
                (None, Some(_)) => false,
                (Some(o), Some(r)) => o <= r,
            }
        }
        let show = |d: Option<Duration>| d.map_or("infinite".to_string(), |d| format!("{d:?}"));
        if !finite_le(self.deadline, requested.deadline) {
            return Err(Incompatibility {
                policy: QosPolicy::Deadline,
                reason: format!(
                    "publisher offers a deadline of {} but subscription requests {}",
                    show(self.deadline),
                    show(requested.deadline)
                ),
            });
        }
        if self.liveliness.kind < requested.liveliness.kind {
            return Err(Incompatibility {
                policy: QosPolicy::Liveliness,
                reason: format!(
                    "publisher offers {:?} liveliness but subscription requests {:?}",
                    self.liveliness.kind, requested.liveliness.kind
                ),
            });
        }
        if !finite_le(self.liveliness.lease, requested.liveliness.lease) {
            return Err(Incompatibility {
                policy: QosPolicy::Liveliness,
                reason: format!(
                    "publisher offers a liveliness lease of {} but subscription requests {}",
                    show(self.liveliness.lease),
                    show(requested.liveliness.lease)
                ),
            });
        }
        if self.durability < requested.durability {
            return Err(Incompatibility {
                policy: QosPolicy::Durability,
                reason: format!(
                    "publisher offers {:?} but subscription requests {:?}",
                    self.durability, requested.durability
                ),
            });
        }
        Ok(())
    }
}

impl Default for QoS {
    fn default() -> Self {
        QoS::default_profile()
    }
}

/// The incompatible-QoS status of a publisher or subscription, as DDS reports
/// it: how many incompatible peers were found and the last policy at fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IncompatibleQosStatus {
    /// Total incompatible peers found so far.
    pub total_count: u64,
    /// Increase since the status was last read with a `take_` method.
    pub total_count_change: u64,
    /// The policy of the last incompatibility, if any.
    pub last_policy: Option<QosPolicy>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compatibility_table() {
        let be = QoS::keep_last(1).best_effort();
        let rel = QoS::keep_last(1).reliable();
        assert!(rel.compatible_with(&be).is_ok());
        assert!(rel.compatible_with(&rel).is_ok());
        assert!(be.compatible_with(&be).is_ok());
        assert_eq!(
            be.compatible_with(&rel).unwrap_err().policy,
            QosPolicy::Reliability
        );
        let vol = QoS::keep_last(1);
        let tl = QoS::keep_last(1).transient_local();
        assert!(tl.compatible_with(&vol).is_ok());
        assert!(tl.compatible_with(&tl).is_ok());
        assert_eq!(
            vol.compatible_with(&tl).unwrap_err().policy,
            QosPolicy::Durability
        );
    }

    #[test]
    fn depth_zero_is_a_mailbox() {
        assert_eq!(QoS::keep_last(0).effective_depth(), 1);
        assert_eq!(QoS::keep_all().max_samples(3).effective_depth(), 3);
    }
}

//! Time as ROS 2 keeps it: ROS time, system time and steady time, and
//! simulated time from `/clock`.
//!
//! * **ROS time** ([`ClockType::RosTime`]) is the system clock, unless the
//!   context was built with [`use_sim_time`](crate::ContextBuilder::use_sim_time):
//!   then it is the last time received on `/clock`
//!   (`rosgraph_msgs/msg/Clock`, what a simulator or `myelin bag play
//!   --clock` publishes), and zero until the first one arrives, as in
//!   rclcpp. [`Node::now`](crate::Node::now) reads it;
//!   [`Node::create_timer`](crate::Node::create_timer) timers and
//!   deadline checks run on it, and lifespans are counted in it.
//! * **Steady time** ([`ClockType::SteadyTime`]) never jumps: wall timers
//!   ([`Node::create_wall_timer`](crate::Node::create_wall_timer)) and
//!   liveliness leases use it, whatever `/clock` says.
//! * **System time** ([`ClockType::SystemTime`]) is the wall clock.
//!
//! Timers on simulated time follow rcl's rules when time jumps: a jump
//! backwards (a replay that loops, a simulator reset) restarts each timer's
//! period from the new time; a jump forwards past several periods fires the
//! timer once and counts the rest as [missed](crate::Timer::missed); the
//! first `/clock` after none starts every period afresh.
//!
//! ```
//! use myelin_core::time::{ClockType, Time};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let t = Time::from_nanos(1_500_000_000);
//! assert_eq!((t.sec, t.nanosec), (1, 500_000_000));
//! assert_eq!(t.nanos(), 1_500_000_000);
//! assert_eq!(Time::from_nanos(-1), Time { sec: -1, nanosec: 999_999_999 });
//!
//! let ctx = myelin_core::Context::builder()
//!     .handle_signals(false)
//!     .shared_memory(false)
//!     .network(false)
//!     .use_sim_time(true)
//!     .build()?;
//! let node = ctx.create_node("sim")?;
//! let clock = node.get_clock();
//! assert_eq!(clock.clock_type(), ClockType::RosTime);
//! assert!(clock.ros_time_is_active());
//! assert_eq!(node.now(), Time::default()); // no /clock yet
//! # Ok(()) }
//! ```

use std::sync::Arc;
use std::time::Duration;

use crate::dispatch::SimTime;

/// A point in time: seconds and nanoseconds since the epoch of its clock
/// (the Unix epoch for ROS and system time). This is
/// `builtin_interfaces/msg/Time`, so it goes straight into a message's
/// `header.stamp`.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(default, deny_unknown_fields)]
pub struct Time {
    /// Seconds.
    pub sec: i32,
    /// Nanoseconds within the second (0..1e9).
    pub nanosec: u32,
}

impl Time {
    /// The time `ns` nanoseconds after the epoch (seconds saturate at the
    /// range of `i32`, as ROS 2's conversion does).
    pub const fn from_nanos(ns: i64) -> Time {
        let sec = ns.div_euclid(1_000_000_000);
        let nanosec = ns.rem_euclid(1_000_000_000) as u32;
        if sec > i32::MAX as i64 {
            Time {
                sec: i32::MAX,
                nanosec: 999_999_999,
            }
        } else if sec < i32::MIN as i64 {
            Time {
                sec: i32::MIN,
                nanosec: 0,
            }
        } else {
            Time {
                sec: sec as i32,
                nanosec,
            }
        }
    }

    /// Nanoseconds since the epoch.
    pub const fn nanos(&self) -> i64 {
        self.sec as i64 * 1_000_000_000 + self.nanosec as i64
    }

    /// The wall clock now (system time).
    pub fn now() -> Time {
        Time::from_nanos(system_ns())
    }

    /// Whether this is time zero (what ROS time reads under simulated
    /// time before the first `/clock`).
    pub const fn is_zero(&self) -> bool {
        self.sec == 0 && self.nanosec == 0
    }
}

impl std::ops::Add<Duration> for Time {
    type Output = Time;
    fn add(self, d: Duration) -> Time {
        let d = i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
        Time::from_nanos(self.nanos().saturating_add(d))
    }
}

impl std::ops::Sub for Time {
    type Output = Duration;
    /// The time from `rhs` to `self` (zero if `rhs` is later).
    fn sub(self, rhs: Time) -> Duration {
        Duration::from_nanos(u64::try_from(self.nanos() - rhs.nanos()).unwrap_or(0))
    }
}

crate::message::impl_cdr_message!(
    Time,
    "builtin_interfaces/msg/Time",
    "RIHS01_b106235e25a4c5ed35098aa0a61a3ee9c9b18d197f398b0e4206cea9acf9c197"
);

/// `rosgraph_msgs/msg/Clock`: the current time of a simulation or a
/// replay, published on `/clock` (the message crate names it
/// `rosgraph_msgs::Clock`).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(default, deny_unknown_fields)]
pub struct ClockMessage {
    /// The time.
    pub clock: Time,
}

crate::message::impl_cdr_message!(
    ClockMessage,
    "rosgraph_msgs/msg/Clock",
    "RIHS01_692f7a66e93a3c83e71765d033b60349ba68023a8c689a79e48078bcb5c58564"
);

/// Which clock a [`Clock`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClockType {
    /// ROS time: the system clock, or `/clock` under simulated time.
    RosTime,
    /// The wall clock.
    SystemTime,
    /// A clock that never jumps (counted from an arbitrary start).
    SteadyTime,
}

/// A clock to read time from ([`Node::get_clock`](crate::Node::get_clock)
/// gives a node's ROS clock). Cheap to clone.
#[derive(Clone)]
pub struct Clock {
    kind: ClockType,
    /// The context's simulated time (ROS clocks of a context built with
    /// `use_sim_time`).
    sim: Option<Arc<SimTime>>,
}

impl Clock {
    /// The wall clock.
    pub fn system() -> Clock {
        Clock {
            kind: ClockType::SystemTime,
            sim: None,
        }
    }

    /// A clock that never jumps.
    pub fn steady() -> Clock {
        Clock {
            kind: ClockType::SteadyTime,
            sim: None,
        }
    }

    /// A ROS clock: `sim` when the context uses simulated time.
    pub(crate) fn ros(sim: Option<Arc<SimTime>>) -> Clock {
        Clock {
            kind: ClockType::RosTime,
            sim,
        }
    }

    /// Which clock this is.
    pub fn clock_type(&self) -> ClockType {
        self.kind
    }

    /// Whether `/clock` drives this clock (a ROS clock of a context built
    /// with `use_sim_time`).
    pub fn ros_time_is_active(&self) -> bool {
        self.sim.is_some()
    }

    /// The time now.
    pub fn now(&self) -> Time {
        match (&self.sim, self.kind) {
            (Some(sim), _) => Time::from_nanos(sim.now_ns()),
            (None, ClockType::SteadyTime) => {
                Time::from_nanos(i64::try_from(crate::clock::now_ns()).unwrap_or(i64::MAX))
            }
            (None, _) => Time::now(),
        }
    }
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clock")
            .field("type", &self.kind)
            .field("simulated", &self.sim.is_some())
            .finish()
    }
}

/// Nanoseconds since the Unix epoch on the wall clock.
fn system_ns() -> i64 {
    match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_nanos()).unwrap_or(i64::MAX),
    }
}

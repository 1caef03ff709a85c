//! Record and replay for myelin: bags in MCAP, rosbag2's default storage,
//! written as `ros2 bag record -s mcap` writes them and read from any
//! rosbag2/MCAP writer of ROS 2 messages.
//!
//! A bag is a directory with `metadata.yaml` and one or more MCAP files
//! (`<name>_0.mcap`, `_1`, ... when split by size or duration): profile
//! `ros2`, one `ros2msg` schema per type with the text of every message it
//! uses, `cdr` messages, and per channel the publishers' QoS
//! (`offered_qos_profiles`) and the REP-2011 type hash
//! (`topic_type_hash`). Foxglove, PlotJuggler, the MCAP CLI, Python's
//! `mcap-ros2-support` and `ros2 bag` read it.
//!
//! * [`Writer`]: create a bag, add topics, write encoded messages (or
//!   typed ones), split, finish. A writer dropped unfinished finishes its
//!   files; one killed outright leaves them readable up to its last
//!   [`flush`](Writer::flush) (the recorder flushes every second).
//! * [`Reader`]: open a bag directory or one `.mcap` file; iterate its
//!   messages in time order across files and decode them as typed
//!   messages; [`Reader::info`] summarises it.
//!
//! `myelin bag record|play|info` is built on these.
#![warn(missing_docs)]

mod error;
mod info;
pub mod metadata;
mod qos;
mod reader;
mod schema;
mod topic;
mod writer;

pub use error::BagError;
pub use info::{BagInfo, FileSummary, SERVICE_EVENT_SUFFIX, ServiceEvents, service_of_event_topic};
pub use qos::{profiles_from_yaml, profiles_to_yaml};
pub use reader::{BagMessage, Messages, Reader};
pub use schema::ros2msg_schema;
pub use topic::TopicInfo;
pub use writer::{Compression, TopicId, Writer, WriterOptions};

/// A calendar time in UTC (for bag names and `bag info`), without a time
/// zone database.
///
/// ```
/// let t = myelin_bag::UtcTime::from_unix_nanos(1_795_501_290_123_000_000);
/// assert_eq!((t.year, t.month, t.day), (2026, 11, 24));
/// assert_eq!((t.hour, t.minute, t.second), (6, 21, 30));
/// assert_eq!(t.nanos, 123_000_000);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UtcTime {
    /// The year.
    pub year: i64,
    /// 1 to 12.
    pub month: u32,
    /// 1 to 31.
    pub day: u32,
    /// 0 to 23.
    pub hour: u32,
    /// 0 to 59.
    pub minute: u32,
    /// 0 to 59.
    pub second: u32,
    /// Within the second.
    pub nanos: u32,
}

impl UtcTime {
    /// The calendar time of `ns` nanoseconds since the Unix epoch.
    pub fn from_unix_nanos(ns: u64) -> UtcTime {
        let secs = (ns / 1_000_000_000) as i64;
        let days = secs.div_euclid(86_400);
        let rem = secs.rem_euclid(86_400) as u32;
        // Civil date from days since 1970-01-01 (proleptic Gregorian), by
        // 400-year eras starting on March 1st.
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
        let year = yoe + era * 400 + i64::from(month <= 2);
        UtcTime {
            year,
            month,
            day,
            hour: rem / 3600,
            minute: rem % 3600 / 60,
            second: rem % 60,
            nanos: (ns % 1_000_000_000) as u32,
        }
    }
}

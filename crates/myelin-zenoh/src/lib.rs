//! myelin's network transport layer on [Eclipse zenoh](https://zenoh.io):
//! everything about the wire that does not need myelin's core types, in
//! rmw_zenoh's format so that ROS 2 nodes on rmw_zenoh and myelin processes
//! see and talk to each other.
//!
//! * [`names`]: topic key expressions `<domain>/<topic>/<type>/<hash>`.
//! * [`token`]: liveliness tokens `@ros2_lv/...` (the graph: nodes,
//!   publishers, subscriptions, services; gone when a process dies).
//! * [`attachment`]: the per-message sequence number, source timestamp
//!   and source gid.
//! * [`gid`]: publisher identities, and the shared-memory island they were
//!   sent from (exactly-once delivery next to shared memory).
//! * [`config`]: the loopback-only default session, `MYELIN_ZENOH_CONFIG`,
//!   and routers.
//! * [`payload`]: payloads over bytes already owned (no copy into zenoh).
//!
//! `myelin-core` wires these into publishers, subscriptions and services
//! (its `zenoh` feature); this crate has no myelin dependency, as
//! `myelin-shm` has none.
//!
//! ```
//! use myelin_zenoh::{names, token};
//! let key = names::topic_key(0, "/chatter", "std_msgs/msg/String", "RIHS01_df66")?;
//! assert_eq!(key, "0/chatter/std_msgs::msg::dds_::String_/RIHS01_df66");
//! let t = token::Token::parse("@ros2_lv/0/ab/1/1/NN/%/%/talker")?;
//! assert_eq!(t.node_fqn(), "/talker");
//! # Ok::<(), myelin_zenoh::Error>(())
//! ```

pub mod attachment;
pub mod config;
pub mod gid;
pub mod names;
pub mod payload;
pub mod token;

pub use zenoh;
pub use zenoh_ext;

/// Errors of the network layer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A name cannot be a key expression.
    #[error("{name:?} cannot be used on zenoh: {why}")]
    Name {
        /// The name.
        name: String,
        /// Why.
        why: &'static str,
    },
    /// A liveliness token that is not in rmw_zenoh's format.
    #[error("liveliness token {key:?}: {why}")]
    Token {
        /// The key expression.
        key: String,
        /// Why.
        why: &'static str,
    },
    /// An attachment that is not in rmw_zenoh's format.
    #[error("message attachment ({len} bytes): {why}")]
    Attachment {
        /// Its length.
        len: usize,
        /// Why.
        why: &'static str,
    },
    /// A configuration that zenoh refused.
    #[error("zenoh configuration{}: {why}", file.as_ref().map(|f| format!(" {}", f.display())).unwrap_or_default())]
    Config {
        /// The file, if it came from one.
        file: Option<std::path::PathBuf>,
        /// zenoh's message.
        why: String,
    },
    /// zenoh could not open the session.
    #[error("cannot open the zenoh session: {0}")]
    Open(String),
}

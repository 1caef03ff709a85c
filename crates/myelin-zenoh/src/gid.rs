//! Publisher identities: the 16-byte "gid" of ROS 2 that a sample's
//! attachment carries. (myelin lays its own gids out so that a sample
//! names the publisher's host and process: see `myelin_core::Gid`.)

/// A 16-byte publisher (or client) identity.
pub type Gid = [u8; 16];

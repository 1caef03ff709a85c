//! What can go wrong with a bag.

use std::path::PathBuf;

/// An error writing or reading a bag: what, where (the file, and the byte
/// offset for a corrupt file), and why.
#[derive(Debug, thiserror::Error)]
pub enum BagError {
    /// The file system refused (a full disk, permissions, a missing file).
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The bag directory exists already (a recorder never overwrites).
    #[error("{0}: already exists (choose another --output, or remove it)")]
    Exists(PathBuf),
    /// The path is neither a bag directory nor an MCAP file.
    #[error("{path}: not a bag ({why})")]
    NotABag {
        /// What was opened.
        path: PathBuf,
        /// Why it is not a bag.
        why: String,
    },
    /// A file is damaged or truncated: everything before `offset` was read.
    #[error("{path}: corrupt at or before byte {offset}: {why}")]
    Corrupt {
        /// The MCAP file.
        path: PathBuf,
        /// How far reading got.
        offset: u64,
        /// What the MCAP reader said.
        why: String,
    },
    /// `metadata.yaml` could not be read or written.
    #[error("{path}: {why}")]
    Metadata {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// The MCAP writer refused.
    #[error("{path}: {source}")]
    Mcap {
        /// The MCAP file.
        path: PathBuf,
        /// The MCAP error.
        #[source]
        source: mcap::McapError,
    },
    /// A message does not decode as the type asked for.
    #[error("topic {topic:?}: cannot decode as {type_name}: {why}")]
    Decode {
        /// The topic.
        topic: String,
        /// The type asked for.
        type_name: &'static str,
        /// The decoder's error.
        why: String,
    },
    /// An argument is out of range (a topic id of another bag, a zero
    /// split size).
    #[error("{0}")]
    Invalid(String),
}

impl BagError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> BagError {
        BagError::Io {
            path: path.into(),
            source,
        }
    }
}

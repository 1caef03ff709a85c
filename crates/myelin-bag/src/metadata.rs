//! `metadata.yaml`: what rosbag2 writes next to a bag's files (version 9,
//! as `ros2 bag` since Jazzy), and reads back from any version.

use std::path::Path;

use serde_yaml::{Mapping, Value};

use crate::BagError;
use crate::topic::TopicInfo;

/// The version written.
pub const VERSION: u64 = 9;

/// One file of a bag.
#[derive(Debug, Clone, PartialEq)]
pub struct FileInfo {
    /// Its name relative to the bag directory.
    pub path: String,
    /// Its first message (ns since the Unix epoch).
    pub starting_time_ns: u64,
    /// From its first to its last message.
    pub duration_ns: u64,
    /// Messages in it.
    pub message_count: u64,
}

/// A topic and how many messages it has.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicCount {
    /// The topic.
    pub info: TopicInfo,
    /// Its messages.
    pub message_count: u64,
}

/// The content of `metadata.yaml`.
#[derive(Debug, Clone, PartialEq)]
pub struct BagMetadata {
    /// `mcap` (or `sqlite3` for bags this crate cannot read).
    pub storage_identifier: String,
    /// The first message (ns since the Unix epoch).
    pub starting_time_ns: u64,
    /// From the first to the last message.
    pub duration_ns: u64,
    /// All messages.
    pub message_count: u64,
    /// Every topic recorded.
    pub topics: Vec<TopicCount>,
    /// Whole-file compression (`zstd`), empty for none (chunk compression
    /// inside MCAP is not listed here).
    pub compression_format: String,
    /// `file`, `message` or empty.
    pub compression_mode: String,
    /// The files, in order.
    pub files: Vec<FileInfo>,
    /// The ROS distribution that wrote the bag, if it says.
    pub ros_distro: Option<String>,
}

fn ns_map(key: &str, ns: u64) -> Value {
    let mut m = Mapping::new();
    m.insert(key.into(), ns.into());
    Value::Mapping(m)
}

impl BagMetadata {
    /// As `metadata.yaml` text.
    pub fn to_yaml(&self) -> Result<String, String> {
        let mut root = Mapping::new();
        root.insert("rosbag2_bagfile_information".into(), self.to_value());
        serde_yaml::to_string(&Value::Mapping(root)).map_err(|e| e.to_string())
    }

    /// The bag's metadata without `metadata.yaml`'s top key: what rosbag2's
    /// MCAP storage stores in each file's `rosbag2` metadata record (key
    /// `serialized_metadata`).
    pub fn to_record_yaml(&self) -> Result<String, String> {
        serde_yaml::to_string(&self.to_value()).map_err(|e| e.to_string())
    }

    fn to_value(&self) -> Value {
        let mut info = Mapping::new();
        info.insert("version".into(), VERSION.into());
        info.insert(
            "storage_identifier".into(),
            self.storage_identifier.clone().into(),
        );
        info.insert("duration".into(), ns_map("nanoseconds", self.duration_ns));
        info.insert(
            "starting_time".into(),
            ns_map("nanoseconds_since_epoch", self.starting_time_ns),
        );
        info.insert("message_count".into(), self.message_count.into());
        let topics: Vec<Value> = self
            .topics
            .iter()
            .map(|t| {
                let mut meta = Mapping::new();
                meta.insert("name".into(), t.info.name.clone().into());
                meta.insert("type".into(), t.info.type_name.clone().into());
                meta.insert(
                    "serialization_format".into(),
                    t.info.serialization_format.clone().into(),
                );
                meta.insert(
                    "offered_qos_profiles".into(),
                    Value::Sequence(
                        t.info
                            .offered_qos
                            .iter()
                            .map(crate::qos::profile_value)
                            .collect(),
                    ),
                );
                meta.insert(
                    "type_description_hash".into(),
                    t.info.type_hash.clone().unwrap_or_default().into(),
                );
                let mut entry = Mapping::new();
                entry.insert("topic_metadata".into(), Value::Mapping(meta));
                entry.insert("message_count".into(), t.message_count.into());
                Value::Mapping(entry)
            })
            .collect();
        info.insert("topics_with_message_count".into(), Value::Sequence(topics));
        info.insert(
            "compression_format".into(),
            self.compression_format.clone().into(),
        );
        info.insert(
            "compression_mode".into(),
            self.compression_mode.clone().into(),
        );
        info.insert(
            "relative_file_paths".into(),
            Value::Sequence(self.files.iter().map(|f| f.path.clone().into()).collect()),
        );
        let files: Vec<Value> = self
            .files
            .iter()
            .map(|f| {
                let mut m = Mapping::new();
                m.insert("path".into(), f.path.clone().into());
                m.insert(
                    "starting_time".into(),
                    ns_map("nanoseconds_since_epoch", f.starting_time_ns),
                );
                m.insert("duration".into(), ns_map("nanoseconds", f.duration_ns));
                m.insert("message_count".into(), f.message_count.into());
                Value::Mapping(m)
            })
            .collect();
        info.insert("files".into(), Value::Sequence(files));
        info.insert("custom_data".into(), Value::Mapping(Mapping::new()));
        info.insert(
            "ros_distro".into(),
            self.ros_distro.clone().unwrap_or_default().into(),
        );
        Value::Mapping(info)
    }

    /// Write `path` (atomically: a reader never sees half a file).
    pub fn write(&self, path: &Path) -> Result<(), BagError> {
        let text = self.to_yaml().map_err(|why| BagError::Metadata {
            path: path.to_path_buf(),
            why,
        })?;
        let tmp = path.with_extension("yaml.tmp");
        std::fs::write(&tmp, text).map_err(|e| BagError::io(&tmp, e))?;
        std::fs::rename(&tmp, path).map_err(|e| BagError::io(path, e))
    }

    /// Read `path`.
    pub fn read(path: &Path) -> Result<BagMetadata, BagError> {
        let bad = |why: String| BagError::Metadata {
            path: path.to_path_buf(),
            why,
        };
        let len = std::fs::metadata(path)
            .map_err(|e| BagError::io(path, e))?
            .len();
        // A metadata file is kilobytes; refuse to load something absurd.
        if len > 64 << 20 {
            return Err(bad(format!("{len} bytes is too large for a metadata.yaml")));
        }
        let text = std::fs::read_to_string(path).map_err(|e| BagError::io(path, e))?;
        Self::from_yaml(&text).map_err(bad)
    }

    /// Parse `metadata.yaml` text (any rosbag2 version).
    pub fn from_yaml(text: &str) -> Result<BagMetadata, String> {
        let root: Value = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
        let info = root
            .get("rosbag2_bagfile_information")
            .ok_or("no rosbag2_bagfile_information")?;
        let u = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
        let s = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("").to_string();
        let topics = info
            .get("topics_with_message_count")
            .and_then(Value::as_sequence)
            .map(|list| {
                list.iter()
                    .filter_map(|e| {
                        let m = e.get("topic_metadata")?;
                        Some(TopicCount {
                            info: TopicInfo {
                                name: s(m.get("name")),
                                type_name: s(m.get("type")),
                                serialization_format: s(m.get("serialization_format")),
                                offered_qos: m
                                    .get("offered_qos_profiles")
                                    .map(crate::qos::profiles_from_value)
                                    .unwrap_or_default(),
                                type_hash: Some(s(m.get("type_description_hash")))
                                    .filter(|h| !h.is_empty()),
                                definition: None,
                            },
                            message_count: u(e.get("message_count")),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        let mut files: Vec<FileInfo> = info
            .get("files")
            .and_then(Value::as_sequence)
            .map(|list| {
                list.iter()
                    .filter_map(|f| {
                        Some(FileInfo {
                            path: f.get("path")?.as_str()?.to_string(),
                            starting_time_ns: u(f
                                .get("starting_time")
                                .and_then(|t| t.get("nanoseconds_since_epoch"))),
                            duration_ns: u(f.get("duration").and_then(|d| d.get("nanoseconds"))),
                            message_count: u(f.get("message_count")),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        // Versions before 5 list only relative_file_paths.
        if files.is_empty()
            && let Some(paths) = info.get("relative_file_paths").and_then(Value::as_sequence)
        {
            files = paths
                .iter()
                .filter_map(Value::as_str)
                .map(|p| FileInfo {
                    path: p.to_string(),
                    starting_time_ns: 0,
                    duration_ns: 0,
                    message_count: 0,
                })
                .collect();
        }
        // A listed path must stay inside the bag directory.
        if let Some(f) = files.iter().find(|f| {
            let p = Path::new(&f.path);
            p.is_absolute()
                || p.components()
                    .any(|c| matches!(c, std::path::Component::ParentDir))
        }) {
            return Err(format!("file {:?} is outside the bag directory", f.path));
        }
        Ok(BagMetadata {
            storage_identifier: s(info.get("storage_identifier")),
            starting_time_ns: u(info
                .get("starting_time")
                .and_then(|t| t.get("nanoseconds_since_epoch"))),
            duration_ns: u(info.get("duration").and_then(|d| d.get("nanoseconds"))),
            message_count: u(info.get("message_count")),
            topics,
            compression_format: s(info.get("compression_format")),
            compression_mode: s(info.get("compression_mode")),
            files,
            ros_distro: Some(s(info.get("ros_distro"))).filter(|d| !d.is_empty()),
        })
    }
}

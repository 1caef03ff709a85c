//! Writing a bag: a directory with `metadata.yaml` and numbered MCAP files,
//! as `ros2 bag record -s mcap` writes it.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::BagError;
use crate::metadata::{BagMetadata, FileInfo, TopicCount};
use crate::topic::TopicInfo;

/// How chunks are compressed (rosbag2's MCAP storage: per chunk, never the
/// whole file, so a truncated file stays readable up to its last chunk).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// Stored as received: the fastest, what `ros2 bag record` does without
    /// a storage preset.
    #[default]
    None,
    /// zstd (level 1): about half the size of typical robot data.
    Zstd,
    /// LZ4: cheaper than zstd, larger files.
    Lz4,
}

/// How a [`Writer`] writes.
#[derive(Debug, Clone)]
pub struct WriterOptions {
    /// Start a new file when the current one reaches this many bytes.
    pub max_bag_size: Option<u64>,
    /// Start a new file when the current one spans this long.
    pub max_bag_duration: Option<Duration>,
    /// Chunk compression.
    pub compression: Compression,
    /// Target size of a chunk before compression; what a `kill -9` of the
    /// recorder can lose at most.
    pub chunk_size: u64,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            max_bag_size: None,
            max_bag_duration: None,
            compression: Compression::None,
            chunk_size: 1024 * 1024,
        }
    }
}

/// A topic added to a [`Writer`] (its index in the bag).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TopicId(usize);

struct TopicState {
    info: TopicInfo,
    schema: String,
    count: u64,
    sequence: u32,
    /// Its channel in the current file.
    channel: Option<u16>,
}

struct OpenFile {
    mcap: mcap::Writer<BufWriter<File>>,
    path: PathBuf,
    relative: String,
    /// Payload bytes written (the split criterion; framing adds a few
    /// percent).
    bytes: u64,
    first: Option<u64>,
    last: u64,
    count: u64,
}

/// Writes a bag directory (`metadata.yaml` and `<name>_0.mcap`, `_1`, ...)
/// that `ros2 bag info/play`, Foxglove and the MCAP tools read: profile
/// `ros2`, `ros2msg` schemas with every dependency, `cdr` messages, each
/// channel's `offered_qos_profiles` and `topic_type_hash`.
///
/// ```
/// use myelin::Message;
/// use myelin_bag::{Reader, TopicInfo, Writer, WriterOptions};
/// use myelin_msgs::std_msgs::String as RosString;
///
/// let dir = std::env::temp_dir().join(format!("doc_bag_{}", std::process::id()));
/// let mut w = Writer::create(&dir, WriterOptions::default()).unwrap();
/// let chatter = w.add_topic(TopicInfo::of::<RosString>("/chatter")).unwrap();
/// for (i, t) in [1_000u64, 2_000, 3_000].into_iter().enumerate() {
///     let m = RosString { data: format!("hello {i}") };
///     w.write_message(chatter, t, &m).unwrap();
/// }
/// w.finish().unwrap();
///
/// let r = Reader::open(&dir).unwrap();
/// let got: Vec<RosString> = r
///     .messages()
///     .unwrap()
///     .map(|m| m.unwrap().decode::<RosString>().unwrap())
///     .collect();
/// assert_eq!(got[2].data, "hello 2");
/// # std::fs::remove_dir_all(&dir).unwrap();
/// ```
pub struct Writer {
    dir: PathBuf,
    name: String,
    options: WriterOptions,
    topics: Vec<TopicState>,
    file: Option<OpenFile>,
    done: Vec<FileInfo>,
    finished: bool,
}

impl Writer {
    /// Create the bag directory `dir` (it must not exist) and its first
    /// file.
    pub fn create(dir: impl AsRef<Path>, options: WriterOptions) -> Result<Writer, BagError> {
        let dir = dir.as_ref().to_path_buf();
        if options.max_bag_size == Some(0) || options.chunk_size == 0 {
            return Err(BagError::Invalid(
                "the split size and the chunk size must be positive".into(),
            ));
        }
        if dir.exists() {
            return Err(BagError::Exists(dir));
        }
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| BagError::io(parent, e))?;
        }
        std::fs::create_dir(&dir).map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => BagError::Exists(dir.clone()),
            _ => BagError::io(&dir, e),
        })?;
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "bag".into());
        let mut w = Writer {
            dir,
            name,
            options,
            topics: Vec::new(),
            file: None,
            done: Vec::new(),
            finished: false,
        };
        w.open_next()?;
        w.write_metadata()?;
        Ok(w)
    }

    /// The bag directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Add a topic with its schema: its [`TopicInfo::definition`], else
    /// the definition in `myelin-msgs` (a type it does not have
    /// gets an empty schema and a warning, as `ros2 bag` records a type it
    /// cannot find: readers then see bytes without field names; use
    /// [`add_topic_with_schema`](Self::add_topic_with_schema)).
    pub fn add_topic(&mut self, info: TopicInfo) -> Result<TopicId, BagError> {
        if let Some(d) = info.definition.clone() {
            return self.add_topic_with_schema(info, &d);
        }
        let schema = crate::ros2msg_schema(&info.type_name).unwrap_or_else(|| {
            tracing::warn!(
                "topic {}: no definition of {} known; recorded without a schema",
                info.name,
                info.type_name
            );
            String::new()
        });
        self.add_topic_with_schema(info, &schema)
    }

    /// Add a topic with its full `ros2msg` schema text (the type's `.msg`
    /// text, then each dependency after a line of 80 `=` and `MSG: pkg/msg/Name`).
    pub fn add_topic_with_schema(
        &mut self,
        info: TopicInfo,
        schema: &str,
    ) -> Result<TopicId, BagError> {
        if let Some(i) = self.topics.iter().position(|t| t.info.name == info.name) {
            return Err(BagError::Invalid(format!(
                "topic {:?} is already in the bag (as {})",
                info.name, self.topics[i].info.type_name
            )));
        }
        self.topics.push(TopicState {
            info,
            schema: schema.to_string(),
            count: 0,
            sequence: 0,
            channel: None,
        });
        let id = self.topics.len() - 1;
        self.add_channel(id)?;
        Ok(TopicId(id))
    }

    /// The topic `name` if it was added.
    pub fn topic(&self, name: &str) -> Option<TopicId> {
        self.topics
            .iter()
            .position(|t| t.info.name == name)
            .map(TopicId)
    }

    fn add_channel(&mut self, id: usize) -> Result<(), BagError> {
        let Some(f) = self.file.as_mut() else {
            return Ok(());
        };
        let t = &mut self.topics[id];
        let path = &f.path;
        let schema = f
            .mcap
            .add_schema(&t.info.type_name, "ros2msg", t.schema.as_bytes())
            .map_err(|e| mcap_err(path, e))?;
        let meta = channel_metadata(&t.info);
        let channel = f
            .mcap
            .add_channel(schema, &t.info.name, &t.info.serialization_format, &meta)
            .map_err(|e| mcap_err(path, e))?;
        t.channel = Some(channel);
        Ok(())
    }

    /// Write one message's encoded bytes (CDR for a ROS type) received at
    /// `log_time` and sent at `publish_time` (nanoseconds since the Unix
    /// epoch).
    pub fn write(
        &mut self,
        topic: TopicId,
        log_time: u64,
        publish_time: u64,
        data: &[u8],
    ) -> Result<(), BagError> {
        if topic.0 >= self.topics.len() {
            return Err(BagError::Invalid(format!(
                "no topic {} in this bag",
                topic.0
            )));
        }
        if self.split_due(log_time) {
            self.split()?;
        }
        let f = self.file.as_mut().expect("a writer always has a file open");
        let t = &mut self.topics[topic.0];
        let header = mcap::records::MessageHeader {
            channel_id: t
                .channel
                .expect("every topic has a channel in the open file"),
            sequence: t.sequence,
            log_time,
            publish_time,
        };
        f.mcap
            .write_to_known_channel(&header, data)
            .map_err(|e| mcap_err(&f.path, e))?;
        t.sequence = t.sequence.wrapping_add(1);
        t.count += 1;
        f.bytes += data.len() as u64;
        f.count += 1;
        f.first = Some(f.first.map_or(log_time, |s| s.min(log_time)));
        f.last = f.last.max(log_time);
        Ok(())
    }

    /// Encode and write a message (`log_time` = `publish_time` = `time`).
    pub fn write_message<T: myelin::Message>(
        &mut self,
        topic: TopicId,
        time: u64,
        msg: &T,
    ) -> Result<(), BagError> {
        let len = msg
            .wire_len()
            .map_err(|e| BagError::Invalid(format!("cannot encode {}: {e}", T::TYPE_NAME)))?;
        let mut buf = vec![0u8; len];
        msg.wire_encode(&mut buf)
            .map_err(|e| BagError::Invalid(format!("cannot encode {}: {e}", T::TYPE_NAME)))?;
        self.write(topic, time, time, &buf)
    }

    fn split_due(&self, log_time: u64) -> bool {
        let Some(f) = &self.file else { return false };
        if f.count == 0 {
            return false;
        }
        let size = self.options.max_bag_size.is_some_and(|max| f.bytes >= max);
        let span = match (self.options.max_bag_duration, f.first) {
            (Some(d), Some(first)) => {
                log_time.saturating_sub(first) >= d.as_nanos().min(u64::MAX as u128) as u64
            }
            _ => false,
        };
        size || span
    }

    /// Close the current file and start the next one.
    fn split(&mut self) -> Result<(), BagError> {
        self.close_file()?;
        self.open_next()?;
        for i in 0..self.topics.len() {
            self.add_channel(i)?;
        }
        self.write_metadata()
    }

    fn open_next(&mut self) -> Result<(), BagError> {
        let relative = format!("{}_{}.mcap", self.name, self.done.len());
        let path = self.dir.join(&relative);
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| BagError::io(&path, e))?;
        let compression = match self.options.compression {
            Compression::None => None,
            Compression::Zstd => Some(mcap::Compression::Zstd),
            Compression::Lz4 => Some(mcap::Compression::Lz4),
        };
        let mcap = mcap::WriteOptions::new()
            .profile("ros2")
            .library(format!("myelin-bag {}", env!("CARGO_PKG_VERSION")))
            .compression(compression)
            .compression_level(1)
            .chunk_size(Some(self.options.chunk_size))
            .create(BufWriter::with_capacity(1 << 20, file))
            .map_err(|e| mcap_err(&path, e))?;
        self.file = Some(OpenFile {
            mcap,
            path,
            relative,
            bytes: 0,
            first: None,
            last: 0,
            count: 0,
        });
        Ok(())
    }

    fn close_file(&mut self) -> Result<(), BagError> {
        let Some(mut f) = self.file.take() else {
            return Ok(());
        };
        let first = f.first.unwrap_or(0);
        self.done.push(FileInfo {
            path: f.relative.clone(),
            starting_time_ns: first,
            duration_ns: f.last.saturating_sub(first),
            message_count: f.count,
        });
        let meta = self.metadata();
        let record = mcap::records::Metadata {
            name: "rosbag2".into(),
            metadata: BTreeMap::from([(
                "serialized_metadata".to_string(),
                meta.to_record_yaml().map_err(|why| BagError::Metadata {
                    path: f.path.clone(),
                    why,
                })?,
            )]),
        };
        f.mcap
            .write_metadata(&record)
            .map_err(|e| mcap_err(&f.path, e))?;
        f.mcap.finish().map_err(|e| mcap_err(&f.path, e))?;
        let mut inner = f.mcap.into_inner();
        std::io::Write::flush(&mut inner).map_err(|e| BagError::io(&f.path, e))?;
        inner
            .get_ref()
            .sync_data()
            .map_err(|e| BagError::io(&f.path, e))?;
        Ok(())
    }

    /// What `metadata.yaml` says now.
    fn metadata(&self) -> BagMetadata {
        let mut files = self.done.clone();
        if let Some(f) = &self.file {
            let first = f.first.unwrap_or(0);
            files.push(FileInfo {
                path: f.relative.clone(),
                starting_time_ns: first,
                duration_ns: f.last.saturating_sub(first),
                message_count: f.count,
            });
        }
        let with_messages: Vec<&FileInfo> = files.iter().filter(|f| f.message_count > 0).collect();
        let start = with_messages
            .iter()
            .map(|f| f.starting_time_ns)
            .min()
            .unwrap_or(0);
        let end = with_messages
            .iter()
            .map(|f| f.starting_time_ns + f.duration_ns)
            .max()
            .unwrap_or(0);
        BagMetadata {
            storage_identifier: "mcap".into(),
            starting_time_ns: start,
            duration_ns: end.saturating_sub(start),
            message_count: files.iter().map(|f| f.message_count).sum(),
            topics: self
                .topics
                .iter()
                .map(|t| TopicCount {
                    info: t.info.clone(),
                    message_count: t.count,
                })
                .collect(),
            compression_format: String::new(),
            compression_mode: String::new(),
            files,
            // As rosbag2 records it: the distribution of the sourced ROS 2
            // environment, none outside one.
            ros_distro: std::env::var("ROS_DISTRO").ok().filter(|d| !d.is_empty()),
        }
    }

    fn write_metadata(&self) -> Result<(), BagError> {
        self.metadata().write(&self.dir.join("metadata.yaml"))
    }

    /// Close the current chunk and hand everything written so far to the
    /// OS: a recorder killed after this (`kill -9`) leaves a file readable
    /// up to here. A recorder calls it about once a second, so a quiet
    /// topic is not held back until a chunk fills.
    pub fn flush(&mut self) -> Result<(), BagError> {
        if let Some(f) = self.file.as_mut() {
            f.mcap.flush().map_err(|e| mcap_err(&f.path, e))?;
        }
        Ok(())
    }

    /// Messages written so far.
    pub fn message_count(&self) -> u64 {
        self.topics.iter().map(|t| t.count).sum()
    }

    /// Close the last file and write `metadata.yaml`: the bag is complete.
    pub fn finish(mut self) -> Result<(), BagError> {
        self.finish_inner()
    }

    fn finish_inner(&mut self) -> Result<(), BagError> {
        if self.finished {
            return Ok(());
        }
        self.finished = true;
        // metadata.yaml is written even if the last file fails, so what
        // was written before stays listed.
        let closed = self.close_file();
        let meta = self.write_metadata();
        closed.and(meta)
    }
}

impl Drop for Writer {
    /// A writer dropped without [`finish`](Writer::finish) (an early
    /// return, a panic) still completes its files.
    fn drop(&mut self) {
        if let Err(e) = self.finish_inner() {
            tracing::warn!("bag {}: {e}", self.dir.display());
        }
    }
}

fn mcap_err(path: &Path, source: mcap::McapError) -> BagError {
    match source {
        mcap::McapError::Io(e) => BagError::io(path, e),
        source => BagError::Mcap {
            path: path.to_path_buf(),
            source,
        },
    }
}

/// The channel metadata rosbag2 writes: the offered QoS profiles (YAML)
/// and the type hash.
fn channel_metadata(info: &TopicInfo) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    m.insert(
        "offered_qos_profiles".to_string(),
        crate::qos::profiles_to_yaml(&info.offered_qos),
    );
    m.insert(
        "topic_type_hash".to_string(),
        info.type_hash.clone().unwrap_or_default(),
    );
    m
}

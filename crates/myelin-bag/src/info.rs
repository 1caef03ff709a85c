//! `myelin bag info`: what a bag holds, from each file's summary (no need
//! to read the messages) or, for a file without one (a recorder killed
//! with `kill -9`), by reading it through.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Seek};
use std::path::{Path, PathBuf};

use crate::BagError;
use crate::reader::{Reader, topic_of_channel};
use crate::topic::TopicInfo;

/// One file of a bag.
#[derive(Debug, Clone)]
pub struct FileSummary {
    /// The file.
    pub path: PathBuf,
    /// Its size in bytes.
    pub size: u64,
    /// Messages in it.
    pub message_count: u64,
    /// Whether it ends properly (a summary and footer); an incomplete file
    /// was read up to its damage.
    pub complete: bool,
    /// What is wrong with it, if anything.
    pub damage: Option<String>,
}

/// What a bag holds (`ros2 bag info`).
#[derive(Debug, Clone)]
pub struct BagInfo {
    /// Its files.
    pub files: Vec<FileSummary>,
    /// Total size in bytes.
    pub size: u64,
    /// The first message's receive time (ns since the Unix epoch).
    pub start_ns: u64,
    /// The last message's receive time.
    pub end_ns: u64,
    /// All messages.
    pub message_count: u64,
    /// Each topic with its message count, by name.
    pub topics: Vec<(TopicInfo, u64)>,
    /// The ROS distribution that wrote it, if it says.
    pub ros_distro: Option<String>,
}

/// The suffix of the topic a service publishes its introspection events
/// on (`rcl`'s `RCL_SERVICE_INTROSPECTION_TOPIC_POSTFIX`).
pub const SERVICE_EVENT_SUFFIX: &str = "/_service_event";

/// The service and service type whose introspection events `topic` of
/// type `type_name` carries (`/add/_service_event` of
/// `example_interfaces/srv/AddTwoInts_Event` is the service `/add` of
/// `example_interfaces/srv/AddTwoInts`), as rosbag2 tells service events
/// from topics; `None` for a topic.
///
/// ```
/// use myelin_bag::service_of_event_topic;
///
/// assert_eq!(
///     service_of_event_topic("/add/_service_event", "example_interfaces/srv/AddTwoInts_Event"),
///     Some(("/add", "example_interfaces/srv/AddTwoInts")),
/// );
/// assert_eq!(service_of_event_topic("/chatter", "std_msgs/msg/String"), None);
/// assert_eq!(service_of_event_topic("/x/_service_event", "std_msgs/msg/String"), None);
/// ```
pub fn service_of_event_topic<'a>(
    topic: &'a str,
    type_name: &'a str,
) -> Option<(&'a str, &'a str)> {
    let service = topic
        .strip_suffix(SERVICE_EVENT_SUFFIX)
        .filter(|s| !s.is_empty())?;
    let service_type = type_name
        .strip_suffix("_Event")
        .filter(|t| t.contains("/srv/"))?;
    Some((service, service_type))
}

/// A service whose introspection events a bag holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceEvents<'a> {
    /// The service (`/add`).
    pub name: &'a str,
    /// Its type (`example_interfaces/srv/AddTwoInts`).
    pub type_name: &'a str,
    /// The events' serialization (`cdr`).
    pub serialization_format: &'a str,
    /// Events recorded (requests and responses, client and server side).
    pub event_count: u64,
}

impl BagInfo {
    /// The topics that are not service events, with their message counts
    /// (what `ros2 bag info` lists as topics).
    pub fn plain_topics(&self) -> impl Iterator<Item = (&TopicInfo, u64)> {
        self.topics
            .iter()
            .filter(|(t, _)| service_of_event_topic(&t.name, &t.type_name).is_none())
            .map(|(t, n)| (t, *n))
    }

    /// The services whose introspection events the bag holds (`ros2 bag
    /// info`'s service information).
    pub fn services(&self) -> impl Iterator<Item = ServiceEvents<'_>> {
        self.topics.iter().filter_map(|(t, n)| {
            let (name, type_name) = service_of_event_topic(&t.name, &t.type_name)?;
            Some(ServiceEvents {
                name,
                type_name,
                serialization_format: &t.serialization_format,
                event_count: *n,
            })
        })
    }

    /// The span from the first to the last message.
    pub fn duration(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.end_ns.saturating_sub(self.start_ns))
    }
}

impl Reader {
    /// Summarise the bag: per file from its MCAP summary when it has one,
    /// else by reading it (a damaged file is reported, not an error).
    pub fn info(&self) -> Result<BagInfo, BagError> {
        let mut info = BagInfo {
            files: Vec::new(),
            size: 0,
            start_ns: u64::MAX,
            end_ns: 0,
            message_count: 0,
            topics: Vec::new(),
            ros_distro: self.metadata().and_then(|m| m.ros_distro.clone()),
        };
        let mut topics: BTreeMap<String, (TopicInfo, u64)> = BTreeMap::new();
        for path in self.files() {
            let size = std::fs::metadata(path)
                .map_err(|e| BagError::io(path, e))?
                .len();
            // A summary without statistics (some writers omit them) does
            // not count messages: read those files through.
            let file = match summarise(path)?.filter(|s| s.stats.is_some()) {
                Some(s) => {
                    let stats = s.stats.unwrap_or_default();
                    for (id, n) in &stats.channel_message_counts {
                        if let Some(c) = s.channels.get(id) {
                            add(&mut topics, topic_of_channel(c), *n);
                        }
                    }
                    if stats.message_count > 0 {
                        info.start_ns = info.start_ns.min(stats.message_start_time);
                        info.end_ns = info.end_ns.max(stats.message_end_time);
                    }
                    FileSummary {
                        path: path.clone(),
                        size,
                        message_count: stats.message_count,
                        complete: true,
                        damage: None,
                    }
                }
                None => {
                    let one = Reader::open(path)?;
                    let mut count = 0;
                    let mut damage = None;
                    for m in one.messages()? {
                        match m {
                            Ok(m) => {
                                count += 1;
                                info.start_ns = info.start_ns.min(m.log_time);
                                info.end_ns = info.end_ns.max(m.log_time);
                                add(&mut topics, (*m.topic).clone(), 1);
                            }
                            Err(e) => damage = Some(e.to_string()),
                        }
                    }
                    FileSummary {
                        path: path.clone(),
                        size,
                        message_count: count,
                        complete: false,
                        damage: damage.or(Some("no summary (the writer did not finish)".into())),
                    }
                }
            };
            info.size += size;
            info.message_count += file.message_count;
            info.files.push(file);
        }
        if info.message_count == 0 {
            info.start_ns = 0;
        }
        // Topics without messages still belong to the bag (metadata.yaml
        // lists every recorded topic).
        if let Some(m) = self.metadata() {
            for t in &m.topics {
                topics
                    .entry(t.info.name.clone())
                    .or_insert_with(|| (t.info.clone(), 0));
            }
        }
        info.topics = topics.into_values().collect();
        Ok(info)
    }
}

fn add(topics: &mut BTreeMap<String, (TopicInfo, u64)>, t: TopicInfo, n: u64) {
    topics
        .entry(t.name.clone())
        .and_modify(|e| {
            for q in &t.offered_qos {
                if !e.0.offered_qos.contains(q) {
                    e.0.offered_qos.push(*q);
                }
            }
            e.1 += n
        })
        .or_insert((t, n));
}

/// The file's MCAP summary, `None` if it has none (unfinished) or it is
/// unreadable.
fn summarise(path: &Path) -> Result<Option<mcap::Summary>, BagError> {
    use mcap::sans_io::summary_reader::{SummaryReadEvent, SummaryReader, SummaryReaderOptions};
    let mut file = File::open(path).map_err(|e| BagError::io(path, e))?;
    let size = file.metadata().map_err(|e| BagError::io(path, e))?.len();
    let mut reader = SummaryReader::new_with_options(
        SummaryReaderOptions::default()
            .with_file_size(size)
            .with_record_length_limit(1 << 30),
    );
    while let Some(event) = reader.next_event() {
        let Ok(event) = event else {
            return Ok(None);
        };
        match event {
            SummaryReadEvent::ReadRequest(need) => {
                let n = file
                    .read(reader.insert(need))
                    .map_err(|e| BagError::io(path, e))?;
                reader.notify_read(n);
            }
            SummaryReadEvent::SeekRequest(to) => {
                let pos = file.seek(to).map_err(|e| BagError::io(path, e))?;
                reader.notify_seeked(pos);
            }
        }
    }
    Ok(reader.finish())
}

//! Reading a bag: a directory (its `metadata.yaml` and MCAP files) or one
//! MCAP file, messages merged in time order across files.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::BagError;
use crate::metadata::BagMetadata;
use crate::topic::TopicInfo;

/// The longest record a reader accepts: a corrupt length field cannot make
/// it allocate more than this (larger than any real message: a 4K RGB
/// frame is 25 MB).
const RECORD_LIMIT: usize = 1 << 30;

/// One recorded message.
#[derive(Debug, Clone)]
pub struct BagMessage {
    /// Its topic.
    pub topic: Arc<TopicInfo>,
    /// When it was received (ns since the Unix epoch).
    pub log_time: u64,
    /// When it was sent, as recorded (ns since the Unix epoch).
    pub publish_time: u64,
    /// Its sequence number on its topic.
    pub sequence: u32,
    /// Its encoded bytes (CDR for ROS types).
    pub data: Vec<u8>,
}

impl BagMessage {
    /// Decode as `T` (which must be the recorded type, or one with the
    /// same encoding).
    ///
    /// See [`Writer`](crate::Writer) for an example.
    pub fn decode<T: myelin::Message>(&self) -> Result<T, BagError> {
        T::wire_decode(myelin::SharedBytes::copy_from(&self.data)).map_err(|e| BagError::Decode {
            topic: self.topic.name.clone(),
            type_name: T::TYPE_NAME,
            why: e.to_string(),
        })
    }
}

/// A bag opened for reading.
///
/// ```no_run
/// let bag = myelin_bag::Reader::open("rosbag2_2026_11_24-10_00_00").unwrap();
/// for m in bag.messages().unwrap() {
///     let m = m.unwrap();
///     println!("{} {} {} bytes", m.log_time, m.topic.name, m.data.len());
/// }
/// ```
#[derive(Debug)]
pub struct Reader {
    path: PathBuf,
    files: Vec<PathBuf>,
    metadata: Option<BagMetadata>,
}

impl Reader {
    /// Open a bag directory (with or without `metadata.yaml`: a recorder
    /// killed before writing it leaves its MCAP files readable) or a single
    /// `.mcap` file.
    pub fn open(path: impl AsRef<Path>) -> Result<Reader, BagError> {
        let path = path.as_ref().to_path_buf();
        let meta = std::fs::metadata(&path).map_err(|e| BagError::io(&path, e))?;
        if meta.is_file() {
            check_magic(&path)?;
            return Ok(Reader {
                files: vec![path.clone()],
                path,
                metadata: None,
            });
        }
        let yaml = path.join("metadata.yaml");
        let metadata = if yaml.exists() {
            Some(BagMetadata::read(&yaml)?)
        } else {
            None
        };
        let mut files: Vec<PathBuf> = Vec::new();
        if let Some(m) = &metadata {
            if m.storage_identifier != "mcap" && !m.storage_identifier.is_empty() {
                return Err(BagError::NotABag {
                    path,
                    why: format!(
                        "its storage is {:?}; only mcap bags are read (convert with `ros2 bag convert`)",
                        m.storage_identifier
                    ),
                });
            }
            for f in &m.files {
                let p = path.join(&f.path);
                if p.exists() {
                    files.push(p);
                } else {
                    tracing::warn!("{}: listed in metadata.yaml but missing", p.display());
                }
            }
        }
        // MCAP files metadata.yaml does not list (a recorder killed after
        // a split): read them too, in the order of their number.
        let mut extra: Vec<PathBuf> = std::fs::read_dir(&path)
            .map_err(|e| BagError::io(&path, e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "mcap") && !files.contains(p))
            .collect();
        extra.sort_by_key(|p| (file_number(p), p.clone()));
        if metadata.is_some() && !extra.is_empty() {
            tracing::warn!(
                "{}: {} MCAP file(s) not listed in metadata.yaml are read too",
                path.display(),
                extra.len()
            );
        }
        files.extend(extra);
        if files.is_empty() {
            return Err(BagError::NotABag {
                path,
                why: "no metadata.yaml and no .mcap file in it".into(),
            });
        }
        for f in &files {
            check_magic(f)?;
        }
        Ok(Reader {
            path,
            files,
            metadata,
        })
    }

    /// What was opened.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The MCAP files, in order.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// The bag's `metadata.yaml`, if it has one.
    pub fn metadata(&self) -> Option<&BagMetadata> {
        self.metadata.as_ref()
    }

    /// Every message, oldest first, by receive time: across files a merge,
    /// within an indexed file in log-time order from its chunk index (as
    /// `ros2 bag play` does; a writer may put chunks out of order or
    /// overlap their times), within a file without a summary (a recording
    /// cut short) in file order. A damaged file yields one
    /// [`BagError::Corrupt`] naming how far it was read, then the other
    /// files go on.
    pub fn messages(&self) -> Result<Messages, BagError> {
        Messages::of_files(&self.files)
    }

    /// The messages of several bags as one stream, oldest first (what
    /// `myelin bag convert` merges).
    pub fn merged(readers: &[Reader]) -> Result<Messages, BagError> {
        let files: Vec<PathBuf> = readers
            .iter()
            .flat_map(|r| r.files.iter().cloned())
            .collect();
        Messages::of_files(&files)
    }
}

impl Messages {
    fn of_files(files: &[PathBuf]) -> Result<Messages, BagError> {
        let mut streams = Vec::new();
        for path in files {
            let mut file = File::open(path).map_err(|e| BagError::io(path, e))?;
            let read = Arc::<std::sync::atomic::AtomicU64>::default();
            let source = match indexed(&mut file) {
                Some((summary, reader)) => Source::Indexed {
                    size: file.metadata().map_or(0, |m| m.len()),
                    reader,
                    summary,
                    file,
                    buf: Vec::new(),
                    at: 0,
                },
                None => {
                    file.seek(SeekFrom::Start(0))
                        .map_err(|e| BagError::io(path, e))?;
                    let counted = Counted {
                        inner: BufReader::with_capacity(1 << 20, file),
                        read: read.clone(),
                    };
                    let options = mcap::sans_io::LinearReaderOptions::default()
                        .with_record_length_limit(RECORD_LIMIT);
                    Source::Linear(mcap::io::MessageReader::new_with_options(counted, options))
                }
            };
            streams.push(Stream {
                path: path.clone(),
                source,
                read,
                topics: HashMap::new(),
            });
        }
        let mut m = Messages {
            streams,
            heads: BinaryHeap::new(),
            pending_errors: Vec::new(),
        };
        for i in 0..m.streams.len() {
            m.advance(i);
        }
        Ok(m)
    }
}

/// The summary of `file` and a reader of its messages in log-time order,
/// when it has a summary with a chunk index (every finished rosbag2 or
/// myelin file does); `None` otherwise (cut short, or not chunked).
fn indexed(
    file: &mut File,
) -> Option<(mcap::Summary, mcap::sans_io::indexed_reader::IndexedReader)> {
    use mcap::sans_io::indexed_reader::{IndexedReader, IndexedReaderOptions, ReadOrder};
    use mcap::sans_io::summary_reader::{SummaryReadEvent, SummaryReader, SummaryReaderOptions};
    let size = file.metadata().ok()?.len();
    let mut reader = SummaryReader::new_with_options(
        SummaryReaderOptions::default()
            .with_file_size(size)
            .with_record_length_limit(RECORD_LIMIT),
    );
    while let Some(event) = reader.next_event() {
        match event.ok()? {
            SummaryReadEvent::ReadRequest(n) => {
                let got = file.read(reader.insert(n)).ok()?;
                reader.notify_read(got);
            }
            SummaryReadEvent::SeekRequest(to) => {
                reader.notify_seeked(file.seek(to).ok()?);
            }
        }
    }
    let summary = reader.finish()?;
    if summary.chunk_indexes.is_empty() || summary.channels.is_empty() {
        return None;
    }
    // A writer may leave channels out of the summary (they are in the
    // data section): then only a linear read knows them.
    let listed = summary.chunk_indexes.iter().all(|c| {
        c.message_index_offsets
            .keys()
            .all(|id| summary.channels.contains_key(id))
    });
    if !listed || overlapping_chunk_bytes(&summary.chunk_indexes) > INDEXED_MEMORY {
        return None;
    }
    let options = IndexedReaderOptions::new()
        .with_order(ReadOrder::LogTime)
        .with_record_length_limit(RECORD_LIMIT);
    let reader = IndexedReader::new_with_options(&summary, options).ok()?;
    Some((summary, reader))
}

/// The most decompressed chunk bytes a log-time-ordered read may hold at
/// once; past it (chunks whose time ranges overlap that much, which a
/// hostile index can claim) a file is read in file order instead.
const INDEXED_MEMORY: u64 = 1 << 30;

/// The largest sum of uncompressed sizes of chunks whose time ranges
/// overlap at one instant: what a log-time-ordered read holds at worst.
fn overlapping_chunk_bytes(chunks: &[mcap::records::ChunkIndex]) -> u64 {
    // Starts before ends at equal times: touching ranges overlap.
    let mut edges: Vec<(u64, bool, u64)> = chunks
        .iter()
        .flat_map(|c| {
            let end = c.message_end_time.max(c.message_start_time);
            [
                (c.message_start_time, false, c.uncompressed_size),
                (end, true, c.uncompressed_size),
            ]
        })
        .collect();
    edges.sort_unstable();
    let (mut now, mut most) = (0u64, 0u64);
    for (_, is_end, size) in edges {
        if is_end {
            now = now.saturating_sub(size);
        } else {
            now = now.saturating_add(size);
            most = most.max(now);
        }
    }
    most
}

/// The number at the end of `name_<n>.mcap`.
fn file_number(p: &Path) -> u64 {
    p.file_stem()
        .and_then(|s| s.to_str())
        .and_then(|s| s.rsplit('_').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(u64::MAX)
}

fn check_magic(path: &Path) -> Result<(), BagError> {
    let mut head = [0u8; 8];
    let mut f = File::open(path).map_err(|e| BagError::io(path, e))?;
    let n = read_up_to(&mut f, &mut head).map_err(|e| BagError::io(path, e))?;
    if n < head.len() || head != mcap::MAGIC {
        return Err(BagError::NotABag {
            path: path.to_path_buf(),
            why: "it does not start with the MCAP magic".into(),
        });
    }
    Ok(())
}

fn read_up_to(f: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// A reader that counts the bytes it has handed out (how far into a file
/// a corrupt record was met).
struct Counted<R> {
    inner: R,
    read: Arc<std::sync::atomic::AtomicU64>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read
            .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(n)
    }
}

struct Stream {
    path: PathBuf,
    source: Source,
    /// How far a linear read got (where a corrupt record was met).
    read: Arc<std::sync::atomic::AtomicU64>,
    topics: HashMap<u16, Arc<TopicInfo>>,
}

/// How a file's messages are read.
enum Source {
    /// In file order, record by record (no usable summary).
    Linear(mcap::io::MessageReader<Counted<BufReader<File>>>),
    /// In log-time order, chunk by chunk as the chunk index asks.
    Indexed {
        reader: mcap::sans_io::indexed_reader::IndexedReader,
        summary: mcap::Summary,
        file: File,
        /// The chunk being read.
        buf: Vec<u8>,
        /// Where the last chunk read starts (where an error is).
        at: u64,
        /// The file's size (a chunk the index places past it is an error,
        /// not an allocation).
        size: u64,
    },
}

/// One message read from a file (its channel, times, sequence, bytes).
type Read1 = (Arc<mcap::Channel<'static>>, u64, u64, u32, Vec<u8>);

impl Stream {
    /// The next message; an error with how far into the file it was met.
    fn next(&mut self) -> Option<Result<Read1, (u64, String)>> {
        match &mut self.source {
            Source::Linear(r) => match r.next()? {
                Ok(m) => Some(Ok((
                    m.channel,
                    m.log_time,
                    m.publish_time,
                    m.sequence,
                    m.data.into_owned(),
                ))),
                Err(e) => Some(Err((
                    self.read.load(std::sync::atomic::Ordering::Relaxed),
                    e.to_string(),
                ))),
            },
            Source::Indexed {
                reader,
                summary,
                file,
                buf,
                at,
                size,
            } => {
                use mcap::sans_io::indexed_reader::IndexedReadEvent;
                loop {
                    let (offset, length) = match reader.next_event()? {
                        Err(e) => return Some(Err((*at, e.to_string()))),
                        Ok(IndexedReadEvent::Message { header, data }) => {
                            let Some(channel) = summary.channels.get(&header.channel_id) else {
                                return Some(Err((
                                    *at,
                                    format!(
                                        "a message on channel {}, which the summary does not list",
                                        header.channel_id
                                    ),
                                )));
                            };
                            return Some(Ok((
                                channel.clone(),
                                header.log_time,
                                header.publish_time,
                                header.sequence,
                                data.to_vec(),
                            )));
                        }
                        Ok(IndexedReadEvent::ReadChunkRequest { offset, length }) => {
                            (offset, length)
                        }
                    };
                    *at = offset;
                    if offset.saturating_add(length as u64) > *size {
                        return Some(Err((
                            offset,
                            format!("the index places a {length}-byte chunk past the file's end"),
                        )));
                    }
                    buf.resize(length, 0);
                    let got = file
                        .seek(SeekFrom::Start(offset))
                        .and_then(|_| file.read_exact(buf));
                    if let Err(e) = got {
                        return Some(Err((offset, format!("reading a chunk: {e}"))));
                    }
                    if let Err(e) = reader.insert_chunk_record_data(offset, buf) {
                        return Some(Err((offset, e.to_string())));
                    }
                }
            }
        }
    }
}

/// The messages of a bag in time order (see [`Reader::messages`]).
pub struct Messages {
    streams: Vec<Stream>,
    /// The next message of each stream, by (log time, stream).
    heads: BinaryHeap<Reverse<(u64, usize, HeadSlot)>>,
    pending_errors: Vec<BagError>,
}

/// A message waiting in the merge (ordered only by its key).
struct HeadSlot(BagMessage);

impl PartialEq for HeadSlot {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for HeadSlot {}
impl PartialOrd for HeadSlot {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for HeadSlot {
    fn cmp(&self, _: &Self) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }
}

impl Messages {
    /// Read the next message of stream `i` into the merge.
    fn advance(&mut self, i: usize) {
        let s = &mut self.streams[i];
        match s.next() {
            None => {}
            Some(Ok((channel, log_time, publish_time, sequence, data))) => {
                let topic = s
                    .topics
                    .entry(channel.id)
                    .or_insert_with(|| Arc::new(topic_of_channel(&channel)))
                    .clone();
                let msg = BagMessage {
                    topic,
                    log_time,
                    publish_time,
                    sequence,
                    data,
                };
                self.heads.push(Reverse((msg.log_time, i, HeadSlot(msg))));
            }
            Some(Err((offset, why))) => self.pending_errors.push(BagError::Corrupt {
                path: s.path.clone(),
                offset,
                why,
            }),
        }
    }
}

impl Iterator for Messages {
    type Item = Result<BagMessage, BagError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(e) = self.pending_errors.pop() {
            return Some(Err(e));
        }
        let Reverse((_, i, HeadSlot(msg))) = self.heads.pop()?;
        self.advance(i);
        Some(Ok(msg))
    }
}

/// A topic as an MCAP channel describes it (rosbag2's channel metadata).
pub(crate) fn topic_of_channel(c: &mcap::Channel<'_>) -> TopicInfo {
    let offered_qos = c
        .metadata
        .get("offered_qos_profiles")
        .map(|y| crate::qos::profiles_from_yaml(y))
        .unwrap_or_default();
    TopicInfo {
        name: c.topic.clone(),
        type_name: c
            .schema
            .as_ref()
            .map(|s| s.name.clone())
            .unwrap_or_default(),
        serialization_format: c.message_encoding.clone(),
        offered_qos,
        type_hash: c
            .metadata
            .get("topic_type_hash")
            .filter(|h| !h.is_empty())
            .cloned(),
        definition: c
            .schema
            .as_ref()
            .filter(|s| s.encoding == "ros2msg" && !s.data.is_empty())
            .map(|s| String::from_utf8_lossy(&s.data).into_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(start: u64, end: u64, size: u64) -> mcap::records::ChunkIndex {
        mcap::records::ChunkIndex {
            message_start_time: start,
            message_end_time: end,
            chunk_start_offset: 0,
            chunk_length: 0,
            message_index_offsets: Default::default(),
            message_index_length: 0,
            compression: String::new(),
            compressed_size: 0,
            uncompressed_size: size,
        }
    }

    /// What a log-time-ordered read holds at worst: chunks in sequence
    /// one at a time, overlapping ones together (touching ends count), and
    /// a hostile index of many chunks at one instant all of them.
    #[test]
    fn overlapping_chunks_are_summed_at_their_worst_instant() {
        assert_eq!(overlapping_chunk_bytes(&[]), 0);
        let seq = [chunk(0, 9, 10), chunk(10, 19, 20), chunk(20, 29, 30)];
        assert_eq!(overlapping_chunk_bytes(&seq), 30);
        let overlap = [chunk(0, 10, 10), chunk(5, 15, 20), chunk(10, 20, 30)];
        assert_eq!(overlapping_chunk_bytes(&overlap), 60);
        let bomb: Vec<_> = (0..30).map(|_| chunk(0, 0, 1 << 30)).collect();
        assert!(overlapping_chunk_bytes(&bomb) > INDEXED_MEMORY);
        // A backwards range (end before start) is a point, not a wrap.
        assert_eq!(overlapping_chunk_bytes(&[chunk(9, 1, 5)]), 5);
    }
}

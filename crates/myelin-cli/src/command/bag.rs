//! `myelin bag record|play|info`: rosbag2-compatible MCAP bags (see the
//! `myelin-bag` crate for the format).

use std::collections::{BTreeMap, BTreeSet};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant, SystemTime};

use myelin::{AnyMessage, QoS, Received};
use myelin_bag::{BagInfo, Compression, Reader, TopicInfo, Writer, WriterOptions};

use crate::cli::{BagCommand, CompressionArg, ConvertArgs, RecordArgs};
use crate::command::topic::{absolute, tool_ctx};

type Res = Result<(), Box<dyn std::error::Error>>;

/// `myelin bag ...`.
pub fn run(cmd: BagCommand) -> Res {
    match cmd {
        BagCommand::Record(args) => record(args),
        BagCommand::Play(args) => crate::command::bag_play::play(args),
        BagCommand::Info { bag } => info(&bag),
        BagCommand::Convert(args) => convert(args),
    }
}

// ------------------------------------------------------------------ info

/// `Nov 24 2026 06:21:30.123 (1795501290.123)`, UTC, as `ros2 bag info`
/// prints a time (in local time there).
fn stamp(ns: u64) -> String {
    let t = myelin_bag::UtcTime::from_unix_nanos(ns);
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{} {:02} {} {:02}:{:02}:{:02}.{:03} ({}.{:09})",
        MONTHS[(t.month - 1) as usize],
        t.day,
        t.year,
        t.hour,
        t.minute,
        t.second,
        t.nanos / 1_000_000,
        ns / 1_000_000_000,
        ns % 1_000_000_000
    )
}

fn print_info(i: &BagInfo) {
    let label = |l: &str| format!("{:<19}", format!("{l}:"));
    let files: Vec<String> = i
        .files
        .iter()
        .map(|f| {
            let name = f.path.file_name().unwrap_or_default().to_string_lossy();
            match &f.damage {
                Some(d) => format!("{name} (incomplete: {d})"),
                None => name.into_owned(),
            }
        })
        .collect();
    println!("{}{}", label("Files"), files.join(&format!("\n{:19}", "")));
    println!("{}{}", label("Bag size"), super::human_size(i.size));
    println!("{}mcap", label("Storage id"));
    if let Some(d) = &i.ros_distro {
        println!("{}{d}", label("ROS Distro"));
    }
    println!("{}{:.3}s", label("Duration"), i.duration().as_secs_f64());
    if i.message_count > 0 {
        println!("{}{}", label("Start"), stamp(i.start_ns));
        println!("{}{}", label("End"), stamp(i.end_ns));
    }
    // As `ros2 bag info` (Jazzy): service introspection events are counted
    // and listed per service, apart from topics.
    let services: Vec<_> = i.services().collect();
    let events: u64 = services.iter().map(|s| s.event_count).sum();
    println!(
        "{}{}",
        label("Messages"),
        i.message_count.saturating_sub(events)
    );
    let topics: Vec<_> = i.plain_topics().collect();
    let width = topics.iter().map(|(t, _)| t.name.len()).max().unwrap_or(0);
    if topics.is_empty() {
        println!("{}", label("Topic information"));
    }
    for (n, (t, count)) in topics.iter().enumerate() {
        let qos: Vec<String> = t
            .offered_qos
            .iter()
            .map(|q| format!("{:?}/{:?}/{:?}", q.reliability, q.durability, q.history))
            .collect();
        println!(
            "{}Topic: {:<width$} | Type: {} | Count: {} | Serialization Format: {} | QoS: {}",
            if n == 0 {
                label("Topic information")
            } else {
                format!("{:19}", "")
            },
            t.name,
            t.type_name,
            count,
            t.serialization_format,
            if qos.is_empty() {
                "-".into()
            } else {
                qos.join(", ")
            },
        );
    }
    println!("{}{}", label("Service"), services.len());
    let width = services.iter().map(|s| s.name.len()).max().unwrap_or(0);
    if services.is_empty() {
        println!("Service information: ");
    }
    for (n, s) in services.iter().enumerate() {
        println!(
            "{}Service: {:<width$} | Type: {} | Event Count: {} | Serialization Format: {}",
            if n == 0 {
                "Service information: ".to_string()
            } else {
                format!("{:21}", "")
            },
            s.name,
            s.type_name,
            s.event_count,
            s.serialization_format,
        );
    }
}

fn info(bag: &std::path::Path) -> Res {
    let r = Reader::open(bag)?;
    print_info(&r.info()?);
    Ok(())
}

// ---------------------------------------------------------------- record

/// Which topics a recording takes: topics, and services' introspection
/// events (`<service>/_service_event`), chosen apart as `ros2 bag record`
/// chooses them.
struct Selection {
    all_topics: bool,
    all_services: bool,
    topics: BTreeSet<String>,
    /// Event topics of the services named with --services.
    services: BTreeSet<String>,
    regex: Option<regex::Regex>,
    exclude: Option<regex::Regex>,
}

impl Selection {
    fn wants(&self, topic: &str, type_name: &str) -> bool {
        if self.exclude.as_ref().is_some_and(|x| x.is_match(topic)) {
            return false;
        }
        let named =
            self.topics.contains(topic) || self.regex.as_ref().is_some_and(|r| r.is_match(topic));
        if myelin_bag::service_of_event_topic(topic, type_name).is_some() {
            self.all_services || self.services.contains(topic) || named
        } else {
            self.all_topics || named
        }
    }

    fn is_empty(&self) -> bool {
        !self.all_topics
            && !self.all_services
            && self.topics.is_empty()
            && self.services.is_empty()
            && self.regex.is_none()
    }
}

fn regex_arg(flag: &str, r: &Option<String>) -> Result<Option<regex::Regex>, String> {
    r.as_deref()
        .map(|r| {
            regex::RegexBuilder::new(r)
                .size_limit(1 << 20)
                .build()
                .map_err(|e| format!("invalid {flag} {r:?}: {e}"))
        })
        .transpose()
}

fn positive_seconds(flag: &str, v: Option<f64>) -> Result<Option<Duration>, String> {
    v.map(|s| {
        if s.is_finite() && s > 0.0 && s <= 1e9 {
            Ok(Duration::from_secs_f64(s))
        } else {
            Err(format!(
                "invalid {flag} {s}: must be a number of seconds above 0 (at most 1e9)"
            ))
        }
    })
    .transpose()
}

/// What the subscription callbacks hand the writer thread.
enum Item {
    Topic(TopicInfo),
    Message {
        topic: usize,
        log_time: u64,
        msg: AnyMessage,
    },
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The type hash of a discovered type: announced (zenoh), or known to
/// myelin-msgs.
fn ros_hash(type_name: &str, announced: Option<&str>) -> Option<String> {
    announced
        .map(str::to_string)
        .or_else(|| myelin_msgs::ros_hash_of(type_name))
}

fn compression(c: CompressionArg) -> Compression {
    match c {
        CompressionArg::None => Compression::None,
        CompressionArg::Zstd => Compression::Zstd,
        CompressionArg::Lz4 => Compression::Lz4,
    }
}

// --------------------------------------------------------------- convert

fn convert(args: ConvertArgs) -> Res {
    if args.max_bag_size == Some(0) {
        return Err("invalid --max-bag-size 0: must be a number of bytes above 0".into());
    }
    let exclude = regex_arg("--exclude", &args.exclude)?;
    let only: BTreeSet<String> = args.topics.iter().map(|t| absolute(t)).collect();
    let readers = args
        .inputs
        .iter()
        .map(Reader::open)
        .collect::<Result<Vec<_>, _>>()?;
    let mut writer = Writer::create(
        &args.output,
        WriterOptions {
            max_bag_size: args.max_bag_size,
            max_bag_duration: positive_seconds("--max-bag-duration", args.max_bag_duration)?,
            compression: compression(args.compression),
            ..WriterOptions::default()
        },
    )?;
    let mut ids = BTreeMap::new();
    let (mut kept, mut damaged) = (0u64, 0u64);
    for m in Reader::merged(&readers)? {
        let m = match m {
            Ok(m) => m,
            Err(e) => {
                eprintln!("warning: {e}; the rest of that file is skipped");
                damaged += 1;
                continue;
            }
        };
        let name = &m.topic.name;
        if (!only.is_empty() && !only.contains(name))
            || exclude.as_ref().is_some_and(|x| x.is_match(name))
        {
            continue;
        }
        let id = match ids.get(name) {
            Some(id) => *id,
            None => {
                let id = writer.add_topic((*m.topic).clone())?;
                ids.insert(name.clone(), id);
                id
            }
        };
        writer.write(id, m.log_time, m.publish_time, &m.data)?;
        kept += 1;
    }
    writer.finish()?;
    eprintln!(
        "wrote {kept} messages on {} topic(s) to {}{}",
        ids.len(),
        args.output.display(),
        if damaged > 0 {
            format!(" ({damaged} damaged file(s) read up to the damage)")
        } else {
            String::new()
        }
    );
    Ok(())
}

fn record(args: RecordArgs) -> Res {
    let selection = Selection {
        all_topics: args.all || args.all_topics,
        all_services: args.all || args.all_services,
        topics: args.topics.iter().map(|t| absolute(t)).collect(),
        services: args
            .services
            .iter()
            .map(|s| {
                // A service's name, or its event topic's.
                let s = absolute(s);
                if s.ends_with(myelin_bag::SERVICE_EVENT_SUFFIX) {
                    s
                } else {
                    s + myelin_bag::SERVICE_EVENT_SUFFIX
                }
            })
            .collect(),
        regex: regex_arg("--regex", &args.regex)?,
        exclude: regex_arg("--exclude", &args.exclude)?,
    };
    if selection.is_empty() {
        return Err(
            "nothing to record: name topics or --services, or use -a (all), --all-topics, --all-services or --regex"
                .into(),
        );
    }
    if args.max_bag_size == Some(0) {
        return Err("invalid --max-bag-size 0: must be a number of bytes above 0".into());
    }
    if args.max_cache_size == 0 {
        return Err("invalid --max-cache-size 0: must be a number of bytes above 0".into());
    }
    let stop_after = positive_seconds("--duration", args.duration)?;
    let options = WriterOptions {
        max_bag_size: args.max_bag_size,
        max_bag_duration: positive_seconds("--max-bag-duration", args.max_bag_duration)?,
        compression: compression(args.compression),
        ..WriterOptions::default()
    };
    let dir = args.output.clone().unwrap_or_else(|| {
        let t = myelin_bag::UtcTime::from_unix_nanos(now_ns());
        format!(
            "rosbag2_{}_{:02}_{:02}-{:02}_{:02}_{:02}",
            t.year, t.month, t.day, t.hour, t.minute, t.second
        )
        .into()
    });
    let ctx = tool_ctx(args.domain)?;
    let mut writer = Writer::create(&dir, options)?;
    let node = ctx.create_node(&format!("myelin_bag_recorder_{}", std::process::id()))?;

    // The writer thread owns the bag: callbacks never wait for the disk.
    // Held messages are bounded by bytes (a shared-memory message held
    // here keeps its chunk from going back to the publisher's pool) and
    // by count.
    let (tx, rx) = mpsc::sync_channel::<Item>(100_000);
    let held = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicU64::new(0));
    let bytes = Arc::new(AtomicU64::new(0));
    let writer_thread = {
        let failed = failed.clone();
        let written = written.clone();
        let bytes = bytes.clone();
        let held = held.clone();
        std::thread::Builder::new()
            .name("bag-writer".into())
            .spawn(move || -> Result<Writer, myelin_bag::BagError> {
                let mut ids = Vec::new();
                let mut last_flush = Instant::now();
                let result = loop {
                    let item = match rx.recv_timeout(Duration::from_millis(200)) {
                        Ok(item) => Some(item),
                        Err(mpsc::RecvTimeoutError::Timeout) => None,
                        Err(mpsc::RecvTimeoutError::Disconnected) => break Ok(()),
                    };
                    let step = match item {
                        Some(Item::Topic(t)) => writer.add_topic(t).map(|id| ids.push(id)),
                        Some(Item::Message {
                            topic,
                            log_time,
                            msg,
                        }) => writer
                            .write(ids[topic], log_time, log_time, msg.bytes())
                            .map(|()| {
                                held.fetch_sub(msg.bytes().len() as u64, Ordering::Relaxed);
                                written.fetch_add(1, Ordering::Relaxed);
                                bytes.fetch_add(msg.bytes().len() as u64, Ordering::Relaxed);
                            }),
                        None => Ok(()),
                    };
                    if let Err(e) = step {
                        break Err(e);
                    }
                    // A quiet topic reaches the disk within a second.
                    if last_flush.elapsed() >= Duration::from_secs(1) {
                        last_flush = Instant::now();
                        if let Err(e) = writer.flush() {
                            break Err(e);
                        }
                    }
                };
                if result.is_err() {
                    failed.store(true, Ordering::Relaxed);
                }
                result.map(|()| writer)
            })?
    };

    let dropped = Arc::new(AtomicU64::new(0));
    let mut subs: BTreeMap<String, myelin::Subscription<AnyMessage>> = BTreeMap::new();
    let mut exec = myelin::Executor::new();
    exec.add_node(&node)?;
    let stop = exec.stop_handle();
    let spinner = std::thread::Builder::new()
        .name("bag-recorder".into())
        .spawn(move || exec.spin())?;

    eprintln!(
        "recording to {} on domain {}; Ctrl-C to stop",
        dir.display(),
        args.domain
    );
    let started = Instant::now();
    let tty = std::io::stderr().is_terminal();
    let mut next_status = Instant::now() + Duration::from_secs(if tty { 1 } else { 10 });
    let mut next_discovery = Instant::now();
    let mut warned_types = BTreeSet::new();
    while !ctx.is_shut_down()
        && !failed.load(Ordering::Relaxed)
        && stop_after.is_none_or(|d| started.elapsed() < d)
    {
        if Instant::now() >= next_discovery {
            next_discovery = Instant::now() + Duration::from_millis(250);
            let mut found: BTreeMap<String, Vec<myelin::DiscoveredEndpoint>> = BTreeMap::new();
            for e in ctx.discover(Duration::from_millis(200)) {
                if e.is_publisher
                    && e.type_name != "*"
                    && !e.topic.starts_with("/_srv/")
                    && !subs.contains_key(&e.topic)
                    && selection.wants(&e.topic, &e.type_name)
                {
                    found.entry(e.topic.clone()).or_default().push(e);
                }
            }
            for (topic, pubs) in found {
                let type_name = pubs[0].type_name.clone();
                if pubs.iter().any(|p| p.type_name != type_name)
                    && warned_types.insert(topic.clone())
                {
                    eprintln!(
                        "warning: {topic}: publishers of several types; recording {type_name}"
                    );
                }
                let hash = ros_hash(&type_name, pubs[0].ros_hash.as_deref());
                let info = TopicInfo {
                    name: topic.clone(),
                    serialization_format: if hash.is_some() { "cdr" } else { "myelin" }.into(),
                    offered_qos: pubs.iter().map(|p| p.qos).collect(),
                    type_hash: hash,
                    type_name: type_name.clone(),
                    definition: None,
                };
                // Reliable only if every publisher is; transient local
                // only if every publisher is (as rosbag2 adapts).
                let mut qos = QoS::keep_last(100);
                if pubs
                    .iter()
                    .any(|p| p.qos.reliability == myelin::Reliability::BestEffort)
                {
                    qos = qos.best_effort();
                }
                if pubs
                    .iter()
                    .all(|p| p.qos.durability == myelin::Durability::TransientLocal)
                {
                    qos = qos.transient_local();
                }
                let index = subs.len();
                if tx.send(Item::Topic(info)).is_err() {
                    break;
                }
                let tx = tx.clone();
                let dropped = dropped.clone();
                let held = held.clone();
                let max_cache = args.max_cache_size;
                let sub =
                    node.create_subscription(&topic, qos, move |m: Received<AnyMessage>| {
                        let msg = match m {
                            Received::Owned(m) => m,
                            Received::Shared(m) => (*m).clone(),
                            Received::InPlace(m) => (*m).clone(),
                        };
                        let len = msg.bytes().len() as u64;
                        if held.fetch_add(len, Ordering::Relaxed) + len > max_cache {
                            held.fetch_sub(len, Ordering::Relaxed);
                            dropped.fetch_add(1, Ordering::Relaxed);
                            return;
                        }
                        let item = Item::Message {
                            topic: index,
                            log_time: now_ns(),
                            msg,
                        };
                        if tx.try_send(item).is_err() {
                            held.fetch_sub(len, Ordering::Relaxed);
                            dropped.fetch_add(1, Ordering::Relaxed);
                        }
                    })?;
                eprintln!("recording {topic} [{type_name}]");
                subs.insert(topic, sub);
            }
        }
        if Instant::now() >= next_status {
            next_status += Duration::from_secs(if tty { 1 } else { 10 });
            let line = format!(
                "{} messages, {} on {} topic(s), {} dropped, {:.0} s",
                written.load(Ordering::Relaxed),
                super::human_size(bytes.load(Ordering::Relaxed)),
                subs.len(),
                dropped.load(Ordering::Relaxed),
                started.elapsed().as_secs_f64()
            );
            if tty {
                eprint!("\r{line}   ");
            } else {
                eprintln!("{line}");
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if tty {
        eprintln!();
    }
    // Stop taking messages, then let the writer drain what it holds.
    let lost: u64 = subs.values().map(|s| s.lost()).sum();
    drop(subs);
    stop.stop();
    let _ = spinner.join();
    drop(node);
    drop(tx);
    let writer = writer_thread
        .join()
        .map_err(|_| "the bag writer thread panicked")??;
    let total = writer.message_count();
    writer.finish()?;
    let dropped = dropped.load(Ordering::Relaxed) + lost;
    eprintln!(
        "recorded {total} messages ({}) to {}{}",
        super::human_size(bytes.load(Ordering::Relaxed)),
        dir.display(),
        if dropped > 0 {
            format!("; {dropped} DROPPED (the disk or the recorder fell behind)")
        } else {
            String::new()
        }
    );
    if dropped > 0 {
        return Err(format!("{dropped} messages were not recorded").into());
    }
    Ok(())
}

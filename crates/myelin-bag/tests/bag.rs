//! Bags written and read back: every standard type, splits, damage, and
//! an independent reader and writer (the MCAP project's Python packages).

use std::path::{Path, PathBuf};
use std::process::Command;

use myelin::Message;
use myelin_bag::{BagError, Compression, Reader, TopicInfo, Writer, WriterOptions};
use myelin_msgs::{geometry_msgs, sensor_msgs, std_msgs};
use serde_json::Value;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("myelin_bag_test_{}_{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Every scalar of `v` set to a distinct small value (integers that every
/// field type holds exactly, also as float32), arrays kept at their length.
fn fill(v: &mut Value, n: &mut u64) {
    match v {
        Value::Number(_) => {
            *n += 1;
            *v = Value::from(*n % 100);
        }
        Value::Bool(b) => *b = true,
        Value::String(s) => {
            *n += 1;
            *s = format!("s{n}");
        }
        Value::Array(a) => a.iter_mut().for_each(|x| fill(x, n)),
        Value::Object(o) => o.values_mut().for_each(|x| fill(x, n)),
        Value::Null => {}
    }
}

fn filled<T: Message + Default + serde::Serialize + serde::de::DeserializeOwned>() -> T {
    let mut v = serde_json::to_value(T::default()).unwrap();
    fill(&mut v, &mut 0);
    serde_json::from_value(v).unwrap()
}

/// Write one filled message of every standard type, each on its own topic;
/// the values by topic.
fn write_every_type(dir: &Path) -> Vec<(String, Value)> {
    let mut w = Writer::create(dir, WriterOptions::default()).unwrap();
    let mut expected = Vec::new();
    macro_rules! each {
        ($($ty:ty),* $(,)?) => {$(
            let topic = format!("/t/{}", <$ty as Message>::TYPE_NAME.replace('/', "_"));
            let id = w.add_topic(TopicInfo::of::<$ty>(&topic)).unwrap();
            let m: $ty = filled();
            let t = 1_000_000_000 + 1000 * expected.len() as u64;
            w.write_message(id, t, &m).unwrap();
            expected.push((topic, serde_json::to_value(&m).unwrap()));
        )*};
    }
    myelin_msgs::for_all_types!(each);
    w.finish().unwrap();
    expected
}

#[test]
fn every_standard_type_round_trips() {
    let dir = scratch("every_type");
    let expected = write_every_type(&dir);
    let r = Reader::open(&dir).unwrap();
    let got: Vec<_> = r.messages().unwrap().map(|m| m.unwrap()).collect();
    assert_eq!(got.len(), expected.len());
    // Decoded as the recorded type, each equals what was written.
    let mut checked = 0;
    macro_rules! each {
        ($($ty:ty),* $(,)?) => {$(
            let topic = format!("/t/{}", <$ty as Message>::TYPE_NAME.replace('/', "_"));
            let m = got.iter().find(|m| m.topic.name == topic).unwrap();
            assert_eq!(m.topic.type_name, <$ty as Message>::TYPE_NAME);
            assert_eq!(m.topic.type_hash.as_deref(), <$ty as Message>::ROS_TYPE_HASH);
            let v: $ty = m.decode().unwrap();
            let want = &expected.iter().find(|(t, _)| *t == topic).unwrap().1;
            assert_eq!(&serde_json::to_value(&v).unwrap(), want, "{topic}");
            checked += 1;
        )*};
    }
    myelin_msgs::for_all_types!(each);
    assert_eq!(checked, expected.len());
    let info = r.info().unwrap();
    assert_eq!(info.message_count, expected.len() as u64);
    assert_eq!(info.topics.len(), expected.len());
    assert!(info.files.iter().all(|f| f.complete));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn split_bags_read_back_in_time_order() {
    let dir = scratch("split");
    let mut w = Writer::create(
        &dir,
        WriterOptions {
            max_bag_size: Some(64 * 1024),
            chunk_size: 16 * 1024,
            ..Default::default()
        },
    )
    .unwrap();
    let img = w
        .add_topic(TopicInfo::of::<sensor_msgs::Image>("/camera"))
        .unwrap();
    let twist = w
        .add_topic(TopicInfo::of::<geometry_msgs::Twist>("/cmd_vel"))
        .unwrap();
    for i in 0..200u64 {
        let frame = sensor_msgs::Image {
            height: 10,
            width: 100,
            encoding: "mono8".into(),
            step: 100,
            data: vec![i as u8; 1000],
            ..Default::default()
        };
        w.write_message(img, 1_000 + i * 10, &frame).unwrap();
        let mut t = geometry_msgs::Twist::default();
        t.linear.x = i as f64;
        w.write_message(twist, 1_005 + i * 10, &t).unwrap();
    }
    w.finish().unwrap();
    let r = Reader::open(&dir).unwrap();
    assert!(r.files().len() >= 3, "{:?}", r.files());
    let meta = r.metadata().unwrap();
    assert_eq!(meta.files.len(), r.files().len());
    assert_eq!(meta.message_count, 400);
    assert_eq!(meta.files.iter().map(|f| f.message_count).sum::<u64>(), 400);
    let times: Vec<u64> = r.messages().unwrap().map(|m| m.unwrap().log_time).collect();
    assert_eq!(times.len(), 400);
    assert!(times.windows(2).all(|w| w[0] <= w[1]));
    let info = r.info().unwrap();
    assert_eq!(info.message_count, 400);
    assert_eq!((info.start_ns, info.end_ns), (1_000, 1_000 + 199 * 10 + 5));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A bag split by duration: a new file each time the current one spans
/// the limit, and the whole reads back in order.
#[test]
fn a_bag_split_by_duration_starts_a_file_per_span() {
    let dir = scratch("split_duration");
    let mut w = Writer::create(
        &dir,
        WriterOptions {
            max_bag_duration: Some(std::time::Duration::from_secs(2)),
            ..Default::default()
        },
    )
    .unwrap();
    let t = w
        .add_topic(TopicInfo::of::<std_msgs::Int32>("/count"))
        .unwrap();
    // 10 s of messages, one every 100 ms.
    for i in 0..100i32 {
        w.write_message(
            t,
            1_000_000_000 + i as u64 * 100_000_000,
            &std_msgs::Int32 { data: i },
        )
        .unwrap();
    }
    w.finish().unwrap();
    let r = Reader::open(&dir).unwrap();
    assert!((5..=6).contains(&r.files().len()), "{:?}", r.files());
    let got: Vec<i32> = r
        .messages()
        .unwrap()
        .map(|m| m.unwrap().decode::<std_msgs::Int32>().unwrap().data)
        .collect();
    assert_eq!(got, (0..100).collect::<Vec<_>>());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// zstd and LZ4 chunks: smaller files, the same messages back, and the
/// MCAP project's Python reader decodes them too.
#[test]
fn compressed_bags_round_trip_and_the_python_reader_reads_them() {
    for (name, compression) in [("zstd", Compression::Zstd), ("lz4", Compression::Lz4)] {
        let dir = scratch(&format!("compressed_{name}"));
        let mut w = Writer::create(
            &dir,
            WriterOptions {
                compression,
                ..Default::default()
            },
        )
        .unwrap();
        let img = w
            .add_topic(TopicInfo::of::<sensor_msgs::Image>("/camera"))
            .unwrap();
        let (n, len) = (10u64, 20_000usize);
        for i in 0..n {
            let frame = sensor_msgs::Image {
                height: 20,
                width: 1000,
                encoding: "mono8".into(),
                step: 1000,
                data: vec![i as u8; len],
                ..Default::default()
            };
            w.write_message(img, 1_000 + i, &frame).unwrap();
        }
        w.finish().unwrap();
        let r = Reader::open(&dir).unwrap();
        let size: u64 = r
            .files()
            .iter()
            .map(|f| std::fs::metadata(f).unwrap().len())
            .sum();
        let raw = n * len as u64;
        assert!(
            size < raw / 4,
            "{name}: {size} bytes for {raw} of frames: not compressed"
        );
        let frames: Vec<sensor_msgs::Image> = r
            .messages()
            .unwrap()
            .map(|m| m.unwrap().decode().unwrap())
            .collect();
        assert_eq!(frames.len(), n as usize, "{name}");
        for (i, f) in frames.iter().enumerate() {
            assert_eq!(f.data.len(), len);
            assert!(f.data.iter().all(|b| *b == i as u8), "{name}: frame {i}");
        }
        if let Some(py) = python() {
            let file = r.files()[0].to_str().unwrap().to_string();
            let decoded = peer(&py, &["read", &file]);
            assert_eq!(decoded.len(), n as usize, "{name}");
            assert_eq!(decoded[3]["value"]["width"], 1000, "{name}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn a_truncated_file_reads_up_to_the_damage_and_names_the_offset() {
    let dir = scratch("truncated");
    let mut w = Writer::create(
        &dir,
        WriterOptions {
            chunk_size: 4096,
            ..Default::default()
        },
    )
    .unwrap();
    let id = w
        .add_topic(TopicInfo::of::<std_msgs::String>("/chatter"))
        .unwrap();
    for i in 0..1000u64 {
        let m = std_msgs::String {
            data: format!("message number {i}"),
        };
        w.write_message(id, i, &m).unwrap();
    }
    w.finish().unwrap();
    let file = Reader::open(&dir).unwrap().files()[0].clone();
    let len = std::fs::metadata(&file).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
    f.set_len(len / 2).unwrap();
    drop(f);

    let r = Reader::open(&dir).unwrap();
    let mut good = Vec::new();
    let mut errors = Vec::new();
    for m in r.messages().unwrap() {
        match m {
            Ok(m) => good.push(m.decode::<std_msgs::String>().unwrap().data),
            Err(e) => errors.push(e),
        }
    }
    assert_eq!(errors.len(), 1);
    match &errors[0] {
        BagError::Corrupt { path, offset, .. } => {
            assert_eq!(path, &file);
            assert!(*offset > 0 && *offset <= len / 2, "{offset}");
        }
        e => panic!("{e}"),
    }
    // Whole chunks before the cut survive, in order.
    assert!(good.len() > 300 && good.len() < 1000, "{}", good.len());
    for (i, g) in good.iter().enumerate() {
        assert_eq!(g, &format!("message number {i}"));
    }
    let info = r.info().unwrap();
    assert!(!info.files[0].complete);
    assert_eq!(info.message_count, good.len() as u64);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn hostile_inputs_are_errors() {
    let dir = scratch("hostile");
    std::fs::create_dir_all(&dir).unwrap();
    // Not MCAP.
    let junk = dir.join("junk.mcap");
    std::fs::write(&junk, b"this is not a bag at all").unwrap();
    assert!(matches!(Reader::open(&junk), Err(BagError::NotABag { .. })));
    // An empty directory.
    let empty = dir.join("empty");
    std::fs::create_dir(&empty).unwrap();
    assert!(matches!(
        Reader::open(&empty),
        Err(BagError::NotABag { .. })
    ));
    // metadata.yaml that points outside the bag.
    let escape = dir.join("escape");
    std::fs::create_dir(&escape).unwrap();
    std::fs::write(
        escape.join("metadata.yaml"),
        "rosbag2_bagfile_information:\n  version: 9\n  storage_identifier: mcap\n  files:\n    - path: ../../etc/passwd\n",
    )
    .unwrap();
    let e = Reader::open(&escape).unwrap_err();
    assert!(e.to_string().contains("outside the bag directory"), "{e}");
    // metadata.yaml that is not YAML.
    std::fs::write(escape.join("metadata.yaml"), "{{{{").unwrap();
    assert!(matches!(
        Reader::open(&escape),
        Err(BagError::Metadata { .. })
    ));
    // A sqlite3 bag.
    std::fs::write(
        escape.join("metadata.yaml"),
        "rosbag2_bagfile_information:\n  version: 5\n  storage_identifier: sqlite3\n",
    )
    .unwrap();
    let e = Reader::open(&escape).unwrap_err();
    assert!(e.to_string().contains("sqlite3"), "{e}");
    // A writer never overwrites.
    assert!(matches!(
        Writer::create(&escape, WriterOptions::default()),
        Err(BagError::Exists(_))
    ));
    // Absurd options.
    assert!(matches!(
        Writer::create(
            dir.join("zero"),
            WriterOptions {
                max_bag_size: Some(0),
                ..Default::default()
            }
        ),
        Err(BagError::Invalid(_))
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_writer_dropped_unfinished_completes_its_bag() {
    let dir = scratch("dropped");
    {
        let mut w = Writer::create(&dir, WriterOptions::default()).unwrap();
        let id = w.add_topic(TopicInfo::of::<std_msgs::Int32>("/n")).unwrap();
        for i in 0..10 {
            w.write_message(id, i as u64, &std_msgs::Int32 { data: i })
                .unwrap();
        }
    }
    let r = Reader::open(&dir).unwrap();
    let info = r.info().unwrap();
    assert!(info.files[0].complete);
    assert_eq!(info.message_count, 10);
    assert_eq!(r.metadata().unwrap().message_count, 10);
    std::fs::remove_dir_all(&dir).unwrap();
}

// ------------------------------------------- the independent implementation

/// The Python with `mcap` and `mcap-ros2-support`, or `None` (with the
/// reason printed) outside CI.
fn python() -> Option<PathBuf> {
    let candidate = std::env::var_os("MYELIN_INTEROP_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| "python3".into());
    let ok = Command::new(&candidate)
        .args(["-c", "import mcap, mcap_ros2"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        return Some(candidate);
    }
    let why = format!(
        "{} cannot import mcap and mcap_ros2; set MYELIN_INTEROP_PYTHON to a Python with \
         mcap-ros2-support (see .ci/run)",
        candidate.display()
    );
    assert!(std::env::var("CI").is_err(), "{why}");
    eprintln!("skipped: {why}");
    None
}

fn peer(python: &Path, args: &[&str]) -> Vec<Value> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../interop/bag_peer.py");
    let out = Command::new(python)
        .arg(script)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "bag_peer.py {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Equal as JSON, numbers compared as numbers (`1` and `1.0`).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

#[test]
fn the_mcap_python_reader_decodes_every_field_of_every_type() {
    let Some(py) = python() else { return };
    let dir = scratch("py_read");
    let expected = write_every_type(&dir);
    let file = Reader::open(&dir).unwrap().files()[0].clone();
    let file = file.to_str().unwrap();
    let decoded = peer(&py, &["read", file]);
    assert_eq!(decoded.len(), expected.len());
    for (topic, want) in &expected {
        let got = decoded
            .iter()
            .find(|d| d["topic"] == topic.as_str())
            .unwrap_or_else(|| panic!("{topic} missing"));
        // An empty message carries one placeholder byte on the wire (as
        // rosidl generates it); the Python decoder hides it.
        let mut want = want.clone();
        if let Some(o) = want.as_object_mut() {
            o.remove("structure_needs_at_least_one_member");
        }
        assert!(
            same(&got["value"], &want),
            "{topic}:\n python {}\n myelin {}",
            got["value"],
            want
        );
    }
    // rosbag2's channel metadata and the profile.
    let mut records = 0;
    for ch in peer(&py, &["channels", file]) {
        if let Some(name) = ch.get("metadata_record") {
            // As rosbag2's MCAP storage writes it: the bag's metadata
            // (version 9) under `serialized_metadata`, without
            // metadata.yaml's top key.
            assert_eq!(name, "rosbag2");
            assert_eq!(ch["keys"], serde_json::json!(["serialized_metadata"]));
            assert_eq!(ch["first_line"], serde_json::json!(["version: 9"]));
            records += 1;
            continue;
        }
        assert_eq!(ch["profile"], "ros2");
        assert_eq!(ch["encoding"], "cdr");
        assert_eq!(ch["schema_encoding"], "ros2msg");
        assert_eq!(ch["count"], 1);
        let meta = &ch["metadata"];
        assert!(
            meta["offered_qos_profiles"]
                .as_str()
                .unwrap()
                .contains("reliability")
        );
        assert!(
            meta["topic_type_hash"]
                .as_str()
                .unwrap()
                .starts_with("RIHS01_")
        );
    }
    assert_eq!(records, 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_bag_the_python_writer_wrote_reads_as_typed_messages() {
    let Some(py) = python() else { return };
    let dir = scratch("py_write");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("py.mcap");
    peer(&py, &["write", file.to_str().unwrap(), "50"]);
    let r = Reader::open(&file).unwrap();
    let mut strings = Vec::new();
    let mut twists = Vec::new();
    for m in r.messages().unwrap() {
        let m = m.unwrap();
        match m.topic.name.as_str() {
            "/py_chatter" => strings.push(m.decode::<std_msgs::String>().unwrap().data),
            "/py_cmd_vel" => twists.push(m.decode::<geometry_msgs::Twist>().unwrap()),
            t => panic!("{t}"),
        }
    }
    assert_eq!(strings.len(), 50);
    assert_eq!(strings[7], "py 7");
    assert_eq!(twists[7].linear.x, 7.0);
    assert_eq!(twists[7].angular.z, -1.0);
    let info = r.info().unwrap();
    assert_eq!(info.message_count, 100);
    assert_eq!(info.duration().as_nanos(), 49 * 10_000_000 + 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A file another writer left out of time order (all of one topic, then
/// all of another, in small chunks) reads in time order, as `ros2 bag
/// play` plays it: the chunk index says where each time range is. Before,
/// it read in file order: every Twist, then every String.
#[test]
fn a_file_written_out_of_time_order_reads_in_time_order() {
    let Some(py) = python() else { return };
    let dir = scratch("py_by_topic");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("by_topic.mcap");
    peer(&py, &["write_by_topic", file.to_str().unwrap(), "60"]);
    let r = Reader::open(&file).unwrap();
    let got: Vec<(u64, String)> = r
        .messages()
        .unwrap()
        .map(|m| {
            let m = m.unwrap();
            (m.log_time, m.topic.name.clone())
        })
        .collect();
    assert_eq!(got.len(), 120);
    assert!(
        got.windows(2).all(|w| w[0].0 <= w[1].0),
        "out of order: {:?}",
        &got[..4]
    );
    // Interleaved: String i, then Twist i (1 ns later).
    assert_eq!(got[0].1, "/py_chatter");
    assert_eq!(got[1].1, "/py_cmd_vel");
    assert_eq!(got[2].1, "/py_chatter");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A file whose summary leaves its channels out (the MCAP writer's
/// `repeat_channels(false)`: they are only in the data section) still
/// reads, every message, in time order: such a file is read record by
/// record, which meets the channels, rather than through the index.
#[test]
fn a_file_whose_summary_lists_no_channels_still_reads() {
    let dir = scratch("no_summary_channels");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("plain.mcap");
    let file = std::fs::File::create(&path).unwrap();
    let mut w = mcap::WriteOptions::new()
        .profile("ros2")
        .repeat_channels(false)
        .repeat_schemas(false)
        .create(std::io::BufWriter::new(file))
        .unwrap();
    let schema = w
        .add_schema("std_msgs/msg/String", "ros2msg", b"string data")
        .unwrap();
    let chatter = w
        .add_channel(schema, "/chatter", "cdr", &Default::default())
        .unwrap();
    for i in 0..20u64 {
        let msg = std_msgs::String {
            data: format!("hi {i}"),
        };
        let mut data = vec![0u8; msg.wire_len().unwrap()];
        msg.wire_encode(&mut data).unwrap();
        w.write_to_known_channel(
            &mcap::records::MessageHeader {
                channel_id: chatter,
                sequence: i as u32,
                log_time: 1_000 + i,
                publish_time: 1_000 + i,
            },
            &data,
        )
        .unwrap();
    }
    w.finish().unwrap();
    drop(w);
    let got: Vec<String> = Reader::open(&path)
        .unwrap()
        .messages()
        .unwrap()
        .map(|m| m.unwrap().decode::<std_msgs::String>().unwrap().data)
        .collect();
    assert_eq!(got, (0..20).map(|i| format!("hi {i}")).collect::<Vec<_>>());
    std::fs::remove_dir_all(&dir).unwrap();
}

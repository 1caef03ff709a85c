//! `myelin bench bag`: the recorder against the disk, and the player's
//! timing, in one run on this machine.
//!
//! 1. Raw sequential write (1 MiB blocks, then `fdatasync`: what `dd
//!    conv=fdatasync` measures), the baseline.
//! 2. A robot's mix recorded by `myelin bag record -a` (a child process)
//!    from this process over shared memory: 30 Hz 1440x1080 RGB images
//!    (4.6 MB), a 1 kHz IMU and five 100 Hz Twist topics; dropped messages,
//!    bytes/s, the recorder's CPU.
//! 3. Saturated: images offered at 1.5x the raw write's speed (the disk
//!    is the limit; a publisher flooding far beyond it would measure the
//!    memory bandwidth its own copies take), recorder bytes/s against the
//!    raw write.
//! 4. Replay timing: a 1 kHz bag played by `myelin bag play` into a
//!    subscription here; the error of each inter-message gap against the
//!    recorded 1 ms (P50, P99, max).
//! 5. Drift: a 10-minute 100 Hz bag played at rate 60; the last message's
//!    arrival against the first one's plus the bag's span over the rate.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use myelin::{Context, QoS};
use myelin_bag::{Reader, TopicInfo, Writer, WriterOptions};
use myelin_msgs::{geometry_msgs, sensor_msgs, std_msgs};

use crate::cli::BenchArgs;

type Res = Result<(), Box<dyn std::error::Error>>;

const DOMAIN: u32 = 231;

fn mb(bytes: f64) -> f64 {
    bytes / 1e6
}

/// Raw sequential write of `total` bytes into `dir`: bytes per second.
fn raw_write(dir: &Path, total: usize) -> Result<f64, Box<dyn std::error::Error>> {
    let path = dir.join("raw_write.bin");
    let block = vec![0x5au8; 1 << 20];
    let start = Instant::now();
    let mut f = std::fs::File::create(&path)?;
    let mut left = total;
    while left > 0 {
        let n = left.min(block.len());
        f.write_all(&block[..n])?;
        left -= n;
    }
    f.sync_data()?;
    let secs = start.elapsed().as_secs_f64();
    drop(f);
    std::fs::remove_file(&path)?;
    Ok(total as f64 / secs)
}

/// `myelin bag ARGS` on shared memory, its stderr captured.
fn myelin_bag(args: &[&str]) -> Result<Child, std::io::Error> {
    Command::new(std::env::current_exe()?)
        .arg("bag")
        .args(args)
        .env("MYELIN_TRANSPORT", "shm")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
}

/// SIGINT the child and wait: its CPU time (user + system) and stderr.
fn stop(mut child: Child) -> Result<(Duration, String, bool), Box<dyn std::error::Error>> {
    let pid = child.id() as i32;
    // SAFETY: kill(2) and wait4(2) on our own child; `usage` is a plain
    // struct the kernel fills.
    let (status, usage) = unsafe {
        libc::kill(pid, libc::SIGINT);
        let mut status = 0;
        let mut usage: libc::rusage = std::mem::zeroed();
        if libc::wait4(pid, &mut status, 0, &mut usage) != pid {
            return Err("wait4 on the recorder failed".into());
        }
        (status, usage)
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    let cpu = tv(usage.ru_utime) + tv(usage.ru_stime);
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        std::io::Read::read_to_string(&mut e, &mut err)?;
    }
    Ok((
        cpu,
        err,
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
    ))
}

fn wait_matched(pubs: &[&dyn Fn() -> usize]) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while pubs.iter().any(|p| p() == 0) {
        if Instant::now() > deadline {
            return Err("the recorder did not subscribe within 30 s".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

fn image() -> sensor_msgs::Image {
    sensor_msgs::Image {
        height: 1080,
        width: 1440,
        encoding: "rgb8".into(),
        step: 1440 * 3,
        data: vec![0x42; 1440 * 1080 * 3],
        ..Default::default()
    }
}

struct Recorded {
    published: u64,
    recorded: u64,
    bytes: u64,
    secs: f64,
    cpu: Duration,
    ok: bool,
}

/// Record `secs` of the robot mix (or, `saturated: Some(bytes/s)`,
/// images pre-encoded on a raw publisher, offered at that rate: above what
/// the disk takes, so the disk is the limit, but not so far above that the
/// publisher's copies into shared memory take the memory bandwidth and the
/// second core the recorder needs on a small machine).
fn record(
    dir: &Path,
    secs: f64,
    saturated: Option<f64>,
) -> Result<Recorded, Box<dyn std::error::Error>> {
    let ctx = Context::builder()
        .domain_id(DOMAIN)
        .network(false)
        .build()?;
    let node = ctx.create_node("bag_bench_robot")?;
    let out = dir.join(if saturated.is_some() {
        "saturated"
    } else {
        "mix"
    });
    let o = out.to_str().ok_or("non-UTF-8 temp dir")?.to_string();
    let domain = DOMAIN.to_string();
    let mut args = vec!["record", "-a", "-o", &o, "--domain", &domain];
    // Saturated: let the recorder hold up to 1 GiB while the disk works.
    if saturated.is_some() {
        args.extend(["--max-cache-size", "1073741824"]);
    }
    let frame = image();
    let mut published = 0u64;
    let start;
    if let Some(offer) = saturated {
        let encoded = {
            let mut b = vec![0u8; myelin::Message::wire_len(&frame)?];
            myelin::Message::wire_encode(&frame, &mut b)?;
            myelin::SharedBytes::from_vec(b)
        };
        let cam = node.create_raw_publisher(
            "/camera/image",
            &myelin::RawType::of::<sensor_msgs::Image>(),
            QoS::keep_last(4),
        )?;
        let child = myelin_bag(&args)?;
        wait_matched(&[&|| cam.subscription_count()])?;
        start = Instant::now();
        let end = start + Duration::from_secs_f64(secs);
        let period = Duration::from_secs_f64(encoded.len() as f64 / offer);
        let mut next = start;
        while Instant::now() < end {
            let now = Instant::now();
            if now < next {
                std::thread::sleep(next - now);
            }
            next += period;
            cam.publish(myelin::AnyMessage(encoded.clone().into()))?;
            published += 1;
        }
        return finish(child, &out, published, start);
    }
    let cam = node.create_publisher::<sensor_msgs::Image>("/camera/image", QoS::keep_last(4))?;
    let imu = node.create_publisher::<sensor_msgs::Imu>("/imu", QoS::keep_last(100))?;
    let twists: Vec<_> = (0..5)
        .map(|i| {
            node.create_publisher::<geometry_msgs::Twist>(
                &format!("/cmd_vel_{i}"),
                QoS::keep_last(10),
            )
        })
        .collect::<Result<_, _>>()?;
    let child = myelin_bag(&args)?;
    {
        let c = || cam.subscription_count();
        let i = || imu.subscription_count();
        let ts: Vec<_> = twists
            .iter()
            .map(|t| move || t.subscription_count())
            .collect();
        let mut counts: Vec<&dyn Fn() -> usize> = vec![&c, &i];
        for t in &ts {
            counts.push(t);
        }
        wait_matched(&counts)?;
    }
    // One loop at 1 kHz: the IMU each tick, Twists every 10th, an image
    // every 33.3 ms.
    start = Instant::now();
    let end = start + Duration::from_secs_f64(secs);
    let mut tick = 0u64;
    let mut next_frame = start;
    while Instant::now() < end {
        let due = start + Duration::from_millis(tick);
        let now = Instant::now();
        if now < due {
            std::thread::sleep(due - now);
        }
        imu.publish(sensor_msgs::Imu::default())?;
        published += 1;
        if tick.is_multiple_of(10) {
            for t in &twists {
                t.publish(geometry_msgs::Twist::default())?;
                published += 1;
            }
        }
        if Instant::now() >= next_frame {
            next_frame += Duration::from_secs_f64(1.0 / 30.0);
            cam.publish(frame.clone())?;
            published += 1;
        }
        tick += 1;
    }
    finish(child, &out, published, start)
}

/// Stop the recorder after the last messages had time to arrive: what it
/// recorded, and the time from the first publish until it had written
/// everything (the settling pause not counted).
fn finish(
    child: Child,
    out: &Path,
    published: u64,
    start: Instant,
) -> Result<Recorded, Box<dyn std::error::Error>> {
    const SETTLE: Duration = Duration::from_millis(500);
    std::thread::sleep(SETTLE);
    let (cpu, err, ok) = stop(child)?;
    let secs = (start.elapsed() - SETTLE).as_secs_f64();
    let recorded = Reader::open(out)
        .map_err(|e| format!("{e} (recorder said: {err})"))?
        .info()?
        .message_count;
    let bytes = dir_size(out);
    std::fs::remove_dir_all(out)?;
    Ok(Recorded {
        published,
        recorded,
        bytes,
        secs,
        cpu,
        ok,
    })
}

fn dir_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok()?.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// What one replay measured.
struct Replayed {
    /// Errors of consecutive inter-message gaps against the recorded gap
    /// scaled by the rate (ns).
    gaps: Vec<u64>,
    /// The last arrival's lateness against the first one plus the bag's
    /// span divided by the rate (ns; negative: early): what accumulates
    /// over a long bag if the schedule drifts.
    drift_ns: i64,
}

/// Play a bag of `n` messages `period_ns` apart at `rate` into a
/// subscription of this process.
fn replay_timing(
    dir: &Path,
    n: u64,
    period_ns: u64,
    rate: f64,
) -> Result<Replayed, Box<dyn std::error::Error>> {
    let bag = dir.join("replay");
    let mut w = Writer::create(&bag, WriterOptions::default())?;
    let topic = w.add_topic(TopicInfo::of::<std_msgs::Int64>("/tick"))?;
    let t0 = 1_700_000_000_000_000_000u64;
    for i in 0..n {
        w.write_message(
            topic,
            t0 + i * period_ns,
            &std_msgs::Int64 { data: i as i64 },
        )?;
    }
    w.finish()?;
    let ctx = Context::builder()
        .domain_id(DOMAIN)
        .network(false)
        .build()?;
    let node = ctx.create_node("bag_bench_sink")?;
    let sub = node.create_polling_subscription::<std_msgs::Int64>(
        "/tick",
        QoS::keep_all(),
        Default::default(),
    )?;
    let b = bag.to_str().ok_or("non-UTF-8 temp dir")?.to_string();
    let domain = DOMAIN.to_string();
    let rate_arg = rate.to_string();
    let player = myelin_bag(&[
        "play",
        &b,
        "--rate",
        &rate_arg,
        "--wait-for-subscribers",
        "30",
        "--domain",
        &domain,
    ])?;
    let mut arrivals: Vec<(i64, Instant)> = Vec::with_capacity(n as usize);
    while arrivals.len() < n as usize {
        match sub.wait_for_message(Duration::from_secs(30)) {
            Ok(m) => arrivals.push((m.data, Instant::now())),
            Err(_) => break,
        }
    }
    let (_, err, ok) = stop(player)?;
    std::fs::remove_dir_all(&bag)?;
    if arrivals.len() < n as usize || !ok && arrivals.is_empty() {
        return Err(format!("replay delivered {} of {n} messages: {err}", arrivals.len()).into());
    }
    let expected_gap = (period_ns as f64 / rate) as i64;
    let gaps = arrivals
        .windows(2)
        .filter(|w| w[1].0 == w[0].0 + 1)
        .map(|w| {
            let gap = w[1].1.duration_since(w[0].1).as_nanos() as i64;
            (gap - expected_gap).unsigned_abs()
        })
        .collect();
    let (first, last) = (arrivals[0], arrivals[arrivals.len() - 1]);
    let span = ((last.0 - first.0) as f64 * period_ns as f64 / rate) as i64;
    let drift_ns = last.1.duration_since(first.1).as_nanos() as i64 - span;
    Ok(Replayed { gaps, drift_ns })
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// `myelin bench bag`.
pub fn run(args: &BenchArgs) -> Res {
    let secs = args.duration.unwrap_or(if args.quick { 5.0 } else { 20.0 });
    if !(secs.is_finite() && secs > 0.0 && secs <= 3600.0) {
        return Err(format!("invalid --duration {secs}: must be 0 to 3600 seconds").into());
    }
    let dir: PathBuf =
        std::env::temp_dir().join(format!("myelin_bench_bag_{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let result = run_in(&dir, secs, args.quick);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// Free bytes on the file system of `dir`.
fn free_bytes(dir: &Path) -> Option<u64> {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: statvfs(3) fills the zeroed struct from a NUL-terminated path.
    unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        (libc::statvfs(c.as_ptr(), &mut st) == 0).then(|| st.f_bavail as u64 * st.f_frsize as u64)
    }
}

fn run_in(dir: &Path, secs: f64, quick: bool) -> Res {
    // The robot mix writes about 140 MB/s; the saturated run is capped at
    // 4 s (it writes as fast as the disk takes: checked again below, once
    // the disk's speed is known); the raw write 1 GiB.
    let mut saturated_secs = (secs / 2.0).min(4.0);
    let need = (150e6 * secs + 1e9 * saturated_secs) as u64 + (1 << 30);
    if let Some(free) = free_bytes(dir)
        && free < need
    {
        return Err(format!(
            "{}: {} MB free, the bag bench needs about {} MB (shorten --duration, or set TMPDIR)",
            dir.display(),
            free / 1_000_000,
            need / 1_000_000
        )
        .into());
    }
    eprintln!("bag bench in {} ({secs} s per recording)", dir.display());
    eprintln!("[1/5] raw sequential write (1 MiB blocks + fdatasync)...");
    let raw = raw_write(dir, if quick { 256 << 20 } else { 1 << 30 })?;
    eprintln!("[2/5] recording the robot mix for {secs} s...");
    let mix = record(dir, secs, None)?;
    // The saturated recording writes at the disk's speed: shorten it to
    // what the free space holds (with a quarter to spare).
    if let Some(free) = free_bytes(dir) {
        let fits = free as f64 * 0.75 / raw;
        if fits < saturated_secs {
            saturated_secs = fits.max(0.5);
            eprintln!("(saturated recording shortened to {saturated_secs:.1} s: free disk)");
        }
    }
    eprintln!(
        "[3/5] recording saturated (images offered at 1.5x the raw write) for {saturated_secs:.1} s..."
    );
    let sat = record(dir, saturated_secs, Some(1.5 * raw))?;
    // The recordings left gigabytes for the kernel to write back: flush
    // them now, so the replay is timed on a quiet machine, not against
    // the writeback threads.
    rustix::fs::sync();
    eprintln!("[4/5] replaying a 1 kHz bag...");
    let replay = replay_timing(dir, if quick { 2_000 } else { 10_000 }, 1_000_000, 1.0)?;
    let mut gaps = replay.gaps;
    gaps.sort_unstable();
    // A 10-minute bag (100 Hz) played 60 times faster: what a drifting
    // schedule would accumulate shows at its end.
    let long_minutes = if quick { 1 } else { 10 };
    eprintln!("[5/5] replaying a {long_minutes}-minute 100 Hz bag at rate 60...");
    let long = replay_timing(dir, long_minutes * 6_000, 10_000_000, 60.0)?;

    println!(
        "\nmyelin bench bag (recorder: `myelin bag record -a`, a child process, shared memory)\n"
    );
    println!("| measurement | value |");
    println!("|---|---|");
    println!("| raw sequential write (baseline) | {:.0} MB/s |", mb(raw));
    for (name, r) in [
        (
            "robot mix (30 Hz 4.6 MB image + 1 kHz IMU + 5x100 Hz Twist)",
            &mix,
        ),
        ("saturated (4.6 MB images at 1.5x the raw write)", &sat),
    ] {
        let rate = r.bytes as f64 / r.secs;
        println!(
            "| {name}: published / recorded / dropped | {} / {} / {} |",
            r.published,
            r.recorded,
            r.published.saturating_sub(r.recorded)
        );
        println!(
            "| {name}: written | {:.0} MB/s ({:.0}% of raw) |",
            mb(rate),
            100.0 * rate / raw
        );
        println!(
            "| {name}: recorder CPU | {:.0}% of a core, {:.2} ms per MB{} |",
            100.0 * r.cpu.as_secs_f64() / r.secs,
            r.cpu.as_secs_f64() * 1e3 / mb(r.bytes as f64).max(1e-9),
            if r.ok {
                ""
            } else {
                " (recorder reported drops)"
            }
        );
    }
    println!(
        "| replay at 1 kHz: gap error P50 / P99 / max ({} gaps) | {:.1} / {:.1} / {:.1} us |",
        gaps.len(),
        percentile(&gaps, 0.5) as f64 / 1e3,
        percentile(&gaps, 0.99) as f64 / 1e3,
        gaps.last().copied().unwrap_or(0) as f64 / 1e3
    );
    println!(
        "| replay of a {long_minutes}-minute 100 Hz bag at rate 60: last message vs the schedule | {:+.1} us (over {:.1} s of playback) |",
        long.drift_ns as f64 / 1e3,
        long_minutes as f64 * 60.0 / 60.0
    );
    let verdict_mix = mix.published == mix.recorded;
    let verdict_sat = sat.bytes as f64 / sat.secs >= 0.8 * raw;
    let verdict_replay = percentile(&gaps, 0.99) < 100_000;
    println!(
        "\nverdict: robot mix {} | saturated {} (goal: >= 80% of raw) | replay P99 {} (goal: < 100 us)",
        if verdict_mix {
            "recorded everything"
        } else {
            "DROPPED messages"
        },
        if verdict_sat {
            "meets the goal"
        } else {
            "BELOW the goal"
        },
        if verdict_replay {
            "meets the goal"
        } else {
            "ABOVE the goal"
        },
    );
    Ok(())
}

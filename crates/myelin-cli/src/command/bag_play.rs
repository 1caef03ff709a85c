//! `myelin bag play`: republish a bag with its recorded timing and QoS,
//! optionally with its time on `/clock`, and keyboard control on a
//! terminal (as `ros2 bag play`: SPACE pause/resume, RIGHT or `s` one
//! message, UP/DOWN rate +/-10%).
//!
//! Timing is one [`Timeline`] that maps bag time to wall time: every
//! message is due at `anchor_wall + (t - anchor_bag) / rate`, computed
//! from the anchor and never accumulated, so a long bag does not drift;
//! pausing, stepping and changing the rate move the anchor. The `/clock`
//! thread reads the same timeline, so simulated time stops when playback
//! pauses.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{IsTerminal, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use myelin::{AnyMessage, Blob, QoS, RawType};
use myelin_bag::Reader;

use crate::cli::PlayArgs;
use crate::command::topic::{absolute, tool_ctx};

type Res = Result<(), Box<dyn std::error::Error>>;

/// Where playback stands: the wall instant at which bag time `anchor_bag`
/// plays, at `rate`; paused playback stands at `anchor_bag`.
#[derive(Debug, Clone, Copy)]
struct Anchor {
    wall: Instant,
    bag: u64,
    rate: f64,
    paused: bool,
    /// Messages to play at once while paused (RIGHT / `s`).
    steps: u32,
}

impl Anchor {
    /// The bag time now.
    fn bag_now(&self, now: Instant) -> u64 {
        if self.paused {
            return self.bag;
        }
        let ns = (now.saturating_duration_since(self.wall).as_nanos() as f64 * self.rate) as u64;
        self.bag.saturating_add(ns)
    }

    /// When bag time `t` plays (running).
    fn wall_at(&self, t: u64) -> Instant {
        self.wall + Duration::from_secs_f64(t.saturating_sub(self.bag) as f64 / 1e9 / self.rate)
    }
}

/// The shared playback clock: the player, the `/clock` thread and the
/// keyboard read and move it.
struct Timeline {
    anchor: Mutex<Anchor>,
    changed: Condvar,
}

/// What the player should do about the next message.
enum Due {
    /// Publish it now.
    Now,
    /// Publish it now as a step while paused.
    Step,
}

impl Timeline {
    fn new(first: u64, rate: f64) -> Timeline {
        Timeline {
            anchor: Mutex::new(Anchor {
                wall: Instant::now(),
                bag: first,
                rate,
                paused: false,
                steps: 0,
            }),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Anchor> {
        self.anchor.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Start (again) at bag time `first`, keeping rate and pause.
    fn restart(&self, first: u64) {
        let mut a = self.lock();
        a.wall = Instant::now();
        a.bag = first;
    }

    fn bag_now(&self) -> u64 {
        self.lock().bag_now(Instant::now())
    }

    /// Pause or resume; returns whether playback is now paused.
    fn toggle_pause(&self) -> bool {
        let mut a = self.lock();
        let now = Instant::now();
        if a.paused {
            a.wall = now;
            a.paused = false;
        } else {
            a.bag = a.bag_now(now);
            a.paused = true;
        }
        self.changed.notify_all();
        a.paused
    }

    /// Play one message while paused (false if not paused).
    fn step(&self) -> bool {
        let mut a = self.lock();
        if a.paused {
            a.steps += 1;
            self.changed.notify_all();
        }
        a.paused
    }

    /// Multiply the rate by `factor` (within 0.001 to 1000); returns it.
    fn scale_rate(&self, factor: f64) -> f64 {
        let mut a = self.lock();
        let now = Instant::now();
        a.bag = a.bag_now(now);
        a.wall = now;
        a.rate = (a.rate * factor).clamp(1e-3, 1e3);
        self.changed.notify_all();
        a.rate
    }

    /// Wait until bag time `t` is due (to within tens of microseconds: the
    /// last stretch is a yield loop, as a 1 kHz replay needs), or until a
    /// step is asked for while paused. `None`: `stop()` became true.
    fn wait_for(&self, t: u64, stop: &dyn Fn() -> bool) -> Option<Due> {
        let mut a = self.lock();
        loop {
            if stop() {
                return None;
            }
            if a.paused {
                if a.steps > 0 {
                    a.steps -= 1;
                    // The paused position moves to this message.
                    a.bag = a.bag.max(t);
                    return Some(Due::Step);
                }
                a = self
                    .changed
                    .wait_timeout(a, Duration::from_millis(100))
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
                continue;
            }
            let target = a.wall_at(t);
            let now = Instant::now();
            if now >= target {
                return Some(Due::Now);
            }
            let left = target - now;
            if left > Duration::from_micros(300) {
                let nap = (left - Duration::from_micros(200)).min(Duration::from_millis(50));
                a = self
                    .changed
                    .wait_timeout(a, nap)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            } else {
                drop(a);
                std::thread::yield_now();
                a = self.lock();
            }
        }
    }
}

/// The terminal in raw mode (keys arrive one by one, unechoed) until
/// dropped.
struct RawTerminal {
    saved: rustix::termios::Termios,
}

impl RawTerminal {
    fn enter() -> Option<RawTerminal> {
        let stdin = std::io::stdin();
        let saved = rustix::termios::tcgetattr(&stdin).ok()?;
        let mut raw = saved.clone();
        // Keys without Enter and without echo; output and Ctrl-C as usual.
        raw.local_modes
            .remove(rustix::termios::LocalModes::ICANON | rustix::termios::LocalModes::ECHO);
        raw.special_codes[rustix::termios::SpecialCodeIndex::VMIN] = 1;
        raw.special_codes[rustix::termios::SpecialCodeIndex::VTIME] = 0;
        rustix::termios::tcsetattr(&stdin, rustix::termios::OptionalActions::Now, &raw).ok()?;
        Some(RawTerminal { saved })
    }
}

impl Drop for RawTerminal {
    fn drop(&mut self) {
        let _ = rustix::termios::tcsetattr(
            std::io::stdin(),
            rustix::termios::OptionalActions::Now,
            &self.saved,
        );
    }
}

/// Read keys from the terminal and act on `timeline` (a thread that lives
/// as long as the process: it blocks in `read`).
fn keyboard(timeline: Arc<Timeline>) {
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut byte = [0u8; 1];
        let mut escape = 0u8; // 1: ESC seen, 2: ESC [ seen
        while stdin.read(&mut byte).is_ok_and(|n| n == 1) {
            let key = match (escape, byte[0]) {
                (0, 0x1b) => {
                    escape = 1;
                    continue;
                }
                (1, b'[') => {
                    escape = 2;
                    continue;
                }
                (2, b'A') => Some("up"),
                (2, b'B') => Some("down"),
                (2, b'C') => Some("right"),
                (_, b' ') => Some("space"),
                (_, b's') => Some("right"),
                _ => None,
            };
            escape = 0;
            match key {
                Some("space") => {
                    if timeline.toggle_pause() {
                        eprintln!("paused (SPACE resumes, RIGHT or s plays one message)");
                    } else {
                        eprintln!("resumed");
                    }
                }
                Some("right") if !timeline.step() => {
                    eprintln!("RIGHT/s steps while paused: press SPACE first");
                }
                Some("up") => eprintln!("rate {:.3}", timeline.scale_rate(1.1)),
                Some("down") => eprintln!("rate {:.3}", timeline.scale_rate(1.0 / 1.1)),
                _ => {}
            }
        }
    });
}

fn parse_remaps(remaps: &[String]) -> Result<BTreeMap<String, String>, String> {
    remaps
        .iter()
        .map(|r| {
            r.split_once(":=")
                .filter(|(a, b)| !a.is_empty() && !b.is_empty())
                .map(|(a, b)| (absolute(a), absolute(b)))
                .ok_or_else(|| format!("invalid --remap {r:?}: use /from:=/to"))
        })
        .collect()
}

fn check_args(args: &PlayArgs) -> Result<(), String> {
    if !(args.rate.is_finite() && (1e-3..=1e3).contains(&args.rate)) {
        return Err(format!(
            "invalid --rate {}: must be 0.001 to 1000",
            args.rate
        ));
    }
    if !(args.start_offset.is_finite() && args.start_offset >= 0.0 && args.start_offset <= 1e9) {
        return Err(format!(
            "invalid --start-offset {}: must be 0 to 1e9 seconds",
            args.start_offset
        ));
    }
    if !(args.wait_for_subscribers.is_finite()
        && (0.0..=3600.0).contains(&args.wait_for_subscribers))
    {
        return Err("invalid --wait-for-subscribers: must be 0 to 3600 seconds".into());
    }
    if let Some(hz) = args.clock
        && !(hz.is_finite() && (0.1..=10_000.0).contains(&hz))
    {
        return Err(format!("invalid --clock {hz}: must be 0.1 to 10000 Hz"));
    }
    Ok(())
}

/// `myelin bag play`.
pub fn play(args: PlayArgs) -> Res {
    check_args(&args)?;
    let remaps = parse_remaps(&args.remap)?;
    let only: BTreeSet<String> = args.topics.iter().map(|t| absolute(t)).collect();
    let reader = Reader::open(&args.bag)?;
    let info = reader.info()?;
    if info.message_count == 0 {
        return Err(format!("{}: no messages to play", args.bag.display()).into());
    }
    let ctx = tool_ctx(args.domain)?;
    let node = ctx.create_node(&format!("myelin_bag_player_{}", std::process::id()))?;
    let mut pubs: BTreeMap<String, myelin::Publisher<AnyMessage>> = BTreeMap::new();
    for (t, _) in &info.topics {
        if !only.is_empty() && !only.contains(&t.name) {
            continue;
        }
        if t.serialization_format != "cdr" {
            eprintln!(
                "warning: {}: serialization {:?} cannot be replayed (only cdr); skipped",
                t.name, t.serialization_format
            );
            continue;
        }
        let Some(hash) = t
            .type_hash
            .clone()
            .or_else(|| myelin_msgs::ros_hash_of(&t.type_name))
        else {
            eprintln!(
                "warning: {}: the bag has no type hash for {} and myelin-msgs does not know it; skipped",
                t.name, t.type_name
            );
            continue;
        };
        let ty = match RawType::ros(&t.type_name, &hash) {
            Ok(ty) => ty,
            Err(e) => {
                eprintln!("warning: {}: {e}; skipped", t.name);
                continue;
            }
        };
        let out = remaps
            .get(&t.name)
            .cloned()
            .unwrap_or_else(|| t.name.clone());
        let p = node.create_raw_publisher(&out, &ty, t.replay_qos())?;
        pubs.insert(t.name.clone(), p);
    }
    if pubs.is_empty() {
        return Err("no topic of the bag can be played".into());
    }
    let wait_until = Instant::now() + Duration::from_secs_f64(args.wait_for_subscribers);
    while Instant::now() < wait_until
        && pubs.values().any(|p| p.subscription_count() == 0)
        && !ctx.is_shut_down()
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    let offset = (args.start_offset * 1e9) as u64;
    let first = info.start_ns.saturating_add(offset);
    let timeline = Arc::new(Timeline::new(first, args.rate));
    let keys = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let _raw = if keys {
        let raw = RawTerminal::enter();
        if raw.is_some() {
            keyboard(timeline.clone());
        }
        raw
    } else {
        None
    };
    eprintln!(
        "playing {} ({} messages, {:.1} s) at rate {}{}; {}Ctrl-C to stop",
        args.bag.display(),
        info.message_count,
        info.duration().as_secs_f64(),
        args.rate,
        if args.looping { ", looping" } else { "" },
        if _raw.is_some() {
            "SPACE pause/resume, RIGHT or s one message, UP/DOWN rate +/-10%, "
        } else {
            ""
        }
    );
    let done = Arc::new(AtomicBool::new(false));
    let clock_thread = match args.clock {
        Some(hz) => Some(clock_publisher(
            &node,
            hz,
            timeline.clone(),
            info.end_ns,
            done.clone(),
        )?),
        None => None,
    };
    let stop = || ctx.is_shut_down();
    let mut played = 0u64;
    'outer: loop {
        timeline.restart(first);
        for m in reader.messages()? {
            let m = match m {
                Ok(m) => m,
                Err(e) => {
                    eprintln!("warning: {e}; the rest of that file is skipped");
                    continue;
                }
            };
            if m.log_time < first {
                continue;
            }
            let Some(p) = pubs.get(&m.topic.name) else {
                continue;
            };
            let Some(due) = timeline.wait_for(m.log_time, &stop) else {
                break 'outer;
            };
            p.publish(AnyMessage(Blob::from(m.data)))?;
            played += 1;
            if let Due::Step = due {
                eprintln!("step: {played} messages played");
            }
        }
        if !args.looping || stop() {
            break;
        }
    }
    // Let subscriptions in other processes read the last messages before
    // the publishers (and their shared memory) go away.
    std::thread::sleep(Duration::from_millis(200));
    done.store(true, Ordering::Relaxed);
    if let Some(t) = clock_thread {
        let _ = t.join();
    }
    eprintln!("played {played} messages");
    Ok(())
}

/// `--clock HZ`: the timeline's bag time on `/clock` (best effort, as
/// `ros2 bag play` publishes it) until `done`, never past `end`.
fn clock_publisher(
    node: &myelin::Node,
    hz: f64,
    timeline: Arc<Timeline>,
    end: u64,
    done: Arc<AtomicBool>,
) -> Result<std::thread::JoinHandle<()>, Box<dyn std::error::Error>> {
    let p = node.create_publisher::<myelin_msgs::rosgraph_msgs::Clock>(
        "/clock",
        QoS::keep_last(1).best_effort(),
    )?;
    Ok(std::thread::spawn(move || {
        let period = Duration::from_secs_f64(1.0 / hz);
        let mut next = Instant::now();
        while !done.load(Ordering::Relaxed) {
            let t = timeline.bag_now().min(end);
            let _ = p.publish(myelin_msgs::rosgraph_msgs::Clock {
                clock: myelin::Time::from_nanos(i64::try_from(t).unwrap_or(i64::MAX)),
            });
            next += period;
            let now = Instant::now();
            if next > now {
                std::thread::sleep(next - now);
            } else {
                next = now;
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timeline_pauses_steps_and_changes_rate_without_losing_its_place() {
        let t = Timeline::new(1_000, 2.0);
        assert!(t.toggle_pause());
        let paused_at = t.bag_now();
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(t.bag_now(), paused_at, "paused time stands");
        // A step while paused plays the next message at once and moves
        // the paused position to it.
        assert!(t.step());
        let next = paused_at + 1_000_000_000;
        assert!(matches!(t.wait_for(next, &|| false), Some(Due::Step)));
        assert_eq!(t.bag_now(), next);
        // Resuming continues from there.
        assert!(!t.toggle_pause());
        assert!(t.bag_now() >= next);
        let r = t.scale_rate(1.1);
        assert!((r - 2.2).abs() < 1e-9, "{r}");
        assert_eq!(t.scale_rate(1e9), 1e3, "rates are bounded");
        // Not paused: a step is refused.
        assert!(!t.step());
        // A stop request ends a wait at once.
        assert!(t.wait_for(u64::MAX / 2, &|| true).is_none());
    }

    #[test]
    fn due_times_come_from_the_anchor_so_they_never_drift() {
        let a = Anchor {
            wall: Instant::now(),
            bag: 0,
            rate: 1.0,
            paused: false,
            steps: 0,
        };
        // Ten minutes of 1 kHz messages: the last is due exactly 600 s
        // after the anchor, whatever came before.
        let last = 600_000_000_000u64;
        assert_eq!(a.wall_at(last) - a.wall, Duration::from_secs(600));
        let half = Anchor { rate: 0.5, ..a };
        assert_eq!(half.wall_at(last) - half.wall, Duration::from_secs(1200));
    }
}

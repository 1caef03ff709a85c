//! Instructions per operation on myelin's hot paths, counted by valgrind's
//! callgrind: a budget that cannot drift (`myelin bench icount`, and CI's
//! gate, the `myelin-icount` binary of this crate).
//!
//! Timings on a shared 2-core VM move 10-30% from run to run (2-3x on
//! tails); the number of instructions an operation executes does not. Each
//! workload runs in a child process (this executable again) under
//! `valgrind --tool=callgrind --collect-atstart=no
//! --toggle-collect=myelin_icount_region`: set-up and a warm-up run
//! uncounted, then [`myelin_icount_region`] runs the operation `iters`
//! times and callgrind counts only what executes inside it, on that thread
//! (callgrind keeps its collection state per thread: background threads
//! such as zenoh's are not counted). The result is instructions per
//! operation.
//!
//! Workloads:
//!
//! * `dispatch 64B`: in-process publish -> callback (a 64-byte POD message,
//!   one executor turn: `publish` then `spin_some`);
//! * `dispatch 64B, 200 idle`: the same with 200 subscriptions of other
//!   topics, silent, on the same node and executor: dispatch costs
//!   O(ready work), so this row is `dispatch 64B`'s count (the timed
//!   benchmark cannot resolve a difference of a few nanoseconds);
//! * `shm loan+take 64B`: a loaned publish into shared memory and the
//!   `take` of it by a polling subscription of another context;
//! * `shm idle take`: a polled `take` that finds nothing, from a
//!   subscription whose one publisher (another context) connected and has
//!   sent nothing yet: what a reader polling a quiet topic pays per poll;
//! * `zenoh publish 64B` (feature `zenoh`): the publishing thread's part of a publish to a
//!   subscription of another zenoh session (best effort, so a slow reader
//!   never makes the writer wait). Reported, not gated: its count depends
//!   on how the publishing thread interleaves with zenoh's transmit
//!   thread (whether a batch is open or being sent), which valgrind's
//!   scheduler fixes per binary but not across builds: 3,255 and 3,671
//!   instructions for two builds of the same source, each stable to a few
//!   instructions over repeated runs;
//! * `cdr encode Image` / `cdr decode Image`: a 64x48 `rgb8`
//!   `sensor_msgs/Image` (9,216 bytes of pixels) to and from CDR;
//! * `relay 64B x5`: instructions **per hop** of a five-hop chain on one
//!   executor (the relay benchmark's single-threaded row): a publish from
//!   outside, then four callbacks that each publish to the next topic
//!   (work they cause on their own executor) and a sink;
//! * `relay 64B x5 turns`: the same chain run the way `spin` runs it,
//!   one executor turn per hop (`spin_once`), with a timer on the node
//!   that does not come due in the run (as a real node has one): what
//!   the executor's turn adds per hop (its deadline, the timer check);
//! * `cold lines x10`: not instructions but **cache lines missed per
//!   delivery** when one publish reaches 10 subscriptions of an executor
//!   whose memory went cold (an executor that slept 10 ms between ticks:
//!   what a 100 Hz fan-out pays). Each operation first writes a 4 MiB
//!   buffer (evicting all data from callgrind's simulated 32 KiB L1 and
//!   1 MiB last-level cache), then publishes and drains the executor; a
//!   second run with the sweep alone is subtracted. The figure is lines
//!   of data missed in the last level, per delivery (the publish's and
//!   the turn's own lines shared among the ten): the sweep runs a few
//!   instructions, so the simulated instruction cache keeps the code and
//!   code misses are not in it; the workload's `code` row (see [`CODE`])
//!   counts the lines of code instead. Reported, not gated: it moves
//!   with where the allocator places objects and with stack frames,
//!   which unrelated changes can shift by a line;
//! * `cold lines x1`: the same with one subscription: every line the
//!   publish and the executor's turn touch counts against the one
//!   delivery, as for a camera frame at 30 Hz reaching an executor that
//!   slept since the last one (on the VM this was written on a cold line
//!   costs 150 ns, 550 ns when it is alone on its page);
//! * `cold timers x10`: the same for timers: cache lines missed per timer
//!   firing when ten timers of ten nodes on one executor come due
//!   together after the sweep (the fixed part of a 100 Hz fan-out tick).
//!   Their period is 1 ns, so that each is due at every turn under
//!   valgrind; each firing therefore also counts missed periods (a
//!   counter a timer at its rate does not write).
//! * `cold relay x5`: the same for the relay chain: cache lines missed
//!   per hop when a message goes down the five hops after the sweep (a
//!   1 kHz chain whose executor sleeps between messages).
//!
//! glibc picks `memcpy` and friends by CPU (AVX2, ERMS, ...), which would
//! make counts differ between machines; the children run with those
//! choices pinned to the baseline x86-64 ones (`GLIBC_TUNABLES`), so a
//! baseline taken on one machine holds on another.
//!
//! A baseline (`--save-baseline FILE`, JSON) is checked in
//! (`.ci/icount.json`); `--baseline FILE` compares a run with it and fails
//! when a workload grew by more than the tolerance (5% by default).
//!
//! CI's gate is this crate's binary, built apart from the benchmark suite
//! (`cargo run --release -p myelin-icount -- --baseline .ci/icount.json`):
//! its release build compiles myelin without zenoh, so it takes a small
//! part of the time `cargo run --release -- bench icount` needs, and its
//! counts are the ones in the checked-in baseline. A build with zenoh
//! compiled in (`myelin bench icount`) counts up to ~3% apart on the same
//! source (code layout, not work): compare it with a baseline it saved.
//!
//! ```no_run
//! // Count every workload and compare with a baseline, as the gate does.
//! let baseline = myelin_icount::load_baseline(".ci/icount.json".as_ref())?;
//! let rows = myelin_icount::run(|line| eprintln!("{line}"))?;
//! print!("{}", myelin_icount::render(&rows, Some(&baseline), 0.05));
//! myelin_icount::gate(&rows, &baseline, 0.05)?;
//! # Ok::<(), myelin_icount::IcountError>(())
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use myelin::msgs::sensor_msgs;
use myelin::{Context, Executor, Message, Publisher, QoS, Subscription};
use serde::{Deserialize, Serialize};

const ENV: &str = "MYELIN_BENCH_ICOUNT";

/// What can go wrong when counting.
#[derive(Debug, thiserror::Error)]
pub enum IcountError {
    /// valgrind is missing or does not run.
    #[error("{0}")]
    Valgrind(String),
    /// A workload could not be set up or failed.
    #[error("icount: {0}")]
    Workload(String),
    /// A baseline file could not be read or parsed.
    #[error("the baseline {path}: {reason}")]
    Baseline {
        /// The file.
        path: PathBuf,
        /// Why it could not be used.
        reason: String,
    },
    /// The tolerance is not a percentage this gate accepts.
    #[error("--tolerance {0}: a percentage from 0 to 1000")]
    Tolerance(f64),
    /// Counts grew past the tolerance (each workload with its growth).
    #[error("instruction counts grew more than {}%: {}", percent(*.tolerance), .grew.join(", "))]
    Grew {
        /// The tolerance, a fraction (0.05: 5%).
        tolerance: f64,
        /// `"<workload> (+x.y%)"` for each that grew.
        grew: Vec<String>,
    },
    /// A workload asked for by name that this build does not have.
    #[error("no workload {name:?}; this build has: {}", .known.join(", "))]
    UnknownWorkload {
        /// The name asked for.
        name: String,
        /// The workloads there are.
        known: Vec<String>,
    },
    /// Gated workloads the baseline has no count for: a gate that cannot
    /// compare must not pass.
    #[error("not in the baseline: {} (add them: --save-baseline FILE --workload NAME)", .0.join(", "))]
    NotInBaseline(Vec<String>),
    /// Files around the workloads (output files, the private directory).
    #[error("icount: {0}")]
    Io(#[from] std::io::Error),
}

/// The workloads, in the order they run.
#[cfg(feature = "zenoh")]
pub const WORKLOADS: &[&str] = &[
    "dispatch 64B",
    DISPATCH_IDLE,
    "shm loan+take 64B",
    SHM_IDLE,
    "zenoh publish 64B",
    "cdr encode Image",
    "cdr decode Image",
    RELAY,
    RELAY_TURNS,
    COLD,
    COLD_ONE,
    COLD_TIMERS,
    COLD_RELAY,
];

/// The workloads, in the order they run (without the `zenoh` feature, the
/// zenoh workload is not compiled in).
#[cfg(not(feature = "zenoh"))]
pub const WORKLOADS: &[&str] = &[
    "dispatch 64B",
    DISPATCH_IDLE,
    "shm loan+take 64B",
    SHM_IDLE,
    "cdr encode Image",
    "cdr decode Image",
    RELAY,
    RELAY_TURNS,
    COLD,
    COLD_ONE,
    COLD_TIMERS,
    COLD_RELAY,
];

/// Dispatch with 200 idle subscriptions on the executor (see the module
/// docs).
pub const DISPATCH_IDLE: &str = "dispatch 64B, 200 idle";

/// Idle subscriptions of [`DISPATCH_IDLE`].
const IDLE_SUBS: usize = 200;

/// A polled take that finds nothing, a silent publisher connected (see
/// the module docs).
pub const SHM_IDLE: &str = "shm idle take";

/// The cold-cache workload: cache lines missed per delivery (see the
/// module docs).
pub const COLD: &str = "cold lines x10";

/// The cold-cache workload with one subscription: cache lines missed by
/// a delivery to a subscription of an executor whose memory went cold,
/// nothing shared with other deliveries (see the module docs).
pub const COLD_ONE: &str = "cold lines x1";

/// The cold-cache workload of timers: cache lines missed per timer
/// firing, ten timers of ten nodes due at once (see the module docs).
pub const COLD_TIMERS: &str = "cold timers x10";

/// A relay chain on one executor: instructions per hop (see the module
/// docs).
pub const RELAY: &str = "relay 64B x5";

/// The relay chain through the executor's turn (`spin_once` per hop),
/// a dormant timer on the node: instructions per hop.
pub const RELAY_TURNS: &str = "relay 64B x5 turns";

/// The relay chain's cache lines missed per hop after the sweep.
pub const COLD_RELAY: &str = "cold relay x5";

/// Whether `workload` counts cache lines (with callgrind's cache
/// simulation), not instructions.
pub fn counts_lines(workload: &str) -> bool {
    workload == COLD || workload == COLD_ONE || workload == COLD_TIMERS || workload == COLD_RELAY
}

/// Hops of the relay workloads: a publish from outside the executor,
/// then four callbacks that each publish to the next one's topic.
const RELAY_HOPS: u64 = 5;

/// What one operation of workload `name` counts as: the deliveries (or
/// firings, or hops) its figure is divided by.
fn units_per_op(name: &str) -> u64 {
    match name {
        COLD | COLD_TIMERS => COLD_SUBS,
        RELAY | RELAY_TURNS | COLD_RELAY => RELAY_HOPS,
        _ => 1,
    }
}

/// The suffix of a workload's companion row that counts its *locked*
/// instructions (`lock`-prefixed read-modify-writes, `xchg` with memory,
/// `mfence`) per operation: each costs about 5 ns on the machines this
/// runs on (a pipeline drain), so one more on a hot path shows here as
/// +10% on a count of ten, where it is one instruction among ~900 in the
/// instruction count.
pub const LOCKED: &str = " locked";

/// The suffix of a cold workload's companion row that counts the lines
/// of *code* its operation executes (per delivery, firing or hop, shared
/// as the data lines are). The simulated sweep evicts data only, and
/// callgrind's first-level instruction cache keeps the code the whole
/// run, so the cold rows themselves count data lines; a core whose
/// thread slept 33 ms between frames has lost both.
pub const CODE: &str = " code";

/// The suffix of a cold workload's companion row that counts the 4 KiB
/// pages its [`CODE`] lines lie on (per delivery, firing or hop, as
/// they are). A thread that slept loses the translations of those pages
/// too: on the VM this was written on, a page of code costs 170-260 ns
/// more than its lines, so the layout of the code (see
/// `myelin_sync::hot`) is part of a cold delivery's cost.
pub const PAGES: &str = " code pages";

/// The suffix of a workload's companion row that counts the instructions
/// per operation it executes in the executable *outside its hot text*
/// (the `.text.hot` section, see `myelin_sync::hot`): myelin's (and std's)
/// per-message code that is not in the section. The workload's own code
/// (its loop, the callback's body: functions of this crate) is left out,
/// so the row does not move when the compiler lays out the harness
/// differently. It does not move with layout either, only with what runs
/// where, so it is gated: a per-message function added without the
/// section's attribute (and so on another page of a cold delivery) grows
/// it.
pub const OUTSIDE: &str = " outside hot text";

/// Whether `workload` has an [`OUTSIDE`] row: the gated per-message paths
/// (not the cold ones, which count lines, nor CDR, which is not hot text).
pub fn has_outside_row(workload: &str) -> bool {
    gated(workload)
        && !counts_lines(workload)
        && !workload.starts_with("cdr ")
        && WORKLOADS.contains(&workload)
}

/// The name of `workload`'s locked-instruction row.
pub fn locked_name(workload: &str) -> String {
    format!("{workload}{LOCKED}")
}

/// Subscriptions the cold workload's publish reaches, and timers that
/// fire in each operation of the cold timer workload.
const COLD_SUBS: u64 = 10;

/// Operations of the cold workload (each sweeps 4 MiB first).
const COLD_ITERS: u64 = 200;

/// Set in the cold workload's second run: the sweep alone.
const SWEEP_ONLY_ENV: &str = "MYELIN_ICOUNT_SWEEP_ONLY";

/// Workloads whose count is a function of the code alone (single-threaded
/// paths), and so gated.
pub fn gated(workload: &str) -> bool {
    not_gated_because(workload).is_none()
}

/// Why a workload is reported but not gated.
fn not_gated_because(workload: &str) -> Option<&'static str> {
    if let Some(cold) = workload.strip_suffix(CODE)
        && counts_lines(cold)
    {
        return Some("code lines executed; move with code layout");
    }
    if let Some(cold) = workload.strip_suffix(PAGES)
        && counts_lines(cold)
    {
        return Some("code pages executed; move with code layout");
    }
    if workload.ends_with(LOCKED) && !myelin::sched::uses_membarrier() {
        // Without it a matched list's read is a fence and a callback takes
        // its lock: locked instructions the baseline (counted where
        // `membarrier` works) does not have.
        return Some("membarrier is off here; the baseline's locked counts assume it");
    }
    match workload.strip_suffix(LOCKED).unwrap_or(workload) {
        "zenoh publish 64B" => Some("interleaves with zenoh's thread"),
        COLD | COLD_ONE => Some("lines per delivery; moves with allocation"),
        COLD_TIMERS => Some("lines per firing; moves with allocation"),
        COLD_RELAY => Some("lines per hop; moves with allocation"),
        _ => None,
    }
}

/// Operations counted per workload.
pub const ITERS: u64 = 2000;

/// A 64-byte message, copied as bytes.
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable, myelin::Message)]
#[repr(C)]
#[message(pod, name = "myelin_bench/msg/Icount64")]
pub struct Icount64 {
    /// A number that changes per message.
    pub seq: u64,
    /// The rest of the 64 bytes.
    pub pad: [u8; 56],
}

/// The counted region: callgrind counts what runs inside this function
/// (`--toggle-collect=myelin_icount_region`), so it must keep this name
/// and never be inlined.
#[unsafe(no_mangle)]
#[inline(never)]
pub fn myelin_icount_region(op: &mut dyn FnMut(), iters: u64) {
    for _ in 0..iters {
        op();
    }
}

/// One workload's count.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IcountRow {
    /// The workload's name (see [`WORKLOADS`]).
    pub workload: String,
    /// Operations counted.
    pub iters: u64,
    /// Instructions executed in the counted region.
    pub instructions: u64,
    /// Instructions per operation.
    pub per_op: f64,
}

/// A baseline: instructions per operation by workload.
pub type Baseline = BTreeMap<String, f64>;

/// Run as a workload under callgrind if this process was started as one
/// (returns only if not): call it first thing in `main` of any binary
/// that calls [`run`], which starts that binary again for each workload.
pub fn workload_if_requested() {
    let Ok(spec) = std::env::var(ENV) else {
        return;
    };
    // The workload's warnings reach the parent's stderr (MYELIN_LOG=error).
    myelin::init_logging();
    if let Some(base) = load_base() {
        println!("{BASE_MARK}{base:#x}");
    }
    let result = spec
        .rsplit_once(',')
        .ok_or_else(|| err(format!("bad {ENV} {spec:?}")))
        .and_then(|(name, iters)| workload(name, iters.parse().map_err(err)?));
    std::process::exit(match result {
        Ok(()) => 0,
        Err(e) => {
            println!("icount workload error: {e}");
            eprintln!("icount workload: {e}");
            1
        }
    });
}

fn err(e: impl std::fmt::Display) -> IcountError {
    IcountError::Workload(e.to_string())
}

/// A domain for the workloads (200..=229, as the benchmark suite's), so
/// user graphs on the usual domains are not disturbed.
fn domain(salt: u32) -> u32 {
    200 + (std::process::id().wrapping_add(salt) % 30)
}

fn quiet() -> myelin::ContextBuilder {
    Context::builder()
        .handle_signals(false)
        .type_description_service(false)
}

/// A keep_last(16) publisher and a polling subscription of one topic in
/// two shared-memory contexts, connected.
struct ShmPair {
    p: Publisher<Icount64>,
    s: Subscription<Icount64>,
    _contexts: (Context, Context),
}

/// The [`ShmPair`] of `topic` in domain `d`.
fn shm_pair(d: u32, topic: &str, name: &str) -> Result<ShmPair, IcountError> {
    let shm = || {
        quiet()
            .domain_id(d)
            .shared_memory(true)
            .network(false)
            .build()
            .map_err(err)
    };
    let (a, b) = (shm()?, shm()?);
    let p = a
        .create_node("icount_pub")
        .map_err(err)?
        .create_publisher::<Icount64>(topic, QoS::keep_last(16))
        .map_err(err)?;
    let s = b
        .create_node("icount_sub")
        .map_err(err)?
        .create_polling_subscription::<Icount64>(topic, QoS::keep_last(16), Default::default())
        .map_err(err)?;
    wait(|| p.subscription_count() > 0, name)?;
    Ok(ShmPair {
        p,
        s,
        _contexts: (a, b),
    })
}

/// Set up `name`, warm it up, then run it `iters` times in the counted
/// region.
fn workload(name: &str, iters: u64) -> Result<(), IcountError> {
    let warm = iters / 10;
    let msg = |seq| Icount64 { seq, pad: [7; 56] };
    let d = domain(11);
    match name {
        "dispatch 64B" | DISPATCH_IDLE => {
            let mut rig = InProcess::new(d, 1)?;
            // Silent subscriptions of other topics on the rig's node (and
            // so on its executor).
            let idle = if name == DISPATCH_IDLE { IDLE_SUBS } else { 0 };
            let _idle = (0..idle)
                .map(|i| {
                    rig.node
                        .create_subscription(&format!("/idle_{i}"), RIG_QOS, |_m: Icount64| {})
                        .map_err(err)
                })
                .collect::<Result<Vec<_>, _>>()?;
            let mut seq = 0;
            let mut op = || {
                seq += 1;
                let _ = rig.publisher.publish(msg(seq));
                let _ = rig.exec.spin_some();
            };
            for _ in 0..warm {
                op();
            }
            myelin_icount_region(&mut op, iters);
            check(rig.sum.load(Ordering::Relaxed) > 0, name)
        }
        COLD | COLD_ONE | RELAY | COLD_RELAY => {
            // One publish per operation, to ten subscriptions (`COLD`), to
            // one (`COLD_ONE`) or down the relay chain, then the executor
            // until idle (`spin_some` leaves what its callbacks cause to
            // the next call: one call per hop).
            let (mut rig, copies) = match name {
                COLD => (InProcess::new(d, COLD_SUBS)?, COLD_SUBS),
                COLD_ONE => (InProcess::new(d, 1)?, 1),
                _ => (InProcess::relay(d)?, 1),
            };
            let sweep_only = std::env::var_os(SWEEP_ONLY_ENV).is_some();
            // Twice the simulated last-level cache and more: every line
            // the operation touched before is gone (counting lines only).
            let mut sweep = vec![0u8; if counts_lines(name) { 4 << 20 } else { 0 }];
            let mut seq = 0;
            let mut op = || {
                evict(&mut sweep);
                if sweep_only {
                    return;
                }
                seq += 1;
                let _ = rig.publisher.publish(msg(seq));
                while rig.exec.spin_some().unwrap_or(0) > 0 {}
            };
            for _ in 0..warm {
                op();
            }
            myelin_icount_region(&mut op, iters);
            // Every subscription (the sink) got every message: `copies`
            // times the sum of the seqs sent, 1 to warm + iters.
            let sent: u64 = (1..=warm + iters).sum();
            check(
                sweep_only || rig.sum.load(Ordering::Relaxed) == copies * sent,
                name,
            )
        }
        RELAY_TURNS => {
            let mut rig = InProcess::relay(d)?;
            // Due in an hour: never in the run, checked at every turn
            // that may run it.
            let _timer = rig
                .node
                .create_timer(Duration::from_secs(3600), || {})
                .map_err(err)?;
            let mut seq = 0;
            let mut op = || {
                seq += 1;
                let _ = rig.publisher.publish(msg(seq));
                for _ in 0..RELAY_HOPS {
                    let _ = rig.exec.spin_once(Duration::ZERO);
                }
            };
            for _ in 0..warm {
                op();
            }
            myelin_icount_region(&mut op, iters);
            let sent: u64 = (1..=warm + iters).sum();
            check(rig.sum.load(Ordering::Relaxed) == sent, name)
        }
        COLD_TIMERS => {
            let ctx = local_context(d)?;
            let fired = Arc::new(AtomicU64::new(0));
            let mut exec = Executor::new();
            let mut keep = Vec::new();
            for k in 0..COLD_SUBS {
                let node = ctx.create_node(&format!("icount_{k}")).map_err(err)?;
                let f = fired.clone();
                // A period far below one operation under valgrind: due at
                // every turn.
                let timer = node
                    .create_timer(Duration::from_nanos(1), move || {
                        f.fetch_add(1, Ordering::Relaxed);
                    })
                    .map_err(err)?;
                exec.add_node(&node).map_err(err)?;
                keep.push((node, timer));
            }
            let sweep_only = std::env::var_os(SWEEP_ONLY_ENV).is_some();
            let mut sweep = vec![0u8; 4 << 20];
            let mut op = || {
                evict(&mut sweep);
                if !sweep_only {
                    let _ = exec.spin_some();
                }
            };
            for _ in 0..warm {
                op();
            }
            let before = fired.load(Ordering::Relaxed);
            myelin_icount_region(&mut op, iters);
            let n = fired.load(Ordering::Relaxed) - before;
            // Every timer fired in every operation (the row divides by it).
            check(sweep_only || n == iters * COLD_SUBS, name)
        }
        "shm loan+take 64B" => {
            let ShmPair { p, s, _contexts } = shm_pair(d, "/icount", name)?;
            let (mut seq, mut got) = (0, 0u64);
            let mut op = || {
                seq += 1;
                if let Ok(l) = p.loan_uninit() {
                    let _ = l.write(msg(seq)).publish();
                }
                if s.take().is_some() {
                    got += 1;
                }
            };
            for _ in 0..warm {
                op();
            }
            myelin_icount_region(&mut op, iters);
            check(got == warm + iters, name)
        }
        SHM_IDLE => {
            let ShmPair {
                p: _p,
                s,
                _contexts,
            } = shm_pair(d, "/quiet", name)?;
            let mut got = 0u64;
            let mut op = || {
                if s.take().is_some() {
                    got += 1;
                }
            };
            for _ in 0..warm {
                op();
            }
            myelin_icount_region(&mut op, iters);
            check(got == 0, name)
        }
        #[cfg(feature = "zenoh")]
        "zenoh publish 64B" => {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map_err(err)?
                .port();
            let dir = std::env::temp_dir();
            let tag = format!("{}_{port}", std::process::id());
            let listen = dir.join(format!("myelin_icount_{tag}_a.json5"));
            let connect = dir.join(format!("myelin_icount_{tag}_b.json5"));
            let scouting =
                "scouting: { multicast: { enabled: false }, gossip: { enabled: false } }";
            std::fs::write(
                &listen,
                format!(r#"{{ mode: "peer", listen: {{ endpoints: ["tcp/127.0.0.1:{port}"] }}, {scouting} }}"#),
            )
            .map_err(err)?;
            std::fs::write(
                &connect,
                format!(r#"{{ mode: "peer", connect: {{ endpoints: ["tcp/127.0.0.1:{port}"] }}, {scouting} }}"#),
            )
            .map_err(err)?;
            let net = |cfg: &Path| {
                quiet()
                    .domain_id(d)
                    .shared_memory(false)
                    .network(true)
                    .zenoh_config(cfg)
                    .build()
                    .map_err(err)
            };
            let a = net(&listen)?;
            let b = net(&connect)?;
            let _ = std::fs::remove_file(&listen);
            let _ = std::fs::remove_file(&connect);
            let pn = a.create_node("icount_pub").map_err(err)?;
            let sn = b.create_node("icount_sub").map_err(err)?;
            let qos = QoS::keep_last(10).best_effort();
            let p = pn
                .create_publisher::<Icount64>("/icount", qos)
                .map_err(err)?;
            let _s = sn
                .create_polling_subscription::<Icount64>("/icount", qos, Default::default())
                .map_err(err)?;
            wait(|| p.subscription_count() > 0, name)?;
            let mut seq = 0;
            let mut op = || {
                seq += 1;
                let _ = p.publish(msg(seq));
            };
            for _ in 0..warm {
                op();
            }
            myelin_icount_region(&mut op, iters);
            Ok(())
        }
        "cdr encode Image" | "cdr decode Image" => {
            let img = sensor_msgs::Image {
                height: 48,
                width: 64,
                encoding: "rgb8".into(),
                step: 64 * 3,
                data: vec![0x42; 64 * 48 * 3],
                ..Default::default()
            };
            let mut buf = vec![0u8; img.wire_len().map_err(err)?];
            img.wire_encode(&mut buf).map_err(err)?;
            if name == "cdr encode Image" {
                let mut op = || {
                    let n = img.wire_len().unwrap_or(0);
                    let _ = img.wire_encode(&mut buf[..n]);
                };
                for _ in 0..warm {
                    op();
                }
                myelin_icount_region(&mut op, iters);
            } else {
                let bytes = myelin::SharedBytes::from_vec(buf);
                let mut ok = 0u64;
                let mut op = || {
                    if let Ok(m) = sensor_msgs::Image::wire_decode(bytes.clone()) {
                        ok += u64::from(m.width);
                    }
                };
                for _ in 0..warm {
                    op();
                }
                myelin_icount_region(&mut op, iters);
                check(ok == (warm + iters) * 64, name)?;
            }
            Ok(())
        }
        other => Err(err(format!("no workload {other:?}"))),
    }
}

/// A context of its own on domain `d`, without shared memory or network.
fn local_context(d: u32) -> Result<Context, IcountError> {
    quiet()
        .domain_id(d)
        .shared_memory(false)
        .network(false)
        .build()
        .map_err(err)
}

/// An in-process rig: a keep_last(10) publisher and subscriptions on one
/// node, the last of them adding the messages' `seq` to `sum`, and an
/// executor running the node.
struct InProcess {
    publisher: myelin::Publisher<Icount64>,
    exec: Executor,
    sum: Arc<AtomicU64>,
    _subs: Vec<myelin::Subscription<Icount64>>,
    node: myelin::Node,
    _ctx: Context,
}

/// The rigs' QoS (publishers and subscriptions).
const RIG_QOS: QoS = QoS::keep_last(10);

impl InProcess {
    /// The rig on domain `d` with `subs` subscriptions of `/icount`, each
    /// adding to `sum`.
    fn new(d: u32, subs: u64) -> Result<InProcess, IcountError> {
        InProcess::build(d, "/icount", |node, sum| {
            (0..subs)
                .map(|_| {
                    node.create_subscription("/icount", RIG_QOS, adder(sum))
                        .map_err(err)
                })
                .collect()
        })
    }

    /// A relay chain on domain `d`: the publisher on `/hop_0`, relays from
    /// `/hop_k` to `/hop_{k+1}`, and a sink on `/hop_4` adding to `sum`
    /// (the relay benchmark's single-threaded chain, with the source
    /// outside the executor).
    fn relay(d: u32) -> Result<InProcess, IcountError> {
        InProcess::build(d, "/hop_0", |node, sum| {
            (0..RELAY_HOPS)
                .map(|k| {
                    let topic = format!("/hop_{k}");
                    if k + 1 == RELAY_HOPS {
                        return node
                            .create_subscription(&topic, RIG_QOS, adder(sum))
                            .map_err(err);
                    }
                    let out = node
                        .create_publisher::<Icount64>(&format!("/hop_{}", k + 1), RIG_QOS)
                        .map_err(err)?;
                    node.create_subscription(&topic, RIG_QOS, move |m: Icount64| {
                        let _ = out.publish(m);
                    })
                    .map_err(err)
                })
                .collect()
        })
    }

    /// A context and node on domain `d`, the publisher on `topic`, the
    /// subscriptions `subs` makes, and an executor with the node.
    fn build(
        d: u32,
        topic: &str,
        subs: impl FnOnce(
            &myelin::Node,
            &Arc<AtomicU64>,
        ) -> Result<Vec<myelin::Subscription<Icount64>>, IcountError>,
    ) -> Result<InProcess, IcountError> {
        let ctx = local_context(d)?;
        let node = ctx.create_node("icount").map_err(err)?;
        let publisher = node
            .create_publisher::<Icount64>(topic, RIG_QOS)
            .map_err(err)?;
        let sum = Arc::new(AtomicU64::new(0));
        let subs = subs(&node, &sum)?;
        let mut exec = Executor::new();
        exec.add_node(&node).map_err(err)?;
        Ok(InProcess {
            publisher,
            exec,
            sum,
            _subs: subs,
            node,
            _ctx: ctx,
        })
    }
}

/// A callback adding each message's `seq` to `sum`.
fn adder(sum: &Arc<AtomicU64>) -> impl FnMut(Icount64) + Send + 'static {
    let sum = sum.clone();
    move |m: Icount64| {
        sum.fetch_add(m.seq, Ordering::Relaxed);
    }
}

/// Write one byte of every line of `sweep` (4 MiB): every line an
/// operation touched before leaves callgrind's simulated caches.
fn evict(sweep: &mut [u8]) {
    for i in (0..sweep.len()).step_by(64) {
        sweep[i] = sweep[i].wrapping_add(1);
    }
    std::hint::black_box(sweep);
}

fn check(ok: bool, name: &str) -> Result<(), IcountError> {
    if ok {
        Ok(())
    } else {
        Err(err(format!("{name}: the messages did not arrive")))
    }
}

/// Wait (up to 60 s: valgrind runs programs 20-50x slower) for `ready`.
fn wait(ready: impl Fn() -> bool, name: &str) -> Result<(), IcountError> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready() {
        if Instant::now() > deadline {
            return Err(err(format!("{name}: the endpoints did not match in 60 s")));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// Whether valgrind can run here; `Err` says why not.
pub fn valgrind_available() -> Result<(), String> {
    match Command::new("valgrind").arg("--version").output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!(
            "valgrind --version failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Err(format!(
            "valgrind is not installed ({e}); Debian/Ubuntu: apt-get install valgrind"
        )),
    }
}

/// Count every workload (each in a child process under callgrind);
/// `progress` hears a line per workload.
pub fn run(progress: impl FnMut(&str)) -> Result<Vec<IcountRow>, IcountError> {
    run_only(&[], progress)
}

/// [`run`] for the workloads named in `only` (all when it is empty), in
/// [`WORKLOADS`]' order; a name this build does not have is an error
/// before anything runs.
///
/// ```no_run
/// let rows = myelin_icount::run_only(&["dispatch 64B".to_string()], |_| {})?;
/// assert_eq!(rows[0].workload, "dispatch 64B");
/// # Ok::<(), myelin_icount::IcountError>(())
/// ```
pub fn run_only(
    only: &[String],
    mut progress: impl FnMut(&str),
) -> Result<Vec<IcountRow>, IcountError> {
    if let Some(name) = only.iter().find(|n| !WORKLOADS.contains(&n.as_str())) {
        return Err(IcountError::UnknownWorkload {
            name: name.clone(),
            known: WORKLOADS.iter().map(|w| w.to_string()).collect(),
        });
    }
    valgrind_available().map_err(IcountError::Valgrind)?;
    let shm_dir = private_dir()?;
    let rows = WORKLOADS
        .iter()
        .filter(|&&name| only.is_empty() || only.iter().any(|n| n == name))
        .map(|&name| {
            if counts_lines(name) {
                progress(&format!(
                    "{name}: simulating the caches over {COLD_ITERS} operations, twice"
                ));
                cold_rows(name, &shm_dir)
            } else {
                progress(&format!(
                    "{name}: counting {ITERS} operations under callgrind"
                ));
                let counts = callgrind(name, ITERS, &shm_dir, false)?;
                let instructions = counts.event("Ir").ok_or_else(|| no_summary(name))?;
                let units = ITERS * units_per_op(name);
                let row = |workload: String, n: u64| IcountRow {
                    workload,
                    iters: units,
                    instructions: n,
                    per_op: n as f64 / units as f64,
                };
                let mut rows = vec![
                    row(name.to_string(), instructions),
                    row(locked_name(name), counts.locked),
                ];
                if has_outside_row(name) {
                    rows.push(row(format!("{name}{OUTSIDE}"), counts.outside));
                }
                Ok(rows)
            }
        })
        .collect::<Result<Vec<_>, _>>()
        .map(|rows| rows.into_iter().flatten().collect());
    let _ = std::fs::remove_dir_all(&shm_dir);
    rows
}

/// A cold workload's rows: `iters` is the deliveries (or timer firings)
/// counted, `instructions` the lines they missed (with the sweep's own
/// misses taken out), `per_op` lines per delivery (firing); then its
/// [`CODE`] row, the lines of code the operation executes that the sweep
/// alone does not, per delivery, and its [`PAGES`] row, the pages those
/// lines are on.
fn cold_rows(name: &str, shm_dir: &Path) -> Result<Vec<IcountRow>, IcountError> {
    let missed = |sweep_only| -> Result<(u64, CodeLines), IcountError> {
        let c = callgrind(name, COLD_ITERS, shm_dir, sweep_only)?;
        let missed = ["ILmr", "DLmr", "DLmw"]
            .iter()
            .map(|e| c.event(e))
            .sum::<Option<u64>>()
            .ok_or_else(|| no_summary(name))?;
        Ok((missed, c.code_lines))
    };
    let ((with, code_with), (sweep, code_sweep)) = (missed(false)?, missed(true)?);
    // Fewer with the work than without it: something other than the work
    // changed between the runs; no figure rather than a wrong one (a 0
    // would also make the saved baseline unreadable).
    let lines = with.checked_sub(sweep).filter(|&n| n > 0).ok_or_else(|| {
        err(format!(
            "{name}: {with} lines missed with the work, {sweep} without"
        ))
    })?;
    let deliveries = COLD_ITERS * units_per_op(name);
    // Every operation runs the same path: the lines over the run are the
    // lines of one operation, shared among its deliveries.
    let code: Vec<_> = code_with.difference(&code_sweep).collect();
    let pages = code
        .iter()
        .map(|(object, line)| (object, line / (4096 / 64)))
        .collect::<std::collections::BTreeSet<_>>()
        .len() as u64;
    let code = code.len() as u64;
    let units = units_per_op(name);
    Ok(vec![
        IcountRow {
            workload: name.to_string(),
            iters: deliveries,
            instructions: lines,
            per_op: lines as f64 / deliveries as f64,
        },
        IcountRow {
            workload: format!("{name}{CODE}"),
            iters: units,
            instructions: code,
            per_op: code as f64 / units as f64,
        },
        IcountRow {
            workload: format!("{name}{PAGES}"),
            iters: units,
            instructions: pages,
            per_op: pages as f64 / units as f64,
        },
    ])
}

/// Lines of code executed: (object, address / 64).
type CodeLines = std::collections::BTreeSet<(String, u64)>;

fn no_summary(name: &str) -> IcountError {
    err(format!("{name}: no summary in callgrind's output"))
}

/// Run workload `name` for `iters` operations in a child process under
/// callgrind (with its cache simulation when it [counts lines](counts_lines)); returns
/// the counted region's event totals.
fn callgrind(
    name: &str,
    iters: u64,
    shm_dir: &Path,
    sweep_only: bool,
) -> Result<Counts, IcountError> {
    static RUNS: AtomicU64 = AtomicU64::new(0);
    let out = std::env::temp_dir().join(format!(
        "myelin_icount_{}_{}.out",
        std::process::id(),
        RUNS.fetch_add(1, Ordering::Relaxed)
    ));
    let mut cmd = Command::new("valgrind");
    cmd.args([
        "--tool=callgrind",
        "--collect-atstart=no",
        "--toggle-collect=myelin_icount_region",
    ]);
    if counts_lines(name) {
        // Fixed cache geometry (not the host's): the same lines miss on
        // every machine.
        cmd.args([
            "--cache-sim=yes",
            "--I1=32768,8,64",
            "--D1=32768,8,64",
            "--LL=1048576,16,64",
        ]);
    }
    // Counts per instruction address (to find the locked ones, or the
    // lines of code executed), written plainly (no name or position
    // compression).
    cmd.args([
        "--dump-instr=yes",
        "--compress-strings=no",
        "--compress-pos=no",
    ]);
    if sweep_only {
        cmd.env(SWEEP_ONLY_ENV, "1");
    }
    let result = cmd
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(std::env::current_exe()?)
        .env(ENV, format!("{name},{iters}"))
        .env("MYELIN_SHM_DIR", shm_dir)
        .env("MYELIN_LOG", "error")
        // The baseline x86-64 string functions on every machine.
        .env(
            "GLIBC_TUNABLES",
            "glibc.cpu.hwcaps=-AVX2,-AVX,-ERMS,-FSRM,-AVX512F,-AVX512VL,-AVX512BW,-EVEX,-BMI1,-BMI2,-LZCNT,-MOVBE,-RTM,-SSE4_1,-SSE4_2,-SSSE3,-POPCNT",
        )
        .output()?;
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    let _ = std::fs::remove_file(&out);
    if !result.status.success() {
        return Err(err(format!(
            "{name}: the workload failed under valgrind: {}{}",
            String::from_utf8_lossy(&result.stdout).trim(),
            tail(&String::from_utf8_lossy(&result.stderr), 12)
        )));
    }
    let mut counts = Counts::parse(&text);
    let exe = std::env::current_exe()?;
    let exe = exe.to_string_lossy();
    let unnamed = Unnamed::from_output(&exe, &String::from_utf8_lossy(&result.stdout));
    let executed = executed_by_address(&text, unnamed, |_| true);
    if counts_lines(name) {
        counts.code_lines = executed
            .into_keys()
            .map(|(object, addr)| (object.to_string(), addr / 64))
            .collect();
    } else {
        counts.locked = locked_executed(&executed)?;
        if has_outside_row(name) {
            let myelins = executed_by_address(&text, unnamed, |f| !is_harness(f));
            counts.outside = outside_hot_text(&myelins, &exe, &hot_text(&exe)?);
        }
    }
    Ok(counts)
}

/// What a workload prints (then its load address, in hex) so that the
/// parent can place the code callgrind could not name an object for.
const BASE_MARK: &str = "icount load base ";

/// Where this executable's first page is mapped (from `/proc/self/maps`).
///
/// callgrind names the object of an instruction by the `.text` section
/// alone: code in the executable's other text sections (the hot text,
/// `.text.hot`, that myelin's binaries link apart, see
/// `myelin_sync::hot`) comes out as object `???` at its run-time
/// address, which this base turns back into one of the file's.
fn load_base() -> Option<u64> {
    let exe = std::env::current_exe().ok()?;
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines().find_map(|l| {
        // "start-end perms offset dev inode path"
        let mut f = l.split_whitespace();
        let range = f.next()?;
        let offset = f.nth(1)?;
        let path = f.nth(2)?;
        (u64::from_str_radix(offset, 16).ok()? == 0 && std::path::Path::new(path) == exe)
            .then(|| u64::from_str_radix(range.split('-').next()?, 16).ok())
            .flatten()
    })
}

/// Code callgrind names no object for (`???`, at run-time addresses):
/// the executable's own, when its load base is known.
#[derive(Clone, Copy)]
struct Unnamed<'a> {
    exe: &'a str,
    base: u64,
}

impl<'a> Unnamed<'a> {
    /// From the workload's output (its [`BASE_MARK`] line).
    fn from_output(exe: &'a str, stdout: &str) -> Option<Self> {
        let base = stdout.lines().find_map(|l| l.strip_prefix(BASE_MARK))?;
        let base = u64::from_str_radix(base.trim().trim_start_matches("0x"), 16).ok()?;
        Some(Unnamed { exe, base })
    }
}

/// Locked instructions among those executed ([`executed_by_address`]):
/// the count of every instruction address whose disassembly (`objdump -d`
/// of its object) is a locked one, summed.
fn locked_executed(executed: &BTreeMap<(&str, u64), u64>) -> Result<u64, IcountError> {
    let mut total = 0;
    let objects: std::collections::BTreeSet<&str> = executed.keys().map(|(o, _)| *o).collect();
    for object in objects {
        let locked = locked_addresses(object)?;
        total += executed
            .range((object, 0)..=(object, u64::MAX))
            .filter(|((_, a), _)| locked.contains(a))
            .map(|(_, n)| n)
            .sum::<u64>();
    }
    Ok(total)
}

/// Instructions executed ([`executed_by_address`]) in the executable `exe`
/// outside its hot text, `hot` ([`hot_text`]).
fn outside_hot_text(
    executed: &BTreeMap<(&str, u64), u64>,
    exe: &str,
    hot: &std::ops::Range<u64>,
) -> u64 {
    executed
        .range((exe, 0)..=(exe, u64::MAX))
        .filter(|((_, a), _)| !hot.contains(a))
        .map(|(_, n)| n)
        .sum()
}

/// The addresses of `exe`'s `.text.hot` section; an error when it has
/// none (linked without the flag, the gate could not tell).
fn hot_text(exe: &str) -> Result<std::ops::Range<u64>, IcountError> {
    section_range(exe, ".text.hot")?.ok_or_else(|| {
        err(format!(
            "{exe} has no .text.hot section: linked without -z keep-text-section-prefix \
             (see myelin_sync::hot)"
        ))
    })
}

/// The addresses of section `name` of `object`, from `objdump -h` (`None`:
/// it has no such section).
fn section_range(object: &str, name: &str) -> Result<Option<std::ops::Range<u64>>, IcountError> {
    let headers = objdump(&["-h", object], "the hot text")?;
    Ok(section_in(&headers, name))
}

/// Section `name`'s address range in `objdump -h` output (`Idx Name Size
/// VMA LMA File-off Algn`, one section per line pair).
fn section_in(headers: &str, name: &str) -> Option<std::ops::Range<u64>> {
    headers.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.get(1) != Some(&name) {
            return None;
        }
        let size = u64::from_str_radix(f.get(2)?, 16).ok()?;
        let vma = u64::from_str_radix(f.get(3)?, 16).ok()?;
        Some(vma..vma.checked_add(size)?)
    })
}

/// Whether callgrind's function `name` is this crate's (a workload's loop
/// or callback, the region marker): the harness, not myelin.
fn is_harness(name: &str) -> bool {
    name.starts_with("myelin_icount")
}

/// (object, instruction address) -> executions, from the cost lines
/// (`0xADDR LINE COUNT`) of a callgrind output, of the functions whose
/// name `keep` accepts; the line after `calls=` is a call's inclusive
/// cost, not the call instruction's own. Code of object `???` is the
/// executable's, `unnamed`, when given.
fn executed_by_address<'a>(
    text: &'a str,
    unnamed: Option<Unnamed<'a>>,
    keep: impl Fn(&str) -> bool,
) -> BTreeMap<(&'a str, u64), u64> {
    let mut executed: BTreeMap<(&str, u64), u64> = BTreeMap::new();
    let (mut object, mut rebase, mut after_call, mut kept) = ("", 0, false, true);
    for line in text.lines() {
        if let Some(ob) = line.strip_prefix("ob=") {
            (object, rebase) = match (ob.trim(), unnamed) {
                ("???", Some(u)) => (u.exe, u.base),
                (ob, _) => (ob, 0),
            };
        } else if let Some(f) = line.strip_prefix("fn=") {
            kept = keep(f.trim());
        } else if line.starts_with("calls=") {
            after_call = true;
        } else if let Some(rest) = line.strip_prefix("0x") {
            if std::mem::take(&mut after_call) || !kept {
                continue;
            }
            let mut parts = rest.split_whitespace();
            let addr = parts.next().and_then(|a| u64::from_str_radix(a, 16).ok());
            let count = parts.nth(1).and_then(|c| c.parse::<u64>().ok());
            if let (Some(addr), Some(count)) = (addr, count) {
                let addr = addr.wrapping_sub(rebase);
                *executed.entry((object, addr)).or_default() += count;
            }
        }
    }
    executed
}

/// `objdump ARGS`' output; `what`: what it is needed for, in the error
/// when binutils is missing.
fn objdump(args: &[&str], what: &str) -> Result<String, IcountError> {
    let out = Command::new("objdump")
        .args(args)
        .output()
        .map_err(|e| err(format!("objdump (binutils) is needed to find {what}: {e}")))?;
    if !out.status.success() {
        return Err(err(format!(
            "objdump {}: {}",
            args.join(" "),
            tail(&String::from_utf8_lossy(&out.stderr), 4)
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The addresses of `object`'s locked instructions, from `objdump -d`.
fn locked_addresses(object: &str) -> Result<std::collections::HashSet<u64>, IcountError> {
    Ok(
        objdump(&["-d", "--no-show-raw-insn", object], "locked instructions")?
            .lines()
            .filter_map(|l| {
                let (addr, insn) = l.trim_start().split_once(":\t")?;
                let addr = u64::from_str_radix(addr, 16).ok()?;
                is_locked(insn.trim()).then_some(addr)
            })
            .collect(),
    )
}

/// Whether an instruction (objdump's AT&T text, e.g. `lock cmpxchg
/// %rsi,0x18(%rbx)`) is a locked one: a `lock` prefix, an `xchg` with a
/// memory operand (implicitly locked), or `mfence`.
fn is_locked(insn: &str) -> bool {
    let mut words = insn.split_whitespace();
    match words.next() {
        Some("lock") => true,
        Some(m) if m.starts_with("xchg") => words.next().is_some_and(|ops| ops.contains('(')),
        Some("mfence") => true,
        _ => false,
    }
}

/// A private shared-memory directory for the workloads (nothing else's
/// segments to look at, nothing left in `/dev/shm`).
fn private_dir() -> Result<PathBuf, IcountError> {
    let dir = std::env::temp_dir().join(format!("myelin_icount_shm_{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
    Ok(dir)
}

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    let from = lines.len().saturating_sub(n);
    let mut out = String::new();
    for l in &lines[from..] {
        out.push_str("\n  ");
        out.push_str(l);
    }
    out
}

/// The event totals of a callgrind output file: its `events:` line names
/// them, its `summary:` (or `totals:`) line counts them.
struct Counts {
    names: Vec<String>,
    values: Vec<u64>,
    /// Locked instructions executed (0 where not counted).
    locked: u64,
    /// Lines of code executed (cold workloads only).
    code_lines: CodeLines,
    /// Instructions executed outside the hot text ([`OUTSIDE`]; 0 where
    /// not counted).
    outside: u64,
}

impl Counts {
    fn parse(text: &str) -> Counts {
        let line = |key: &str| text.lines().find_map(|l| l.strip_prefix(key));
        let names = line("events:")
            .map(|l| l.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default();
        let values = line("summary:")
            .or_else(|| line("totals:"))
            // A token that is not a count leaves no values (rather than
            // shifting the later ones onto the wrong events).
            .and_then(|l| l.split_whitespace().map(|v| v.parse().ok()).collect())
            .unwrap_or_default();
        Counts {
            names,
            values,
            locked: 0,
            code_lines: CodeLines::new(),
            outside: 0,
        }
    }

    /// The total of `event` (`Ir`, `DLmr`, ...). callgrind leaves out
    /// trailing zero counts, so an event it named and did not count is 0.
    fn event(&self, event: &str) -> Option<u64> {
        if self.values.is_empty() {
            return None;
        }
        let i = self.names.iter().position(|n| n == event)?;
        Some(self.values.get(i).copied().unwrap_or(0))
    }
}

/// How a row compares with the baseline.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Within the tolerance (the ratio to the baseline).
    Within(f64),
    /// Grew beyond the tolerance.
    Grew(f64),
    /// Shrank beyond the tolerance: update the baseline to keep the gain.
    Shrank(f64),
    /// Not in the baseline.
    New,
    /// Reported only (see [`gated`]): the ratio to the baseline.
    NotGated(f64),
}

/// Compare `rows` with `baseline`; `tolerance` is a fraction (0.05: 5%).
pub fn compare(rows: &[IcountRow], baseline: &Baseline, tolerance: f64) -> Vec<Verdict> {
    rows.iter()
        .map(|r| match baseline.get(&r.workload) {
            None => Verdict::New,
            Some(&b) => {
                // A path with no locked instruction: any is growth.
                let ratio = match (b, r.per_op) {
                    (0.0, 0.0) => 1.0,
                    (0.0, _) => f64::INFINITY,
                    _ => r.per_op / b,
                };
                if !gated(&r.workload) {
                    Verdict::NotGated(ratio)
                } else if ratio > 1.0 + tolerance {
                    Verdict::Grew(ratio)
                } else if ratio < 1.0 - tolerance {
                    Verdict::Shrank(ratio)
                } else {
                    Verdict::Within(ratio)
                }
            }
        })
        .collect()
}

/// Read a baseline file (JSON: workload -> instructions per operation).
pub fn load_baseline(path: &Path) -> Result<Baseline, IcountError> {
    let bad = |reason: String| IcountError::Baseline {
        path: path.to_path_buf(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let baseline: Baseline =
        serde_json::from_str(&text).map_err(|e| bad(format!("not valid: {e}")))?;
    // Instruction counts are positive; a locked-instruction count may be
    // 0 (a path without any), and so may an outside-hot-text one.
    let may_be_zero = |k: &str| k.ends_with(LOCKED) || k.ends_with(OUTSIDE);
    let valid = |k: &str, v: f64| v.is_finite() && (v > 0.0 || (v == 0.0 && may_be_zero(k)));
    match baseline.iter().find(|(k, v)| !valid(k, **v)) {
        Some((k, v)) => Err(bad(format!("{k:?}: {v} is not a positive count"))),
        None => Ok(baseline),
    }
}

/// Check a tolerance given in percent; returns it as a fraction.
pub fn tolerance(percent: f64) -> Result<f64, IcountError> {
    let t = percent / 100.0;
    if t.is_finite() && (0.0..=10.0).contains(&t) {
        Ok(t)
    } else {
        Err(IcountError::Tolerance(percent))
    }
}

/// The gate: an error naming every gated workload whose count grew past
/// `tolerance` (a fraction) over `baseline`, or that the baseline lacks.
pub fn gate(rows: &[IcountRow], baseline: &Baseline, tolerance: f64) -> Result<(), IcountError> {
    let verdicts = compare(rows, baseline, tolerance);
    let missing: Vec<String> = rows
        .iter()
        .zip(&verdicts)
        .filter(|(r, v)| **v == Verdict::New && gated(&r.workload))
        .map(|(r, _)| r.workload.clone())
        .collect();
    if !missing.is_empty() {
        return Err(IcountError::NotInBaseline(missing));
    }
    let grew: Vec<String> = rows
        .iter()
        .zip(verdicts)
        .filter_map(|(r, v)| match v {
            Verdict::Grew(x) => Some(format!("{} ({:+.1}%)", r.workload, (x - 1.0) * 100.0)),
            _ => None,
        })
        .collect();
    if grew.is_empty() {
        Ok(())
    } else {
        Err(IcountError::Grew { tolerance, grew })
    }
}

/// A fraction as the percentage a user would have typed (0.07 -> "7",
/// 0.025 -> "2.5"), without the float noise of `x * 100.0`.
fn percent(fraction: f64) -> String {
    let s = format!("{:.3}", fraction * 100.0);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Write the baseline `rows` make to `path` (pretty JSON). With `update`
/// (a run of some workloads), the rows of the baseline already in `path`
/// that this run did not count stay as they were (a missing file starts
/// empty; a corrupt one is refused, not overwritten); without, `path`
/// holds this run's rows only.
///
/// ```
/// use myelin_icount::{IcountRow, load_baseline, save_baseline};
/// let path = std::env::temp_dir().join(format!("icount_doc_{}.json", std::process::id()));
/// let row = |w: &str, per_op| IcountRow { workload: w.into(), iters: 1, instructions: 1, per_op };
/// save_baseline(&path, &[row("a", 10.0), row("b", 20.0)], false)?;
/// save_baseline(&path, &[row("b", 21.0)], true)?;
/// let b = load_baseline(&path)?;
/// assert_eq!((b["a"], b["b"]), (10.0, 21.0));
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn save_baseline(path: &Path, rows: &[IcountRow], update: bool) -> Result<(), IcountError> {
    let mut baseline = if update && path.exists() {
        load_baseline(path)?
    } else {
        Baseline::new()
    };
    baseline.extend(baseline_of(rows));
    let json = serde_json::to_string_pretty(&baseline).map_err(std::io::Error::other)?;
    std::fs::write(path, json + "\n")?;
    Ok(())
}

/// The baseline a run makes.
pub fn baseline_of(rows: &[IcountRow]) -> Baseline {
    rows.iter()
        .map(|r| (r.workload.clone(), (r.per_op * 10.0).round() / 10.0))
        .collect()
}

/// The rows as a table, with the baseline's column where there is one.
pub fn render(rows: &[IcountRow], baseline: Option<&Baseline>, tolerance: f64) -> String {
    // The longest name sets the first column ("shm loan+take 64B outside
    // hot text" is 36).
    let w = rows
        .iter()
        .map(|r| r.workload.len())
        .max()
        .unwrap_or(0)
        .max(26);
    let mut out = format!(
        "{:<w$} {:>10} {:>16} {:>14} {:>14} {:>8}  verdict\n",
        "workload", "ops", "instructions", "per op", "baseline", "ratio"
    );
    out.push_str(&"-".repeat(76 + w));
    out.push('\n');
    let verdicts = baseline.map(|b| compare(rows, b, tolerance));
    for (i, r) in rows.iter().enumerate() {
        let base = baseline
            .and_then(|b| b.get(&r.workload))
            .map_or("-".to_string(), |b| format!("{b:.1}"));
        let (ratio, verdict) = match verdicts.as_ref().map(|v| &v[i]) {
            None => ("-".to_string(), String::new()),
            Some(Verdict::Within(x)) => (format!("{x:.3}"), "ok".into()),
            Some(Verdict::Grew(x)) => (
                format!("{x:.3}"),
                format!("GREW more than {:.0}%", tolerance * 100.0),
            ),
            Some(Verdict::Shrank(x)) => (
                format!("{x:.3}"),
                "shrank: update the baseline to keep the gain".into(),
            ),
            Some(Verdict::New) => ("-".to_string(), "new: not in the baseline".into()),
            Some(Verdict::NotGated(x)) => (
                format!("{x:.3}"),
                format!(
                    "not gated ({})",
                    not_gated_because(&r.workload).unwrap_or("reported only")
                ),
            ),
        };
        out.push_str(&format!(
            "{:<w$} {:>10} {:>16} {:>14.1} {:>14} {:>8}  {}\n",
            r.workload, r.iters, r.instructions, r.per_op, base, ratio, verdict
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, per_op: f64) -> IcountRow {
        IcountRow {
            workload: name.into(),
            iters: 10,
            instructions: (per_op * 10.0) as u64,
            per_op,
        }
    }

    #[test]
    fn a_count_that_grew_past_the_tolerance_is_a_regression_and_one_within_is_not() {
        let base: Baseline = [("a".to_string(), 1000.0), ("b".to_string(), 1000.0)]
            .into_iter()
            .collect();
        let v = compare(
            &[row("a", 1049.0), row("b", 1051.0), row("c", 5.0)],
            &base,
            0.05,
        );
        assert!(matches!(v[0], Verdict::Within(_)));
        assert!(matches!(v[1], Verdict::Grew(r) if r > 1.05));
        assert_eq!(v[2], Verdict::New);
        let v = compare(&[row("a", 900.0)], &base, 0.05);
        assert!(matches!(v[0], Verdict::Shrank(_)));
        let base: Baseline = [("zenoh publish 64B".to_string(), 1000.0)]
            .into_iter()
            .collect();
        let v = compare(&[row("zenoh publish 64B", 2000.0)], &base, 0.05);
        assert!(matches!(v[0], Verdict::NotGated(_)));
    }

    #[test]
    fn the_gate_names_every_workload_that_grew_and_passes_the_rest() {
        let base: Baseline = [("a".to_string(), 1000.0), ("b".to_string(), 1000.0)]
            .into_iter()
            .collect();
        assert!(gate(&[row("a", 1049.0), row("b", 900.0)], &base, 0.05).is_ok());
        let e = gate(&[row("a", 1100.0), row("b", 1200.0)], &base, 0.05).unwrap_err();
        assert_eq!(
            e.to_string(),
            "instruction counts grew more than 5%: a (+10.0%), b (+20.0%)"
        );
        // The tolerance as typed, not as float arithmetic leaves it.
        let e = gate(&[row("a", 1100.0)], &base, 0.07).unwrap_err();
        assert!(e.to_string().contains("more than 7%:"), "{e}");
        // A gated workload the baseline lacks fails the gate.
        let e = gate(&[row("a", 1000.0), row("c", 5.0)], &base, 0.05).unwrap_err();
        assert_eq!(
            e.to_string(),
            "not in the baseline: c (add them: --save-baseline FILE --workload NAME)"
        );
        assert!(tolerance(5.0).is_ok_and(|t| (t - 0.05).abs() < 1e-12));
        assert!(tolerance(1000.0).is_ok());
        assert!(tolerance(-1.0).is_err() && tolerance(f64::INFINITY).is_err());
    }

    #[test]
    fn an_update_keeps_the_rows_it_did_not_count_and_refuses_a_corrupt_file() {
        let path = std::env::temp_dir().join(format!("icount_update_{}.json", std::process::id()));
        save_baseline(&path, &[row("a", 10.0), row("b", 20.0)], false).unwrap();
        save_baseline(&path, &[row("b", 21.0), row("c", 5.0)], true).unwrap();
        let b = load_baseline(&path).unwrap();
        assert_eq!(b.len(), 3);
        assert_eq!((b["a"], b["b"], b["c"]), (10.0, 21.0, 5.0));
        // Without `update` the file holds the run's rows only.
        save_baseline(&path, &[row("c", 6.0)], false).unwrap();
        assert_eq!(load_baseline(&path).unwrap().len(), 1);
        std::fs::write(&path, "{ not json").unwrap();
        let e = save_baseline(&path, &[row("a", 1.0)], true).unwrap_err();
        assert!(e.to_string().contains("not valid"), "{e}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{ not json");
        // A file that is not there yet starts empty.
        std::fs::remove_file(&path).unwrap();
        save_baseline(&path, &[row("a", 1.0)], true).unwrap();
        assert_eq!(load_baseline(&path).unwrap().len(), 1);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn locked_instructions_are_told_from_the_others() {
        for locked in [
            "lock cmpxchg %rsi,0x18(%rbx)",
            "lock orq $0x0,(%rsp)",
            "xchg   %al,0x40(%rbx)",
            "mfence",
        ] {
            assert!(is_locked(locked), "{locked}");
        }
        for plain in [
            "xchg   %ax,%ax",
            "xchg %rax,%rbx",
            "mov 0x8(%rdi),%rax",
            "cmpxchg8b",
        ] {
            assert!(!is_locked(plain), "{plain}");
        }
    }

    #[test]
    fn executions_are_read_per_address_without_the_calls_inclusive_costs() {
        let text = "\
ob=/bin/a
fn=f
0x10 3 5
calls=1 0x40 9
0x14 4 100
0x18 5 5
ob=/lib/b
fn=g
0x10 1 7
";
        let e = executed_by_address(text, None, |_| true);
        assert_eq!(e.get(&("/bin/a", 0x10)), Some(&5));
        assert_eq!(e.get(&("/bin/a", 0x14)), None, "a call's inclusive cost");
        assert_eq!(e.get(&("/bin/a", 0x18)), Some(&5));
        assert_eq!(e.get(&("/lib/b", 0x10)), Some(&7));
        // Without one function's code (the harness's, for the outside row).
        let e = executed_by_address(text, None, |f| f != "g");
        assert_eq!(e.get(&("/bin/a", 0x10)), Some(&5));
        assert_eq!(e.get(&("/lib/b", 0x10)), None);
        assert!(is_harness("myelin_icount::workload::{{closure}}"));
        assert!(is_harness("myelin_icount_region"));
        assert!(!is_harness("myelin_core::publisher::Publisher<T>::publish"));
    }

    #[test]
    fn code_callgrind_names_no_object_for_is_the_executables_at_its_file_address() {
        let text = "\
ob=/bin/a
fn=f
0x10 3 5
ob=???
fn=hot
0x108040 1 7
";
        let out = "icount load base 0x108000\n";
        let unnamed = Unnamed::from_output("/bin/a", out);
        let e = executed_by_address(text, unnamed, |_| true);
        assert_eq!(e.get(&("/bin/a", 0x10)), Some(&5));
        assert_eq!(e.get(&("/bin/a", 0x40)), Some(&7), "{e:?}");
        // Without the base, the unnamed code stays apart, as callgrind
        // wrote it.
        let e = executed_by_address(text, None, |_| true);
        assert_eq!(e.get(&("???", 0x108040)), Some(&7));
    }

    #[test]
    fn a_section_is_found_in_objdumps_headers_and_a_missing_one_is_none() {
        let headers = "\
Sections:
Idx Name          Size      VMA               LMA               File off  Algn
 16 .text         01497b6c  0000000000682480  0000000000682480  00681480  2**6
                  CONTENTS, ALLOC, LOAD, READONLY, CODE
 20 .text.hot     0006ac68  0000000001bf68b0  0000000001bf68b0  01bf58b0  2**4
                  CONTENTS, ALLOC, LOAD, READONLY, CODE
";
        assert_eq!(
            section_in(headers, ".text.hot"),
            Some(0x1bf68b0..0x1bf68b0 + 0x6ac68)
        );
        assert_eq!(section_in(headers, ".text.unlikely"), None);
        assert_eq!(section_in("garbage\n 1 .text.hot zz 10", ".text.hot"), None);
    }

    #[test]
    fn the_instructions_outside_the_hot_text_are_the_executables_others() {
        let hot = 0x1000..0x2000;
        let executed: BTreeMap<(&str, u64), u64> = [
            (("/bin/a", 0x1000), 5),
            (("/bin/a", 0x1fff), 6),
            (("/bin/a", 0x2000), 7),
            (("/bin/a", 0xfff), 11),
            (("/lib/libc.so.6", 0x10), 13),
        ]
        .into();
        assert_eq!(outside_hot_text(&executed, "/bin/a", &hot), 18);
    }

    #[test]
    fn a_workload_finds_its_own_load_base() {
        let base = load_base().expect("this test's executable is in /proc/self/maps");
        let here = load_base as fn() -> Option<u64> as usize as u64;
        assert!(
            base <= here && base.is_multiple_of(4096),
            "{base:#x} {here:#x}"
        );
    }

    #[test]
    fn a_locked_instruction_where_there_were_none_is_growth() {
        let base: Baseline = [("cdr encode Image locked".to_string(), 0.0)].into();
        assert_eq!(
            compare(&[row("cdr encode Image locked", 0.0)], &base, 0.05),
            vec![Verdict::Within(1.0)]
        );
        assert!(gate(&[row("cdr encode Image locked", 0.5)], &base, 0.05).is_err());
        // One more on ten is past 5%.
        let base: Baseline = [("dispatch 64B locked".to_string(), 10.0)].into();
        assert!(gate(&[row("dispatch 64B locked", 11.0)], &base, 0.05).is_err());
    }

    #[test]
    fn callgrind_summary_lines_are_read() {
        let ir = |text: &str| Counts::parse(text).event("Ir");
        assert_eq!(ir("events: Ir\nsummary: 1634450\n"), Some(1634450));
        assert_eq!(ir("events: Ir\ntotals: 42\n"), Some(42));
        assert_eq!(ir("events: Ir\n"), None);
        // The cache simulation's events, found by name; an event left
        // out at the end of the line counted nothing.
        let c = Counts::parse(
            "events: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw\nsummary: 100 40 30 2 9 4 1 7 3\n",
        );
        assert_eq!(
            (c.event("ILmr"), c.event("DLmr"), c.event("DLmw")),
            (Some(1), Some(7), Some(3))
        );
        assert_eq!(c.event("Bogus"), None);
        let short = Counts::parse("events: Ir ILmr DLmr DLmw\nsummary: 100 5\n");
        assert_eq!(
            (short.event("ILmr"), short.event("DLmw")),
            (Some(5), Some(0))
        );
        let garbled = Counts::parse("events: Ir ILmr DLmr\nsummary: 100 x 7\n");
        assert_eq!(
            garbled.event("DLmr"),
            None,
            "no count moved onto another event"
        );
    }

    #[test]
    fn the_cold_workload_is_reported_not_gated() {
        assert!(!gated(COLD) && !gated("zenoh publish 64B") && gated("dispatch 64B"));
        // The code lines of every cold workload are reported, not gated.
        for cold in [COLD, COLD_ONE, COLD_TIMERS, COLD_RELAY] {
            assert!(
                counts_lines(cold)
                    && !gated(&format!("{cold}{CODE}"))
                    && !gated(&format!("{cold}{PAGES}")),
                "{cold}"
            );
        }
        assert!(!gated(COLD_RELAY) && gated(RELAY) && counts_lines(COLD_RELAY));
        assert!(gated(RELAY_TURNS) && units_per_op(RELAY_TURNS) == RELAY_HOPS);
        // The relay rows are per hop, the cold ones per delivery.
        assert_eq!(
            (
                units_per_op(RELAY),
                units_per_op(COLD),
                units_per_op("dispatch 64B")
            ),
            (RELAY_HOPS, COLD_SUBS, 1)
        );
        let base: Baseline = [(COLD.to_string(), 8.0)].into();
        assert_eq!(
            compare(&[row(COLD, 12.0)], &base, 0.05),
            vec![Verdict::NotGated(1.5)]
        );
        assert!(gate(&[row(COLD, 12.0)], &base, 0.05).is_ok());
        assert!(render(&[row(COLD, 12.0)], Some(&base), 0.05).contains("lines per delivery"));
    }
}

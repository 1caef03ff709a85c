//! Seed 002's relay chain: Source => Relay_0 .. Relay_{n-2} => Sink, one
//! topic per hop. Per-hop latency = end-to-end latency / hops.
//!
//! `--hops` counts message transfers (topics): `--hops 5` is Source, four
//! relays and Sink. Relays receive the message by value and publish it on,
//! so myelin moves it through the chain without a copy.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use myelin::MultiThreadedExecutor;
use myelin::prelude::*;

use super::{
    BenchError, Job, Meter, Outcome, STAMPED_HEADER, Stamped, System, now_ns, period_of,
    rate_label, size_label, sleep_until, warmup_for,
};
use crate::harness::stats::LatencyRecorder;

/// Parameters of the relay chain.
#[derive(Debug, Clone, Copy)]
pub struct RelayParams {
    /// Message transfers from source to sink (1..=64).
    pub hops: u32,
    /// Source rate in Hz.
    pub rate: f64,
    /// Messages measured (a warm-up is added and excluded).
    pub count: u64,
    /// Message size in bytes (16 B .. 64 MiB).
    pub size: usize,
}

/// The largest message the benchmarks accept.
pub const MAX_SIZE: usize = 64 << 20;

impl RelayParams {
    /// Check the parameters; errors name the flag.
    pub fn validate(&self) -> Result<(), BenchError> {
        period_of(self.rate)?;
        if !(1..=64).contains(&self.hops) {
            return Err(BenchError::InvalidArg {
                flag: "hops",
                reason: format!("{}: must be 1 to 64", self.hops),
            });
        }
        if self.count == 0 {
            return Err(BenchError::InvalidArg {
                flag: "count",
                reason: "must be at least 1".into(),
            });
        }
        if !(STAMPED_HEADER..=MAX_SIZE).contains(&self.size) {
            return Err(BenchError::InvalidArg {
                flag: "size",
                reason: format!(
                    "{} bytes does not fit: must be {STAMPED_HEADER} (the timestamp header) to {MAX_SIZE}",
                    self.size
                ),
            });
        }
        Ok(())
    }

    fn config(&self, arrangement: &str) -> String {
        format!(
            "{arrangement} {} {}",
            rate_label(self.rate),
            size_label(self.size)
        )
    }

    fn total(&self) -> u64 {
        self.count + warmup_for(self.count)
    }

    /// How long to wait for the last message before calling it lost.
    fn patience(&self) -> Duration {
        Duration::from_secs_f64(self.total() as f64 / self.rate * 1.5) + Duration::from_secs(10)
    }
}

/// Plan the relay jobs for the chosen systems.
pub fn plan(p: RelayParams, systems: &[System]) -> Result<Vec<Job>, BenchError> {
    p.validate()?;
    let mut jobs = Vec::new();
    for s in systems {
        match s {
            System::Myelin => {
                for a in [
                    Arrangement::SingleThreaded,
                    Arrangement::ThreadPerNode,
                    Arrangement::MultiThreaded2,
                    Arrangement::Inline,
                ] {
                    jobs.push(Job::new(
                        format!("relay/myelin/{}", p.config(a.name())),
                        move || myelin_chain(p, a),
                    ));
                }
            }
            System::Channel => {
                jobs.push(Job::new(
                    format!("relay/channel/{}", p.config("thread-per-stage")),
                    move || channel_chain(p),
                ));
            }
            System::Zenoh => {
                #[cfg(feature = "zenoh")]
                for mode in [
                    super::zenoh_peer::Sessions::Shared,
                    super::zenoh_peer::Sessions::PerNode,
                ] {
                    jobs.push(Job::new(
                        format!("relay/zenoh/{}", p.config(mode.name())),
                        move || zenoh_chain(p, mode),
                    ));
                }
            }
            System::Grpc | System::Iceoryx2 | System::CycloneDds => {} // rpc / ipc only
            System::Raw => {
                for mode in [super::raw::Handoff::Spin, super::raw::Handoff::Futex] {
                    jobs.push(Job::new(format!("relay/raw/{}", mode.name()), move || {
                        super::raw::handoff("relay", mode, p.rate, p.count)
                    }));
                }
            }
        }
    }
    Ok(jobs)
}

/// Collects sink samples, dropping the warm-up.
struct Sink {
    warmup: u64,
    samples: Mutex<Vec<(u64, u64, u64)>>,
    received: AtomicU64,
}

impl Sink {
    fn new(p: &RelayParams) -> Arc<Self> {
        Arc::new(Sink {
            warmup: warmup_for(p.count),
            samples: Mutex::new(Vec::with_capacity(p.total() as usize)),
            received: AtomicU64::new(0),
        })
    }

    fn on_message(&self, m: &Stamped) {
        let lat = now_ns().saturating_sub(m.stamp_ns);
        self.samples
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((m.seq, m.stamp_ns, lat));
        self.received.fetch_add(1, Ordering::Release);
    }

    #[cfg(feature = "zenoh")]
    fn on_stamp(&self, seq: u64, stamp: u64) {
        let lat = now_ns().saturating_sub(stamp);
        self.samples
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((seq, stamp, lat));
        self.received.fetch_add(1, Ordering::Release);
    }

    fn received(&self) -> u64 {
        self.received.load(Ordering::Acquire)
    }

    fn recorder(&self, t0_ns: u64) -> LatencyRecorder {
        let mut rec = LatencyRecorder::with_time_series();
        let samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        for &(seq, stamp, lat) in samples.iter() {
            if seq >= self.warmup {
                rec.record_at(stamp.saturating_sub(t0_ns) as f64 / 1e9, lat);
            }
        }
        rec
    }
}

/// How myelin runs the chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrangement {
    /// Every node on one single-threaded executor.
    SingleThreaded,
    /// Every node on its own executor and thread (rclcpp#1772's ask).
    ThreadPerNode,
    /// Relays and sink with inline subscriptions: the whole chain runs in the
    /// source's publish call.
    Inline,
    /// Every node on one multi-threaded executor with 2 workers.
    MultiThreaded2,
}

impl Arrangement {
    /// The config name.
    pub fn name(self) -> &'static str {
        match self {
            Arrangement::SingleThreaded => "single-threaded",
            Arrangement::ThreadPerNode => "thread-per-node",
            Arrangement::Inline => "inline",
            Arrangement::MultiThreaded2 => "multi-threaded-2",
        }
    }
}

fn myelin_chain(p: RelayParams, arrangement: Arrangement) -> Result<Outcome, BenchError> {
    let thread_per_node = arrangement == Arrangement::ThreadPerNode;
    let opts = if arrangement == Arrangement::Inline {
        SubscriptionOptions::inline()
    } else {
        SubscriptionOptions::default()
    };
    let system = "myelin";
    let setup = |e: &dyn std::fmt::Display| BenchError::setup(system, e);
    let ctx = Context::builder()
        .handle_signals(false)
        .shared_memory(false)
        .build()
        .map_err(|e| setup(&e))?;
    let qos = QoS::keep_last(100);
    let sink = Sink::new(&p);
    let total = p.total();
    let hops = p.hops as usize;

    let mut nodes = Vec::new();
    let mut keep_subs = Vec::new();
    // Relays and sink first, so the chain exists before the source starts.
    for i in 0..hops {
        let last = i + 1 == hops;
        let name = if last {
            "sink".to_string()
        } else {
            format!("relay_{i}")
        };
        let node = ctx.create_node(&name).map_err(|e| setup(&e))?;
        let topic = format!("hop_{i}");
        if last {
            let s = sink.clone();
            keep_subs.push(
                node.create_subscription_with(&topic, qos, opts.clone(), move |m: Stamped| {
                    s.on_message(&m)
                })
                .map_err(|e| setup(&e))?,
            );
        } else {
            let out = node
                .create_publisher::<Stamped>(&format!("hop_{}", i + 1), qos)
                .map_err(|e| setup(&e))?;
            keep_subs.push(
                node.create_subscription_with(&topic, qos, opts.clone(), move |m: Stamped| {
                    let _ = out.publish(m);
                })
                .map_err(|e| setup(&e))?,
            );
        }
        nodes.push(node);
    }
    let source = ctx.create_node("source").map_err(|e| setup(&e))?;
    let out = source
        .create_publisher::<Stamped>("hop_0", qos)
        .map_err(|e| setup(&e))?;
    let mut seq = 0u64;
    let size = p.size;
    let _timer = source
        .create_timer(period_of(p.rate)?, move || {
            if seq < total {
                let mut m = Stamped::with_size(seq, size);
                m.stamp_ns = now_ns();
                let _ = out.publish(m);
                seq += 1;
            }
        })
        .map_err(|e| setup(&e))?;
    nodes.push(source);

    let meter = Meter::start();
    let t0 = now_ns();
    let patience = p.patience();
    if arrangement == Arrangement::MultiThreaded2 {
        let mut exec = MultiThreadedExecutor::new(2);
        for n in &nodes {
            exec.add_node(n).map_err(|e| setup(&e))?;
        }
        let s = sink.clone();
        exec.spin_until(patience, move || s.received() >= total)
            .map_err(|e| setup(&e))?;
    } else if !thread_per_node {
        let mut exec = Executor::new();
        for n in &nodes {
            exec.add_node(n).map_err(|e| setup(&e))?;
        }
        let s = sink.clone();
        exec.spin_until(patience, || s.received() >= total)
            .map_err(|e| setup(&e))?;
    } else {
        let mut handles = Vec::new();
        let mut stops = Vec::new();
        for n in &nodes {
            let mut exec = Executor::new();
            exec.add_node(n).map_err(|e| setup(&e))?;
            stops.push(exec.stop_handle());
            handles.push(std::thread::spawn(move || exec.spin()));
        }
        let deadline = Instant::now() + patience;
        while sink.received() < total && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        for s in &stops {
            s.stop();
        }
        for h in handles {
            h.join()
                .map_err(|_| setup(&"executor thread panicked"))?
                .map_err(|e| setup(&e))?;
        }
    }
    let received = sink.received();
    let rec = sink.recorder(t0);
    let deliveries = received * u64::from(p.hops);
    Ok(meter.finish(
        "relay",
        system,
        p.config(arrangement.name()),
        rec,
        deliveries,
        total - received,
        Some(p.hops),
        vec![],
    ))
}

fn channel_chain(p: RelayParams) -> Result<Outcome, BenchError> {
    let total = p.total();
    let sink = Sink::new(&p);
    let (first_tx, mut rx) = crossbeam_channel::unbounded::<Stamped>();
    let mut handles = Vec::new();
    for _ in 0..p.hops - 1 {
        let (tx, next_rx) = crossbeam_channel::unbounded::<Stamped>();
        let my_rx = std::mem::replace(&mut rx, next_rx);
        handles.push(std::thread::spawn(move || {
            for m in my_rx {
                if tx.send(m).is_err() {
                    break;
                }
            }
        }));
    }
    let s = sink.clone();
    handles.push(std::thread::spawn(move || {
        for m in rx {
            s.on_message(&m);
        }
    }));
    let meter = Meter::start();
    let t0 = now_ns();
    let period = period_of(p.rate)?;
    let start = Instant::now();
    for seq in 0..total {
        sleep_until(start + period * (seq as u32 + 1));
        let mut m = Stamped::with_size(seq, p.size);
        m.stamp_ns = now_ns();
        if first_tx.send(m).is_err() {
            break;
        }
    }
    drop(first_tx);
    for h in handles {
        h.join()
            .map_err(|_| BenchError::setup("channel", "stage thread panicked"))?;
    }
    let received = sink.received();
    Ok(meter.finish(
        "relay",
        "channel",
        p.config("thread-per-stage"),
        sink.recorder(t0),
        received * u64::from(p.hops),
        total - received,
        Some(p.hops),
        vec![],
    ))
}

#[cfg(feature = "zenoh")]
fn zenoh_chain(p: RelayParams, mode: super::zenoh_peer::Sessions) -> Result<Outcome, BenchError> {
    use super::zenoh_peer as zp;
    use std::sync::atomic::AtomicBool;
    use zenoh::Wait;

    let err = |e: &dyn std::fmt::Display| BenchError::setup("zenoh", e);
    let hops = p.hops as usize;
    let total = p.total();
    let payload = p.size - STAMPED_HEADER;
    // Session 0 is the source, 1..hops-1 the relays, `hops` the sink.
    let sessions = zp::sessions(mode, hops + 1)?;
    let key = |i: usize| format!("myelin_bench/relay/hop_{i}");
    let sink = Sink::new(&p);
    let probe_seen = Arc::new(AtomicBool::new(false));
    let (s, ps) = (sink.clone(), probe_seen.clone());
    let mut keep = Vec::new();
    keep.push(
        sessions[hops]
            .declare_subscriber(key(hops - 1))
            .callback(move |sample| {
                if let Some((stamp, seq)) = zp::decode(&sample.payload().to_bytes()) {
                    if seq == zp::PROBE {
                        ps.store(true, Ordering::Release);
                    } else {
                        s.on_stamp(seq, stamp);
                    }
                }
            })
            .wait()
            .map_err(|e| err(&e))?,
    );
    for i in 0..hops - 1 {
        let out = zp::publisher(&sessions[i + 1], key(i + 1))?;
        keep.push(
            sessions[i + 1]
                .declare_subscriber(key(i))
                .callback(move |sample| {
                    // Forward the payload as is (reference counted, no copy).
                    let _ = out.put(sample.payload().clone()).wait();
                })
                .wait()
                .map_err(|e| err(&e))?,
        );
    }
    let source = zp::publisher(&sessions[0], key(0))?;
    zp::wait_until_routed(&source, &probe_seen, payload)?;

    let meter = Meter::start();
    let t0 = now_ns();
    let period = period_of(p.rate)?;
    let start = Instant::now();
    for seq in 0..total {
        sleep_until(start + period * (seq as u32 + 1));
        let bytes = zp::encode(now_ns(), seq, payload);
        source.put(bytes).wait().map_err(|e| err(&e))?;
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while sink.received() < total && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    let received = sink.received();
    let outcome = meter.finish(
        "relay",
        "zenoh",
        p.config(mode.name()),
        sink.recorder(t0),
        received * u64::from(p.hops),
        total.saturating_sub(received),
        Some(p.hops),
        vec!["zenoh peers, TCP on 127.0.0.1, scouting off; relays forward the payload".into()],
    );
    drop(keep);
    drop(sessions);
    Ok(outcome)
}

//! Running a graph's nodes in one process: build them from their plans,
//! publish stamped messages from timers, and count on every subscription
//! what iRobot's benchmark counts: `late` (above min(5 ms, 20% of the
//! period), not too late), `too_late` (above min(50 ms, the period);
//! excluded from the latency statistics) and `lost` (gaps in tracking
//! numbers).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use myelin::prelude::*;
use myelin::{Blob, Executor, IdleWait};
use serde::{Deserialize, Serialize};

use super::TopologyError;
use super::format::{HEADER, NodePlan};
use super::report::{SubResult, TopologyReport, report_of};
use crate::harness::stats::LatencyRecorder;
use crate::harness::sys::CpuSnapshot;

struct Tracker {
    period_ns: u64,
    received: u64,
    late: u64,
    too_late: u64,
    lost: u64,
    next_tracking: Option<u32>,
    rec: LatencyRecorder,
}

impl Tracker {
    fn new(period: Duration) -> Arc<Mutex<Tracker>> {
        Arc::new(Mutex::new(Tracker {
            period_ns: period.as_nanos() as u64,
            received: 0,
            late: 0,
            too_late: 0,
            lost: 0,
            next_tracking: None,
            rec: LatencyRecorder::with_time_series(),
        }))
    }

    fn on(&mut self, now: u64, stamp: u64, tracking: u32, freq: f32) {
        let lat = now.saturating_sub(stamp);
        let period = if freq > 0.0 {
            (1e9 / f64::from(freq)) as u64
        } else {
            self.period_ns
        };
        let late_at = (period / 5).min(5_000_000);
        let too_late_at = period.min(50_000_000);
        self.received += 1;
        if let Some(n) = self.next_tracking
            && tracking > n
        {
            self.lost += u64::from(tracking - n);
        }
        self.next_tracking = Some(tracking.wrapping_add(1));
        if lat > too_late_at {
            self.too_late += 1;
            return;
        }
        if lat > late_at {
            self.late += 1;
        }
        self.rec.record(lat);
    }
}

fn header_bytes(b: &mut [u8], stamp: u64, tracking: u32, freq: f32, size: u32) {
    b[0..8].copy_from_slice(&stamp.to_le_bytes());
    b[8..12].copy_from_slice(&tracking.to_le_bytes());
    b[12..16].copy_from_slice(&freq.to_le_bytes());
    b[16..20].copy_from_slice(&size.to_le_bytes());
}

/// What one process measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PartResult {
    /// Per subscription of this process's nodes.
    pub subscriptions: Vec<SubResult>,
    /// Every latency sample (ns) of on-time and late messages.
    pub samples: Vec<(f64, u64)>,
    /// CPU time of the process during the measurement (ns).
    pub cpu_ns: u64,
    /// Of it, time on executor threads in the runner's own code (ns):
    /// filling payloads, keeping the statistics, and the callbacks' busy
    /// work the topology asks for; the rest is myelin's (and the OS's).
    #[serde(default)]
    pub runner_ns: u64,
    /// Resident memory at the end (bytes).
    pub rss_bytes: u64,
    /// Seconds measured.
    pub elapsed_s: f64,
    /// Stopped early.
    pub interrupted: bool,
}

/// Build `mine` (a subset of `all`) on `ctx`, start publishing at
/// `start_at_ns` (monotonic clock, shared by every process of the host),
/// measure for `duration`; the executors wait as `idle` says.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_nodes(
    all: &[NodePlan],
    mine: &[usize],
    ctx: &Context,
    start_at_ns: u64,
    duration: Duration,
    idle: IdleWait,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(f64),
) -> Result<PartResult, TopologyError> {
    let err = |e: &dyn std::fmt::Display| TopologyError::Run(e.to_string());
    let mut nodes = Vec::new();
    let mut keep: Vec<Box<dyn std::any::Any>> = Vec::new();
    // (node, topic, message size, tracker, period) per subscription.
    type Tracked = (String, String, usize, Arc<Mutex<Tracker>>, Duration);
    let mut trackers: Vec<Tracked> = Vec::new();
    let mut periods: HashMap<String, (Duration, usize)> = HashMap::new();
    for n in all {
        for p in &n.publishers {
            periods.insert(p.topic.clone(), (p.period, p.size));
        }
    }
    let running = Arc::new(AtomicBool::new(false));
    // Time in the runner's own code on executor threads (ns).
    let runner_ns = Arc::new(AtomicU64::new(0));
    for &i in mine {
        let n = &all[i];
        let node = ctx
            .create_node_in(&n.name, &n.namespace)
            .map_err(|e| err(&e))?;
        for s in &n.subscribers {
            let (period, size) = periods[&s.topic];
            let t = Tracker::new(period);
            trackers.push((n.name.clone(), s.topic.clone(), size, t.clone(), period));
            let busy = s.callback;
            let on = running.clone();
            let spent = runner_ns.clone();
            keep.push(Box::new(
                node.create_subscription(&s.topic, s.qos, move |m: &Blob| {
                    let now = crate::harness::now_ns();
                    if m.len() >= HEADER && on.load(Ordering::Relaxed) {
                        let stamp = u64::from_le_bytes(m[0..8].try_into().expect("8"));
                        let tracking = u32::from_le_bytes(m[8..12].try_into().expect("4"));
                        let freq = f32::from_le_bytes(m[12..16].try_into().expect("4"));
                        t.lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .on(now, stamp, tracking, freq);
                    }
                    if !busy.is_zero() {
                        let until = Instant::now() + busy;
                        while Instant::now() < until {
                            std::hint::spin_loop();
                        }
                    }
                    spent.fetch_add(
                        crate::harness::now_ns().saturating_sub(now),
                        Ordering::Relaxed,
                    );
                })
                .map_err(|e| err(&e))?,
            ));
        }
        for p in &n.publishers {
            let publisher = node
                .create_publisher::<Blob>(&p.topic, p.qos)
                .map_err(|e| err(&e))?;
            let size = p.size;
            let freq = (1.0 / p.period.as_secs_f64()) as f32;
            let mut tracking = 0u32;
            let on = running.clone();
            let template = vec![0u8; size];
            let spent = runner_ns.clone();
            keep.push(Box::new(
                node.create_timer(p.period, move || {
                    if !on.load(Ordering::Relaxed) {
                        return;
                    }
                    // Build the message first (the payload is the node's
                    // work), then stamp it: latency is publish to receive.
                    // A loan: no payload copy (into shared memory when a
                    // subscriber is in another process; its contents are
                    // whatever the memory held, as a camera driver's
                    // buffer would be). Only the header is written, and
                    // the loan itself is myelin's work, not the runner's.
                    let _ = match publisher.loan_slice(size) {
                        Ok(mut loan) => {
                            let now = crate::harness::now_ns();
                            header_bytes(&mut loan, now, tracking, freq, size as u32);
                            loan.publish()
                        }
                        Err(_) => {
                            let t0 = crate::harness::now_ns();
                            let mut msg = template.clone();
                            let now = crate::harness::now_ns();
                            header_bytes(&mut msg, now, tracking, freq, size as u32);
                            spent.fetch_add(now.saturating_sub(t0), Ordering::Relaxed);
                            publisher.publish(Blob::from(msg))
                        }
                    };
                    tracking = tracking.wrapping_add(1);
                })
                .map_err(|e| err(&e))?,
            ));
        }
        for srv in &n.servers {
            // Echo the request's header in a stamped10b response.
            keep.push(Box::new(
                node.create_service::<Blob, Blob>(srv, |req: Blob| {
                    let mut resp = vec![0u8; HEADER + 10];
                    let n = req.len().min(HEADER);
                    resp[..n].copy_from_slice(&req[..n]);
                    Blob::from(resp)
                })
                .map_err(|e| err(&e))?,
            ));
        }
        for c in &n.clients {
            let client = node
                .create_client::<Blob, Blob>(&c.service)
                .map_err(|e| err(&e))?;
            let t = Tracker::new(c.period);
            trackers.push((
                n.name.clone(),
                format!("{} (service)", c.service),
                HEADER + 10,
                t.clone(),
                c.period,
            ));
            let on = running.clone();
            let freq = (1.0 / c.period.as_secs_f64()) as f32;
            let timeout = c.period.max(Duration::from_millis(100)) * 10;
            let mut tracking = 0u32;
            keep.push(Box::new(
                node.create_timer(c.period, move || {
                    if !on.load(Ordering::Relaxed) {
                        return;
                    }
                    let mut req = vec![0u8; HEADER + 10];
                    let t0 = crate::harness::now_ns();
                    header_bytes(&mut req, t0, tracking, freq, (HEADER + 10) as u32);
                    let seq = tracking;
                    tracking = tracking.wrapping_add(1);
                    // A call's latency: request sent to response received.
                    let answered = client.call(Blob::from(req), timeout).is_ok();
                    let mut g = t.lock().unwrap_or_else(|e| e.into_inner());
                    if answered {
                        g.on(crate::harness::now_ns(), t0, seq, freq);
                    } else {
                        g.next_tracking = Some(seq.wrapping_add(1));
                        g.lost += 1;
                    }
                })
                .map_err(|e| err(&e))?,
            ));
        }
        nodes.push((n.executor_id, node));
    }
    // One executor (and thread) per executor id.
    let mut groups: BTreeMap<u32, Executor> = BTreeMap::new();
    for (id, node) in &nodes {
        groups
            .entry(*id)
            .or_default()
            .add_node(node)
            .map_err(|e| err(&e))?;
    }
    let mut stops = Vec::new();
    let mut threads = Vec::new();
    for (_, mut exec) in groups {
        exec.set_idle_wait(idle);
        stops.push(exec.stop_handle());
        threads.push(std::thread::spawn(move || exec.spin()));
    }
    while crate::harness::now_ns() < start_at_ns && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(2));
    }
    let cpu0 = CpuSnapshot::now();
    let runner0 = runner_ns.load(Ordering::Relaxed);
    let start = Instant::now();
    running.store(true, Ordering::Relaxed);
    let mut interrupted = false;
    while start.elapsed() < duration {
        if stop.load(Ordering::Relaxed) || ctx.is_shut_down() {
            interrupted = true;
            break;
        }
        std::thread::sleep(
            Duration::from_millis(100).min(duration.saturating_sub(start.elapsed())),
        );
        progress((start.elapsed().as_secs_f64() / duration.as_secs_f64()).min(1.0));
    }
    running.store(false, Ordering::Relaxed);
    let elapsed = start.elapsed();
    let usage = CpuSnapshot::now().since(&cpu0);
    let runner_spent = runner_ns.load(Ordering::Relaxed).saturating_sub(runner0);
    // Let in-flight messages land (not counted: `running` is off).
    std::thread::sleep(Duration::from_millis(20));
    for s in &stops {
        s.stop();
    }
    for t in threads {
        let _ = t.join();
    }
    let mut subs = Vec::new();
    let mut samples = Vec::new();
    for (node, topic, size, t, period) in trackers {
        let t = t.lock().unwrap_or_else(|e| e.into_inner());
        samples.extend_from_slice(t.rec.time_series());
        subs.push(SubResult {
            node,
            topic,
            size,
            received: t.received,
            late: t.late,
            too_late: t.too_late,
            lost: t.lost,
            latency: t.rec.summary(),
            expected: (elapsed.as_secs_f64() / period.as_secs_f64()) as u64,
        });
    }
    Ok(PartResult {
        subscriptions: subs,
        samples,
        cpu_ns: usage.cpu_ns,
        runner_ns: runner_spent,
        rss_bytes: crate::harness::sys::current_rss_bytes(),
        elapsed_s: elapsed.as_secs_f64(),
        interrupted,
    })
}

/// Run the graph in this process for `duration` (nodes with the same
/// `executor_id` share an executor thread, which waits as `idle` says).
/// `progress` is called about every 100 ms with the elapsed fraction;
/// `stop` ends the run early.
pub fn run_in_process(
    plans: &[NodePlan],
    file: &str,
    duration: Duration,
    idle: IdleWait,
    stop: Arc<AtomicBool>,
    mut progress: impl FnMut(f64),
) -> Result<TopologyReport, TopologyError> {
    let ctx = Context::builder()
        .handle_signals(false)
        .shared_memory(false)
        .build()
        .map_err(|e| TopologyError::Run(e.to_string()))?;
    let all: Vec<usize> = (0..plans.len()).collect();
    let part = run_nodes(
        plans,
        &all,
        &ctx,
        crate::harness::now_ns(),
        duration,
        idle,
        &stop,
        &mut progress,
    )?;
    Ok(report_of(
        file,
        placement_name("one process", idle),
        vec![part],
    ))
}

/// A placement's name, with how its executors wait when not the default.
pub(super) fn placement_name(placement: &str, idle: IdleWait) -> String {
    match idle {
        IdleWait::Block => placement.to_string(),
        w => format!("{placement}, executors {w}"),
    }
}

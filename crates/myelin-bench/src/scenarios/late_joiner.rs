//! `myelin bench net` (late joiner rows): transient-local history replayed
//! to a subscription that joins late, over zenoh, across processes.
//!
//! A helper process publishes 100 samples with transient-local durability
//! (keep last 100) and stays; the measuring process then, round after
//! round, opens a fresh session (not timed), creates a transient-local
//! subscription and times how long until the first and the last of the
//! 100 samples arrive. myelin (a context with shared memory off: zenoh's
//! AdvancedPublisher cache and AdvancedSubscriber history, as rmw_zenoh)
//! beside raw zenoh-ext with the same settings, same router, same run.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use myelin_zenoh::zenoh::{self, Wait};
use myelin_zenoh::zenoh_ext::{
    AdvancedPublisherBuilderExt, AdvancedSubscriberBuilderExt, CacheConfig, HistoryConfig,
    MissDetectionConfig,
};

use crate::harness::processes::{Helper, domain, run_role};
use crate::harness::stats::LatencyRecorder;
use crate::harness::{BenchError, Job, Meter, Outcome, now_ns};
use crate::scenarios::net::{LoopbackRouter, err};

/// Samples in the history.
pub const SAMPLES: u64 = 100;
const ENV: &str = "MYELIN_BENCH_LATE_JOINER";
const TOPIC: &str = "/bench_late_joiner";

/// The jobs: myelin and raw zenoh, each timed to the first and to the last
/// sample of the history, `rounds` late joiners each.
pub fn plan(rounds: u64) -> Vec<Job> {
    let mut jobs = Vec::new();
    for system in ["myelin", "zenoh"] {
        for last in [false, true] {
            let which = if last { "last" } else { "first" };
            jobs.push(Job::new(
                format!("net/{system}/late joiner {which} of {SAMPLES}"),
                move || run(system, last, rounds),
            ));
        }
    }
    jobs
}

/// Run as the publisher helper if started as one (returns only if not).
pub fn publisher_if_requested() {
    run_role(ENV, "late-joiner publisher", publisher);
}

fn key(tag: &str) -> String {
    format!("bench_late_joiner/{tag}")
}

fn session(config: &Path) -> Result<zenoh::Session, BenchError> {
    myelin_zenoh::config::open(myelin_zenoh::config::from_file(config).map_err(err)?).map_err(err)
}

fn myelin_ctx(config: &Path, domain: u32) -> Result<myelin::Context, BenchError> {
    myelin::Context::builder()
        .domain_id(domain)
        .handle_signals(false)
        .shared_memory(false)
        .zenoh_config(config)
        .build()
        .map_err(err)
}

fn qos() -> myelin::QoS {
    myelin::QoS::keep_last(SAMPLES as usize).transient_local()
}

/// `system,config,domain,tag`: publish the history, say `ready`, stay
/// until stdin closes.
fn publisher(spec: &str) -> Result<(), BenchError> {
    let parts: Vec<&str> = spec.split(',').collect();
    let [system, config, domain, tag] = parts[..] else {
        return Err(err(format!("bad {ENV} {spec:?}")));
    };
    let config = PathBuf::from(config);
    let domain: u32 = domain.parse().map_err(err)?;
    let wait = || {
        let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new());
    };
    match system {
        "myelin" => {
            let ctx = myelin_ctx(&config, domain)?;
            let node = ctx.create_node("late_joiner_source").map_err(err)?;
            let p = node.create_publisher::<u64>(TOPIC, qos()).map_err(err)?;
            for i in 0..SAMPLES {
                p.publish(i).map_err(err)?;
            }
            println!("ready");
            wait();
        }
        _ => {
            let s = session(&config)?;
            let p = s
                .declare_publisher(key(tag))
                .cache(CacheConfig::default().max_samples(SAMPLES as usize))
                .sample_miss_detection(
                    MissDetectionConfig::default().sporadic_heartbeat(Duration::from_millis(500)),
                )
                .publisher_detection()
                .wait()
                .map_err(err)?;
            for i in 0..SAMPLES {
                p.put(i.to_le_bytes().to_vec()).wait().map_err(err)?;
            }
            println!("ready");
            wait();
        }
    }
    Ok(())
}

/// One late joiner: the times from creating the subscription to the
/// first and to the last sample.
fn join_once(
    system: &str,
    config: &Path,
    domain: u32,
    tag: &str,
) -> Result<(u64, u64), BenchError> {
    const WAIT: Duration = Duration::from_secs(30);
    match system {
        "myelin" => {
            let ctx = myelin_ctx(config, domain)?;
            let node = ctx.create_node("late_joiner").map_err(err)?;
            let t0 = Instant::now();
            let s = node
                .create_polling_subscription::<u64>(TOPIC, qos(), Default::default())
                .map_err(err)?;
            let mut first = None;
            loop {
                let m = s.wait_for_message(WAIT).map_err(err)?;
                first.get_or_insert_with(|| t0.elapsed());
                if *m == SAMPLES - 1 {
                    let last = t0.elapsed();
                    return Ok((
                        first.unwrap_or(last).as_nanos() as u64,
                        last.as_nanos() as u64,
                    ));
                }
            }
        }
        _ => {
            let s = session(config)?;
            let (tx, rx) = mpsc::channel::<u64>();
            let t0 = Instant::now();
            let _sub = s
                .declare_subscriber(key(tag))
                .history(
                    HistoryConfig::default()
                        .detect_late_publishers()
                        .max_samples(SAMPLES as usize),
                )
                .callback(move |sample| {
                    let b = sample.payload().to_bytes();
                    if let Ok(v) = <[u8; 8]>::try_from(&b[..]) {
                        let _ = tx.send(u64::from_le_bytes(v));
                    }
                })
                .wait()
                .map_err(err)?;
            let mut first = None;
            loop {
                let v = rx.recv_timeout(WAIT).map_err(err)?;
                first.get_or_insert_with(|| t0.elapsed());
                if v == SAMPLES - 1 {
                    let last = t0.elapsed();
                    return Ok((
                        first.unwrap_or(last).as_nanos() as u64,
                        last.as_nanos() as u64,
                    ));
                }
            }
        }
    }
}

fn run(system: &'static str, last: bool, rounds: u64) -> Result<Outcome, BenchError> {
    let r = LoopbackRouter::start()?;
    let dom = domain(13);
    let tag = format!("{}_{}", std::process::id(), now_ns());
    let spec = format!("{system},{},{dom},{tag}", r.config.display());
    let mut helper = Helper::spawn("late_joiner_role", ENV, spec).map_err(err)?;
    helper.expect("ready").map_err(err)?;
    let mut rec = LatencyRecorder::new();
    let meter = Meter::start();
    for _ in 0..rounds {
        let (first, to_last) = join_once(system, &r.config, dom, &tag)?;
        rec.record(if last { to_last } else { first });
    }
    drop(helper);
    let mut outcome = meter.finish(
        "net",
        system,
        format!(
            "late joiner: {} of {SAMPLES}",
            if last { "last" } else { "first" }
        ),
        rec,
        rounds * SAMPLES,
        0,
        None,
        vec![format!(
            "a transient-local publisher in another process published {SAMPLES} samples (keep last {SAMPLES}) before; each round a fresh session (not timed) subscribes transient-local and is timed from creating the subscription to the {} sample; zenoh 1.x through a router on 127.0.0.1; {} = zenoh-ext's AdvancedPublisher cache and AdvancedSubscriber history as rmw_zenoh uses them",
            if last { "last" } else { "first" },
            if system == "myelin" { "myelin over zenoh" } else { "raw zenoh" }
        )],
    );
    outcome.record.cpu_percent = 0.0;
    outcome.record.cpu_ns_per_msg = 0.0;
    Ok(outcome)
}

//! Running a graph across processes: each process is this executable
//! started again as a topology process (`MYELIN_TOPOLOGY_CHILD`), runs its
//! share of the nodes from the same start time, and prints what it
//! measured for this process to gather.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use myelin::{Context, IdleWait};

use super::TopologyError;
use super::format::{NodePlan, load};
use super::placement::Placement;
use super::report::{TopologyReport, report_of};
use super::runner::{PartResult, run_nodes};

const CHILD_ENV: &str = "MYELIN_TOPOLOGY_CHILD";
const RESULT_MARK: &str = "MYELIN_TOPOLOGY_RESULT ";

/// Run as one process of a multi-process topology run if started as one
/// (call first thing in `main`; returns only if not).
pub fn child_if_requested() {
    crate::harness::processes::run_role(CHILD_ENV, "topology child", |spec| {
        let part = child(spec)?;
        println!(
            "{RESULT_MARK}{}",
            serde_json::to_string(&part).map_err(|e| TopologyError::Run(e.to_string()))?
        );
        Ok::<(), TopologyError>(())
    });
}

/// `file|domain|i,j,k|start_at_ns|duration_s|shm or zenoh config file`
fn child(spec: &str) -> Result<PartResult, TopologyError> {
    let bad = || TopologyError::Run(format!("bad {CHILD_ENV} {spec:?}"));
    let parts: Vec<&str> = spec.split('|').collect();
    let [file, domain, nodes, start, secs, transport, idle] = parts[..] else {
        return Err(bad());
    };
    let idle: IdleWait = idle.parse().map_err(|_| bad())?;
    let plans = load(Path::new(file))?;
    let domain: u32 = domain.parse().map_err(|_| bad())?;
    let mine: Vec<usize> = nodes
        .split(',')
        .map(|x| x.parse().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    let start: u64 = start.parse().map_err(|_| bad())?;
    let secs: f64 = secs.parse().map_err(|_| bad())?;
    let builder = Context::builder().domain_id(domain).handle_signals(true);
    let builder = if transport == "shm" {
        builder.shared_memory(true).network(false)
    } else {
        builder.shared_memory(false).zenoh_config(transport)
    };
    let ctx = builder
        .build()
        .map_err(|e| TopologyError::Run(e.to_string()))?;
    let stop = AtomicBool::new(false);
    run_nodes(
        &plans,
        &mine,
        &ctx,
        start,
        Duration::from_secs_f64(secs),
        idle,
        &stop,
        &mut |_| {},
    )
}

/// How the processes of a multi-process run talk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcTransport {
    /// Shared memory (zenoh off).
    SharedMemory,
    /// zenoh with shared memory off, through a router this process runs
    /// on a free loopback port (feature `zenoh`).
    Zenoh,
}

/// Run the graph across processes over shared memory: one process per node
/// or per executor id, all started together after a discovery head start.
pub fn run_in_processes(
    plans: &[NodePlan],
    path: &Path,
    placement: Placement,
    duration: Duration,
    progress: impl FnMut(f64),
) -> Result<TopologyReport, TopologyError> {
    run_in_processes_over(
        plans,
        path,
        placement,
        ProcTransport::SharedMemory,
        duration,
        myelin::IdleWait::Block,
        progress,
    )
}

/// [`run_in_processes`] over a chosen transport, the executors waiting as
/// `idle` says when idle.
pub fn run_in_processes_over(
    plans: &[NodePlan],
    path: &Path,
    placement: Placement,
    transport: ProcTransport,
    duration: Duration,
    idle: myelin::IdleWait,
    mut progress: impl FnMut(f64),
) -> Result<TopologyReport, TopologyError> {
    let err = |e: &dyn std::fmt::Display| TopologyError::Run(e.to_string());
    #[cfg(feature = "zenoh")]
    let router = match transport {
        ProcTransport::Zenoh => {
            Some(crate::scenarios::net::LoopbackRouter::start().map_err(|e| err(&e))?)
        }
        ProcTransport::SharedMemory => None,
    };
    #[cfg(feature = "zenoh")]
    let transport_spec = router
        .as_ref()
        .map_or_else(|| "shm".to_string(), |r| r.config.display().to_string());
    #[cfg(not(feature = "zenoh"))]
    let transport_spec = match transport {
        ProcTransport::SharedMemory => "shm".to_string(),
        ProcTransport::Zenoh => {
            return Err(err(&"zenoh placement needs the `zenoh` feature"));
        }
    };
    let groups = placement.processes(plans);
    let domain = crate::harness::processes::domain(13);
    // Discovery head start: every process connects before publishing.
    let head = Duration::from_millis(1500 + 50 * groups.len() as u64);
    let start_at = crate::harness::now_ns() + head.as_nanos() as u64;
    let exe = std::env::current_exe().map_err(|e| err(&e))?;
    let mut children = Vec::new();
    for nodes in groups.values() {
        let list: Vec<String> = nodes.iter().map(|i| i.to_string()).collect();
        let spec = format!(
            "{}|{domain}|{}|{start_at}|{}|{transport_spec}|{}",
            path.display(),
            list.join(","),
            duration.as_secs_f64(),
            idle
        );
        let child = std::process::Command::new(&exe)
            .args(["topology_role", "--exact", "--nocapture"])
            .env(CHILD_ENV, spec)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| err(&e))?;
        children.push(child);
    }
    let t0 = Instant::now();
    let total = head + duration;
    // Read every child's output while it runs (a result bigger than the
    // pipe buffer must not block its writer).
    let waiters: Vec<_> = children
        .into_iter()
        .map(|c| std::thread::spawn(move || c.wait_with_output()))
        .collect();
    while !waiters.iter().all(|w| w.is_finished()) {
        progress((t0.elapsed().as_secs_f64() / total.as_secs_f64()).min(1.0));
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut outputs = Vec::new();
    for w in waiters {
        let out = w
            .join()
            .map_err(|_| err(&"a waiter thread panicked"))?
            .map_err(|e| err(&e))?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() {
            // Even one that printed its result: it may have panicked after
            // (a run whose workers failed is not a result).
            let stderr = String::from_utf8_lossy(&out.stderr);
            let why = stderr
                .lines()
                .chain(text.lines())
                .find(|l| l.contains("error") || l.contains("panicked"))
                .unwrap_or("no message");
            return Err(TopologyError::Run(format!(
                "a topology process failed ({}): {why}",
                out.status
            )));
        }
        let part = text
            .lines()
            .find_map(|l| l.strip_prefix(RESULT_MARK))
            .ok_or_else(|| {
                let why = text
                    .lines()
                    .find(|l| l.contains("error"))
                    .unwrap_or("no result");
                TopologyError::Run(format!("a topology process failed: {why}"))
            })?;
        outputs.push(serde_json::from_str::<PartResult>(part).map_err(|e| err(&e))?);
    }
    let how = match transport {
        ProcTransport::SharedMemory => "",
        ProcTransport::Zenoh => ", zenoh",
    };
    let label = format!("{} processes ({}{how})", outputs.len(), placement.label());
    let label = super::runner::placement_name(&label, idle);
    Ok(report_of(&path.display().to_string(), label, outputs))
}

//! myelin in the client/server chain, in four arrangements: every server
//! node on one single-threaded executor (nested calls spin it
//! re-entrantly), one executor thread per node, one 2-worker multi-threaded
//! executor, and inline services (the whole chain is nested function
//! calls).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use myelin::prelude::*;
use myelin::{MultiThreadedExecutor, ServiceOptions};

use crate::harness::stats::LatencyRecorder;
use crate::harness::{
    BenchError, Job, Meter, Outcome, Stamped, now_ns, period_of, rate_label, size_label, warmup_for,
};
use crate::scenarios::relay::RelayParams;

/// The jobs: one per arrangement.
pub(super) fn jobs(p: RelayParams) -> Vec<Job> {
    [
        RpcArrangement::SingleThreaded,
        RpcArrangement::ThreadPerNode,
        RpcArrangement::MultiThreaded2,
        RpcArrangement::Inline,
    ]
    .into_iter()
    .map(|a| {
        Job::new(
            format!(
                "rpc/myelin/{} {} {}",
                a.name(),
                rate_label(p.rate),
                size_label(p.size)
            ),
            move || chain(p, a),
        )
    })
    .collect()
}

/// How the servers are run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RpcArrangement {
    /// One single-threaded executor for every server.
    SingleThreaded,
    /// One executor thread per server node.
    ThreadPerNode,
    /// One multi-threaded executor with 2 workers.
    MultiThreaded2,
    /// Inline services: no executor.
    Inline,
}

impl RpcArrangement {
    /// The config name.
    pub fn name(self) -> &'static str {
        match self {
            RpcArrangement::SingleThreaded => "single-threaded",
            RpcArrangement::ThreadPerNode => "thread-per-node",
            RpcArrangement::MultiThreaded2 => "multi-threaded-2",
            RpcArrangement::Inline => "inline",
        }
    }
}

fn chain(p: RelayParams, a: RpcArrangement) -> Result<Outcome, BenchError> {
    let setup = |e: &dyn std::fmt::Display| BenchError::setup("myelin", e);
    let ctx = super::local_context()?;
    let hops = p.hops as usize;
    let call_timeout = Duration::from_secs(30);
    let opts = if a == RpcArrangement::Inline {
        ServiceOptions::inline()
    } else {
        ServiceOptions::default()
    };
    let mut nodes = Vec::new();
    let mut servers = Vec::new();
    // The last server first, so every forwarding client finds its server.
    for i in (0..hops).rev() {
        let node = ctx
            .create_node(&format!("server_{i}"))
            .map_err(|e| setup(&e))?;
        let name = format!("/rpc_{i}");
        if i + 1 == hops {
            servers.push(
                node.create_service_with::<Stamped, u64>(&name, opts.clone(), |req: Stamped| {
                    req.seq
                })
                .map_err(|e| setup(&e))?,
            );
        } else {
            let next = node
                .create_client::<Stamped, u64>(&format!("/rpc_{}", i + 1))
                .map_err(|e| setup(&e))?;
            servers.push(
                node.create_service_with::<Stamped, u64>(
                    &name,
                    opts.clone(),
                    move |req: Stamped| next.call(req, call_timeout).unwrap_or(u64::MAX),
                )
                .map_err(|e| setup(&e))?,
            );
        }
        nodes.push(node);
    }
    // The source is a timer on the servers' executor (as in `relay`), so
    // both chains start from inside an executor.
    let source = ctx.create_node("source").map_err(|e| setup(&e))?;
    let client = source
        .create_client::<Stamped, u64>("/rpc_0")
        .map_err(|e| setup(&e))?;
    let warm = warmup_for(p.count);
    let total = p.count + warm;
    let state = Arc::new(Mutex::new((
        LatencyRecorder::with_time_series(),
        0u64,
        0u64,
    )));
    let st = state.clone();
    let t0 = now_ns();
    let size = p.size;
    let mut seq = 0u64;
    let _timer = source
        .create_timer(period_of(p.rate)?, move || {
            if seq >= total {
                return;
            }
            let sent = now_ns();
            let ok = client.call(Stamped::with_size(seq, size), call_timeout) == Ok(seq);
            let done = now_ns();
            let mut g = st.lock().unwrap_or_else(|e| e.into_inner());
            if ok && seq >= warm {
                g.0.record_at(
                    sent.saturating_sub(t0) as f64 / 1e9,
                    done.saturating_sub(sent),
                );
            }
            g.1 += 1;
            g.2 += u64::from(!ok);
            seq += 1;
        })
        .map_err(|e| setup(&e))?;
    let finished = || state.lock().unwrap_or_else(|e| e.into_inner()).1 >= total;
    let patience = Duration::from_secs_f64(total as f64 / p.rate * 1.5) + Duration::from_secs(20);

    let meter = Meter::start();
    match a {
        RpcArrangement::SingleThreaded | RpcArrangement::Inline => {
            let mut exec = Executor::new();
            if a == RpcArrangement::SingleThreaded {
                for n in &nodes {
                    exec.add_node(n).map_err(|e| setup(&e))?;
                }
            }
            exec.add_node(&source).map_err(|e| setup(&e))?;
            exec.spin_until(patience, finished).map_err(|e| setup(&e))?;
        }
        RpcArrangement::MultiThreaded2 => {
            let mut exec = MultiThreadedExecutor::new(2);
            for n in nodes.iter().chain(std::iter::once(&source)) {
                exec.add_node(n).map_err(|e| setup(&e))?;
            }
            exec.spin_until(patience, finished).map_err(|e| setup(&e))?;
        }
        RpcArrangement::ThreadPerNode => {
            let mut stops = Vec::new();
            let mut threads = Vec::new();
            for n in nodes.iter().chain(std::iter::once(&source)) {
                let mut exec = Executor::new();
                exec.add_node(n).map_err(|e| setup(&e))?;
                stops.push(exec.stop_handle());
                threads.push(std::thread::spawn(move || exec.spin()));
            }
            let deadline = Instant::now() + patience;
            while !finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            for s in &stops {
                s.stop();
            }
            for t in threads {
                t.join()
                    .map_err(|_| setup(&"executor thread panicked"))?
                    .map_err(|e| setup(&e))?;
            }
        }
    }
    drop(servers);
    let (rec, calls, failed) =
        std::mem::take(&mut *state.lock().unwrap_or_else(|e| e.into_inner()));
    let lost = failed + total.saturating_sub(calls);
    Ok(meter.finish(
        "rpc",
        "myelin",
        format!("{} {} {}", a.name(), rate_label(p.rate), size_label(p.size)),
        rec,
        calls * u64::from(p.hops),
        lost,
        Some(p.hops),
        vec!["client/server chain; one hop = a request and its response".into()],
    ))
}

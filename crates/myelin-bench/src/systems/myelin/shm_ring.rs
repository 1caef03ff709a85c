//! myelin's shared-memory broadcast ring (`myelin-shm`) under its API, in
//! the two-process round trip: a ping ring one way, a pong ring back, the
//! echo a forked child; blocking (futex in the segment) or polling.

use std::time::Duration;

use myelin_shm::{RingReader, RingWriter, SegmentName, TypeId};

use crate::harness::stats::LatencyRecorder;
use crate::harness::{BenchError, Job, Meter, Outcome, now_ns, size_label};
use crate::scenarios::ipc::{IpcParams, Wait, err, fork_child, reap, warm};

/// The jobs: blocking, then polling.
pub(super) fn jobs(p: IpcParams) -> Vec<Job> {
    Wait::BOTH
        .into_iter()
        .map(|w| {
            Job::new(
                format!("ipc/myelin/shm-ring {} {}", w.label(), size_label(p.size)),
                move || ring(p, w),
            )
        })
        .collect()
}

fn ring(p: IpcParams, wait: Wait) -> Result<Outcome, BenchError> {
    let tag = format!("ipc_{}_{}", std::process::id(), now_ns());
    let ty = TypeId {
        name: "myelin_bench/msg/Bytes".into(),
        hash: 1,
    };
    let ping_name = SegmentName::new(0, &format!("{tag}_ping")).map_err(err)?;
    let pong_name = SegmentName::new(0, &format!("{tag}_pong")).map_err(err)?;
    let slot = p.size.max(1) as u32;
    let mut ping_w = RingWriter::create(&ping_name, &ty, 4, slot).map_err(err)?;
    let mut pong_w = RingWriter::create(&pong_name, &ty, 4, slot).map_err(err)?;
    let mut ping_r = RingReader::open(&ping_name, &ty).map_err(err)?;
    let mut pong_r = RingReader::open(&pong_name, &ty).map_err(err)?;
    let total = p.count + warm(p.count);
    let mut child_buf = Vec::with_capacity(p.size.max(1));
    let pid = fork_child(move || {
        // Echo until the stop message (one byte 0xFF after `total` pings).
        for _ in 0..total {
            let got = match wait {
                Wait::Block => ping_r.recv_timeout(&mut child_buf, Duration::from_secs(30)),
                Wait::Poll => loop {
                    match ping_r.try_recv(&mut child_buf) {
                        Ok(None) => std::hint::spin_loop(),
                        other => break other,
                    }
                },
            };
            if !matches!(got, Ok(Some(_))) || pong_w.publish(&child_buf).is_err() {
                return;
            }
        }
    })?;
    let msg = vec![0x5Au8; p.size.max(1)];
    let mut buf = Vec::with_capacity(p.size.max(1));
    let mut rec = LatencyRecorder::with_time_series();
    let mut lost = 0;
    let meter = Meter::start();
    let t_start = now_ns();
    for i in 0..total {
        let t0 = now_ns();
        ping_w.publish(&msg).map_err(err)?;
        let got = match wait {
            Wait::Block => pong_r
                .recv_timeout(&mut buf, Duration::from_secs(30))
                .map_err(err)?,
            Wait::Poll => loop {
                if let Some(x) = pong_r.try_recv(&mut buf).map_err(err)? {
                    break Some(x);
                }
                std::hint::spin_loop();
            },
        };
        let t1 = now_ns();
        match got {
            Some(_) if i >= warm(p.count) => rec.record_at(
                t0.saturating_sub(t_start) as f64 / 1e9,
                t1.saturating_sub(t0) / 2,
            ),
            Some(_) => {}
            None => {
                lost += 1;
                break;
            }
        }
    }
    reap(pid);
    // The child's writer never ran its destructor: remove its segment.
    let _ = std::fs::remove_file(pong_name.path());
    let label = wait.label();
    Ok(meter.finish(
        "ipc",
        "myelin",
        format!("shm-ring {label} {}", size_label(p.size)),
        rec,
        total * 2,
        lost,
        None,
        vec!["one way = round trip / 2 between two processes; the ring copies the message into and out of the segment".into()],
    ))
}

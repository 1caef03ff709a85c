//! The iceoryx2 peer of `ipc` (crate `iceoryx2` 0.10, feature `iceoryx2`):
//! the same two-process ping-pong as myelin's `ipc/myelin/api`, through iceoryx2's
//! zero-copy publish-subscribe (`[u8]` slices loaned with
//! `loan_slice_uninit`, as iceoryx2's own benchmark does), polling
//! (`receive()` in a loop) or blocking (an event service per direction;
//! the receiver sleeps in a `WaitSet` with the listener attached, the
//! sender notifies after each send).
//!
//! The pong is this executable started again with `MYELIN_BENCH_IOX2` set.

use std::time::{Duration, Instant};

use iceoryx2::prelude::*;

use super::{Role, Runs};
use crate::harness::processes::Helper;
use crate::harness::stats::LatencyRecorder;
use crate::harness::{BenchError, Job, Meter, Outcome, now_ns, size_label};
use crate::scenarios::ipc::{IpcParams, Wait};

const ENV: &str = "MYELIN_BENCH_IOX2";

pub(super) const RUNS: Runs = Runs {
    ipc: Some(jobs),
    roles: &[Role {
        env: ENV,
        name: "iceoryx2 pong",
        run: pong,
    }],
    ..Runs::NONE
};

/// The jobs: blocking, then polling.
fn jobs(p: IpcParams) -> Vec<Job> {
    Wait::BOTH
        .into_iter()
        .map(|w| {
            let size = p.size;
            Job::new(
                format!("ipc/iceoryx2/{} {}", w.label(), size_label(size)),
                move || run(p.count, size, w),
            )
        })
        .collect()
}

fn err(e: impl std::fmt::Display) -> BenchError {
    BenchError::setup("iceoryx2", e)
}

fn debug_err(e: impl std::fmt::Debug) -> BenchError {
    BenchError::setup("iceoryx2", format!("{e:?}"))
}

/// One direction: a pub-sub service of byte slices and an event service.
struct Port {
    publisher: iceoryx2::port::publisher::Publisher<ipc::Service, [u8], ()>,
    subscriber: iceoryx2::port::subscriber::Subscriber<ipc::Service, [u8], ()>,
    notifier: iceoryx2::port::notifier::Notifier<ipc::Service>,
    listener: iceoryx2::port::listener::Listener<ipc::Service>,
    size: usize,
}

fn service_name(tag: &str, what: &str) -> Result<ServiceName, BenchError> {
    ServiceName::new(&format!("myelin-bench/{tag}/{what}")).map_err(debug_err)
}

impl Port {
    /// `out`/`inn` name the directions this side sends and receives on.
    fn open(
        node: &Node<ipc::Service>,
        tag: &str,
        out: &str,
        inn: &str,
        size: usize,
    ) -> Result<Port, BenchError> {
        let ps = |dir: &str| {
            node.service_builder(&service_name(tag, dir)?)
                .publish_subscribe::<[u8]>()
                .max_publishers(1)
                .max_subscribers(1)
                .history_size(0)
                .subscriber_max_buffer_size(1)
                .enable_safe_overflow(true)
                .open_or_create()
                .map_err(debug_err)
        };
        let ev = |dir: &str| {
            node.service_builder(&service_name(tag, &format!("{dir}-ev"))?)
                .event()
                .open_or_create()
                .map_err(debug_err)
        };
        let (s_out, s_in) = (ps(out)?, ps(inn)?);
        let (e_out, e_in) = (ev(out)?, ev(inn)?);
        Ok(Port {
            publisher: s_out
                .publisher_builder()
                .initial_max_slice_len(size)
                .create()
                .map_err(debug_err)?,
            subscriber: s_in.subscriber_builder().create().map_err(debug_err)?,
            notifier: e_out.notifier_builder().create().map_err(debug_err)?,
            listener: e_in.listener_builder().create().map_err(debug_err)?,
            size,
        })
    }

    fn send(&self, seq: u64, wait: Wait) -> Result<(), BenchError> {
        let sample = self
            .publisher
            .loan_slice_uninit(self.size)
            .map_err(debug_err)?;
        // SAFETY: `u8` has no invalid bit patterns, and the loaned chunk is
        // mapped memory (zero-filled or an earlier payload), so it is
        // initialised; this is how iceoryx2's own benchmark sends.
        let mut sample = unsafe { sample.assume_init() };
        sample.payload_mut()[..8].copy_from_slice(&seq.to_le_bytes());
        sample.send().map_err(debug_err)?;
        if wait == Wait::Block {
            self.notifier.notify().map_err(debug_err)?;
        }
        Ok(())
    }

    /// The next message's sequence number. `waitset` (blocking mode) has
    /// this port's listener attached.
    fn receive(
        &self,
        waitset: Option<&WaitSet<ipc::Service>>,
        deadline: Instant,
    ) -> Result<u64, BenchError> {
        loop {
            if let Some(s) = self.subscriber.receive().map_err(debug_err)? {
                let p = s.payload();
                return Ok(u64::from_le_bytes(p[..8].try_into().expect("8 bytes")));
            }
            if Instant::now() > deadline {
                return Err(err("no message within 30 s"));
            }
            match waitset {
                Some(ws) => {
                    ws.wait_and_process_once_with_timeout(
                        |_| {
                            let _ = self.listener.try_wait(|_| {});
                            CallbackProgression::Stop
                        },
                        Duration::from_millis(100),
                    )
                    .map_err(debug_err)?;
                }
                None => std::hint::spin_loop(),
            }
        }
    }
}

/// A WaitSet with `port`'s listener attached (blocking mode), then `f`.
fn with_waitset<R>(
    port: &Port,
    wait: Wait,
    f: impl FnOnce(Option<&WaitSet<ipc::Service>>) -> Result<R, BenchError>,
) -> Result<R, BenchError> {
    if wait == Wait::Poll {
        return f(None);
    }
    let ws = WaitSetBuilder::new()
        .create::<ipc::Service>()
        .map_err(debug_err)?;
    let _guard = ws.attach_notification(&port.listener).map_err(debug_err)?;
    f(Some(&ws))
}

/// The pong process (`tag,size,block|poll,total`): echoes `total` pings.
fn pong(spec: &str) -> Result<(), BenchError> {
    let parts: Vec<&str> = spec.split(',').collect();
    let [tag, size, wait, total] = parts[..] else {
        return Err(err(format!("bad {ENV} {spec:?}")));
    };
    let size: usize = size.parse().map_err(err)?;
    let total: u64 = total.parse().map_err(err)?;
    let wait = if wait == "poll" {
        Wait::Poll
    } else {
        Wait::Block
    };
    iceoryx2::prelude::set_log_level(iceoryx2::prelude::LogLevel::Error);
    let node = NodeBuilder::new()
        .create::<ipc::Service>()
        .map_err(debug_err)?;
    let port = Port::open(&node, tag, "b2a", "a2b", size)?;
    with_waitset(&port, wait, |ws| {
        println!("ready");
        for _ in 0..total {
            let seq = port.receive(ws, Instant::now() + Duration::from_secs(30))?;
            port.send(seq, wait)?;
        }
        Ok(())
    })
}

/// One ping-pong run.
fn run(count: u64, size: usize, wait: Wait) -> Result<Outcome, BenchError> {
    iceoryx2::prelude::set_log_level(iceoryx2::prelude::LogLevel::Error);
    let tag = format!("{}-{}", std::process::id(), now_ns());
    let label = wait.label();
    let warm = (count / 10).clamp(10, 1000);
    let total = count + warm;
    // Dropped at the end: the pong has answered `total` pings and exits.
    let mut pong =
        Helper::spawn("iox2_role", ENV, format!("{tag},{size},{label},{total}")).map_err(err)?;
    pong.expect("ready").map_err(err)?;
    let node = NodeBuilder::new()
        .create::<ipc::Service>()
        .map_err(debug_err)?;
    let port = Port::open(&node, &tag, "a2b", "b2a", size)?;
    let mut rec = LatencyRecorder::with_time_series();
    let meter = Meter::start();
    let t_start = now_ns();
    with_waitset(&port, wait, |ws| {
        for i in 0..total {
            let t0 = now_ns();
            port.send(i, wait)?;
            let seq = port.receive(ws, Instant::now() + Duration::from_secs(30))?;
            let t1 = now_ns();
            if seq != i {
                return Err(err(format!("pong {seq} for ping {i}")));
            }
            if i >= warm {
                rec.record_at((t0 - t_start) as f64 / 1e9, (t1 - t0) / 2);
            }
        }
        Ok(())
    })?;
    Ok(meter.finish(
        "ipc",
        "iceoryx2",
        format!("{label} {} loaned slice", size_label(size)),
        rec,
        total * 2,
        0,
        None,
        vec![format!(
            "iceoryx2 0.10 publish-subscribe between two processes, one way = round trip / 2; {}",
            if wait == Wait::Block {
                "blocking in a WaitSet on an event listener per direction"
            } else {
                "polling receive()"
            }
        )],
    ))
}

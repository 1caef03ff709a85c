//! myelin in the `net` ring: contexts with shared memory off, so every
//! message crosses zenoh through the run's router. Each stage is a polling
//! subscription whose thread wakes and republishes (zenoh's thread hands
//! the message over, as to any executor); the measuring end publishes and
//! waits for the reply the same way.

use std::path::Path;

use myelin::{Blob, Context, Publisher, QoS, Subscription};

use crate::harness::{BenchError, Job, size_label};
use crate::scenarios::net::{
    NetParams, NetRing, OpenedEnd, Ring, RingEnd, WAIT, err, run, seq_of, wait_for,
};

/// myelin's part in the ring: one way of forwarding.
pub(super) const RING: NetRing = NetRing {
    modes: &["myelin"],
    stage,
    open,
};

/// myelin over its zenoh transport between two processes, for `bench
/// pingpong`'s zenoh row: fewer round trips for large messages, which
/// cross TCP loopback.
pub(super) fn pingpong_job(count: u64, size: usize) -> Job {
    let count = if size > 64 << 10 {
        count.min(300)
    } else {
        count.min(5_000)
    };
    Job::new(
        format!("pingpong/myelin/zenoh {}", size_label(size)),
        move || {
            run(
                NetParams { count, size },
                "myelin",
                RING,
                "myelin",
                1,
                "pingpong",
            )
        },
    )
}

fn context(config: &Path, domain: u32) -> Result<Context, BenchError> {
    Context::builder()
        .domain_id(domain)
        .handle_signals(false)
        .shared_memory(false)
        .zenoh_config(config)
        .build()
        .map_err(err)
}

fn topic(i: u32) -> String {
    format!("/bench_net/s{i}")
}

/// A node `name` reading ring topic `from` and writing ring topic `to`.
fn hop(
    ctx: &Context,
    name: &str,
    from: u32,
    to: u32,
) -> Result<(Subscription<Blob>, Publisher<Blob>), BenchError> {
    let node = ctx.create_node(name).map_err(err)?;
    let out = node
        .create_publisher::<Blob>(&topic(to), QoS::keep_last(16))
        .map_err(err)?;
    let sub = node
        .create_polling_subscription::<Blob>(&topic(from), QoS::keep_last(16), Default::default())
        .map_err(err)?;
    Ok((sub, out))
}

fn stage(ring: &Ring, i: u32, total: u64) -> Result<(), BenchError> {
    let ctx = context(&ring.config, ring.domain)?;
    let (sub, out) = hop(&ctx, &format!("stage{i}"), i, i + 1)?;
    println!("ready");
    // Messages wait in the subscription's buffer until our
    // publisher has seen the next stage (nothing is sent before).
    wait_for(|| out.subscription_count() > 0)?;
    for _ in 0..total {
        let m = sub.wait_for_message(WAIT).map_err(err)?;
        out.publish(m.into_owned()).map_err(err)?;
    }
    Ok(())
}

/// The measuring end: node `ping` writes position 0 and reads position
/// `stages`. Fields drop in order: publisher, subscription, context.
struct End {
    out: Publisher<Blob>,
    back: Subscription<Blob>,
    _ctx: Context,
}

fn open(ring: &Ring, stages: u32) -> OpenedEnd {
    let ctx = context(&ring.config, ring.domain)?;
    let (back, out) = hop(&ctx, "ping", stages, 0)?;
    wait_for(|| out.subscription_count() > 0 && back.matched_count() > 0)?;
    Ok(Box::new(End {
        out,
        back,
        _ctx: ctx,
    }))
}

impl RingEnd for End {
    fn send(&mut self, payload: &[u8]) -> Result<(), BenchError> {
        self.out.publish(Blob::from(payload)).map_err(err)
    }

    fn recv(&mut self) -> Result<[u8; 8], BenchError> {
        seq_of(&self.back.wait_for_message(WAIT).map_err(err)?)
    }
}

//! myelin in the `net` ring: contexts with shared memory off, so every
//! message crosses zenoh through the run's router. Each stage is a polling
//! subscription whose thread wakes and republishes (zenoh's thread hands
//! the message over, as to any executor); the measuring end publishes and
//! waits for the reply the same way. In `myelin-service` mode the stage is
//! an echo service (a service type, run by an executor thread) and the
//! measuring end, a myelin client, calls it (myelin to myelin: the
//! request/reply topics). In `myelin-queryable` mode the same server is
//! called as a ROS 2 client on rmw_zenoh calls it: a raw zenoh `get` on
//! the service's key expression (its queryable). In `myelin-image` mode
//! the ring carries `sensor_msgs/Image`s (CDR, as to and from ROS 2 nodes)
//! whose pixels are the payload, where `myelin` carries `Blob`s.

use std::path::Path;

use myelin::{Blob, Client, Context, Executor, Publisher, QoS, ServiceType, Subscription};
use myelin_msgs::sensor_msgs::Image;

use crate::harness::{BenchError, Job, size_label};
use crate::scenarios::net::{
    NetParams, NetRing, OpenedEnd, Ring, RingEnd, WAIT, err, is_probe, run, seq_of, until_released,
    wait_for,
};

/// myelin's part in the ring: one way of forwarding.
pub(super) const RING: NetRing = NetRing {
    modes: &[
        "myelin",
        "myelin-image",
        "myelin-service",
        "myelin-queryable",
    ],
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
                NetParams {
                    count,
                    size,
                    hosts: false,
                },
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

/// A message type the ring carries: made from a payload, read back.
trait Carried: myelin::Message {
    fn wrap(payload: &[u8]) -> Self;
    fn payload(&self) -> &[u8];
}

impl Carried for Blob {
    fn wrap(payload: &[u8]) -> Blob {
        Blob::from(payload)
    }
    fn payload(&self) -> &[u8] {
        self
    }
}

/// An RGB image one row high whose pixels are the payload.
impl Carried for Image {
    fn wrap(payload: &[u8]) -> Image {
        Image {
            height: 1,
            width: (payload.len() / 3) as u32,
            encoding: "rgb8".into(),
            step: payload.len() as u32,
            data: payload.to_vec(),
            ..Default::default()
        }
    }
    fn payload(&self) -> &[u8] {
        &self.data
    }
}

/// A node `name` reading ring topic `from` and writing ring topic `to`,
/// reliable keep_all both (zenoh's `Block`: see the module `net`'s
/// scenario on why a ring never drops).
fn hop<T: Carried>(
    ctx: &Context,
    name: &str,
    from: u32,
    to: u32,
) -> Result<(Subscription<T>, Publisher<T>), BenchError> {
    let node = ctx.create_node(name).map_err(err)?;
    let out = node
        .create_publisher::<T>(&topic(to), QoS::keep_all())
        .map_err(err)?;
    let sub = node
        .create_polling_subscription::<T>(&topic(from), QoS::keep_all(), Default::default())
        .map_err(err)?;
    Ok((sub, out))
}

/// The echo service of `myelin-service` mode: the reply is the request.
struct Echo;
impl ServiceType for Echo {
    type Request = Blob;
    type Response = Blob;
    const TYPE_NAME: &'static str = "myelin_bench/srv/Echo";
    // A fixed hash, so the raw caller of `myelin-queryable` knows the key.
    const ROS_TYPE_HASH: Option<&'static str> =
        Some("RIHS01_0000000000000000000000000000000000000000000000000000000000000001");
}

const ECHO: &str = "/bench_net/echo";

/// Serve `total` echo calls, then return.
fn service_stage(ring: &Ring, total: u64) -> Result<(), BenchError> {
    let ctx = context(&ring.config, ring.domain)?;
    let node = ctx.create_node("echo").map_err(err)?;
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let mut left = total;
    let _srv = node
        .create_service_for::<Echo>(ECHO, move |req| {
            if req.is_empty() {
                // The measuring end's probe.
                return req;
            }
            left = left.saturating_sub(1);
            if left == 0 {
                let _ = tx.send(());
            }
            req
        })
        .map_err(err)?;
    let mut exec = Executor::new();
    exec.add_node(&node).map_err(err)?;
    let stop = exec.stop_handle();
    let spin = std::thread::spawn(move || exec.spin());
    println!("ready");
    let served = rx.recv_timeout(WAIT * 10).map_err(err);
    until_released();
    stop.stop();
    let _ = spin.join();
    served
}

fn stage(ring: &Ring, i: u32, total: u64) -> Result<(), BenchError> {
    match ring.mode {
        "myelin" => forward::<Blob>(ring, i, total),
        "myelin-image" => forward::<Image>(ring, i, total),
        _ => service_stage(ring, total),
    }
}

/// Republish every message of `T` this stage reads.
fn forward<T: Carried>(ring: &Ring, i: u32, total: u64) -> Result<(), BenchError> {
    let ctx = context(&ring.config, ring.domain)?;
    let (sub, out) = hop::<T>(&ctx, &format!("stage{i}"), i, i + 1)?;
    println!("ready");
    // Messages wait in the subscription's buffer until our
    // publisher has seen the next stage (nothing is sent before).
    wait_for(|| out.subscription_count() > 0)?;
    let mut left = total;
    while left > 0 {
        let m = sub.wait_for_message(WAIT).map_err(err)?;
        if !is_probe(m.payload()) {
            left -= 1;
        }
        out.publish(m.into_owned()).map_err(err)?;
    }
    until_released();
    Ok(())
}

/// The measuring end: node `ping` writes position 0 and reads position
/// `stages`. Fields drop in order: publisher, subscription, context.
struct End<T: Carried> {
    out: Publisher<T>,
    back: Subscription<T>,
    _ctx: Context,
}

/// The measuring end of `myelin-service` mode: each send is a call, whose
/// reply the next recv returns.
struct Caller {
    client: Client<Blob, Blob>,
    reply: Option<Blob>,
    _ctx: Context,
}

impl RingEnd for Caller {
    fn send(&mut self, payload: &[u8]) -> Result<(), BenchError> {
        self.reply = Some(self.client.call(Blob::from(payload), WAIT).map_err(err)?);
        Ok(())
    }

    fn recv(&mut self) -> Result<[u8; 8], BenchError> {
        seq_of(&self.reply.take().ok_or_else(|| err("no call made"))?)
    }
}

/// The measuring end of `myelin-queryable`: a raw zenoh `get` per call, as
/// a ROS 2 client on rmw_zenoh sends it (without the attachment: the
/// server answers either way).
struct RawCaller {
    session: myelin_zenoh::zenoh::Session,
    key: String,
    reply: Option<Vec<u8>>,
}

impl RawCaller {
    fn get(&self, payload: Vec<u8>) -> Result<Vec<u8>, BenchError> {
        use myelin_zenoh::zenoh::Wait;
        use myelin_zenoh::zenoh::query::{ConsolidationMode, QueryTarget};
        let replies = self
            .session
            .get(&self.key)
            .payload(payload)
            .target(QueryTarget::AllComplete)
            .consolidation(ConsolidationMode::None)
            .timeout(WAIT)
            .wait()
            .map_err(err)?;
        let reply = replies.recv().map_err(err)?;
        let sample = reply.result().map_err(|e| err(format!("{e:?}")))?;
        Ok(sample.payload().to_bytes().into_owned())
    }
}

impl RingEnd for RawCaller {
    fn send(&mut self, payload: &[u8]) -> Result<(), BenchError> {
        self.reply = Some(self.get(payload.to_vec())?);
        Ok(())
    }

    fn recv(&mut self) -> Result<[u8; 8], BenchError> {
        seq_of(&self.reply.take().ok_or_else(|| err("no call made"))?)
    }
}

fn open(ring: &Ring, stages: u32) -> OpenedEnd {
    if ring.mode == "myelin-queryable" {
        let session =
            myelin_zenoh::config::open(myelin_zenoh::config::from_file(&ring.config).map_err(err)?)
                .map_err(err)?;
        let key = myelin_zenoh::names::topic_key(
            ring.domain,
            ECHO,
            Echo::TYPE_NAME,
            Echo::ROS_TYPE_HASH.unwrap_or_default(),
        )
        .map_err(err)?;
        let c = RawCaller {
            session,
            key,
            reply: None,
        };
        // The server's queryable: wait until a call reaches it (an empty
        // probe, which the server does not count).
        wait_for(|| c.get(Vec::new()).is_ok())?;
        return Ok(Box::new(c));
    }
    if ring.mode == "myelin-service" {
        let ctx = context(&ring.config, ring.domain)?;
        let node = ctx.create_node("caller").map_err(err)?;
        let client = node.create_client_for::<Echo>(ECHO).map_err(err)?;
        if !client.wait_for_service(WAIT) {
            return Err(err("the echo service never appeared"));
        }
        return Ok(Box::new(Caller {
            client,
            reply: None,
            _ctx: ctx,
        }));
    }
    if ring.mode == "myelin-image" {
        return end::<Image>(ring, stages);
    }
    end::<Blob>(ring, stages)
}

fn end<T: Carried>(ring: &Ring, stages: u32) -> OpenedEnd {
    let ctx = context(&ring.config, ring.domain)?;
    let (back, out) = hop::<T>(&ctx, "ping", stages, 0)?;
    wait_for(|| out.subscription_count() > 0 && back.matched_count() > 0)?;
    Ok(Box::new(End {
        out,
        back,
        _ctx: ctx,
    }))
}

impl<T: Carried> RingEnd for End<T> {
    fn send(&mut self, payload: &[u8]) -> Result<(), BenchError> {
        self.out.publish(T::wrap(payload)).map_err(err)
    }

    fn recv(&mut self) -> Result<[u8; 8], BenchError> {
        seq_of(self.back.wait_for_message(WAIT).map_err(err)?.payload())
    }

    fn recv_within(&mut self, wait: std::time::Duration) -> Result<Option<[u8; 8]>, BenchError> {
        match self.back.wait_for_message(wait) {
            Ok(m) => seq_of(m.payload()).map(Some),
            Err(_) => Ok(None),
        }
    }
}

//! Raw zenoh in the `net` ring, with the same session configuration as
//! myelin's: each stage republishes inside zenoh's subscriber callback
//! (`zenoh-callback`: no thread hand-off, zenoh's fastest), or zenoh's
//! callback hands the sample to the stage's own thread through a channel,
//! which republishes (`zenoh-thread`: the same threading as myelin's).

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use myelin_zenoh::zenoh::{self, Wait};

use crate::harness::BenchError;
use crate::scenarios::net::{NetRing, OpenedEnd, Ring, RingEnd, WAIT, err, seq_of, wait_for};

/// zenoh's part in the ring: two ways of forwarding.
pub(super) const RING: NetRing = NetRing {
    modes: &["zenoh-callback", "zenoh-thread"],
    stage,
    open,
};

fn session(config: &Path) -> Result<zenoh::Session, BenchError> {
    myelin_zenoh::config::open(myelin_zenoh::config::from_file(config).map_err(err)?).map_err(err)
}

fn key(tag: &str, i: u32) -> String {
    format!("bench_net/{tag}/s{i}")
}

fn stage(ring: &Ring, i: u32, total: u64) -> Result<(), BenchError> {
    let tag = ring.tag.as_str();
    match ring.mode {
        "zenoh-callback" => {
            let (s, out) = stage_session(&ring.config, tag, i)?;
            let (tx, rx) = mpsc::channel::<()>();
            let mut left = total;
            let _sub = s
                .declare_subscriber(key(tag, i))
                .callback_mut(move |sample| {
                    let _ = out.put(sample.payload().clone()).wait();
                    left -= 1;
                    if left == 0 {
                        let _ = tx.send(());
                    }
                })
                .wait()
                .map_err(err)?;
            rx.recv_timeout(WAIT * 10).map_err(err)?;
        }
        "zenoh-thread" => {
            let (s, out) = stage_session(&ring.config, tag, i)?;
            let (_sub, rx) = channel_subscriber(&s, key(tag, i))?;
            for _ in 0..total {
                let p = rx.recv_timeout(WAIT).map_err(err)?;
                out.put(p).wait().map_err(err)?;
            }
        }
        other => return Err(err(format!("bad kind {other:?}"))),
    }
    Ok(())
}

/// A stage's session and publisher to the next stage; says `ready`,
/// then waits until the next stage listens (so the caller subscribes only
/// then: the ping waits for our subscriber before sending).
fn stage_session(
    config: &Path,
    tag: &str,
    i: u32,
) -> Result<(zenoh::Session, zenoh::pubsub::Publisher<'static>), BenchError> {
    let s = session(config)?;
    let out = s.declare_publisher(key(tag, i + 1)).wait().map_err(err)?;
    println!("ready");
    wait_matching(&out)?;
    Ok((s, out))
}

/// A subscriber whose callback hands each payload to a channel.
fn channel_subscriber(
    s: &zenoh::Session,
    key: String,
) -> Result<
    (
        zenoh::pubsub::Subscriber<()>,
        mpsc::Receiver<zenoh::bytes::ZBytes>,
    ),
    BenchError,
> {
    let (tx, rx) = mpsc::channel();
    let sub = s
        .declare_subscriber(key)
        .callback(move |sample| {
            let _ = tx.send(sample.payload().clone());
        })
        .wait()
        .map_err(err)?;
    Ok((sub, rx))
}

/// Wait until a publisher has a matching subscriber.
fn wait_matching(p: &zenoh::pubsub::Publisher<'_>) -> Result<(), BenchError> {
    wait_for(|| p.matching_status().wait().is_ok_and(|m| m.matching()))
}

/// The measuring end, the same for both modes: publishes to position 0,
/// hands replies from position `stages` to this thread. Fields drop in
/// order: channel, subscriber, publisher, session.
struct End {
    rx: mpsc::Receiver<zenoh::bytes::ZBytes>,
    _sub: zenoh::pubsub::Subscriber<()>,
    out: zenoh::pubsub::Publisher<'static>,
    _session: zenoh::Session,
}

fn open(ring: &Ring, stages: u32) -> OpenedEnd {
    let s = session(&ring.config)?;
    let out = s.declare_publisher(key(&ring.tag, 0)).wait().map_err(err)?;
    let (sub, rx) = channel_subscriber(&s, key(&ring.tag, stages))?;
    wait_matching(&out)?;
    // The last stage's publisher matches our subscriber.
    std::thread::sleep(Duration::from_millis(200));
    Ok(Box::new(End {
        rx,
        _sub: sub,
        out,
        _session: s,
    }))
}

impl RingEnd for End {
    fn send(&mut self, payload: &[u8]) -> Result<(), BenchError> {
        self.out.put(payload.to_vec()).wait().map_err(err)
    }

    fn recv(&mut self) -> Result<[u8; 8], BenchError> {
        seq_of(&self.rx.recv_timeout(WAIT).map_err(err)?.to_bytes())
    }
}

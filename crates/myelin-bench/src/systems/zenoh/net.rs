//! Raw zenoh in the `net` ring, with the same session configuration as
//! myelin's: each stage republishes inside zenoh's subscriber callback
//! (`zenoh-callback`: no thread hand-off, zenoh's fastest), or zenoh's
//! callback hands the sample to the stage's own thread through a channel,
//! which republishes (`zenoh-thread`: the same threading as myelin's).
//! `zenoh-queryable`: the stage is a queryable that replies with the
//! query's payload (in zenoh's callback), the measuring end calls it with
//! `get` as rmw_zenoh's clients do (the baseline of service calls).

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use myelin_zenoh::zenoh::qos::CongestionControl;
use myelin_zenoh::zenoh::{self, Wait};

use crate::harness::BenchError;
use crate::scenarios::net::{
    NetRing, OpenedEnd, Ring, RingEnd, WAIT, err, is_probe, seq_of, until_released, wait_for,
};

/// zenoh's part in the ring: two ways of forwarding.
pub(super) const RING: NetRing = NetRing {
    modes: &["zenoh-callback", "zenoh-thread", "zenoh-queryable"],
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
                    let probe = is_probe(&sample.payload().to_bytes());
                    let _ = out.put(sample.payload().clone()).wait();
                    if probe {
                        return;
                    }
                    left -= 1;
                    if left == 0 {
                        let _ = tx.send(());
                    }
                })
                .wait()
                .map_err(err)?;
            rx.recv_timeout(WAIT * 10).map_err(err)?;
            until_released();
        }
        "zenoh-queryable" => {
            let s = session(&ring.config)?;
            let (tx, rx) = mpsc::channel::<()>();
            let mut left = total;
            let _q = s
                .declare_queryable(key(tag, 0))
                .complete(true)
                .callback_mut(move |q| {
                    let payload = q.payload().cloned().unwrap_or_default();
                    // An empty query is the measuring end's probe.
                    let probe = payload.is_empty();
                    let _ = q.reply(q.key_expr().clone(), payload).wait();
                    if probe {
                        return;
                    }
                    left = left.saturating_sub(1);
                    if left == 0 {
                        let _ = tx.send(());
                    }
                })
                .wait()
                .map_err(err)?;
            println!("ready");
            rx.recv_timeout(WAIT * 10).map_err(err)?;
            until_released();
        }
        "zenoh-thread" => {
            let (s, out) = stage_session(&ring.config, tag, i)?;
            let (_sub, rx) = channel_subscriber(&s, key(tag, i))?;
            let mut left = total;
            while left > 0 {
                let p = rx.recv_timeout(WAIT).map_err(err)?;
                if !is_probe(&p.to_bytes()) {
                    left -= 1;
                }
                out.put(p).wait().map_err(err)?;
            }
            until_released();
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
    let out = publisher(&s, key(tag, i + 1))?;
    println!("ready");
    wait_matching(&out)?;
    Ok((s, out))
}

/// A ring's publisher: reliable, and blocking rather than dropping when
/// zenoh's queue is full (as myelin's reliable keep_all; the scenario
/// says why a ring never drops).
fn publisher(
    s: &zenoh::Session,
    key: String,
) -> Result<zenoh::pubsub::Publisher<'static>, BenchError> {
    s.declare_publisher(key)
        .congestion_control(CongestionControl::Block)
        .wait()
        .map_err(err)
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

/// The measuring end of `zenoh-queryable`: each send is a `get`, whose
/// first reply the next recv returns.
struct Getter {
    session: zenoh::Session,
    key: String,
    reply: Option<zenoh::bytes::ZBytes>,
}

impl RingEnd for Getter {
    fn send(&mut self, payload: &[u8]) -> Result<(), BenchError> {
        let replies = self
            .session
            .get(&self.key)
            .payload(payload.to_vec())
            .target(zenoh::query::QueryTarget::AllComplete)
            .consolidation(zenoh::query::ConsolidationMode::None)
            .timeout(WAIT)
            .wait()
            .map_err(err)?;
        let reply = replies.recv().map_err(err)?;
        let sample = reply.result().map_err(|e| err(format!("{e:?}")))?;
        self.reply = Some(sample.payload().clone());
        Ok(())
    }

    fn recv(&mut self) -> Result<[u8; 8], BenchError> {
        let r = self.reply.take().ok_or_else(|| err("no get made"))?;
        seq_of(&r.to_bytes())
    }
}

fn open(ring: &Ring, stages: u32) -> OpenedEnd {
    if ring.mode == "zenoh-queryable" {
        let s = session(&ring.config)?;
        let key = key(&ring.tag, 0);
        // The queryable is declared before the stage says ready; wait
        // until a get reaches it (an empty probe, which the stage does not
        // count).
        wait_for(|| {
            s.get(&key)
                .target(zenoh::query::QueryTarget::AllComplete)
                .timeout(Duration::from_secs(1))
                .wait()
                .is_ok_and(|r| r.recv().is_ok_and(|r| r.result().is_ok()))
        })?;
        return Ok(Box::new(Getter {
            session: s,
            key,
            reply: None,
        }));
    }
    let s = session(&ring.config)?;
    let out = publisher(&s, key(&ring.tag, 0))?;
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

    fn recv_within(&mut self, wait: Duration) -> Result<Option<[u8; 8]>, BenchError> {
        match self.rx.recv_timeout(wait) {
            Ok(p) => seq_of(&p.to_bytes()).map(Some),
            Err(mpsc::RecvTimeoutError::Timeout) => Ok(None),
            Err(e) => Err(err(e)),
        }
    }
}

//! gRPC (tonic, HTTP/2 over 127.0.0.1) as the peer of `rpc` (feature
//! `grpc`): the same client/server chain, so the table has a gRPC row
//! beside myelin's. Each server is its own
//! tonic server on a loopback port; server_i's handler calls server_{i+1}.
//! Messages are raw bytes (a pass-through codec, no protobuf codegen): the
//! request carries the sequence number in its first 8 bytes.

use std::convert::Infallible;
use std::future::Future;
use std::net::TcpListener;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut};
use http::uri::PathAndQuery;
use tonic::Status;
use tonic::body::Body;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::server::{NamedService, UnaryService};
use tonic::transport::{Channel, Server};

use super::Runs;
use crate::harness::stats::LatencyRecorder;
use crate::harness::{
    BenchError, Job, Meter, Outcome, now_ns, period_of, rate_label, size_label, sleep_until,
    warmup_for,
};
use crate::scenarios::relay::RelayParams;

pub(super) const RUNS: Runs = Runs {
    rpc: Some(jobs),
    ..Runs::NONE
};

/// The job: the chain over loopback.
fn jobs(p: RelayParams) -> Vec<Job> {
    vec![Job::new(
        format!(
            "rpc/grpc/tonic-loopback {} {}",
            rate_label(p.rate),
            size_label(p.size)
        ),
        move || chain(p),
    )]
}

const PATH: &str = "/myelin.Relay/Call";

/// A pass-through codec: messages are the bytes on the wire.
#[derive(Debug, Clone, Copy, Default)]
struct Raw;

impl Codec for Raw {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = Raw;
    type Decoder = Raw;
    fn encoder(&mut self) -> Raw {
        Raw
    }
    fn decoder(&mut self) -> Raw {
        Raw
    }
}

impl Encoder for Raw {
    type Item = Vec<u8>;
    type Error = Status;
    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for Raw {
    type Item = Vec<u8>;
    type Error = Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, Status> {
        let mut v = vec![0u8; src.remaining()];
        src.copy_to_slice(&mut v);
        Ok(Some(v))
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// One hop's handler: answer (last hop) or forward to the next server.
#[derive(Clone)]
struct Hop {
    next: Option<tonic::client::Grpc<Channel>>,
}

impl UnaryService<Vec<u8>> for Hop {
    type Response = Vec<u8>;
    type Future = BoxFuture<Result<tonic::Response<Vec<u8>>, Status>>;

    fn call(&mut self, req: tonic::Request<Vec<u8>>) -> Self::Future {
        let next = self.next.clone();
        Box::pin(async move {
            let body = req.into_inner();
            match next {
                None => Ok(tonic::Response::new(body[..8.min(body.len())].to_vec())),
                Some(mut c) => {
                    c.ready()
                        .await
                        .map_err(|e| Status::unavailable(e.to_string()))?;
                    let r = c
                        .unary(
                            tonic::Request::new(body),
                            PathAndQuery::from_static(PATH),
                            Raw,
                        )
                        .await?;
                    Ok(tonic::Response::new(r.into_inner()))
                }
            }
        })
    }
}

/// The routing service tonic's server runs.
#[derive(Clone)]
struct RelaySvc {
    hop: Hop,
}

impl NamedService for RelaySvc {
    const NAME: &'static str = "myelin.Relay";
}

impl tower::Service<http::Request<Body>> for RelaySvc {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<http::Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let hop = self.hop.clone();
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(Raw);
            Ok(grpc.unary(hop, req).await)
        })
    }
}

fn err(e: impl std::fmt::Display) -> BenchError {
    BenchError::setup("grpc", e)
}

async fn connect(port: u16) -> Result<tonic::client::Grpc<Channel>, BenchError> {
    let uri = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match Channel::from_shared(uri.clone())
            .map_err(err)?
            .connect()
            .await
        {
            Ok(ch) => return Ok(tonic::client::Grpc::new(ch)),
            Err(e) if Instant::now() > deadline => {
                return Err(err(format!("cannot connect to {uri}: {e}")));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// The gRPC chain: `p.hops` servers on loopback, a paced source.
fn chain(p: RelayParams) -> Result<Outcome, BenchError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(err)?;
    let hops = p.hops as usize;
    let ports: Vec<u16> = (0..hops)
        .map(|_| {
            let l = TcpListener::bind("127.0.0.1:0").map_err(err)?;
            Ok(l.local_addr().map_err(err)?.port())
        })
        .collect::<Result<_, BenchError>>()?;
    // Start the servers from the last one back, so each can connect onward.
    let mut stops = Vec::new();
    let mut client = None;
    for i in (0..hops).rev() {
        let hop = Hop {
            next: client.take(),
        };
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        stops.push(tx);
        let addr = format!("127.0.0.1:{}", ports[i]).parse().map_err(err)?;
        rt.spawn(
            Server::builder()
                .add_service(RelaySvc { hop })
                .serve_with_shutdown(addr, async {
                    let _ = rx.await;
                }),
        );
        client = Some(rt.block_on(connect(ports[i]))?);
    }
    let mut source = client.expect("at least one hop");
    let warm = warmup_for(p.count);
    let total = p.count + warm;
    let period = period_of(p.rate)?;
    let mut rec = LatencyRecorder::with_time_series();
    let mut failed = 0u64;
    let mut body = vec![0xA5u8; p.size.max(8)];
    let meter = Meter::start();
    let t0 = now_ns();
    let start = Instant::now();
    for seq in 0..total {
        sleep_until(start + period * (seq as u32 + 1));
        body[..8].copy_from_slice(&seq.to_le_bytes());
        let sent = now_ns();
        let req = body.clone();
        let answer = rt.block_on(async {
            source
                .ready()
                .await
                .map_err(|e| Status::unavailable(e.to_string()))?;
            source
                .unary(
                    tonic::Request::new(req),
                    PathAndQuery::from_static(PATH),
                    Raw,
                )
                .await
        });
        let done = now_ns();
        match answer {
            Ok(r) if r.get_ref().as_slice() == seq.to_le_bytes() => {
                if seq >= warm {
                    rec.record_at(
                        sent.saturating_sub(t0) as f64 / 1e9,
                        done.saturating_sub(sent),
                    );
                }
            }
            _ => failed += 1,
        }
    }
    for s in stops {
        let _ = s.send(());
    }
    let outcome = meter.finish(
        "rpc",
        "grpc",
        format!(
            "tonic-loopback {} {}",
            rate_label(p.rate),
            size_label(p.size)
        ),
        rec,
        total * u64::from(p.hops),
        failed,
        Some(p.hops),
        vec!["tonic 0.14 over HTTP/2 on 127.0.0.1, one server per hop, 2 runtime workers".into()],
    );
    rt.shutdown_timeout(Duration::from_secs(2));
    Ok(outcome)
}

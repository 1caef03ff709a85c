//! `myelin perf ping` / `myelin perf pong` (see `myelin_bench::perf`).

use std::time::Duration;

use myelin_bench::perf::{self, PerfConfig, PerfError, Row, Transport, WaitMode};

use crate::cli::{PerfCommand, PerfCommon, PingArgs, TransportArg, WaitArg};

fn seconds(flag: &'static str, v: f64) -> Result<Duration, PerfError> {
    if !(v.is_finite() && (0.0..=1e7).contains(&v)) {
        return Err(PerfError::InvalidArg {
            flag,
            reason: format!("{v}: must be a number of seconds from 0 to 10000000"),
        });
    }
    Ok(Duration::from_secs_f64(v))
}

fn config(c: &PerfCommon) -> Result<PerfConfig, Box<dyn std::error::Error>> {
    let size = super::bench::parse_size(&c.size)?;
    Ok(PerfConfig {
        transport: match c.transport {
            TransportArg::Intra => Transport::Intra,
            TransportArg::Shm => Transport::Shm,
            TransportArg::Zenoh => Transport::Zenoh,
        },
        wait: match c.wait {
            WaitArg::Block => WaitMode::Block,
            WaitArg::Poll => WaitMode::Poll,
        },
        size,
        rate: None,
        duration: Duration::from_secs(10),
        warmup: Duration::from_secs(1),
        domain: c.domain,
        loan: !c.copy,
        local: false,
        match_timeout: Duration::from_secs(10),
    })
}

/// Pinning and priority first, so every thread created later inherits
/// them; the wake-up latency request, held while the returned value lives.
fn place(c: &PerfCommon) -> Result<Option<myelin::CpuWakeupLatency>, PerfError> {
    if let Some(cpu) = c.cpu {
        perf::set_affinity(cpu)?;
    }
    if let Some(p) = c.rt_priority {
        perf::set_rt_priority(p)?;
    }
    c.cpu_wakeup_latency
        .map(|us| myelin::CpuWakeupLatency::hold(Duration::from_micros(us)))
        .transpose()
        .map_err(|e| PerfError::Myelin(e.to_string()))
}

/// Run `myelin perf ...`.
pub fn run(cmd: PerfCommand) -> Result<(), Box<dyn std::error::Error>> {
    match cmd {
        PerfCommand::Pong(c) => {
            let mut cfg = config(&c)?;
            cfg.local = false;
            if cfg.transport == Transport::Intra {
                return Err(PerfError::InvalidArg {
                    flag: "transport",
                    reason: "a separate pong needs shm (intra is for `perf ping --local`)".into(),
                }
                .into());
            }
            cfg.validate()?;
            let _awake = place(&c)?;
            let ctx = myelin::Context::builder()
                .domain_id(cfg.domain)
                .shared_memory(true)
                .build()?;
            let echoed = perf::pong(&cfg, &ctx, || {
                eprintln!(
                    "pong: echoing on domain {} ({:?}, {:?} wait); Ctrl-C to stop",
                    cfg.domain, cfg.transport, cfg.wait
                );
            })?;
            if echoed == 0 {
                eprintln!(
                    "pong: stopped; no ping came (start `myelin perf ping --domain {}` while pong runs)",
                    cfg.domain
                );
            } else {
                eprintln!("pong: stopped; echoed {echoed} pings in the last run");
            }
            Ok(())
        }
        PerfCommand::Ping(a) => ping(a),
    }
}

fn ping(a: PingArgs) -> Result<(), Box<dyn std::error::Error>> {
    let mut cfg = config(&a.common)?;
    cfg.rate = match a.rate.trim() {
        "unlimited" | "inf" | "0" => None,
        r => Some(r.parse::<f64>().map_err(|_| PerfError::InvalidArg {
            flag: "rate",
            reason: format!("{r:?}: a number of Hz or `unlimited`"),
        })?),
    };
    cfg.duration = seconds("duration", a.duration)?;
    cfg.warmup = seconds("warmup", a.warmup)?;
    cfg.match_timeout = seconds("timeout", a.timeout)?;
    cfg.local = a.local;
    cfg.validate()?;
    let _awake = place(&a.common)?;
    println!(
        "ping: {:?} transport, {:?} wait, {} B, {}, {} s",
        cfg.transport,
        cfg.wait,
        cfg.size,
        cfg.rate
            .map_or("back to back".to_string(), |r| format!("{r} Hz")),
        a.duration
    );
    println!("{}", Row::header());
    let domain = cfg.domain;
    let report = perf::ping(
        &cfg,
        None,
        |row| println!("{}", row.line()),
        || {
            eprintln!(
                "ping: waiting for a pong on domain {domain} (start `myelin perf pong --domain {domain}`)..."
            )
        },
    )?;
    println!("{}", "-".repeat(Row::header().len()));
    println!("{}  all", report.summary.line());
    if report.interrupted {
        println!("(interrupted: the summary covers what was measured)");
    }
    println!("ping: {}", report.ping.line());
    match &report.pong {
        Some(p) => println!("pong: {}", p.line()),
        None => println!("pong: did not report (interrupted)"),
    }
    if let Some(path) = &a.json {
        let text = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, text).map_err(|e| format!("--json {}: {e}", path.display()))?;
        println!("wrote {}", path.display());
    }
    if let Some(dir) = &a.plot {
        for f in perf::write_plots(dir, &report)? {
            println!("wrote {}", f.display());
        }
    }
    Ok(())
}

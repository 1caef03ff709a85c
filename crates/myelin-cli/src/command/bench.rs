//! `myelin bench`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use myelin_bench::harness::{BenchError, Job};
use myelin_bench::scenarios::{
    self, dispatch::DispatchParams, fanout::FanoutParams, image::ImageParams, relay::RelayParams,
};
use myelin_bench::systems::{self, System};
use myelin_bench::{MachineInfo, Record, Report, render_table, write_plots};

use crate::cli::{BenchArgs, Scenario};

/// Parse "64", "4KiB", "1MiB", "4665600B", "10kB".
pub fn parse_size(s: &str) -> Result<usize, BenchError> {
    let t = s.trim();
    let bad = || BenchError::InvalidArg {
        flag: "size",
        reason: format!("{s:?} is not a size (examples: 64, 4KiB, 1MiB, 4665600)"),
    };
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: usize = num.parse().map_err(|_| bad())?;
    let mult = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1000,
        "kib" | "k" => 1024,
        "mb" => 1_000_000,
        "mib" | "m" => 1024 * 1024,
        _ => return Err(bad()),
    };
    n.checked_mul(mult).ok_or_else(bad)
}

fn chosen_systems(args: &BenchArgs) -> Result<Vec<&'static System>, BenchError> {
    if args.systems.is_empty() {
        return Ok(systems::all());
    }
    args.systems.iter().map(|s| systems::parse(s)).collect()
}

fn duration(args: &BenchArgs, default: f64) -> Result<Duration, BenchError> {
    let secs = args.duration.unwrap_or(default);
    if !(secs.is_finite() && secs > 0.0 && secs < 86_400.0) {
        return Err(BenchError::InvalidArg {
            flag: "duration",
            reason: format!("{secs}: must be a positive number of seconds"),
        });
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Plan the jobs for the arguments.
pub fn plan(args: &BenchArgs) -> Result<Vec<Job>, BenchError> {
    let sys = chosen_systems(args)?;
    let q = args.quick;
    let size = parse_size(args.size.as_deref().unwrap_or("64"))?;
    // relay and rpc share their flags.
    let chain = RelayParams {
        hops: args.hops,
        rate: args.rate.unwrap_or(100.0),
        count: args.count.unwrap_or(if q { 100 } else { 1000 }),
        size,
    };
    Ok(match args.scenario {
        Scenario::Suite => scenarios::suite(q, &sys)?,
        Scenario::Relay if args.processes.is_some() => {
            scenarios::relay::plan_processes(chain, &sys)?
        }
        Scenario::Relay => scenarios::relay::plan(chain, &sys)?,
        Scenario::Rpc => scenarios::rpc::plan(chain, &sys)?,
        Scenario::Topology => unreachable!("handled by `topology`"),
        Scenario::Bag => unreachable!("handled by `bench_bag`"),
        Scenario::Scale => unreachable!("handled by `bench_scale`"),
        Scenario::Icount => unreachable!("handled by `bench_icount`"),
        Scenario::Pingpong => scenarios::pingpong::plan(
            scenarios::pingpong::PingPongParams {
                count: args.count.unwrap_or(if q { 2_000 } else { 20_000 }),
                sizes: if args.size.is_some() {
                    vec![size]
                } else {
                    vec![64, 4096, 1 << 20, 4_665_600]
                },
                ddsperf_secs: if q { 3 } else { 10 },
            },
            &sys,
        )?,
        #[cfg(feature = "zenoh")]
        Scenario::Net => scenarios::net::plan(
            scenarios::net::NetParams {
                count: args.count.unwrap_or(if q { 500 } else { 5_000 }),
                size,
                hosts: args.hosts,
            },
            &sys,
        )?,
        #[cfg(not(feature = "zenoh"))]
        Scenario::Net => {
            return Err(BenchError::InvalidArg {
                flag: "scenario",
                reason: "`net` needs the `zenoh` feature (on by default)".into(),
            });
        }
        Scenario::Ipc => scenarios::ipc::plan(
            scenarios::ipc::IpcParams {
                count: args.count.unwrap_or(if q { 2_000 } else { 20_000 }),
                size,
            },
            &sys,
        )?,
        Scenario::Fanout => scenarios::fanout::plan(
            FanoutParams {
                rate: args.rate.unwrap_or(100.0),
                duration: duration(args, if q { 1.0 } else { 5.0 })?,
                nodes: args.nodes,
            },
            &sys,
        )?,
        Scenario::Image if args.processes.is_some() => {
            // Camera => a stage in another process => viewer (back in the
            // camera's process): two cross-process hops per frame, the
            // executors blocking or anticipating; then the low-latency
            // mode, one hop to a busy-polling viewer process.
            let myelin_only: Vec<_> = sys.iter().copied().filter(|s| s.name == "myelin").collect();
            let mut jobs = Vec::new();
            for size in [1440 * 1080 * 3, 320 * 240 * 3] {
                jobs.extend(scenarios::relay::plan_processes(
                    scenarios::relay::RelayParams {
                        hops: 2,
                        rate: args.rate.unwrap_or(30.0),
                        count: args.count.unwrap_or(if q { 20 } else { 300 }),
                        size,
                    },
                    &myelin_only,
                )?);
            }
            jobs.extend(scenarios::image::plan_processes(
                ImageParams {
                    rate: args.rate.unwrap_or(30.0),
                    frames: args.count.unwrap_or(if q { 20 } else { 300 }),
                    fifo: args.rt_priority,
                },
                &myelin_only,
            )?);
            jobs
        }
        Scenario::Image => scenarios::image::plan(
            ImageParams {
                rate: args.rate.unwrap_or(30.0),
                frames: args.count.unwrap_or(if q { 20 } else { 300 }),
                fifo: args.rt_priority,
            },
            &sys,
        )?,
        Scenario::Dispatch => scenarios::dispatch::plan(
            DispatchParams {
                samples: args.count.unwrap_or(if q { 100_000 } else { 200_000 }),
            },
            &sys,
        )?,
    })
}

/// The line prefix a child uses for its record on stdout.
const RECORD_MARK: &str = "MYELIN-RECORD ";

/// Run one job; write its plots; return its records (one, or a paired
/// job's several).
fn run_job(
    job: Job,
    plot: Option<&std::path::Path>,
) -> Result<Vec<Record>, Box<dyn std::error::Error>> {
    let name = job.name.clone();
    let outcome = (job.run)().map_err(|e| format!("{name}: {e}"))?;
    if let Some(dir) = plot {
        plot_outcome(dir, &outcome)?;
    }
    Ok(outcome.records())
}

/// Write the plots of `outcome` and of the rows it measured with it.
fn plot_outcome(
    dir: &std::path::Path,
    outcome: &myelin_bench::harness::Outcome,
) -> Result<(), Box<dyn std::error::Error>> {
    let r = &outcome.record;
    let stem = format!("{}-{}-{}", r.scenario, r.system, r.config);
    let title = format!("{} / {} / {}", r.scenario, r.system, r.config);
    if !outcome.recorder.is_empty() {
        write_plots(dir, &stem, &outcome.recorder, &title)?;
    }
    for more in &outcome.more {
        plot_outcome(dir, more)?;
    }
    Ok(())
}

/// Run job `index` in a child process (this same binary with `--job`):
/// its records, one line each.
fn run_child(index: usize, name: &str) -> Result<Vec<Record>, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find own executable: {e}"))?;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let out = std::process::Command::new(exe)
        .args(&args)
        .arg("--job")
        .arg(index.to_string())
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("{name}: cannot start child process: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let msg = stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("no message");
        return Err(format!(
            "{name}: child failed ({}): {}",
            out.status,
            msg.trim_start_matches("error: ")
        ));
    }
    let records = stdout
        .lines()
        .filter_map(|l| l.strip_prefix(RECORD_MARK))
        .map(|line| {
            serde_json::from_str(line)
                .map_err(|e| format!("{name}: unreadable record from child: {e}"))
        })
        .collect::<Result<Vec<Record>, String>>()?;
    if records.is_empty() {
        return Err(format!("{name}: child printed no record"));
    }
    Ok(records)
}

/// Write `rows` with the machine they were measured on as JSON to `path`
/// (`{ "machine": ..., "rows": [...] }`), and say where.
pub(crate) fn write_rows_json(
    path: &std::path::Path,
    machine: &myelin_bench::MachineInfo,
    rows: &impl serde::Serialize,
) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::write(
        path,
        serde_json::to_string_pretty(&serde_json::json!({ "machine": machine, "rows": rows }))?,
    )?;
    println!("\nJSON: {}", path.display());
    Ok(())
}

/// Run `myelin bench`.
pub fn run(args: BenchArgs) -> Result<(), Box<dyn std::error::Error>> {
    // Held by the parent for the whole run: the request is system-wide,
    // so it covers the child process of every job too.
    let _awake = match args.cpu_wakeup_latency {
        Some(us) if args.job.is_none() => {
            let held = myelin::CpuWakeupLatency::hold(Duration::from_micros(us))?;
            eprintln!(
                "holding the CPU wake-up latency at {us} us ({}): idle CPUs stay in states they leave that fast, at the cost of power",
                myelin::sched::CPU_DMA_LATENCY
            );
            Some(held)
        }
        _ => None,
    };
    if args.scenario == Scenario::Topology {
        return topology(&args);
    }
    if args.scenario == Scenario::Bag {
        return crate::command::bench_bag::run(&args);
    }
    if args.scenario == Scenario::Scale {
        return crate::command::bench_scale::run(&args);
    }
    if args.scenario == Scenario::Icount {
        return crate::command::bench_icount::run(&args);
    }
    let jobs = plan(&args)?;
    if let Some(index) = args.job {
        let n = jobs.len();
        let job = jobs
            .into_iter()
            .nth(index)
            .ok_or_else(|| format!("--job {index}: the plan has {n} jobs"))?;
        for record in run_job(job, args.plot.as_deref())? {
            println!("{RECORD_MARK}{}", serde_json::to_string(&record)?);
        }
        return Ok(());
    }
    let header = MachineInfo::detect();
    // On a terminal a progress bar; otherwise (a log, CI, a pipe) a line
    // per finished run, so a redirected run is never silent for minutes.
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let total = jobs.len();
    let bar = if tty {
        ProgressBar::new(total as u64)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    // Ctrl-C stops after the current run (whose child process the
    // terminal interrupts too) and prints what finished.
    let stop = Arc::new(AtomicBool::new(false));
    {
        let s = stop.clone();
        let _ = ctrlc::set_handler(move || s.store(true, Ordering::Relaxed));
    }
    let stopped = || stop.load(Ordering::Relaxed);
    let mut report = Report {
        header,
        records: Vec::new(),
    };
    let mut failures = Vec::new();
    let mut interrupted = false;
    // Jobs that finished (a paired job adds several records).
    let mut finished = 0;
    for (index, job) in jobs.into_iter().enumerate() {
        if stopped() {
            interrupted = true;
            break;
        }
        bar.set_message(job.name.clone());
        let name = job.name.clone();
        let started = std::time::Instant::now();
        let result = if args.in_process {
            run_job(job, args.plot.as_deref()).map_err(|e| e.to_string())
        } else {
            drop(job);
            run_child(index, &name)
        };
        let cut = stopped();
        match result {
            Ok(records) => {
                report.records.extend(records);
                finished += 1;
                if !tty {
                    eprintln!(
                        "[{}/{total}] {name}: {:.1} s",
                        index + 1,
                        started.elapsed().as_secs_f64()
                    );
                }
            }
            // Interrupted with the rest: not a failure of the run.
            Err(_) if cut => {}
            Err(e) => {
                if tty {
                    bar.println(format!("error: {e}"));
                } else {
                    eprintln!("[{}/{total}] error: {e}", index + 1);
                }
                failures.push(e);
            }
        }
        bar.inc(1);
        if cut {
            interrupted = true;
            break;
        }
    }
    bar.finish_and_clear();
    let h = &report.header;
    let awake = match h.cpu_wakeup_latency.as_str() {
        "none" | "unknown" => String::new(),
        us => format!("; idle CPUs wake within {us} (a CPU wake-up latency request)"),
    };
    println!(
        "myelin bench {:?} on {} ({} cpus), {}, {} at {}; one process per run{awake}\n",
        args.scenario, h.cpu_model, h.nproc, h.kernel, h.rustc, h.git_commit
    );
    println!("{}", myelin_bench::render_legend(&report.records));
    println!("{}", render_table(&report.records));
    if let Some(v) = myelin_bench::harness::verdict::render_verdict(&report.records) {
        println!("\n{v}");
    }
    if let Some(path) = &args.json {
        report.write_json(path)?;
        println!("\nJSON: {}", path.display());
    }
    if let Some(dir) = &args.plot {
        // One chart per scenario, systems side by side (also after
        // Ctrl-C: the runs that finished).
        let charts = myelin_bench::write_comparison_charts(dir, &report.records)?;
        println!(
            "plots: {} ({} comparison chart(s), compare-SCENARIO.svg, and per-run latency plots)",
            dir.display(),
            charts.len()
        );
    }
    if interrupted {
        return Err(format!(
            "interrupted (Ctrl-C) after {finished} of {total} runs: the table shows those that finished"
        )
        .into());
    }
    if !failures.is_empty() {
        return Err(format!(
            "{} run(s) failed:\n  {}",
            failures.len(),
            failures.join("\n  ")
        )
        .into());
    }
    Ok(())
}

/// `myelin bench topology FILE`: the graph in this process, with a progress
/// bar; Ctrl-C stops early and reports what was measured.
fn topology(args: &BenchArgs) -> Result<(), Box<dyn std::error::Error>> {
    let file = args
        .file
        .as_ref()
        .ok_or("myelin bench topology needs a FILE (e.g. topologies/sierra_nevada.json)")?;
    let plans = myelin_bench::topology::load(file)?;
    let secs = match args.duration {
        Some(d) if d.is_finite() && d > 0.0 => d,
        Some(d) => return Err(format!("invalid --duration {d}: must be above 0 seconds").into()),
        None if args.quick => 3.0,
        None => 10.0,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    ctrlc::set_handler(move || s.store(true, Ordering::Relaxed))
        .map_err(|e| format!("cannot handle Ctrl-C: {e}"))?;
    let bar = ProgressBar::new(1000);
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:40}] {elapsed}/{duration}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message(format!("{} ({} nodes)", file.display(), plans.len()));
    let transport = match args.transport.as_deref() {
        None | Some("shm") => myelin_bench::topology::ProcTransport::SharedMemory,
        Some("zenoh") if args.processes.is_some() => myelin_bench::topology::ProcTransport::Zenoh,
        Some("zenoh") => {
            return Err(
                "--transport zenoh needs --processes (one process talks to itself in-process)"
                    .into(),
            );
        }
        Some(other) => {
            return Err(format!("invalid --transport {other:?}: expected shm or zenoh").into());
        }
    };
    let placement = match args.processes.as_deref() {
        None => None,
        Some("per-node") => Some(myelin_bench::topology::Placement::PerNode),
        Some("per-executor") => Some(myelin_bench::topology::Placement::PerExecutor),
        Some(path) => Some(myelin_bench::topology::load_placement(
            std::path::Path::new(path),
            &plans,
        )?),
    };
    let idle: myelin::IdleWait = args
        .idle_wait
        .parse()
        .map_err(|e| format!("invalid --idle-wait: {e}"))?;
    let report = match placement {
        None => myelin_bench::topology::run_in_process(
            &plans,
            &file.display().to_string(),
            Duration::from_secs_f64(secs),
            idle,
            stop,
            |f| bar.set_position((f * 1000.0) as u64),
        )?,
        Some(p) => myelin_bench::topology::run_in_processes_over(
            &plans,
            file,
            p,
            transport,
            Duration::from_secs_f64(secs),
            idle,
            |f| bar.set_position((f * 1000.0) as u64),
        )?,
    };
    bar.finish_and_clear();
    print!("{}", myelin_bench::topology::render(&report));
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .map_err(|e| format!("--json {}: {e}", path.display()))?;
        println!("wrote {}", path.display());
    }
    if let Some(dir) = &args.plot {
        let stem = file
            .file_stem()
            .map_or("topology".to_string(), |s| s.to_string_lossy().into_owned());
        for f in write_plots(dir, &stem, &report.recorder, &stem)? {
            println!("wrote {}", f.display());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_size("64").unwrap(), 64);
        assert_eq!(parse_size("4KiB").unwrap(), 4096);
        assert_eq!(parse_size("1MiB").unwrap(), 1 << 20);
        assert_eq!(parse_size("10kB").unwrap(), 10_000);
        let e = parse_size("12 parsecs").unwrap_err().to_string();
        assert!(e.contains("--size"), "{e}");
    }
}

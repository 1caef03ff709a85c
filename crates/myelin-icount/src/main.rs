//! CI's instruction-count gate: count the hot paths under callgrind and
//! fail when one grew past the checked-in baseline.
//!
//! ```text
//! cargo run --release -p myelin-icount -- --baseline .ci/icount.json
//! cargo run --release -p myelin-icount -- --save-baseline .ci/icount.json
//! ```
//!
//! The same workloads as `myelin bench icount`, without zenoh's (which is
//! never gated), in a binary whose release build leaves out the benchmark
//! suite's peers.

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "\
usage: myelin-icount [--baseline FILE] [--save-baseline FILE] [--tolerance PCT]
                     [--workload NAME]...

Counts the instructions of myelin's hot paths under valgrind's callgrind.
  --baseline FILE       compare with this baseline (JSON: workload ->
                        instructions per operation); fail when a count grew
                        past the tolerance
  --save-baseline FILE  write this run's counts as a baseline; with
                        --workload, update those workloads' rows in FILE
                        and keep the others
  --tolerance PCT       how much a count may grow, in percent (default 5)
  --workload NAME       count only this workload (repeatable; default all)";

struct Args {
    baseline: Option<PathBuf>,
    save: Option<PathBuf>,
    tolerance_pct: f64,
    only: Vec<String>,
}

fn parse(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut args = Args {
        baseline: None,
        save: None,
        tolerance_pct: 5.0,
        only: Vec::new(),
    };
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--baseline" => args.baseline = Some(value()?.into()),
            "--save-baseline" => args.save = Some(value()?.into()),
            "--tolerance" => {
                let v = value()?;
                args.tolerance_pct = v
                    .parse()
                    .map_err(|_| format!("--tolerance {v:?}: not a number"))?;
            }
            "--workload" => args.only.push(value()?),
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(args)
}

fn main() -> ExitCode {
    myelin_icount::workload_if_requested();
    let args = match parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) if e.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match gate(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn gate(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let tolerance = myelin_icount::tolerance(args.tolerance_pct)?;
    let baseline = match &args.baseline {
        Some(path) => Some(myelin_icount::load_baseline(path)?),
        None => None,
    };
    let rows = myelin_icount::run_only(&args.only, |line| eprintln!("icount: {line}"))?;
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|m| m.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_else(|| "an unknown CPU".into());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("myelin-icount on {cpu} ({cpus} cpus); instructions counted by callgrind\n");
    print!(
        "{}",
        myelin_icount::render(&rows, baseline.as_ref(), tolerance)
    );
    if let Some(path) = &args.save {
        myelin_icount::save_baseline(path, &rows, !args.only.is_empty())?;
        println!("baseline written: {}", path.display());
    }
    if let Some(b) = &baseline {
        myelin_icount::gate(&rows, b, tolerance)?;
    }
    Ok(())
}

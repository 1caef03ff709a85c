//! `myelin bench icount`: instructions per operation under callgrind, and
//! the gate that compares them with a checked-in baseline (see
//! `myelin_bench::scenarios::icount`).

use myelin_bench::MachineInfo;
use myelin_bench::harness::BenchError;
use myelin_bench::scenarios::icount::{self, Baseline, Verdict};

use crate::cli::BenchArgs;

/// Run it: a line per workload on stderr, the table on stdout; with
/// `--baseline`, an error when a count grew past the tolerance.
pub fn run(args: &BenchArgs) -> Result<(), Box<dyn std::error::Error>> {
    let tolerance = args.tolerance / 100.0;
    if !(tolerance.is_finite() && (0.0..10.0).contains(&tolerance)) {
        return Err(BenchError::InvalidArg {
            flag: "tolerance",
            reason: format!("{}: a percentage from 0 to 1000", args.tolerance),
        }
        .into());
    }
    let baseline: Option<Baseline> = match &args.baseline {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("reading the baseline {}: {e}", path.display()))?;
            Some(
                serde_json::from_str(&text)
                    .map_err(|e| format!("the baseline {} is not valid: {e}", path.display()))?,
            )
        }
        None => None,
    };
    let h = MachineInfo::detect();
    let rows = icount::run(|line| eprintln!("icount: {line}"))?;
    println!(
        "myelin bench icount on {} ({} cpus), {}, {} at {}; instructions counted by callgrind\n",
        h.cpu_model, h.nproc, h.kernel, h.rustc, h.git_commit
    );
    print!("{}", icount::render(&rows, baseline.as_ref(), tolerance));
    if let Some(path) = &args.json {
        crate::command::bench::write_rows_json(path, &h, &rows)?;
    }
    if let Some(path) = &args.save_baseline {
        std::fs::write(
            path,
            serde_json::to_string_pretty(&icount::baseline_of(&rows))? + "\n",
        )?;
        println!("baseline written: {}", path.display());
    }
    if let Some(b) = &baseline {
        let grew: Vec<String> = rows
            .iter()
            .zip(icount::compare(&rows, b, tolerance))
            .filter_map(|(r, v)| match v {
                Verdict::Grew(x) => Some(format!("{} ({:+.1}%)", r.workload, (x - 1.0) * 100.0)),
                _ => None,
            })
            .collect();
        if !grew.is_empty() {
            return Err(format!(
                "instruction counts grew more than {}%: {}",
                args.tolerance,
                grew.join(", ")
            )
            .into());
        }
    }
    Ok(())
}

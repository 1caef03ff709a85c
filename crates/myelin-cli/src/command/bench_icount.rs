//! `myelin bench icount`: instructions per operation under callgrind, and
//! the gate that compares them with a checked-in baseline (see the
//! myelin-icount crate, whose own binary is CI's gate).

use myelin_bench::MachineInfo;
use myelin_bench::scenarios::icount;

use crate::cli::BenchArgs;

/// Run it: a line per workload on stderr, the table on stdout; with
/// `--baseline`, an error when a count grew past the tolerance.
pub fn run(args: &BenchArgs) -> Result<(), Box<dyn std::error::Error>> {
    let tolerance = icount::tolerance(args.tolerance)?;
    let baseline = match &args.baseline {
        Some(path) => Some(icount::load_baseline(path)?),
        None => None,
    };
    let h = MachineInfo::detect();
    let rows = icount::run_only(&args.workload, |line| eprintln!("icount: {line}"))?;
    println!(
        "myelin bench icount on {} ({} cpus), {}, {} at {}; instructions counted by callgrind\n",
        h.cpu_model, h.nproc, h.kernel, h.rustc, h.git_commit
    );
    print!("{}", icount::render(&rows, baseline.as_ref(), tolerance));
    if let Some(path) = &args.json {
        crate::command::bench::write_rows_json(path, &h, &rows)?;
    }
    if let Some(path) = &args.save_baseline {
        icount::save_baseline(path, &rows, !args.workload.is_empty())?;
        println!("baseline written: {}", path.display());
    }
    if let Some(b) = &baseline {
        icount::gate(&rows, b, tolerance)?;
    }
    Ok(())
}

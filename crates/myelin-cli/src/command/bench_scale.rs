//! `myelin bench scale`: many idle processes on this host, side by side on
//! shared memory and on zenoh (see `myelin_bench::scenarios::scale`).

use std::time::Duration;

use myelin_bench::MachineInfo;
use myelin_bench::harness::BenchError;
use myelin_bench::scenarios::scale::{self, ScaleParams, ScaleTransport};

use crate::cli::BenchArgs;

/// The parameters the arguments ask for.
fn params(args: &BenchArgs) -> Result<ScaleParams, BenchError> {
    let populations = if args.population.is_empty() {
        if args.quick {
            vec![10, 50]
        } else {
            vec![10, 50, 100, 200]
        }
    } else {
        args.population.clone()
    };
    let transports = match args.transport.as_deref() {
        None => vec![
            ScaleTransport::Shm,
            ScaleTransport::Zenoh,
            ScaleTransport::ZenohClient,
        ],
        Some(t) => t
            .split(',')
            .map(ScaleTransport::parse)
            .collect::<Result<_, _>>()?,
    };
    let idle = args.duration.unwrap_or(if args.quick { 2.0 } else { 5.0 });
    if !(idle.is_finite() && idle > 0.0 && idle < 3600.0) {
        return Err(BenchError::InvalidArg {
            flag: "duration",
            reason: format!("{idle}: the idle window is 0 to 3600 seconds"),
        });
    }
    Ok(ScaleParams {
        populations,
        endpoints: args.endpoints,
        idle: Duration::from_secs_f64(idle),
        transports,
    })
}

/// Run it: a line per step on stderr, the table on stdout, JSON and a
/// chart (`scale.svg` in the `--plot` directory) when asked.
pub fn run(args: &BenchArgs) -> Result<(), Box<dyn std::error::Error>> {
    let params = params(args)?;
    let h = MachineInfo::detect();
    let rows = scale::run(&params, |line| eprintln!("scale: {line}"))?;
    println!(
        "myelin bench scale on {} ({} cpus), {}, {} at {}; {} endpoints per process, idle window {:.0} s\n",
        h.cpu_model,
        h.nproc,
        h.kernel,
        h.rustc,
        h.git_commit,
        params.endpoints,
        params.idle.as_secs_f64()
    );
    print!("{}", scale::render(&rows));
    if let Some(path) = &args.json {
        crate::command::bench::write_rows_json(path, &h, &rows)?;
    }
    if let Some(dir) = &args.plot {
        let path = dir.join("scale.svg");
        scale::write_chart(&path, &rows)?;
        println!("chart: {}", path.display());
    }
    Ok(())
}

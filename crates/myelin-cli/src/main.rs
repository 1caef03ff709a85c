//! The `myelin` command: benchmarks now; performance tools and
//! introspection as the transports land.
//!
//! ```text
//! myelin bench                 # the standard suite, every system, one table
//! myelin bench relay --hops 5 --rate 100 --size 1KiB --json out.json --plot plots/
//! ```

mod cli;
mod command;

use clap::Parser;

fn main() {
    // Started by a multi-process benchmark (`myelin bench ipc`, `relay
    // --processes`, `net`, `topology --processes`) as a helper process.
    myelin_bench::child_if_requested();
    let cli = cli::Cli::parse();
    // Warnings (a squatted segment, a missing router, ...) on stderr.
    myelin::init_logging();
    let result = match cli.command {
        cli::Command::Bench(args) => command::bench::run(args),
        cli::Command::Doctor(args) => command::doctor::run(args),
        cli::Command::Perf(cmd) => command::perf::run(cmd),
        cli::Command::Topic(cmd) => command::topic::run(cmd),
        cli::Command::Node(cmd) => command::topic::run_node(cmd),
        cli::Command::Service(cmd) => command::service::run(cmd),
        cli::Command::Param(cmd) => command::param::run(cmd),
        cli::Command::Interface(cmd) => command::interface::run(cmd),
        cli::Command::Bag(cmd) => command::bag::run(cmd),
        cli::Command::Completions { shell } => {
            let mut cmd = <cli::Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "myelin", &mut std::io::stdout());
            Ok(())
        }
        cli::Command::Router(args) => command::router::run(args),
    };
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
}

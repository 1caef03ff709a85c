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
    if prints_for_a_reader(&cli.command) {
        stop_quietly_when_the_reader_leaves();
    }
    // Warnings (a squatted segment, a missing router, ...) on stderr.
    myelin::init_logging();
    let result = match cli.command {
        cli::Command::Bench(args) => command::bench::run(*args),
        cli::Command::Doctor(args) => command::doctor::run(args),
        cli::Command::Perf(cmd) => command::perf::run(cmd),
        cli::Command::Topic(cmd) => command::topic::run(cmd),
        cli::Command::Node(cmd) => command::topic::run_node(cmd),
        cli::Command::Service(cmd) => command::service::run(cmd),
        cli::Command::Action(cmd) => command::action::run(cmd),
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

/// Commands whose job is their output (`topic echo`, `node list`,
/// `interface show`, ...), as opposed to those that drive child processes,
/// files or a router (`bench`, `router`, `perf`, `bag record|play|convert`).
fn prints_for_a_reader(command: &cli::Command) -> bool {
    use cli::Command as C;
    match command {
        C::Topic(_)
        | C::Node(_)
        | C::Service(_)
        | C::Action(_)
        | C::Param(_)
        | C::Interface(_)
        | C::Completions { .. }
        | C::Doctor(_) => true,
        C::Bag(b) => matches!(b, cli::BagCommand::Info { .. }),
        C::Bench(_) | C::Perf(_) | C::Router(_) => false,
    }
}

/// A reader that stops early (`myelin topic echo /imu | head -3`) ends a
/// printing command the way it ends `cat` or `grep`: quietly, by SIGPIPE.
/// Rust ignores SIGPIPE, so `println!` would panic on the closed pipe
/// instead. Sockets are unaffected (the standard library and zenoh send
/// with `MSG_NOSIGNAL`); this process's shared memory is swept by its peers
/// as after any other abrupt exit.
fn stop_quietly_when_the_reader_leaves() {
    // SAFETY: called once at start-up, before any thread exists, so no
    // other thread's signal disposition is changed under it; SIG_DFL for
    // SIGPIPE is a valid disposition.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

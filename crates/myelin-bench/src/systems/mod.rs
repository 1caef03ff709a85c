//! The systems the suite measures, registered in one table.
//!
//! Each system is a module here that exports its [`Runs`]: for every
//! scenario it measures, a function that plans its jobs for that
//! scenario's (already validated) parameters, one job per arrangement, mode
//! or size it runs; and the helper processes those jobs start. [`ALL`]
//! lists every system with its name and what a build needs to measure it
//! (a cargo feature, a program on the PATH). Scenarios iterate the chosen
//! systems and never name one.
//!
//! # Adding a system
//!
//! 1. Write `systems/<name>.rs`: the run functions, and
//!    `pub(super) const RUNS: Runs = Runs { relay: Some(relay_jobs), ..Runs::NONE };`
//!    naming the scenarios it measures (each function returns the jobs,
//!    named `<scenario>/<name>/<config>`, for one scenario's parameters).
//! 2. Declare the module below (behind its feature, if it has one) and add
//!    its line to [`ALL`]: [`System::always`], [`System::program`], or
//!    `behind_feature!` for a peer behind a cargo feature of its name
//!    (declared, with its optional dependencies, in this crate's
//!    `Cargo.toml`, and forwarded by `myelin-cli`'s features).

use crate::harness::{BenchError, Job};
#[cfg(feature = "zenoh")]
use crate::scenarios::net::NetRing;
use crate::scenarios::{
    dispatch::DispatchParams, fanout::FanoutParams, image::Frame, image::ImageParams,
    ipc::IpcParams, pingpong::PingPongParams, relay::RelayParams,
};

mod channel;
pub(crate) mod cyclonedds;
#[cfg(feature = "grpc")]
mod grpc;
#[cfg(feature = "iceoryx2")]
mod iceoryx2;
mod myelin;
mod raw;
#[cfg(feature = "zenoh")]
mod zenoh;

/// A peer behind the cargo feature of its name: its [`Runs`] when the
/// feature is on; when it is off, the system is still known (so
/// `--system` can say which feature to enable) but measures nothing.
macro_rules! behind_feature {
    ($feature:literal, $runs:expr) => {
        System {
            name: $feature,
            what: "",
            needs: Needs::Feature {
                compiled: cfg!(feature = $feature),
            },
            runs: {
                #[cfg(feature = $feature)]
                let runs = $runs;
                #[cfg(not(feature = $feature))]
                let runs = Runs::NONE;
                runs
            },
        }
    };
}

/// Every system this crate knows, in report order (the default of
/// `--system` is all of them that this build can measure).
pub static ALL: &[System] = &[
    // myelin itself: intra-process, shared memory, and its zenoh transport.
    System::always("myelin", myelin::RUNS).what(
        "this library: in-process (dispatch, relay, rpc, fanout, image), shared memory \
         between processes (ipc, pingpong, --processes), zenoh (net); config names the \
         executor arrangement or transport",
    ),
    // zenoh 1.x peers over TCP loopback.
    behind_feature!("zenoh", zenoh::RUNS).what(
        "zenoh 1.x peers over TCP loopback: one session shared by every node (shared) or \
         one per node, as ROS 2 maps nodes (per-node)",
    ),
    // gRPC (tonic) over TCP loopback: the client/server chain.
    behind_feature!("grpc", grpc::RUNS)
        .what("gRPC (tonic) over TCP loopback: the client/server chain of rpc"),
    // iceoryx2 0.10 zero-copy publish-subscribe: the two-process ping-pong.
    behind_feature!("iceoryx2", iceoryx2::RUNS)
        .what("iceoryx2 0.10 zero-copy publish-subscribe between two processes (ipc)"),
    // CycloneDDS through its `ddsperf` tool over UDP loopback: the ping-pong.
    System::program(
        "cyclonedds",
        cyclonedds::INSTALL,
        cyclonedds::installed,
        cyclonedds::RUNS,
    )
    .what("CycloneDDS's ddsperf ping-pong over UDP loopback (pingpong)"),
    // crossbeam channels: the in-process floor.
    System::always("channel", channel::RUNS)
        .what("crossbeam channels: the in-process floor (no bus, no types, no QoS)"),
    // This machine's limits: hand-offs between threads and processes, clock reads, memcpy.
    System::always("raw", raw::RUNS).what(
        "this machine's limits: thread and process hand-offs (futex, spin), clock reads, memcpy, a tick's sleep",
    ),
];

/// A system the suite can measure: one entry of [`ALL`].
#[derive(Debug)]
pub struct System {
    /// The name used on the command line and in reports.
    pub name: &'static str,
    /// What it is, in one line: the report's legend.
    pub what: &'static str,
    /// What a build needs to measure it.
    pub needs: Needs,
    /// How it runs each scenario it measures.
    pub runs: Runs,
}

/// What a build needs to measure a system.
#[derive(Debug, Clone, Copy)]
pub enum Needs {
    /// Nothing: always measured.
    Nothing,
    /// The cargo feature of the system's name.
    Feature {
        /// Whether this build has it.
        compiled: bool,
    },
    /// A program on the PATH.
    Program {
        /// How to install it (for the error when it is missing).
        install: &'static str,
        /// Whether it is installed.
        installed: fn() -> bool,
    },
}

/// How a system runs each scenario it measures (`None`: not measured
/// there). Each function plans the system's jobs for the scenario's
/// validated parameters, in report order.
#[derive(Debug, Clone, Copy)]
pub struct Runs {
    /// [`dispatch`](crate::scenarios::dispatch): same-thread publish to
    /// callback.
    pub dispatch: Option<fn(DispatchParams) -> Vec<Job>>,
    /// [`relay`](crate::scenarios::relay): the relay chain in one process.
    pub relay: Option<fn(RelayParams) -> Vec<Job>>,
    /// `relay --processes`: the relay chain with every relay its own
    /// process.
    pub relay_processes: Option<fn(RelayParams) -> Vec<Job>>,
    /// [`rpc`](crate::scenarios::rpc): the client/server chain.
    pub rpc: Option<fn(RelayParams) -> Vec<Job>>,
    /// [`fanout`](crate::scenarios::fanout): 20 topics x 10 subscribers.
    pub fanout: Option<fn(FanoutParams) -> Vec<Job>>,
    /// [`image`](crate::scenarios::image): one frame size at a time.
    pub image: Option<fn(ImageParams, Frame) -> Vec<Job>>,
    /// `image --processes`: the viewer in another process than the
    /// camera, one frame size at a time.
    pub image_processes: Option<fn(ImageParams, Frame) -> Vec<Job>>,
    /// [`ipc`](crate::scenarios::ipc): round trips between two processes.
    pub ipc: Option<fn(IpcParams) -> Vec<Job>>,
    /// [`pingpong`](crate::scenarios::pingpong): one message size at a time.
    pub pingpong: Option<fn(&PingPongParams, usize) -> Vec<Job>>,
    /// [`net`](crate::scenarios::net): the system's stages and measuring
    /// end of the ring of processes.
    #[cfg(feature = "zenoh")]
    pub net: Option<NetRing>,
    /// The helper processes its runs start.
    pub roles: &'static [Role],
}

impl Runs {
    /// No scenario: the base of a system's `RUNS` (`..Runs::NONE`).
    pub const NONE: Runs = Runs {
        dispatch: None,
        relay: None,
        relay_processes: None,
        rpc: None,
        fanout: None,
        image: None,
        image_processes: None,
        ipc: None,
        pingpong: None,
        #[cfg(feature = "zenoh")]
        net: None,
        roles: &[],
    };
}

/// A helper process of a system's runs: this executable started again with
/// `env` set to the run's spec; `run` does the process's part.
#[derive(Debug)]
pub struct Role {
    /// The environment variable that names the role.
    pub env: &'static str,
    /// How its errors name it.
    pub name: &'static str,
    /// The process's part, given the variable's value.
    pub run: fn(&str) -> Result<(), BenchError>,
}

impl System {
    /// A system every build measures.
    pub const fn always(name: &'static str, runs: Runs) -> System {
        System {
            name,
            what: "",
            needs: Needs::Nothing,
            runs,
        }
    }

    /// `self`, described as `what` in the report's legend.
    pub const fn what(self, what: &'static str) -> System {
        System { what, ..self }
    }

    /// A system measured through a program on the PATH.
    pub const fn program(
        name: &'static str,
        install: &'static str,
        installed: fn() -> bool,
        runs: Runs,
    ) -> System {
        System {
            name,
            what: "",
            needs: Needs::Program { install, installed },
            runs,
        }
    }

    /// Whether this build can measure the system.
    pub fn available(&self) -> bool {
        match self.needs {
            Needs::Nothing => true,
            Needs::Feature { compiled } => compiled,
            Needs::Program { installed, .. } => installed(),
        }
    }
}

/// The systems this build can measure, in report order.
pub fn all() -> Vec<&'static System> {
    ALL.iter().filter(|s| s.available()).collect()
}

/// The system named `name`, whether or not this build can measure it.
pub fn named(name: &str) -> Option<&'static System> {
    ALL.iter().find(|s| s.name == name)
}

/// Parse a `--system` value.
pub fn parse(s: &str) -> Result<&'static System, BenchError> {
    let known = || ALL.iter().map(|s| s.name).collect::<Vec<_>>().join(", ");
    let sys = named(s).ok_or_else(|| BenchError::InvalidArg {
        flag: "system",
        reason: format!("unknown system {s:?}; known: {}", known()),
    })?;
    if !sys.available() {
        let how = match sys.needs {
            Needs::Program { install, .. } => install.to_string(),
            Needs::Nothing | Needs::Feature { .. } => format!("enable the `{s}` feature"),
        };
        return Err(BenchError::InvalidArg {
            flag: "system",
            reason: format!("{s:?} is not available in this build: {how}"),
        });
    }
    Ok(sys)
}

/// The jobs of `systems` in one scenario, in their order: `run` gives a
/// system's jobs from its [`Runs`], or `None` where it does not measure the
/// scenario.
pub(crate) fn jobs_of(systems: &[&System], run: impl Fn(&Runs) -> Option<Vec<Job>>) -> Vec<Job> {
    systems
        .iter()
        .filter_map(|s| run(&s.runs))
        .flatten()
        .collect()
}

/// Every helper-process role of every system.
pub(crate) fn roles() -> impl Iterator<Item = &'static Role> {
    ALL.iter().flat_map(|s| s.runs.roles)
}

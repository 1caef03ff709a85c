//! Whole robot graphs from a JSON file in iRobot ros2-performance's topology
//! format, run in one process or spread over many.
//!
//! - [`format`](mod@format): the topology file format and its validation, resolved into
//!   [`NodePlan`]s before anything starts.
//! - [`runner`]: building a process's nodes from the plans and measuring
//!   every subscription as that benchmark defines it (late, too late, lost);
//!   [`run_in_process`] runs the whole graph in this process.
//! - [`placement`]: which process runs which node (`--processes per-node`,
//!   `per-executor` or a placement file).
//! - [`processes`]: running the graph across processes over shared memory
//!   or zenoh, each process one role of this executable.
//! - [`report`]: the per-subscription figures, the run's totals and their
//!   table.

pub mod format;
pub mod placement;
pub mod processes;
pub mod report;
pub mod runner;

pub use format::{
    ClientPlan, ClientSpec, HEADER, NodePlan, NodeSpec, PubPlan, PubSpec, QosSpec, ServerSpec,
    SubPlan, SubSpec, Topology, load, parse, payload_size,
};
pub use placement::{Placement, load_placement};
pub use processes::{ProcTransport, child_if_requested, run_in_processes, run_in_processes_over};
pub use report::{SubResult, TopologyReport, render};
pub use runner::{PartResult, run_in_process};

/// A topology file could not be used; each names the file, node and field.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// The file could not be read.
    #[error("{file}: {source}")]
    Io {
        /// The file.
        file: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Not JSON, or not the topology schema.
    #[error("{file}:{line}:{column}: {why}")]
    Syntax {
        /// The file.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong.
        why: String,
    },
    /// Well-formed but unusable.
    #[error("{file}: node {node:?}: {field}: {why}")]
    Invalid {
        /// The file.
        file: String,
        /// The node.
        node: String,
        /// The field (e.g. `publishers[1].msg_type`).
        field: String,
        /// What is wrong.
        why: String,
    },
    /// The run failed.
    #[error("{0}")]
    Run(String),
}

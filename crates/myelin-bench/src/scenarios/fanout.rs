//! The 20 topics x 10 subscribers CPU-overhead measurement: 20 topics, each
//! with 1 publisher and 10 subscriptions, in one process on one executor
//! thread.
//!
//! * `nodes=10` (the measurement's `ros` configuration): node `k` publishes topics `2k` and
//!   `2k+1` from its own timer and subscribes to all 20 topics.
//! * `nodes=1` (`rosonenode`): one node, one timer publishing all 20 topics,
//!   200 subscriptions.
//! * `nopub`: 10 nodes with one timer each and no topics: what nodes and
//!   timers cost on their own.
//!
//! Reported: CPU% of the process, CPU time per delivered message, and
//! publish-to-callback latency. zenoh (feature `zenoh`) runs the 10-node
//! graph in a shared session and in a session per node.

use std::time::Duration;

use super::peers_first;
use crate::harness::{BenchError, Job, period_of};
use crate::systems::{self, System};

/// Topics in the experiment.
pub const TOPICS: usize = 20;
/// Subscriptions per topic.
pub const SUBS_PER_TOPIC: usize = 10;

/// Parameters.
#[derive(Debug, Clone, Copy)]
pub struct FanoutParams {
    /// Publish rate per topic, Hz.
    pub rate: f64,
    /// How long to run.
    pub duration: Duration,
    /// 1 or 10 nodes; `None` runs both.
    pub nodes: Option<usize>,
}

impl FanoutParams {
    /// Check the parameters; errors name the flag.
    pub fn validate(&self) -> Result<(), BenchError> {
        period_of(self.rate)?;
        if self.duration < Duration::from_millis(100) {
            return Err(BenchError::InvalidArg {
                flag: "duration",
                reason: format!("{:?}: must be at least 100 ms", self.duration),
            });
        }
        if let Some(n) = self.nodes
            && n != 1
            && n != 10
        {
            return Err(BenchError::InvalidArg {
                flag: "nodes",
                reason: format!("{n}: the experiment is defined for 1 or 10 nodes"),
            });
        }
        Ok(())
    }
}

/// Plan the fan-out jobs (myelin, and zenoh when compiled in).
pub fn plan(p: FanoutParams, systems: &[&System]) -> Result<Vec<Job>, BenchError> {
    p.validate()?;
    Ok(systems::jobs_of(&peers_first(systems), |r| {
        r.fanout.map(|run| run(p))
    }))
}

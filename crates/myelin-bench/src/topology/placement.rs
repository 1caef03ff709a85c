//! Which process runs which node of a multi-process topology run: one
//! process per node, one per `executor_id`, or named processes from a
//! placement file.

use std::collections::BTreeMap;
use std::path::Path;

use super::TopologyError;
use super::format::NodePlan;

/// How nodes are spread over processes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// Every node its own process.
    PerNode,
    /// Nodes with the same `executor_id` in one process.
    PerExecutor,
    /// Named processes and their nodes (see [`load_placement`]).
    Groups(BTreeMap<String, Vec<String>>),
}

/// Read a placement file: a JSON object from process name to the node
/// names it runs, e.g. `{"perception": ["camera", "watermark"], "ui":
/// ["view"]}`. Every node of the topology must be placed exactly once.
pub fn load_placement(path: &Path, plans: &[NodePlan]) -> Result<Placement, TopologyError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| TopologyError::Io {
        file: file.clone(),
        source,
    })?;
    let groups: BTreeMap<String, Vec<String>> =
        serde_json::from_str(&text).map_err(|e| TopologyError::Syntax {
            file: file.clone(),
            line: e.line(),
            column: e.column(),
            why: e.to_string(),
        })?;
    let mut seen = std::collections::HashSet::new();
    for (process, nodes) in &groups {
        for n in nodes {
            if !plans.iter().any(|p| &p.name == n) {
                return Err(TopologyError::Invalid {
                    file: file.clone(),
                    node: n.clone(),
                    field: format!("process {process:?}"),
                    why: "no such node in the topology".into(),
                });
            }
            if !seen.insert(n.clone()) {
                return Err(TopologyError::Invalid {
                    file: file.clone(),
                    node: n.clone(),
                    field: format!("process {process:?}"),
                    why: "placed twice".into(),
                });
            }
        }
    }
    if let Some(missing) = plans.iter().find(|p| !seen.contains(&p.name)) {
        return Err(TopologyError::Invalid {
            file,
            node: missing.name.clone(),
            field: "placement".into(),
            why: "not placed in any process".into(),
        });
    }
    Ok(Placement::Groups(groups))
}

impl Placement {
    /// The processes of a run, by a key that sorts them: each with the
    /// indices (into `plans`) of the nodes it runs.
    pub(super) fn processes(&self, plans: &[NodePlan]) -> BTreeMap<String, Vec<usize>> {
        let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (i, n) in plans.iter().enumerate() {
            let key = match self {
                Placement::PerNode => format!("{i:04}"),
                Placement::PerExecutor => format!("{:010}", n.executor_id),
                Placement::Groups(g) => g
                    .iter()
                    .find(|(_, nodes)| nodes.contains(&n.name))
                    .map_or_else(|| format!("unplaced {i}"), |(k, _)| k.clone()),
            };
            groups.entry(key).or_default().push(i);
        }
        groups
    }

    /// How the report names it: `per node`, `per executor`, `placement file`.
    pub(super) fn label(&self) -> &'static str {
        match self {
            Placement::PerNode => "per node",
            Placement::PerExecutor => "per executor",
            Placement::Groups(_) => "placement file",
        }
    }
}

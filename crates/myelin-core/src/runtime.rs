//! The state behind a context and its nodes that every entity holds: the
//! context's graph, transports, id counter, timer epoch and executors, and a
//! node's names, executor and entities.
//!
//! The public handles ([`Context`](crate::Context), [`Node`](crate::Node))
//! sit above the entities they create; the entities sit above this module.
//! Attaching a node to an executor attaches everything the node made.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, Weak};

use myelin_sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::dispatch::{ExecShared, Executable, Tick};
use crate::error::AddNodeError;
use crate::graph::Graph;
use crate::group::{CallbackGroup, CallbackGroupKind};
use crate::locks::lock;
use crate::transport::{NodeIdent, Transports};

/// A context's shared state.
pub(crate) struct ContextInner {
    pub(crate) domain_id: u32,
    /// This process, as the context's gids name it (read once: getpid is
    /// a system call, and an in-process message's info is made of it).
    pub(crate) pid: u32,
    pub(crate) graph: Graph,
    shut_down: AtomicBool,
    pub(crate) node_names: Mutex<HashSet<String>>,
    pub(crate) executors: Mutex<Vec<Weak<ExecShared>>>,
    pub(crate) next_id: AtomicU64,
    /// Timers are phase-aligned to this instant (see `executor` docs).
    pub(crate) epoch: std::time::Instant,
    /// The transports that connect this context to other processes and
    /// hosts (empty: in-process only).
    pub(crate) transports: Transports,
    /// Simulated time (`use_sim_time`): ROS time follows `/clock`.
    pub(crate) sim: Option<Arc<crate::dispatch::SimTime>>,
    /// Initial parameter values (`--ros-args -p`, `--params-file`).
    pub(crate) param_overrides: crate::parameter::Overrides,
    /// Remapping rules (`--ros-args -r`).
    pub(crate) remaps: crate::names::Remaps,
    /// Nodes serve `~/get_type_description` (set once, at build).
    pub(crate) type_description_service: AtomicBool,
}

impl ContextInner {
    /// A running context on `domain_id`, connected by `transports`.
    pub(crate) fn new(
        domain_id: u32,
        transports: Transports,
        sim: Option<Arc<crate::dispatch::SimTime>>,
        param_overrides: crate::parameter::Overrides,
        remaps: crate::names::Remaps,
    ) -> Self {
        ContextInner {
            domain_id,
            pid: std::process::id(),
            graph: Graph::default(),
            shut_down: AtomicBool::new(false),
            node_names: Mutex::new(HashSet::new()),
            executors: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(1),
            epoch: std::time::Instant::now(),
            transports,
            sim,
            param_overrides,
            remaps,
            type_description_service: AtomicBool::new(true),
        }
    }

    /// The clock of message expiry (lifespan): simulated time under
    /// `use_sim_time` (0 before the first `/clock`), else the monotonic
    /// clock.
    pub(crate) fn expiry_now_ns(&self) -> u64 {
        match &self.sim {
            Some(s) => u64::try_from(s.now_ns()).unwrap_or(0),
            None => crate::clock::now_ns(),
        }
    }

    /// Publishers and subscriptions of other contexts, as this context's
    /// transports see them now (each endpoint once).
    pub(crate) fn graph_endpoints(&self) -> Vec<crate::transport::DiscoveredEndpoint> {
        self.transports
            .iter()
            .flat_map(|t| t.graph_endpoints())
            .collect()
    }

    /// The nodes of the graph: this context's and those its transports
    /// see, fully qualified, sorted, each once.
    pub(crate) fn graph_nodes(&self) -> Vec<String> {
        let mut all: Vec<String> = lock(&self.node_names).iter().cloned().collect();
        for t in self.transports.iter() {
            all.extend(t.graph_nodes());
        }
        all.sort();
        all.dedup();
        all
    }

    #[inline]
    pub(crate) fn is_shut_down(&self) -> bool {
        self.shut_down.load(Ordering::Acquire)
    }

    pub(crate) fn new_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Whether any transport connects this context to other processes.
    pub(crate) fn crosses_processes(&self) -> bool {
        !self.transports.is_empty()
    }

    /// Shut down: transports close, every executor's `spin` returns and
    /// blocked waiters wake.
    pub(crate) fn shutdown(&self) {
        self.shut_down.store(true, Ordering::Release);
        for t in self.transports.iter() {
            t.shutdown();
        }
        let execs: Vec<_> = self
            .executors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        for e in execs {
            e.context_down();
        }
        self.graph.wake_all_waiters();
    }
}

/// A node's shared state; its entities keep it (and so its context) alive.
pub(crate) struct NodeInner {
    pub(crate) name: String,
    pub(crate) namespace: String,
    pub(crate) fqn: String,
    /// The name the program created the node with (remapping rules for a
    /// node name it).
    pub(crate) created_as: String,
    pub(crate) ctx: Arc<ContextInner>,
    executor: Mutex<Option<Arc<ExecShared>>>,
    /// The default (mutually exclusive) callback group.
    pub(crate) default_group: CallbackGroup,
    entities: Mutex<Vec<Weak<dyn Executable>>>,
    timers: Mutex<Vec<Weak<dyn Tick>>>,
    /// The node's id in its context (the `nid` of its liveliness tokens).
    pub(crate) nid: u64,
    /// The node's announcements on its transports (withdrawn on drop).
    _announced: Vec<Box<dyn std::any::Any + Send + Sync>>,
    /// Its parameters.
    pub(crate) params: crate::parameter::ParamState,
    /// What serves them (the parameter services and the
    /// `/parameter_events` publisher, made with the first parameter),
    /// dropped with the node's last handle: they hold the node, so holding
    /// them here past that would keep it alive for ever.
    pub(crate) param_entities: Mutex<Option<Box<dyn std::any::Any + Send + Sync>>>,
    /// The `/rosout` publisher of its logger (made with the first line;
    /// dropped with the node's last handle, as `param_entities`).
    pub(crate) rosout: Mutex<Option<Box<dyn std::any::Any + Send + Sync>>>,
    /// The described types its endpoints use, and the
    /// `~/get_type_description` service that tells them (dropped with the
    /// node's last handle, as `param_entities`).
    pub(crate) types: crate::message::description::NodeTypesCell,
}

impl NodeInner {
    pub(crate) fn new(
        ctx: Arc<ContextInner>,
        name: String,
        namespace: String,
        fqn: String,
    ) -> Self {
        let nid = ctx.new_id();
        let ident = NodeIdent {
            fqn: &fqn,
            name: &name,
            namespace: &namespace,
            nid,
        };
        let _announced = ctx
            .transports
            .iter()
            .filter_map(|t| t.node(&ident))
            .collect();
        NodeInner {
            nid,
            _announced,
            created_as: name.clone(),
            name,
            namespace,
            fqn,
            ctx,
            executor: Mutex::new(None),
            default_group: CallbackGroup::new(CallbackGroupKind::MutuallyExclusive),
            entities: Mutex::new(Vec::new()),
            timers: Mutex::new(Vec::new()),
            params: Default::default(),
            param_entities: Mutex::new(None),
            rosout: Mutex::new(None),
            types: Default::default(),
        }
    }

    pub(crate) fn executor(&self) -> Option<Arc<ExecShared>> {
        lock(&self.executor).clone()
    }

    pub(crate) fn attach(&self, exec: &Arc<ExecShared>) -> Result<(), AddNodeError> {
        let mut slot = lock(&self.executor);
        if slot.is_some() {
            return Err(AddNodeError::AlreadyAdded(self.fqn.clone()));
        }
        *slot = Some(exec.clone());
        for e in lock(&self.entities).iter().filter_map(Weak::upgrade) {
            e.attach(Some(exec.clone()));
        }
        for t in lock(&self.timers).iter().filter_map(Weak::upgrade) {
            exec.add_timer(t);
        }
        Ok(())
    }

    pub(crate) fn detach(&self, exec: &Arc<ExecShared>) {
        let mut slot = lock(&self.executor);
        if !slot.as_ref().is_some_and(|e| Arc::ptr_eq(e, exec)) {
            return;
        }
        *slot = None;
        for e in lock(&self.entities).iter().filter_map(Weak::upgrade) {
            e.attach(None);
        }
        for t in lock(&self.timers).iter().filter_map(Weak::upgrade) {
            exec.remove_timer(t.id());
        }
    }

    /// Attach an executable entity to this node (and its executor, if any).
    /// The executor lock is held so a concurrent `attach` cannot miss it.
    pub(crate) fn adopt(&self, e: Arc<dyn Executable>) {
        let exec = lock(&self.executor);
        e.clone().attach(exec.clone());
        let mut ents = lock(&self.entities);
        ents.retain(|w| w.strong_count() > 0);
        ents.push(Arc::downgrade(&e));
    }

    /// Schedule a timer on this node's executor (now, if it has one, and
    /// on every executor the node is added to later).
    pub(crate) fn adopt_timer(&self, t: Arc<dyn Tick>) {
        let exec = lock(&self.executor);
        {
            let mut timers = lock(&self.timers);
            timers.retain(|t| t.strong_count() > 0);
            timers.push(Arc::downgrade(&t));
        }
        if let Some(e) = exec.as_ref() {
            e.add_timer(t);
        }
    }

    pub(crate) fn remove_timer(&self, id: u64) {
        lock(&self.timers).retain(|t| t.upgrade().is_some_and(|t| t.id() != id));
        if let Some(e) = self.executor() {
            e.remove_timer(id);
        }
    }
}

impl Drop for NodeInner {
    fn drop(&mut self) {
        lock(&self.ctx.node_names).remove(&self.fqn);
    }
}

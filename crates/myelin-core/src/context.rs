//! The context: one per process (or per test), owner of the graph.

use std::sync::{Arc, Mutex, OnceLock, Weak};

use crate::error::{ContextError, CreateNodeError};
use crate::names;
use crate::node::Node;
use crate::runtime::{ContextInner, NodeInner};
use crate::transport::TransportConfig;

/// The highest ROS 2 domain id.
pub const MAX_DOMAIN_ID: u32 = 232;

/// The root object of myelin: holds the intra-process manager (the graph of
/// publishers and subscriptions), the node names, and the executors' wake-up
/// handles. Cheap to clone (a handle).
///
/// All nodes of a context share it: one participant per process, not one
/// per node (one per node multiplies discovery and wake-up CPU). Two contexts are separate participants: within a
/// process they do not see each other's topics (the transports connect
/// contexts of the same domain).
///
/// ```
/// use myelin_core::Context;
///
/// // A program's `main`: Ctrl-C shuts the context down, every transport
/// // built in is on (`Context::new()` is the same with defaults).
/// let ctx = Context::builder().domain_id(7).build()?;
/// let camera = ctx.create_node("camera")?;
/// let detector = ctx.create_node_in("detector", "/perception")?;
/// assert_eq!(detector.fully_qualified_name(), "/perception/detector");
/// # drop(camera);
/// ctx.shutdown();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Context {
    pub(crate) inner: Arc<ContextInner>,
}

/// Builds a [`Context`].
///
/// ```
/// use myelin_core::Context;
///
/// // A library's context: no Ctrl-C handler, this process only.
/// let ctx = Context::builder()
///     .handle_signals(false)
///     .shared_memory(false)
///     .network(false)
///     .build()?;
/// assert!(!ctx.uses_shared_memory() && !ctx.uses_network());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct ContextBuilder {
    /// `None`: `ROS_DOMAIN_ID`, else 0.
    domain_id: Option<u32>,
    handle_signals: bool,
    /// `None`: the default (on when available; a failure falls back to
    /// in-process with a warning). `Some(true)`: required (a failure is an
    /// error).
    shared_memory: Option<bool>,
    /// As `shared_memory`, for the zenoh session.
    network: Option<bool>,
    /// A zenoh configuration file.
    zenoh_config: Option<std::path::PathBuf>,
    /// ROS time follows `/clock`.
    use_sim_time: bool,
    /// `--ros-args ...` to read at build.
    ros_args: Vec<String>,
    /// Nodes serve `~/get_type_description`.
    type_description_service: bool,
}

impl Default for ContextBuilder {
    fn default() -> Self {
        ContextBuilder {
            domain_id: None,
            handle_signals: true,
            shared_memory: None,
            network: None,
            zenoh_config: None,
            use_sim_time: false,
            ros_args: Vec::new(),
            type_description_service: true,
        }
    }
}

impl ContextBuilder {
    /// The ROS 2 domain id (0..=232). Different domains never see each
    /// other. Without it the context takes `ROS_DOMAIN_ID` from the
    /// environment, as every ROS 2 node does (unset or empty: 0; anything
    /// but a number from 0 to 232 is [`ContextError::InvalidDomainEnv`]).
    pub fn domain_id(mut self, id: u32) -> Self {
        self.domain_id = Some(id);
        self
    }

    /// Whether Ctrl-C (SIGINT) shuts this context down, which makes every
    /// `spin` of its executors return `Ok`. On by default, as in rclcpp.
    pub fn handle_signals(mut self, on: bool) -> Self {
        self.handle_signals = on;
        self
    }

    /// Whether endpoints reach other processes on this host through shared
    /// memory. On by default when the `shm` feature is compiled in, unless
    /// `MYELIN_TRANSPORT` is set without `shm` in it (e.g.
    /// `MYELIN_TRANSPORT=intra`).
    ///
    /// Asked for explicitly (`shared_memory(true)`), a failure to set it up
    /// is a [`ContextError::SharedMemory`]; by default it falls back to
    /// in-process delivery with a warning.
    pub fn shared_memory(mut self, on: bool) -> Self {
        self.shared_memory = Some(on);
        self
    }

    /// Whether endpoints reach other hosts (and processes that do not share
    /// memory with this one) through a zenoh session. On by default when
    /// the `zenoh` feature is compiled in, unless `MYELIN_TRANSPORT` is set
    /// without `zenoh` in it (`MYELIN_TRANSPORT=shm`).
    ///
    /// The default session is a peer that connects to a zenoh router on
    /// `tcp/127.0.0.1:7447` when one runs (`myelin router`), with multicast
    /// scouting off: nothing leaves the host unless a router is pointed
    /// at another. Asked for explicitly, a failure to open it is a
    /// [`ContextError::Network`]; by default it falls back with a warning.
    pub fn network(mut self, on: bool) -> Self {
        self.network = Some(on);
        self
    }

    /// Open the zenoh session with this configuration file (JSON5 or YAML,
    /// any zenoh setting) instead of the default or `MYELIN_ZENOH_CONFIG`.
    /// A file that cannot be read or that zenoh refuses is a
    /// [`ContextError::Network`] naming it.
    pub fn zenoh_config(mut self, file: impl Into<std::path::PathBuf>) -> Self {
        self.zenoh_config = Some(file.into());
        self
    }

    /// Simulated time, as ROS 2's `use_sim_time` parameter: ROS time
    /// (every node's [`now`](crate::Node::now), [`create_timer`](crate::Node::create_timer)
    /// timers, deadline checks, lifespans) follows the last
    /// `rosgraph_msgs/msg/Clock` on `/clock` from any process or host
    /// (a simulator, `myelin bag play --clock`, `ros2 bag play --clock`),
    /// and reads zero until the first arrives. Wall timers and liveliness
    /// leases stay on steady time. See [`time`](crate::time).
    pub fn use_sim_time(mut self, on: bool) -> Self {
        self.use_sim_time = on;
        self
    }

    /// Whether nodes serve `~/get_type_description` for the types they use
    /// (default on, as rclcpp's `start_type_description_service`; see
    /// [`type_description`](crate::type_description)). Off saves each node
    /// one service (with shared memory: an inbox and a publisher) where
    /// many processes share a host and no tool learns types at run time.
    pub fn type_description_service(mut self, on: bool) -> Self {
        self.type_description_service = on;
        self
    }

    /// Command-line arguments in ROS 2's syntax (a program passes
    /// `std::env::args()`): what follows `--ros-args` (up to `--` or the
    /// end) is read at [`build`](Self::build); anything before it is the
    /// program's. Understood:
    ///
    /// * `-p name:=value` / `--param name:=value`: an initial value for
    ///   the parameter `name` of every node (`-p node:name:=value`: of
    ///   `node` only), YAML as in ROS 2 (`true`, `3`, `2.5`, `[1, 2]`, a
    ///   string otherwise);
    /// * `--params-file FILE`: ROS 2's parameter YAML
    ///   (`/**:` or `node:` then `ros__parameters:`);
    /// * `-r from:=to` / `--remap`: a topic or service name (relative
    ///   names resolve against each node), `-r __node:=name` and `-r
    ///   __ns:=/namespace` for the nodes created; `-r node:from:=to` for
    ///   the node created as `node` only. The first matching rule wins.
    ///
    /// A node's [`declare_parameter`](crate::Node::declare_parameter)
    /// then starts from that value instead of its default. Anything else
    /// after `--ros-args` is an error naming it.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let ctx = myelin_core::Context::builder()
    ///     .handle_signals(false)
    ///     .ros_args(["my_program", "--ros-args", "-p", "rate:=20"])
    ///     .build()?;
    /// let node = ctx.create_node("camera")?;
    /// assert_eq!(node.declare_parameter("rate", 10)?.as_i64(), Some(20));
    /// # Ok(()) }
    /// ```
    pub fn ros_args<S: Into<String>>(mut self, args: impl IntoIterator<Item = S>) -> Self {
        self.ros_args = args.into_iter().map(Into::into).collect();
        self
    }

    /// Create the context.
    pub fn build(self) -> Result<Context, ContextError> {
        let (overrides, remaps) = parse_ros_args(&self.ros_args)?;
        let domain_id = match self.domain_id {
            Some(d) => d,
            None => domain_from_env(std::env::var_os(DOMAIN_ENV).as_deref())?,
        };
        if domain_id > MAX_DOMAIN_ID {
            return Err(ContextError::DomainOutOfRange(domain_id));
        }
        let transports = crate::transport::start_all(&TransportConfig {
            domain: domain_id,
            shared_memory: self.shared_memory,
            network: self.network,
            zenoh_config: self.zenoh_config,
        })?;
        // `-p use_sim_time:=true` (or a parameters file saying so) wins
        // over the builder, as a command line wins over a node's defaults.
        let use_sim_time = overrides
            .use_sim_time()
            .map_err(ContextError::RosArgs)?
            .unwrap_or(self.use_sim_time);
        let sim = use_sim_time.then(|| Arc::new(crate::dispatch::SimTime::new()));
        let inner = Arc::new(ContextInner::new(
            domain_id,
            transports,
            sim.clone(),
            overrides,
            remaps,
        ));
        inner.type_description_service.store(
            self.type_description_service,
            std::sync::atomic::Ordering::Relaxed,
        );
        if self.handle_signals {
            signals::register(&inner);
        }
        let ctx = Context { inner };
        if let Some(sim) = sim {
            // A hidden node (leading underscore, as ROS 2 hides them) per
            // context holds the /clock subscription.
            let node = ctx
                .create_node(&format!(
                    "_myelin_clock_{}_{}",
                    std::process::id(),
                    ctx.inner.new_id()
                ))
                .map_err(|e| ContextError::SimTime(e.to_string()))?;
            start_time_source(node, sim)?;
        }
        Ok(ctx)
    }
}

/// Subscribe `node` to `/clock` and feed what arrives into `sim`, on a
/// thread of its own (the context may have no executor; a simulator or a
/// replay publishes from another process). The thread ends when the
/// context shuts down or when nothing but this thread holds the context.
fn start_time_source(
    node: crate::Node,
    sim: Arc<crate::dispatch::SimTime>,
) -> Result<(), ContextError> {
    use crate::subscription::WaitError;
    use crate::time::ClockMessage;
    use std::time::Duration;
    let sub = node
        .create_polling_subscription::<ClockMessage>(
            "/clock",
            // rclcpp's ClockQoS: the latest time, best effort (matches
            // reliable publishers too).
            crate::QoS::keep_last(1).best_effort(),
            Default::default(),
        )
        .map_err(|e| ContextError::SimTime(e.to_string()))?;
    let ctx = Arc::downgrade(&node.inner.ctx);
    std::thread::Builder::new()
        .name("myelin-clock".into())
        .spawn(move || {
            let _node = node;
            loop {
                match sub.wait_for_message(Duration::from_millis(200)) {
                    Ok(m) => sim.set(m.clock.nanos()),
                    Err(WaitError::Timeout { .. } | WaitError::PublisherGone(_)) => {}
                    Err(_) => return,
                }
                // Only this thread's node holds the context: the program
                // is done with it.
                match ctx.upgrade() {
                    Some(c) if !c.is_shut_down() && Arc::strong_count(&c) > 2 => {}
                    _ => return,
                }
            }
        })
        .map_err(|e| ContextError::SimTime(format!("starting its thread: {e}")))?;
    Ok(())
}

/// Read ROS 2 command-line arguments (see [`ContextBuilder::ros_args`]).
fn parse_ros_args(
    args: &[String],
) -> Result<(crate::parameter::Overrides, names::Remaps), ContextError> {
    let mut overrides = crate::parameter::Overrides::default();
    let mut remaps = names::Remaps::default();
    let Some(start) = args.iter().position(|a| a == "--ros-args") else {
        return Ok((overrides, remaps));
    };
    let mut it = args[start + 1..].iter();
    let bad = |why: String| ContextError::RosArgs(why);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--" => break,
            "--ros-args" => {}
            "-p" | "--param" => {
                let v = it
                    .next()
                    .ok_or_else(|| bad(format!("{a} needs name:=value")))?;
                overrides.add_arg(v).map_err(bad)?;
            }
            "-r" | "--remap" => {
                let v = it
                    .next()
                    .ok_or_else(|| bad(format!("{a} needs from:=to")))?;
                remaps.add_arg(v).map_err(bad)?;
            }
            "--params-file" => {
                let f = it
                    .next()
                    .ok_or_else(|| bad("--params-file needs a file".into()))?;
                overrides.add_file(std::path::Path::new(f)).map_err(bad)?;
            }
            other => {
                return Err(bad(format!(
                    "{:?} is not understood after --ros-args (myelin reads -p name:=value, -r from:=to and --params-file FILE)",
                    other.chars().take(60).collect::<String>()
                )));
            }
        }
    }
    Ok((overrides, remaps))
}

/// The environment variable that names the domain, as in ROS 2.
pub const DOMAIN_ENV: &str = "ROS_DOMAIN_ID";

/// The domain `ROS_DOMAIN_ID` names (`value`): unset or empty is 0.
fn domain_from_env(value: Option<&std::ffi::OsStr>) -> Result<u32, ContextError> {
    let Some(v) = value else { return Ok(0) };
    let text = v.to_string_lossy();
    let t = text.trim();
    if t.is_empty() {
        return Ok(0);
    }
    match t.parse::<u32>() {
        Ok(d) if d <= MAX_DOMAIN_ID => Ok(d),
        _ => Err(ContextError::InvalidDomainEnv {
            value: text.chars().take(40).collect(),
        }),
    }
}

impl Context {
    /// A context on the domain `ROS_DOMAIN_ID` names (0 when unset), with
    /// every transport compiled in, that shuts down on Ctrl-C, whose
    /// warnings reach stderr ([`init_logging`](crate::init_logging)), and
    /// that reads the program's ROS 2 arguments (`--ros-args -p
    /// use_sim_time:=true -r chatter:=talk ...`, see
    /// [`ContextBuilder::ros_args`]), as `rclcpp::init(argc, argv)` does:
    /// what a program's `main` wants. It panics only on a configuration
    /// error, with a message that names what to fix (a bad
    /// `ROS_DOMAIN_ID`, `MYELIN_ZENOH_CONFIG` or `--ros-args`); a library
    /// should use [`Context::builder`] and handle the error.
    pub fn new() -> Self {
        crate::init_logging();
        ContextBuilder::default()
            .ros_args(std::env::args())
            .build()
            .unwrap_or_else(|e| panic!("myelin: cannot create the context: {e}"))
    }

    /// A builder to choose the domain id and signal handling.
    pub fn builder() -> ContextBuilder {
        ContextBuilder::default()
    }

    /// The domain id.
    pub fn domain_id(&self) -> u32 {
        self.inner.domain_id
    }

    /// Whether this context's endpoints reach other processes through
    /// shared memory.
    pub fn uses_shared_memory(&self) -> bool {
        self.inner.transports.get("shm").is_some()
    }

    /// Whether this context's endpoints reach other hosts through zenoh.
    pub fn uses_network(&self) -> bool {
        self.inner.transports.get("zenoh").is_some()
    }

    /// This context's zenoh session id (hex, as in liveliness tokens), if
    /// it has a session.
    pub fn zenoh_id(&self) -> Option<String> {
        self.inner
            .transports
            .get("zenoh")
            .and_then(|t| t.session_id())
    }

    /// Every publisher and subscription of this context's domain that
    /// other processes have: this host's shared memory (as
    /// [`endpoints`](crate::transport::endpoints)) plus what the network
    /// reports (asking it for up to `wait`), each endpoint once. Shared
    /// memory lists this process's own endpoints too; the network part
    /// leaves this context's out.
    pub fn discover(&self, wait: std::time::Duration) -> Vec<crate::transport::DiscoveredEndpoint> {
        let mut all = crate::transport::endpoints(self.inner.domain_id);
        for t in self.inner.transports.iter() {
            all.extend(t.discover(wait));
        }
        all
    }

    /// The service servers and clients other processes have, on this host
    /// and (through the network, asking it for up to `wait`) elsewhere:
    /// myelin's services by their request topics, and every service
    /// announced as rmw_zenoh does (ROS 2 nodes; myelin services of a
    /// [`ServiceType`](crate::ServiceType)), which name their type. One
    /// entry per (service, node, server or client), with the type when any
    /// announcement names it.
    ///
    /// ```
    /// let ctx = myelin_core::Context::builder().handle_signals(false).build()?;
    /// let node = ctx.create_node("doubler")?;
    /// let _srv = node.create_service::<i64, i64>("double", |x| 2 * x)?;
    /// let found = ctx.discover_services(std::time::Duration::ZERO);
    /// # let _ = found;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn discover_services(
        &self,
        wait: std::time::Duration,
    ) -> Vec<crate::transport::DiscoveredService> {
        let mut all = crate::transport::services_of(&self.discover(wait));
        for t in self.inner.transports.iter() {
            all.extend(t.discover_services(wait));
        }
        // One entry per (name, node, kind), the typed one when there is one.
        all.sort_by(|a, b| {
            (&a.name, &a.node, a.is_server, a.type_name.is_none()).cmp(&(
                &b.name,
                &b.node,
                b.is_server,
                b.type_name.is_none(),
            ))
        });
        all.dedup_by(|later, first| {
            (&later.name, &later.node, later.is_server)
                == (&first.name, &first.node, first.is_server)
        });
        all
    }

    /// Create a node in the root namespace.
    pub fn create_node(&self, name: &str) -> Result<Node, CreateNodeError> {
        self.create_node_in(name, "/")
    }

    /// Create a node in a namespace (`"robot1"` and `"/robot1"` are the same).
    pub fn create_node_in(&self, name: &str, namespace: &str) -> Result<Node, CreateNodeError> {
        names::validate_node_name(name)?;
        names::normalize_namespace(namespace)?;
        let created_as = name;
        let (name, namespace) = self.inner.remaps.node(name, namespace);
        let name = name.as_str();
        let namespace = names::normalize_namespace(&namespace)?;
        let fqn = names::node_fqn(&namespace, name);
        if self.inner.is_shut_down() {
            return Err(CreateNodeError::ContextShutDown(fqn));
        }
        {
            let mut taken = self
                .inner
                .node_names
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if !taken.insert(fqn.clone()) {
                return Err(CreateNodeError::NameTaken(fqn));
            }
        }
        let mut node = NodeInner::new(self.inner.clone(), name.to_string(), namespace, fqn);
        node.created_as = created_as.to_string();
        let inner = Arc::new(node);
        Ok(Node {
            _user: Some(Arc::new(crate::node::UserHandle {
                node: Arc::downgrade(&inner),
            })),
            inner,
        })
    }

    /// The initial value this context's `--ros-args` (`-p`,
    /// `--params-file`) give parameter `name` of the node `fqn`, if any
    /// (what [`Node::declare_parameter`](crate::Node::declare_parameter)
    /// starts from).
    pub fn parameter_override(&self, fqn: &str, name: &str) -> Option<crate::ParameterValue> {
        self.inner.param_overrides.value(fqn, name)
    }

    /// Shut the context down: every executor's `spin` returns, blocked
    /// waiters wake, and creating entities fails from now on.
    pub fn shutdown(&self) {
        self.inner.shutdown();
    }

    /// Whether [`shutdown`](Context::shutdown) was called (or Ctrl-C seen).
    pub fn is_shut_down(&self) -> bool {
        self.inner.is_shut_down()
    }
}

impl Default for Context {
    fn default() -> Self {
        Context::new()
    }
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("domain_id", &self.inner.domain_id)
            .field("shut_down", &self.is_shut_down())
            .finish()
    }
}

/// Ctrl-C handling: one process-wide handler (the `ctrlc` crate runs it on
/// its own thread, so it may lock and notify) that shuts down every context
/// that asked for it.
mod signals {
    use super::*;

    static CONTEXTS: OnceLock<Mutex<Vec<Weak<ContextInner>>>> = OnceLock::new();

    pub(super) fn register(ctx: &Arc<ContextInner>) {
        let list = CONTEXTS.get_or_init(|| {
            // Another handler may already be installed by the application;
            // then it owns Ctrl-C and we stay out of its way.
            if let Err(e) = ctrlc::set_handler(on_interrupt) {
                tracing::debug!("myelin: not installing a Ctrl-C handler: {e}");
            }
            Mutex::new(Vec::new())
        });
        let mut list = list.lock().unwrap_or_else(|e| e.into_inner());
        list.retain(|w| w.strong_count() > 0);
        list.push(Arc::downgrade(ctx));
    }

    fn on_interrupt() {
        if let Some(list) = CONTEXTS.get() {
            let ctxs: Vec<_> = list
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .filter_map(Weak::upgrade)
                .collect();
            for c in ctxs {
                c.shutdown();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn ros_domain_id_is_read_as_ros_2_reads_it() {
        assert_eq!(domain_from_env(None).unwrap(), 0);
        assert_eq!(domain_from_env(Some(OsStr::new(""))).unwrap(), 0);
        assert_eq!(domain_from_env(Some(OsStr::new("42"))).unwrap(), 42);
        assert_eq!(domain_from_env(Some(OsStr::new(" 7 "))).unwrap(), 7);
        assert_eq!(domain_from_env(Some(OsStr::new("232"))).unwrap(), 232);
        for bad in ["233", "-1", "one", "4294967296", "1e3"] {
            let e = domain_from_env(Some(OsStr::new(bad))).unwrap_err();
            assert!(e.to_string().contains("ROS_DOMAIN_ID"), "{e}");
        }
        let long = "x".repeat(10_000);
        let e = domain_from_env(Some(OsStr::new(&long))).unwrap_err();
        assert!(
            e.to_string().len() < 200,
            "the error quotes a short excerpt"
        );
    }
}

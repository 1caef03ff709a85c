//! Command-line definitions.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// myelin: a robotics message bus, and the instruments to measure it.
#[derive(Debug, Parser)]
#[command(name = "myelin", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run benchmark scenarios side by side with peers and print a table.
    Bench(Box<BenchArgs>),
    /// Check and repair this host's myelin state (stale shared memory).
    Doctor(DoctorArgs),
    /// Topics of a domain (this host, and other hosts through zenoh): list,
    /// info, echo, hz, bw, pub.
    #[command(subcommand)]
    Topic(TopicCommand),
    /// Nodes of a domain (this host, and other hosts through zenoh): list,
    /// info.
    #[command(subcommand)]
    Node(NodeCommand),
    /// Services of a domain (this host, and ROS 2 and myelin services on
    /// other hosts through zenoh): list, call.
    #[command(subcommand)]
    Service(ServiceCommand),
    /// Actions of a domain (myelin's and ROS 2's on rmw_zenoh): list,
    /// info, send a goal and follow it to its result.
    #[command(subcommand)]
    Action(ActionCommand),
    /// A node's parameters (as `ros2 param`): list, get, set, dump to and
    /// load from ROS 2's parameter YAML, through the node's parameter
    /// services (ROS 2 nodes on rmw_zenoh too).
    #[command(subcommand)]
    Param(ParamCommand),
    /// The message and service types myelin knows (as `ros2 interface`).
    #[command(subcommand)]
    Interface(InterfaceCommand),
    /// Record topics into a rosbag2-compatible MCAP bag, play one back,
    /// and show what a bag holds (`ros2 bag` reads them and vice versa).
    #[command(subcommand)]
    Bag(BagCommand),
    /// Print a shell completion script: `myelin completions bash >
    /// ~/.local/share/bash-completion/completions/myelin` (zsh: into a
    /// directory of $fpath as `_myelin`; fish:
    /// ~/.config/fish/completions/myelin.fish).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// ddsperf-style latency between two processes: `perf pong` in one
    /// terminal, `perf ping` in another (or `perf ping --local`).
    #[command(subcommand)]
    Perf(PerfCommand),
    /// Run a zenoh router (zenoh's own, in this process) that myelin and
    /// ROS 2 rmw_zenoh processes connect to; point routers at each other
    /// to join hosts.
    Router(RouterArgs),
}

/// `myelin router` flags.
#[derive(Debug, clap::Args)]
pub struct RouterArgs {
    /// Listen on this zenoh endpoint (repeatable; default
    /// tcp/127.0.0.1:7447, where processes look for a router).
    #[arg(long, value_name = "ENDPOINT")]
    pub listen: Vec<String>,
    /// Connect to another router, e.g. tcp/192.168.1.20:7447 (repeatable).
    #[arg(long, value_name = "ENDPOINT")]
    pub connect: Vec<String>,
    /// Start from this zenoh configuration file (JSON5/YAML).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// `myelin topic` subcommands.
#[derive(Debug, Subcommand)]
pub enum TopicCommand {
    /// The topics with a publisher or subscription.
    List {
        /// Show each topic's type.
        #[arg(short = 't', long = "show-types")]
        show_types: bool,
        /// Also list hidden topics (a name part starting with `_`, such as
        /// an action's `_action/feedback`), as ROS 2 does.
        #[arg(long = "include-hidden-topics")]
        include_hidden: bool,
        /// The ROS 2 domain id (default: ROS_DOMAIN_ID, else 0).
        #[arg(long, env = "ROS_DOMAIN_ID", default_value_t = 0)]
        domain: u32,
    },
    /// A topic's type, publishers and subscriptions (node, process, QoS).
    Info {
        /// The topic (`chatter` means `/chatter`).
        topic: String,
        /// The ROS 2 domain id (default: ROS_DOMAIN_ID, else 0).
        #[arg(long, env = "ROS_DOMAIN_ID", default_value_t = 0)]
        domain: u32,
    },
    /// Print the messages of a topic (decoded for the standard types, as
    /// hex for others).
    Echo {
        /// The topic.
        topic: String,
        /// The type, e.g. `std_msgs/msg/String`: subscribe at once, before
        /// any publisher exists (without it, echo waits until the topic
        /// appears and takes its publishers' type).
        #[arg(value_name = "TYPE")]
        type_name: Option<String>,
        /// Stop after N messages.
        #[arg(long)]
        count: Option<u64>,
        /// The ROS 2 domain id (default: ROS_DOMAIN_ID, else 0).
        #[arg(long, env = "ROS_DOMAIN_ID", default_value_t = 0)]
        domain: u32,
    },
    /// Publish a message of a standard type, once or at a rate.
    Pub {
        /// The topic.
        topic: String,
        /// The type, e.g. `std_msgs/msg/String` (the standard types of
        /// myelin-msgs and the builtins).
        type_name: String,
        /// The message as YAML, e.g. `"data: hello"` (`{}` for defaults).
        #[arg(default_value = "{}")]
        value: String,
        /// Publish at this rate (Hz) until Ctrl-C or --count; default once.
        #[arg(long)]
        rate: Option<f64>,
        /// Stop after N messages.
        #[arg(long)]
        count: Option<u64>,
        /// The ROS 2 domain id (default: ROS_DOMAIN_ID, else 0).
        #[arg(long, env = "ROS_DOMAIN_ID", default_value_t = 0)]
        domain: u32,
    },
    /// Print a topic's bandwidth (bytes per second) every second.
    Bw {
        /// The topic.
        topic: String,
        /// Stop after this many seconds (default: until Ctrl-C).
        #[arg(long)]
        duration: Option<f64>,
        /// The ROS 2 domain id (default: ROS_DOMAIN_ID, else 0).
        #[arg(long, env = "ROS_DOMAIN_ID", default_value_t = 0)]
        domain: u32,
    },
    /// Print a topic's message rate every second.
    Hz {
        /// The topic.
        topic: String,
        /// Stop after this many seconds (default: until Ctrl-C).
        #[arg(long)]
        duration: Option<f64>,
        /// The ROS 2 domain id (default: ROS_DOMAIN_ID, else 0).
        #[arg(long, env = "ROS_DOMAIN_ID", default_value_t = 0)]
        domain: u32,
    },
}

/// `myelin interface` subcommands.
#[derive(Debug, Subcommand)]
pub enum InterfaceCommand {
    /// Every type, `pkg/msg/Name` and `pkg/srv/Name`.
    List,
    /// A type's definition (`.msg` or `.srv`) and its ROS 2 type hash,
    /// e.g. `myelin interface show sensor_msgs/msg/Image`.
    Show {
        /// The type.
        #[arg(value_name = "TYPE")]
        type_name: String,
    },
}

/// `myelin param` subcommands.
#[derive(Debug, Subcommand)]
pub enum ParamCommand {
    /// The node's parameters (and their types with `-t`).
    List {
        /// The node, e.g. `/camera`.
        node: String,
        /// Show each parameter's type.
        #[arg(short = 't', long = "param-type")]
        show_types: bool,
        /// The ROS 2 domain id (default: ROS_DOMAIN_ID, else 0).
        #[arg(long, env = "ROS_DOMAIN_ID", default_value_t = 0)]
        domain: u32,
    },
    /// A parameter's value, e.g. `myelin param get /camera fps`.
    Get {
        /// The node.
        node: String,
        /// The parameter.
        name: String,
        /// The ROS 2 domain id (default: ROS_DOMAIN_ID, else 0).
        #[arg(long, env = "ROS_DOMAIN_ID", default_value_t = 0)]
        domain: u32,
    },
    /// Set a parameter; the value is YAML as in ROS 2 (`30`, `2.5`,
    /// `true`, `"[1, 2]"`, text), e.g. `myelin param set /camera fps 15`.
    Set {
        /// The node.
        node: String,
        /// The parameter.
        name: String,
        /// The value.
        value: String,
        /// The ROS 2 domain id (default: ROS_DOMAIN_ID, else 0).
        #[arg(long, env = "ROS_DOMAIN_ID", default_value_t = 0)]
        domain: u32,
    },
    /// Print every parameter of the node as a ROS 2 parameter file.
    Dump {
        /// The node.
        node: String,
        /// The ROS 2 domain id (default: ROS_DOMAIN_ID, else 0).
        #[arg(long, env = "ROS_DOMAIN_ID", default_value_t = 0)]
        domain: u32,
    },
    /// Set the node's parameters from a ROS 2 parameter file (its
    /// `/**` entry and the node's own), all at once.
    Load {
        /// The node.
        node: String,
        /// The file.
        file: std::path::PathBuf,
        /// The ROS 2 domain id (default: ROS_DOMAIN_ID, else 0).
        #[arg(long, env = "ROS_DOMAIN_ID", default_value_t = 0)]
        domain: u32,
    },
}

/// `myelin service` subcommands.
#[derive(Debug, Subcommand)]
pub enum ServiceCommand {
    /// The services with a server or client, and their servers' nodes.
    List {
        /// Show each service's type (when its announcement names one).
        #[arg(short = 't', long = "show-types")]
        show_types: bool,
        /// Also list hidden services (a name part starting with `_`, such
        /// as an action's `_action/send_goal`), as ROS 2 does.
        #[arg(long = "include-hidden-services")]
        include_hidden: bool,
        /// The ROS 2 domain id (default: ROS_DOMAIN_ID, else 0).
        #[arg(long, env = "ROS_DOMAIN_ID", default_value_t = 0)]
        domain: u32,
    },
    /// A service's type, as its servers and clients announce it.
    Type {
        /// The service (`add_two_ints` means `/add_two_ints`).
        service: String,
        /// The ROS 2 domain id (default: ROS_DOMAIN_ID, else 0).
        #[arg(long, env = "ROS_DOMAIN_ID", default_value_t = 0)]
        domain: u32,
    },
    /// Call a service of a standard type once and print the response as
    /// YAML, e.g. `myelin service call /add_two_ints
    /// example_interfaces/srv/AddTwoInts "{a: 2, b: 3}"`.
    Call {
        /// The service (`add_two_ints` means `/add_two_ints`).
        service: String,
        /// The service type, e.g. `example_interfaces/srv/AddTwoInts` (the
        /// services of myelin-msgs: std_srvs, example_interfaces).
        #[arg(value_name = "TYPE")]
        type_name: String,
        /// The request as YAML (`{}` for defaults).
        #[arg(default_value = "{}")]
        request: String,
        /// Seconds to wait for a server, then for the answer.
        #[arg(long, default_value_t = 10.0)]
        timeout: f64,
        /// The ROS 2 domain id (default: ROS_DOMAIN_ID, else 0).
        #[arg(long, env = "ROS_DOMAIN_ID", default_value_t = 0)]
        domain: u32,
    },
    /// Print a service's introspection events as YAML (as `ros2 service
    /// echo`): each request and response its servers and clients publish
    /// on `<service>/_service_event` when their introspection is on
    /// (`configure_introspection`, ROS 2's and myelin's).
    Echo {
        /// The service (`add_two_ints` means `/add_two_ints`).
        service: String,
        /// Stop after N events.
        #[arg(long)]
        count: Option<u64>,
        /// Show arrays and sequences as their type and length, not their
        /// elements.
        #[arg(long = "no-arr")]
        no_arr: bool,
        /// The ROS 2 domain id (default: ROS_DOMAIN_ID, else 0).
        #[arg(long, env = "ROS_DOMAIN_ID", default_value_t = 0)]
        domain: u32,
    },
}

/// `myelin action` subcommands.
#[derive(Debug, Subcommand)]
pub enum ActionCommand {
    /// The actions with a server or client.
    List {
        /// Show each action's type.
        #[arg(short = 't', long = "show-types")]
        show_types: bool,
        /// The ROS 2 domain id (default: ROS_DOMAIN_ID, else 0).
        #[arg(long, env = "ROS_DOMAIN_ID", default_value_t = 0)]
        domain: u32,
    },
    /// An action's servers and clients.
    Info {
        /// The action (`fibonacci` means `/fibonacci`).
        action: String,
        /// Show the action's type after each node.
        #[arg(short = 't', long = "show-types")]
        show_types: bool,
        /// The ROS 2 domain id (default: ROS_DOMAIN_ID, else 0).
        #[arg(long, env = "ROS_DOMAIN_ID", default_value_t = 0)]
        domain: u32,
    },
    /// Send a goal of a standard action type and wait for its result, e.g.
    /// `myelin action send_goal /fibonacci
    /// example_interfaces/action/Fibonacci "{order: 5}" --feedback`.
    #[command(name = "send_goal", alias = "send-goal")]
    SendGoal {
        /// The action (`fibonacci` means `/fibonacci`).
        action: String,
        /// The action type, e.g. `example_interfaces/action/Fibonacci`.
        #[arg(value_name = "TYPE")]
        type_name: String,
        /// The goal as YAML (`{}` for defaults).
        #[arg(default_value = "{}")]
        goal: String,
        /// Print the feedback as it comes.
        #[arg(short = 'f', long)]
        feedback: bool,
        /// Seconds to wait for a server, then for the goal to be accepted
        /// (the result is waited for as long as it takes).
        #[arg(long, default_value_t = 10.0)]
        timeout: f64,
        /// The ROS 2 domain id (default: ROS_DOMAIN_ID, else 0).
        #[arg(long, env = "ROS_DOMAIN_ID", default_value_t = 0)]
        domain: u32,
    },
}

/// `myelin bag` subcommands.
#[derive(Debug, Subcommand)]
pub enum BagCommand {
    /// Record topics (from this host's shared memory and, through zenoh,
    /// other hosts and ROS 2 nodes) until Ctrl-C, e.g. `myelin bag record
    /// -a` or `myelin bag record /camera/image /imu -o run1`.
    Record(RecordArgs),
    /// Republish a bag's messages with their recorded timing and QoS, e.g.
    /// `myelin bag play run1 --rate 2 --loop`.
    Play(PlayArgs),
    /// Merge, split, filter or recompress bags into a new one, e.g.
    /// `myelin bag convert run1 run2 -o both --topics /imu -b 100000000`.
    Convert(ConvertArgs),
    /// What a bag holds: files, duration, topics with types and counts.
    Info {
        /// A bag directory or one .mcap file.
        bag: std::path::PathBuf,
    },
}

/// `myelin bag record` arguments.
#[derive(Debug, clap::Args)]
pub struct RecordArgs {
    /// Topics to record (or -a / --regex).
    pub topics: Vec<String>,
    /// Record every topic and every service's introspection events,
    /// including those that appear while recording.
    #[arg(short = 'a', long = "all")]
    pub all: bool,
    /// Record every topic (service events only with --all-services or
    /// --services).
    #[arg(long)]
    pub all_topics: bool,
    /// Record the introspection events (`<service>/_service_event`) of
    /// every service that publishes them.
    #[arg(long)]
    pub all_services: bool,
    /// Record the introspection events of these services.
    #[arg(long, num_args = 1..)]
    pub services: Vec<String>,
    /// Record topics whose name matches this regular expression.
    #[arg(short = 'e', long)]
    pub regex: Option<String>,
    /// Leave out topics whose name matches this regular expression.
    #[arg(short = 'x', long)]
    pub exclude: Option<String>,
    /// The bag directory (default: rosbag2_YYYY_MM_DD-HH_MM_SS, UTC).
    #[arg(short = 'o', long)]
    pub output: Option<std::path::PathBuf>,
    /// Start a new file after this many bytes.
    #[arg(short = 'b', long)]
    pub max_bag_size: Option<u64>,
    /// Start a new file after this many seconds.
    #[arg(short = 'd', long)]
    pub max_bag_duration: Option<f64>,
    /// Compress chunks.
    #[arg(long, value_enum, default_value = "none")]
    pub compression: CompressionArg,
    /// Stop after this many seconds (default: at Ctrl-C).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Bytes of messages the recorder may hold while the disk catches up
    /// (as rosbag2's --max-cache-size); more are dropped and counted.
    #[arg(long, default_value_t = 100 * 1024 * 1024)]
    pub max_cache_size: u64,
    /// The ROS 2 domain id (default: ROS_DOMAIN_ID, else 0).
    #[arg(long, env = "ROS_DOMAIN_ID", default_value_t = 0)]
    pub domain: u32,
}

/// `myelin bag convert` arguments.
#[derive(Debug, clap::Args)]
pub struct ConvertArgs {
    /// The input bags (directories or .mcap files), merged in time order.
    #[arg(required = true)]
    pub inputs: Vec<std::path::PathBuf>,
    /// The new bag directory.
    #[arg(short = 'o', long)]
    pub output: std::path::PathBuf,
    /// Keep only these topics.
    #[arg(long, num_args = 1..)]
    pub topics: Vec<String>,
    /// Leave out topics whose name matches this regular expression.
    #[arg(short = 'x', long)]
    pub exclude: Option<String>,
    /// Start a new file after this many bytes.
    #[arg(short = 'b', long)]
    pub max_bag_size: Option<u64>,
    /// Start a new file after this many seconds.
    #[arg(short = 'd', long)]
    pub max_bag_duration: Option<f64>,
    /// Compress chunks.
    #[arg(long, value_enum, default_value = "none")]
    pub compression: CompressionArg,
}

/// `--compression`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum CompressionArg {
    /// Stored as received.
    None,
    /// zstd per chunk.
    Zstd,
    /// LZ4 per chunk.
    Lz4,
}

/// `myelin bag play` arguments.
#[derive(Debug, clap::Args)]
pub struct PlayArgs {
    /// A bag directory or one .mcap file (from myelin, `ros2 bag` or any
    /// MCAP writer of ROS 2 messages).
    pub bag: std::path::PathBuf,
    /// Play faster (2) or slower (0.5).
    #[arg(short = 'r', long, default_value_t = 1.0)]
    pub rate: f64,
    /// Start again at the end.
    #[arg(short = 'l', long = "loop")]
    pub looping: bool,
    /// Only these topics.
    #[arg(long, num_args = 1..)]
    pub topics: Vec<String>,
    /// Publish a topic under another name: `--remap /from:=/to` (repeat).
    #[arg(long, num_args = 1..)]
    pub remap: Vec<String>,
    /// Skip this many seconds from the start.
    #[arg(long, default_value_t = 0.0)]
    pub start_offset: f64,
    /// Seconds to wait for subscribers before the first message.
    #[arg(long, default_value_t = 1.0)]
    pub wait_for_subscribers: f64,
    /// Publish the bag's time on /clock (rosgraph_msgs/msg/Clock) at this
    /// rate (default 40 Hz), for nodes with use_sim_time.
    #[arg(long, value_name = "HZ", num_args = 0..=1, default_missing_value = "40")]
    pub clock: Option<f64>,
    /// The ROS 2 domain id (default: ROS_DOMAIN_ID, else 0).
    #[arg(long, env = "ROS_DOMAIN_ID", default_value_t = 0)]
    pub domain: u32,
}

/// `myelin node` subcommands.
#[derive(Debug, Subcommand)]
pub enum NodeCommand {
    /// The nodes with a publisher or subscription.
    List {
        /// The ROS 2 domain id (default: ROS_DOMAIN_ID, else 0).
        #[arg(long, env = "ROS_DOMAIN_ID", default_value_t = 0)]
        domain: u32,
    },
    /// A node's publishers and subscriptions.
    Info {
        /// The fully qualified node name (e.g. `/talker`).
        node: String,
        /// The ROS 2 domain id (default: ROS_DOMAIN_ID, else 0).
        #[arg(long, env = "ROS_DOMAIN_ID", default_value_t = 0)]
        domain: u32,
    },
}

/// `myelin perf` subcommands.
#[derive(Debug, Subcommand)]
pub enum PerfCommand {
    /// Send pings, print one latency row per second and a summary.
    Ping(PingArgs),
    /// Echo pings until Ctrl-C.
    Pong(PerfCommon),
}

/// Flags both sides take.
#[derive(Debug, Clone, clap::Args)]
pub struct PerfCommon {
    /// How the sides connect: shm (two processes), intra (with --local), zenoh
    /// (through a router).
    #[arg(long, value_enum, default_value_t = TransportArg::Shm)]
    pub transport: TransportArg,
    /// block: sleep in the kernel until woken; poll: spin.
    #[arg(long, value_enum, default_value_t = WaitArg::Block)]
    pub wait: WaitArg,
    /// The ROS 2 domain id, 0..=232 (default: ROS_DOMAIN_ID, else 0).
    #[arg(long, env = "ROS_DOMAIN_ID", default_value_t = 0)]
    pub domain: u32,
    /// Pin this process to CPU N (sched_setaffinity).
    #[arg(long, value_name = "N")]
    pub cpu: Option<usize>,
    /// Run at SCHED_FIFO priority P (1..=99); refused with an error without
    /// permission.
    #[arg(long, value_name = "P")]
    pub rt_priority: Option<i32>,
    /// Hold a CPU wake-up latency request of US microseconds while this
    /// side runs (/dev/cpu_dma_latency, as cyclictest; root).
    #[arg(long, value_name = "US")]
    pub cpu_wakeup_latency: Option<u64>,
    /// Build messages in private memory and let publish copy them (default:
    /// loan them in shared memory).
    #[arg(long)]
    pub copy: bool,
    /// Message size in bytes (0 to 8 MiB; e.g. 64, 4KiB, 1MiB, 4665600).
    #[arg(long, default_value = "64")]
    pub size: String,
}

/// `myelin perf ping` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct PingArgs {
    /// Shared flags.
    #[command(flatten)]
    pub common: PerfCommon,
    /// Pings per second, or `unlimited` (back to back).
    #[arg(long, default_value = "unlimited")]
    pub rate: String,
    /// Seconds measured.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Seconds of unmeasured warm-up first.
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
    /// Run the pong in this process too.
    #[arg(long)]
    pub local: bool,
    /// Seconds to wait for a pong to appear.
    #[arg(long, default_value_t = 10.0)]
    pub timeout: f64,
    /// Write every row and the summary to this JSON file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write latency plots (histogram, over time, per-second lines) here.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
}

/// `--transport`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TransportArg {
    /// The intra-process manager (`--local` only).
    Intra,
    /// Shared memory.
    Shm,
    /// zenoh, shared memory off (start `myelin router` first, or set
    /// MYELIN_ZENOH_CONFIG).
    Zenoh,
}

/// `--wait`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WaitArg {
    /// Sleep in the kernel.
    Block,
    /// Spin.
    Poll,
}

/// `myelin doctor` arguments.
#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// Remove this user's shared-memory segments whose owner process is
    /// dead (never another user's, never a symlink).
    #[arg(long)]
    pub clean: bool,
    /// Clean only this ROS 2 domain (0..=232); default: every domain.
    #[arg(long)]
    pub domain: Option<u32>,
}

/// Benchmark scenarios.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// The standard set (dispatch, relay at 10/100/1000 Hz, rpc, fanout, image).
    Suite,
    /// The relay-chain per-hop latency measurement: Source => Relay_0..n => Sink.
    Relay,
    /// The 20 topics x 10 subscribers CPU-overhead measurement (1 publisher per topic).
    Fanout,
    /// The image pipeline: 1440x1080 and 320x240 RGB frames at 30 Hz.
    Image,
    /// Same-thread publish -> callback cost, 64 B and 4.6 MB shared.
    Dispatch,
    /// The client/server chain: a source calls server_0, which calls server_1, ...; per-hop latency.
    Rpc,
    /// Two processes: round trips over the shared-memory ring vs the raw futex/spin limits.
    Ipc,
    /// A whole robot graph from a topology JSON file (`myelin bench topology FILE`).
    Topology,
    /// The ddsperf-style ping-pong between processes: myelin (shm, block and poll) beside CycloneDDS ddsperf.
    Pingpong,
    /// The network transport across processes through a zenoh router on
    /// loopback (ping-pong and a 3-process relay), beside raw zenoh.
    Net,
    /// The bag recorder against the disk's raw write speed (a robot's mix
    /// and saturated), and the player's timing at 1 kHz (`--duration`
    /// seconds per recording, default 20; writes to the temp directory).
    Bag,
    /// Many idle processes: CPU, memory and shared memory per process, and
    /// how fast a late joiner finds them all (`--population 10,50,100,200`,
    /// `--endpoints 4`, `--transport shm|zenoh|zenoh-client|hosts`,
    /// comma-separated; default the first three; `hosts`: two hosts of
    /// the test bed, root only).
    Scale,
    /// Instructions per operation on the hot paths (in-process dispatch,
    /// a shared-memory loan and take, a zenoh publish, CDR encode and
    /// decode of an image), counted by valgrind's callgrind: deterministic
    /// where timings are not. `--baseline FILE` fails when one grew more
    /// than `--tolerance` percent; `--save-baseline FILE` writes one.
    Icount,
}

/// `myelin bench` arguments.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// The scenario (default: the suite).
    #[arg(value_enum, default_value_t = Scenario::Suite)]
    pub scenario: Scenario,
    /// topology: the topology file (iRobot ros2-performance JSON format;
    /// see topologies/).
    #[arg(value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Systems to measure (repeatable): myelin, channel, raw. Default: all.
    #[arg(long = "system", value_name = "SYSTEM")]
    pub systems: Vec<String>,
    /// Smaller counts and durations (the suite finishes in well under a minute).
    #[arg(long)]
    pub quick: bool,
    /// Write every record, with a machine header, to this JSON file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write latency histograms and latency-over-time plots (SVG) here.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// relay: message transfers from source to sink.
    #[arg(long, default_value_t = 5)]
    pub hops: u32,
    /// relay/fanout/image: publish rate in Hz (defaults: relay 100, fanout 100, image 30).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Messages (relay), frames (image) or samples (dispatch) measured.
    #[arg(long)]
    pub count: Option<u64>,
    /// Message size, e.g. 64, 4KiB, 1MiB (relay/ipc: default 64; pingpong:
    /// default 64 B, 4 KiB, 1 MiB and 4,665,600 B).
    #[arg(long)]
    pub size: Option<String>,
    /// fanout: 1 or 10 nodes (default: both).
    #[arg(long)]
    pub nodes: Option<usize>,
    /// fanout: seconds to run.
    #[arg(long)]
    pub duration: Option<f64>,
    /// Stages in separate processes over shared memory. relay: every relay
    /// its own process (beside the raw two-process futex ping-pong); image:
    /// a stage in another process than the camera (the chain blocking and
    /// anticipating), then the low-latency mode's busy-polling viewer in
    /// another process (unwarmed and warmed); topology: `per-node`
    /// (the default), `per-executor`, or a placement FILE (JSON: process
    /// name -> node names).
    #[arg(long, value_name = "PLACEMENT", num_args = 0..=1, default_missing_value = "per-node")]
    pub processes: Option<String>,
    /// topology --processes: how the processes talk, `shm` (default) or
    /// `zenoh` (shared memory off, through a router on a loopback port
    /// that the run starts).
    #[arg(long, value_name = "shm|zenoh")]
    pub transport: Option<String>,
    /// topology: how the executors wait when idle: `block` (default: asleep
    /// in the kernel), `anticipate` (learn each executor's period and be
    /// awake when work is due: lower latency for a short spin per period)
    /// or `busy-poll` (never sleep).
    #[arg(
        long,
        value_name = "block|anticipate|busy-poll",
        default_value = "block"
    )]
    pub idle_wait: String,
    /// Internal: run only job N of the plan and print its record as JSON.
    /// The parent runs every job in its own child process, so CPU, RSS and
    /// background threads (zenoh's runtime) never leak between systems.
    #[arg(long, hide = true)]
    pub job: Option<usize>,
    /// Run every job in this process instead of one child process per job.
    #[arg(long)]
    pub in_process: bool,
    /// net: between two hosts of the multi-host test bed (network
    /// namespaces on a bridge, a router per host; needs root, iproute2 and
    /// nftables) instead of loopback; ping-pong only.
    #[arg(long)]
    pub hosts: bool,
    /// scale: numbers of processes, comma-separated (default
    /// 10,50,100,200; with --quick 10,50).
    #[arg(long, value_name = "N,N,...", value_delimiter = ',')]
    pub population: Vec<usize>,
    /// scale: endpoints per process, half publishers and half
    /// subscriptions.
    #[arg(long, default_value_t = 4)]
    pub endpoints: usize,
    /// icount: compare with this baseline (JSON: workload -> instructions
    /// per operation); exit non-zero when one grew more than `--tolerance`.
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<std::path::PathBuf>,
    /// icount: write this run's counts as a baseline; with --workload,
    /// update those workloads' rows in FILE and keep the others.
    #[arg(long, value_name = "FILE")]
    pub save_baseline: Option<std::path::PathBuf>,
    /// icount: count only this workload (repeatable; default: all).
    #[arg(long, value_name = "NAME")]
    pub workload: Vec<String>,
    /// icount: how much a count may grow before `--baseline` fails, in
    /// percent.
    #[arg(long, value_name = "PCT", default_value_t = 5.0)]
    pub tolerance: f64,
    /// image: also run myelin's executor callback with the executor thread
    /// under SCHED_FIFO at priority P (`callback fifo` rows; needs root,
    /// CAP_SYS_NICE or an rtprio limit).
    #[arg(long, value_name = "P", value_parser = clap::value_parser!(u8).range(1..=99))]
    pub rt_priority: Option<u8>,
    /// Hold a CPU wake-up latency request of US microseconds while the
    /// benchmark runs (/dev/cpu_dma_latency, as cyclictest does; root):
    /// idle CPUs stay in states they leave that fast (0: they poll), so
    /// wake-ups measure myelin rather than the idle state's exit.
    #[arg(long, value_name = "US")]
    pub cpu_wakeup_latency: Option<u64>,
}

//! Errors: one enum per operation, each message saying what and where.

use crate::names::NameError;

/// Building a [`Context`](crate::Context) failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ContextError {
    /// Domain ids follow ROS 2: 0 to 232.
    #[error("domain id {0} is out of range: ROS 2 domain ids are 0 to 232")]
    DomainOutOfRange(u32),
    /// `MYELIN_TRANSPORT` names something that is not a transport.
    #[error("MYELIN_TRANSPORT={value:?}: {why}")]
    InvalidTransportEnv {
        /// The variable's value (its first 60 characters).
        value: String,
        /// What is wrong, with a suggestion.
        why: String,
    },
    /// `ROS_DOMAIN_ID` is set to something that is not a domain id.
    #[error(
        "ROS_DOMAIN_ID={value:?} is not a domain id: set it to a number from 0 to 232, or unset it (domain 0)"
    )]
    InvalidDomainEnv {
        /// The variable's value (its first 40 characters).
        value: String,
    },
    /// Shared memory was asked for explicitly and could not be set up.
    #[error("domain {domain}: shared memory could not be set up: {why}")]
    SharedMemory {
        /// The domain.
        domain: u32,
        /// What failed.
        why: String,
    },
    /// The network transport was asked for explicitly (or configured with
    /// a file) and could not be set up.
    #[error("domain {domain}: the zenoh session could not be opened: {why}")]
    Network {
        /// The domain.
        domain: u32,
        /// What failed (names the configuration file when there is one).
        why: String,
    },
    /// Simulated time was asked for and its `/clock` subscription could
    /// not be set up.
    #[error("use_sim_time: the /clock subscription could not be set up: {0}")]
    SimTime(String),
    /// `--ros-args` holds something wrong (an unreadable parameter file,
    /// a malformed `-p`, an unknown flag).
    #[error("--ros-args: {0}")]
    RosArgs(String),
}

/// Creating a node failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CreateNodeError {
    /// The node name or namespace breaks the ROS 2 naming rules.
    #[error(transparent)]
    InvalidName(#[from] NameError),
    /// A node with this fully qualified name already exists in the context.
    #[error("a node named {0:?} already exists in this context")]
    NameTaken(String),
    /// The context was shut down.
    #[error("cannot create node {0:?}: the context is shut down")]
    ContextShutDown(String),
}

/// Creating a publisher or subscription failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CreateEndpointError {
    /// The topic name breaks the ROS 2 naming rules.
    #[error(transparent)]
    InvalidName(#[from] NameError),
    /// The topic already carries another message type.
    #[error(
        "topic {topic:?} carries type {existing} (hash {existing_hash}), not {requested} (hash {requested_hash})"
    )]
    TypeMismatch {
        /// The topic.
        topic: String,
        /// The type already on the topic.
        existing: &'static str,
        /// Its schema hash.
        existing_hash: crate::TypeHash,
        /// The type of the refused endpoint.
        requested: &'static str,
        /// Its schema hash.
        requested_hash: crate::TypeHash,
    },
    /// An endpoint in another process has the topic with another type.
    #[error(
        "topic {topic:?} carries type {remote} (hash {remote_hash:016x}) in process {pid}, not {requested} (hash {requested_hash})"
    )]
    RemoteTypeMismatch {
        /// The topic.
        topic: String,
        /// The other process's type name.
        remote: String,
        /// Its schema hash.
        remote_hash: u64,
        /// The other process.
        pid: u32,
        /// The type of the refused endpoint.
        requested: &'static str,
        /// Its schema hash.
        requested_hash: crate::TypeHash,
    },
    /// A transport (shared memory, zenoh) could not carry the endpoint.
    #[error("topic {topic:?}: {why}")]
    Transport {
        /// The topic.
        topic: String,
        /// Which transport, and what failed.
        why: String,
    },
    /// The context was shut down.
    #[error("cannot create an endpoint on topic {0:?}: the context is shut down")]
    ContextShutDown(String),
    /// A QoS value cannot be honoured.
    #[error("topic {topic:?}: invalid {policy} QoS: {reason}")]
    InvalidQos {
        /// The topic.
        topic: String,
        /// The policy.
        policy: crate::QosPolicy,
        /// Why.
        reason: &'static str,
    },
    /// An option is out of its range.
    #[error("topic {topic:?}: invalid {option}: {reason}")]
    InvalidOption {
        /// The topic.
        topic: String,
        /// The option.
        option: &'static str,
        /// Why.
        reason: String,
    },
}

/// Creating a publisher failed.
pub type CreatePublisherError = CreateEndpointError;
/// Creating a subscription failed.
pub type CreateSubscriptionError = CreateEndpointError;

/// Publishing failed (the message may still have reached other subscriptions).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PublishError {
    /// Keep-all subscriptions were full: the message was delivered to every
    /// other matched subscription, and counted as lost by the full ones.
    #[error(
        "topic {topic:?}: {full} keep_all subscription(s) at their resource limit of {limit} messages refused the message"
    )]
    ResourceLimit {
        /// The topic.
        topic: String,
        /// How many subscriptions refused the message.
        full: usize,
        /// The smallest limit among them.
        limit: usize,
    },
    /// The context was shut down.
    #[error("cannot publish on {0:?}: the context is shut down")]
    ContextShutDown(String),
    /// A [`DetachedSliceLoan`](crate::DetachedSliceLoan) was handed to a
    /// publisher other than the one that lent it.
    #[error("cannot publish on {0:?}: the loan was lent by another publisher")]
    ForeignLoan(String),
    /// The message could not be encoded for subscriptions in other
    /// processes (local ones got it).
    #[error("topic {topic:?}: {why}")]
    Wire {
        /// The topic.
        topic: String,
        /// What failed.
        why: String,
    },
    /// Shared memory for the message could not be had (pool exhausted, or
    /// the message is larger than a chunk can be).
    #[error("topic {topic:?}: no shared memory for a {len}-byte message: {why}")]
    OutOfMemory {
        /// The topic.
        topic: String,
        /// The message size.
        len: usize,
        /// Why.
        why: String,
    },
    /// An inline subscription's callback panicked while handling the
    /// message (caught; the subscription stays usable).
    #[error("inline callback of {entity} panicked: {message}")]
    CallbackPanicked {
        /// E.g. `subscription "/chatter" of node "/listener"`.
        entity: String,
        /// The panic payload, if it was a string.
        message: String,
    },
}

/// Creating a timer failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CreateTimerError {
    /// A zero period would spin forever.
    #[error("timer period must be greater than zero")]
    ZeroPeriod,
    /// A period beyond ROS 2's (and rclcpp's) limit of `i64::MAX`
    /// nanoseconds, about 292 years: `Duration::MAX` is no period (cancel
    /// the timer, or leave it out, for one that never fires).
    #[error("timer period {0:?} is beyond i64::MAX nanoseconds (about 292 years)")]
    PeriodTooLong(std::time::Duration),
    /// The context was shut down.
    #[error("cannot create a timer: the context is shut down")]
    ContextShutDown,
}

/// Adding a node to an executor failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AddNodeError {
    /// A node belongs to at most one executor at a time (as in ROS 2).
    #[error("node {0:?} has already been added to an executor")]
    AlreadyAdded(String),
    /// The node belongs to another context than the executor.
    #[error("node {0:?} belongs to another context than this executor")]
    OtherContext(String),
}

/// Spinning stopped with an error.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpinError {
    /// A user callback panicked. The panic was caught, the entity stays
    /// usable, and spinning stopped so the error is not lost.
    #[error("callback of {entity} panicked: {message}")]
    CallbackPanicked {
        /// E.g. `subscription "/chatter" of node "/talker"`.
        entity: String,
        /// The panic payload, if it was a string.
        message: String,
    },
    /// The executor's [`ThreadPolicy`](crate::ThreadPolicy) could not be
    /// applied to a worker; no callback ran.
    #[error("executor thread policy: {0}")]
    ThreadPolicy(#[from] crate::sched::SchedError),
    /// The operating system refused a worker thread of a
    /// [`MultiThreadedExecutor`](crate::MultiThreadedExecutor) (a limit on
    /// processes or memory); no callback ran.
    #[error(
        "the OS refused an executor worker thread ({started} of {wanted} running): {reason} \
         (check `ulimit -u` and the memory limit, or use fewer threads)"
    )]
    WorkerThread {
        /// The threads that were running, the calling one included.
        started: usize,
        /// The executor's thread count.
        wanted: usize,
        /// The OS's answer.
        reason: String,
    },
}

/// Creating a service server or client failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CreateServiceError {
    /// The service name breaks the ROS 2 naming rules.
    #[error(transparent)]
    InvalidName(#[from] NameError),
    /// The service already exists with other request/response types.
    #[error("service {service:?} is {existing}, not {requested}")]
    TypeMismatch {
        /// The service.
        service: String,
        /// `Request -> Response` type names already on the name.
        existing: String,
        /// The refused endpoint's `Request -> Response` type names.
        requested: String,
    },
    /// The service's endpoints for other processes could not be created.
    #[error("service endpoint for other processes: {0}")]
    Transport(String),
    /// The context was shut down.
    #[error("cannot create service endpoint {0:?}: the context is shut down")]
    ContextShutDown(String),
}

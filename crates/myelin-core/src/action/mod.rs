//! Actions: long-running goals with feedback, a result and cancellation,
//! as `rclcpp_action` has them and over the same services and topics, so
//! a myelin action server serves `ros2 action send_goal` and a ROS 2
//! action client on rmw_zenoh, and a myelin action client drives a ROS 2
//! action server.
//!
//! An action `name` of type [`ActionType`] `A` is three services and two
//! topics under `name/_action/`:
//!
//! | name | kind | type |
//! |---|---|---|
//! | `send_goal` | service | [`SendGoal<A>`]: the goal with its id → accepted? and when |
//! | `cancel_goal` | service | [`CancelGoal`] |
//! | `get_result` | service | [`GetResult<A>`]: answered when the goal ends |
//! | `feedback` | topic | [`FeedbackMessage<A>`] |
//! | `status` | topic (transient local, keep last 1) | [`GoalStatusArray`] |
//!
//! A goal goes through the states of [`GoalState`]: accepted, executing,
//! canceling, then succeeded, canceled or aborted, by the rules of
//! `rcl_action`; a move the rules do not allow is an
//! [`ActionError::InvalidTransition`]. The server keeps a finished goal's
//! result for [`ActionServerOptions::result_timeout`] (15 minutes, as
//! ROS 2) for clients that ask late.
//!
//! The server's callbacks run on the node's executor (spin the node, as
//! for any service); the goal itself runs wherever
//! [`handle_accepted`](crate::Node::create_action_server) sends its
//! [`ServerGoalHandle`], usually a thread of its own. The client needs no
//! executor: its calls block the calling thread (with a timeout), and
//! feedback and status arrive on the thread that delivers them (see
//! [`SubscriptionOptions::inline`](crate::SubscriptionOptions::inline)).
//!
//! ```
//! use myelin_core::action::{ActionType, GoalResponse, CancelResponse, GoalState};
//! use myelin_core::{Context, Executor};
//! use std::time::Duration;
//!
//! /// Counts to a number, reporting each step.
//! struct CountTo;
//! impl ActionType for CountTo {
//!     type Goal = i64;
//!     type Result = i64;
//!     type Feedback = i64;
//!     const NAMES: myelin_core::action::ActionNames =
//!         myelin_core::action_names!("my_pkg/action/CountTo");
//! }
//!
//! let ctx = Context::builder().handle_signals(false).build()?;
//! let node = ctx.create_node("counter")?;
//! let _server = node.create_action_server::<CountTo>(
//!     "count",
//!     |_id, goal| if *goal >= 0 { GoalResponse::AcceptAndExecute } else { GoalResponse::Reject },
//!     |_id, _goal| CancelResponse::Accept,
//!     |handle| {
//!         std::thread::spawn(move || {
//!             for i in 1..=*handle.goal() {
//!                 handle.publish_feedback(i).unwrap();
//!             }
//!             handle.succeed(*handle.goal()).unwrap();
//!         });
//!     },
//! )?;
//! let mut exec = Executor::new();
//! exec.add_node(&node)?;
//! let stop = exec.stop_handle();
//! let spinner = std::thread::spawn(move || exec.spin());
//!
//! let client = node.create_action_client::<CountTo>("count")?;
//! assert!(client.wait_for_action_server(Duration::from_secs(5)));
//! let goal = client.send_goal(3, Duration::from_secs(5))?;
//! let done = goal.get_result(Duration::from_secs(5))?;
//! assert_eq!((done.state, done.result), (GoalState::Succeeded, 3));
//! assert!(client.send_goal(-1, Duration::from_secs(5)).is_err()); // rejected
//! stop.stop();
//! spinner.join().unwrap()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod client;
pub mod msgs;
mod server;

use std::fmt;
use std::marker::PhantomData;

use serde::Serialize;
use serde::de::DeserializeOwned;

pub use client::{ActionClient, ClientGoalHandle, GoalResult, SendGoalOptions};
pub use msgs::{
    CancelGoal, CancelGoalRequest, CancelGoalResponse, GoalInfo, GoalStatus, GoalStatusArray, UUID,
};
pub use server::{ActionServer, ActionServerOptions, ServerGoalHandle};

use crate::message::{Message, ServiceType, TypeHash};
use crate::time::Time;
use crate::wire::{SharedBytes, Wire, WireError};

/// An action type: the goal a client sends, the result it gets back and
/// the feedback it hears meanwhile (what ROS 2 generates from an
/// `.action` file). The message crate implements it for its actions
/// (`myelin_msgs::example_interfaces::Fibonacci`); an action of your own
/// names itself with [`action_names!`](crate::action_names):
///
/// ```
/// use myelin_core::action::{ActionNames, ActionType, SendGoal};
/// use myelin_core::{Message, ServiceType};
///
/// struct CountTo;
/// impl ActionType for CountTo {
///     type Goal = i64;
///     type Result = i64;
///     type Feedback = i64;
///     const NAMES: ActionNames = myelin_core::action_names!("my_pkg/action/CountTo");
/// }
/// assert_eq!(CountTo::NAMES.action, "my_pkg/action/CountTo");
/// assert_eq!(SendGoal::<CountTo>::TYPE_NAME, "my_pkg/action/CountTo_SendGoal");
/// ```
pub trait ActionType: 'static {
    /// What a client asks for.
    type Goal: Message + Serialize + DeserializeOwned;
    /// What the server answers when the goal ends (`Default` is what a
    /// goal that ended without one reports, as in ROS 2).
    type Result: Message + Serialize + DeserializeOwned + Default;
    /// What the server reports while it works.
    type Feedback: Message + Serialize + DeserializeOwned;
    /// The names of the action and of the messages and services it
    /// implies.
    const NAMES: ActionNames;
    /// The ROS 2 type hashes (REP 2011) of the same, when the action
    /// mirrors a ROS 2 `.action`, so ROS 2 nodes on rmw_zenoh find its
    /// services and topics.
    const ROS_HASHES: Option<ActionHashes> = None;

    /// The action type's description (REP 2016), as
    /// [`Message::ros_type_description`].
    fn ros_type_description() -> Option<crate::message::description::Described> {
        None
    }
}

/// The type names an action implies, as ROS 2 names them: the action
/// `pkg/action/Name` has the services `pkg/action/Name_SendGoal` and
/// `pkg/action/Name_GetResult` (with `_Request` and `_Response` parts)
/// and the message `pkg/action/Name_FeedbackMessage`. Build it with
/// [`action_names!`](crate::action_names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActionNames {
    /// `pkg/action/Name`.
    pub action: &'static str,
    /// `pkg/action/Name_SendGoal`.
    pub send_goal: &'static str,
    /// `pkg/action/Name_SendGoal_Request`.
    pub send_goal_request: &'static str,
    /// `pkg/action/Name_SendGoal_Response`.
    pub send_goal_response: &'static str,
    /// `pkg/action/Name_GetResult`.
    pub get_result: &'static str,
    /// `pkg/action/Name_GetResult_Request`.
    pub get_result_request: &'static str,
    /// `pkg/action/Name_GetResult_Response`.
    pub get_result_response: &'static str,
    /// `pkg/action/Name_FeedbackMessage`.
    pub feedback_message: &'static str,
}

/// `action_names!("pkg/action/Name")`: the [`ActionNames`] of an action.
///
/// ```
/// let n = myelin_core::action_names!("example_interfaces/action/Fibonacci");
/// assert_eq!(n.get_result_response, "example_interfaces/action/Fibonacci_GetResult_Response");
/// ```
#[macro_export]
macro_rules! action_names {
    ($name:literal) => {
        $crate::action::ActionNames {
            action: $name,
            send_goal: concat!($name, "_SendGoal"),
            send_goal_request: concat!($name, "_SendGoal_Request"),
            send_goal_response: concat!($name, "_SendGoal_Response"),
            get_result: concat!($name, "_GetResult"),
            get_result_request: concat!($name, "_GetResult_Request"),
            get_result_response: concat!($name, "_GetResult_Response"),
            feedback_message: concat!($name, "_FeedbackMessage"),
        }
    };
}

/// The ROS 2 type hashes (`RIHS01_...`) of an action and of what it
/// implies, field for field as in [`ActionNames`] (the message crate's
/// `idl::action_type_hash` and friends compute them from the `.action`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActionHashes {
    /// The action.
    pub action: &'static str,
    /// The `_SendGoal` service.
    pub send_goal: &'static str,
    /// Its request.
    pub send_goal_request: &'static str,
    /// Its response.
    pub send_goal_response: &'static str,
    /// The `_GetResult` service.
    pub get_result: &'static str,
    /// Its request.
    pub get_result_request: &'static str,
    /// Its response.
    pub get_result_response: &'static str,
    /// The `_FeedbackMessage`.
    pub feedback_message: &'static str,
}

/// What a server says to a new goal
/// ([`Node::create_action_server`](crate::Node::create_action_server)'s
/// `handle_goal`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GoalResponse {
    /// Refuse it: the client's `send_goal` fails with
    /// [`ActionError::Rejected`].
    Reject,
    /// Accept it and start executing ([`GoalState::Executing`]).
    AcceptAndExecute,
    /// Accept it for later ([`GoalState::Accepted`]): the handle's
    /// [`execute`](ServerGoalHandle::execute) starts it.
    AcceptAndDefer,
}

/// What a server says to a request to cancel a goal (`handle_cancel`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CancelResponse {
    /// Keep going.
    Reject,
    /// Wind down: the goal becomes [`GoalState::Canceling`], which its
    /// handle's [`is_canceling`](ServerGoalHandle::is_canceling) tells
    /// the code that executes it.
    Accept,
}

/// Where a goal is in its life (`action_msgs/msg/GoalStatus`'s constants).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GoalState {
    /// Not known to the server.
    Unknown,
    /// Accepted, not yet executing.
    Accepted,
    /// Executing.
    Executing,
    /// A cancel request was accepted; the goal is winding down.
    Canceling,
    /// Done: achieved.
    Succeeded,
    /// Done: canceled.
    Canceled,
    /// Done: the server gave up.
    Aborted,
}

impl GoalState {
    /// The state a `GoalStatus::status` number names (an unknown number is
    /// [`Unknown`](Self::Unknown)).
    pub fn from_status(status: i8) -> GoalState {
        match status {
            GoalStatus::STATUS_ACCEPTED => GoalState::Accepted,
            GoalStatus::STATUS_EXECUTING => GoalState::Executing,
            GoalStatus::STATUS_CANCELING => GoalState::Canceling,
            GoalStatus::STATUS_SUCCEEDED => GoalState::Succeeded,
            GoalStatus::STATUS_CANCELED => GoalState::Canceled,
            GoalStatus::STATUS_ABORTED => GoalState::Aborted,
            _ => GoalState::Unknown,
        }
    }

    /// The `GoalStatus::status` number of this state.
    pub fn status(self) -> i8 {
        match self {
            GoalState::Unknown => GoalStatus::STATUS_UNKNOWN,
            GoalState::Accepted => GoalStatus::STATUS_ACCEPTED,
            GoalState::Executing => GoalStatus::STATUS_EXECUTING,
            GoalState::Canceling => GoalStatus::STATUS_CANCELING,
            GoalState::Succeeded => GoalStatus::STATUS_SUCCEEDED,
            GoalState::Canceled => GoalStatus::STATUS_CANCELED,
            GoalState::Aborted => GoalStatus::STATUS_ABORTED,
        }
    }

    /// Succeeded, canceled or aborted: the goal has its result.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            GoalState::Succeeded | GoalState::Canceled | GoalState::Aborted
        )
    }

    /// Accepted, executing or canceling.
    pub fn is_active(self) -> bool {
        matches!(
            self,
            GoalState::Accepted | GoalState::Executing | GoalState::Canceling
        )
    }
}

impl fmt::Display for GoalState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GoalState::Unknown => "UNKNOWN",
            GoalState::Accepted => "ACCEPTED",
            GoalState::Executing => "EXECUTING",
            GoalState::Canceling => "CANCELING",
            GoalState::Succeeded => "SUCCEEDED",
            GoalState::Canceled => "CANCELED",
            GoalState::Aborted => "ABORTED",
        })
    }
}

/// The transitions of `rcl_action`'s goal state machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GoalEvent {
    Execute,
    CancelGoal,
    Succeed,
    Abort,
    Canceled,
}

impl GoalEvent {
    /// The state `event` leads to from `from`, if the rules allow it.
    pub(crate) fn next(self, from: GoalState) -> Option<GoalState> {
        use GoalState::*;
        match (from, self) {
            (Accepted, GoalEvent::Execute) => Some(Executing),
            (Accepted | Executing, GoalEvent::CancelGoal) => Some(Canceling),
            (Executing | Canceling, GoalEvent::Succeed) => Some(Succeeded),
            (Executing | Canceling, GoalEvent::Abort) => Some(Aborted),
            (Canceling, GoalEvent::Canceled) => Some(Canceled),
            _ => None,
        }
    }
}

impl fmt::Display for GoalEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GoalEvent::Execute => "execute",
            GoalEvent::CancelGoal => "cancel",
            GoalEvent::Succeed => "succeed",
            GoalEvent::Abort => "abort",
            GoalEvent::Canceled => "canceled",
        })
    }
}

impl UUID {
    /// A fresh random (version 4) UUID: what a client gives each goal.
    ///
    /// ```
    /// use myelin_core::action::UUID;
    /// let (a, b) = (UUID::random(), UUID::random());
    /// assert_ne!(a, b);
    /// assert_eq!(a.uuid[6] >> 4, 4); // version 4
    /// ```
    pub fn random() -> UUID {
        use std::hash::{BuildHasher, Hasher};
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        // std's RandomState is seeded from the operating system's random
        // source; two independently keyed hashes give 128 random bits.
        let mut bytes = [0u8; 16];
        for half in bytes.chunks_mut(8) {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(n);
            h.write_u64(now);
            h.write_u32(std::process::id());
            half.copy_from_slice(&h.finish().to_le_bytes());
        }
        bytes[6] = (bytes[6] & 0x0f) | 0x40;
        bytes[8] = (bytes[8] & 0x3f) | 0x80;
        UUID { uuid: bytes }
    }

    /// All zero (in a cancel request: "any goal").
    pub fn is_zero(&self) -> bool {
        self.uuid == [0; 16]
    }
}

impl fmt::Display for UUID {
    /// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, as `ros2 action` prints it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.uuid.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// Creating an action server or client failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CreateActionError {
    /// One of its services could not be created.
    #[error(transparent)]
    Service(#[from] crate::CreateServiceError),
    /// One of its topics could not be created.
    #[error(transparent)]
    Topic(#[from] crate::CreateEndpointError),
    /// The server's result-expiry timer could not be created.
    #[error(transparent)]
    Timer(#[from] crate::CreateTimerError),
}

/// An action call or a goal's transition failed.
#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    /// A call to one of the action's services failed (no server, timeout,
    /// server gone...).
    #[error(transparent)]
    Call(#[from] crate::CallError),
    /// The server refused the goal.
    #[error("the server of action {action:?} rejected the goal")]
    Rejected {
        /// The action.
        action: String,
    },
    /// The goal's state does not allow the move (succeed before
    /// executing, canceled without a cancel request, anything after the
    /// end...).
    #[error("goal {goal} of action {action:?} cannot {event} while {state}")]
    InvalidTransition {
        /// The action.
        action: String,
        /// The goal.
        goal: UUID,
        /// What was asked (`execute`, `succeed`, `abort`, `canceled`).
        event: String,
        /// The goal's state.
        state: GoalState,
    },
    /// Publishing feedback or status failed.
    #[error(transparent)]
    Publish(#[from] crate::PublishError),
}

/// The goal request: a fresh id and the goal (`pkg/action/Name_SendGoal_Request`).
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(bound = "")]
pub struct SendGoalRequest<A: ActionType> {
    /// The goal's id, chosen by the client.
    pub goal_id: UUID,
    /// The goal.
    pub goal: A::Goal,
}

/// The answer to a goal request (`pkg/action/Name_SendGoal_Response`).
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(bound = "")]
pub struct SendGoalResponse<A: ActionType> {
    /// Whether the server took the goal.
    pub accepted: bool,
    /// When (the server's ROS time).
    pub stamp: Time,
    #[serde(skip)]
    _action: PhantomData<fn() -> A>,
}

impl<A: ActionType> SendGoalResponse<A> {
    /// An answer.
    pub fn new(accepted: bool, stamp: Time) -> Self {
        SendGoalResponse {
            accepted,
            stamp,
            _action: PhantomData,
        }
    }
}

/// A request for a goal's result (`pkg/action/Name_GetResult_Request`).
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(bound = "")]
pub struct GetResultRequest<A: ActionType> {
    /// The goal.
    pub goal_id: UUID,
    #[serde(skip)]
    _action: PhantomData<fn() -> A>,
}

impl<A: ActionType> GetResultRequest<A> {
    /// A request for `goal_id`'s result.
    pub fn new(goal_id: UUID) -> Self {
        GetResultRequest {
            goal_id,
            _action: PhantomData,
        }
    }
}

/// A goal's end (`pkg/action/Name_GetResult_Response`).
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(bound = "")]
pub struct GetResultResponse<A: ActionType> {
    /// The goal's final `GoalStatus` number (`STATUS_UNKNOWN` for a goal
    /// the server does not know).
    pub status: i8,
    /// The result.
    pub result: A::Result,
}

/// Feedback on one goal (`pkg/action/Name_FeedbackMessage`).
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(bound = "")]
pub struct FeedbackMessage<A: ActionType> {
    /// The goal.
    pub goal_id: UUID,
    /// The feedback.
    pub feedback: A::Feedback,
}

impl<A: ActionType> Clone for SendGoalRequest<A> {
    fn clone(&self) -> Self {
        SendGoalRequest {
            goal_id: self.goal_id.clone(),
            goal: self.goal.clone(),
        }
    }
}

impl<A: ActionType> Clone for SendGoalResponse<A> {
    fn clone(&self) -> Self {
        SendGoalResponse::new(self.accepted, self.stamp)
    }
}

impl<A: ActionType> Clone for GetResultRequest<A> {
    fn clone(&self) -> Self {
        GetResultRequest::new(self.goal_id.clone())
    }
}

impl<A: ActionType> Clone for GetResultResponse<A> {
    fn clone(&self) -> Self {
        GetResultResponse {
            status: self.status,
            result: self.result.clone(),
        }
    }
}

impl<A: ActionType> Clone for FeedbackMessage<A> {
    fn clone(&self) -> Self {
        FeedbackMessage {
            goal_id: self.goal_id.clone(),
            feedback: self.feedback.clone(),
        }
    }
}

/// The schema hash of an action's own message `name` when the action has
/// no ROS hashes: its name and the hashes of its three parts.
const fn own_hash<A: ActionType>(name: &str) -> TypeHash {
    let h = TypeHash::of_schema(name).0;
    TypeHash(
        h ^ A::Goal::TYPE_HASH.0.rotate_left(7)
            ^ A::Result::TYPE_HASH.0.rotate_left(23)
            ^ A::Feedback::TYPE_HASH.0.rotate_left(41),
    )
}

/// The [`Message`] of an action's wrapper type, named and hashed by the
/// [`ActionNames`]/[`ActionHashes`] field `$field`, sent as CDR.
macro_rules! action_message {
    ($t:ident, $field:ident) => {
        impl<A: ActionType> Message for $t<A> {
            const TYPE_NAME: &'static str = A::NAMES.$field;
            const ROS_TYPE_HASH: Option<&'static str> = match A::ROS_HASHES {
                Some(h) => Some(h.$field),
                None => None,
            };
            const TYPE_HASH: TypeHash = match A::ROS_HASHES {
                Some(h) => TypeHash::of_ros_hash(h.$field),
                None => own_hash::<A>(A::NAMES.$field),
            };
            const WIRE: Wire = Wire::Cdr;
            fn wire_len(&self) -> Result<usize, WireError> {
                crate::wire::cdr_codec::len(self)
            }
            fn wire_encode(&self, out: &mut [u8]) -> Result<(), WireError> {
                crate::wire::cdr_codec::encode(self, out, Self::TYPE_NAME)
            }
            fn wire_decode(bytes: SharedBytes) -> Result<Self, WireError> {
                crate::wire::cdr_codec::decode(&bytes, Self::TYPE_NAME)
            }
            fn wire_decode_parts(parts: &[&[u8]]) -> Result<Self, WireError> {
                crate::wire::cdr_codec::decode_parts(parts, Self::TYPE_NAME)
            }
        }
    };
}

action_message!(SendGoalRequest, send_goal_request);
action_message!(SendGoalResponse, send_goal_response);
action_message!(GetResultRequest, get_result_request);
action_message!(GetResultResponse, get_result_response);
action_message!(FeedbackMessage, feedback_message);

/// An action's `_action/send_goal` service type (`pkg/action/Name_SendGoal`).
pub struct SendGoal<A>(PhantomData<fn() -> A>);

impl<A: ActionType> ServiceType for SendGoal<A> {
    type Request = SendGoalRequest<A>;
    type Response = SendGoalResponse<A>;
    const TYPE_NAME: &'static str = A::NAMES.send_goal;
    const ROS_TYPE_HASH: Option<&'static str> = match A::ROS_HASHES {
        Some(h) => Some(h.send_goal),
        None => None,
    };
}

/// An action's `_action/get_result` service type (`pkg/action/Name_GetResult`).
pub struct GetResult<A>(PhantomData<fn() -> A>);

impl<A: ActionType> ServiceType for GetResult<A> {
    type Request = GetResultRequest<A>;
    type Response = GetResultResponse<A>;
    const TYPE_NAME: &'static str = A::NAMES.get_result;
    const ROS_TYPE_HASH: Option<&'static str> = match A::ROS_HASHES {
        Some(h) => Some(h.get_result),
        None => None,
    };
}

/// Note a described action type `node` uses (for its
/// `~/get_type_description`).
pub(crate) fn uses_action_type<A: ActionType>(node: &crate::Node) {
    crate::node::type_descriptions::register(
        node,
        A::NAMES.action,
        A::ROS_HASHES.map(|h| h.action),
        A::ros_type_description,
    );
}

/// The services' and topics' names of the action `name` (already
/// resolved or relative, as given).
pub(crate) struct Endpoints {
    pub(crate) send_goal: String,
    pub(crate) cancel_goal: String,
    pub(crate) get_result: String,
    pub(crate) feedback: String,
    pub(crate) status: String,
}

impl Endpoints {
    pub(crate) fn of(name: &str) -> Endpoints {
        let base = name.trim_end_matches('/');
        Endpoints {
            send_goal: format!("{base}/_action/send_goal"),
            cancel_goal: format!("{base}/_action/cancel_goal"),
            get_result: format!("{base}/_action/get_result"),
            feedback: format!("{base}/_action/feedback"),
            status: format!("{base}/_action/status"),
        }
    }
}

/// The suffix of an action's `send_goal` service: a service name that
/// ends with it names an action (what `myelin action list` looks for).
pub const SEND_GOAL_SUFFIX: &str = "/_action/send_goal";

/// The QoS of an action's status topic (`rcl_action`'s default: reliable,
/// transient local, keep last 1), so a late client sees where every goal
/// is.
pub const STATUS_QOS: crate::QoS = crate::QoS::keep_last(1).reliable().transient_local();

/// The QoS of an action's feedback topic (ROS 2's default).
pub const FEEDBACK_QOS: crate::QoS = crate::QoS::keep_last(10);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_machine_is_rcl_actions() {
        use GoalState as S;
        let states = [
            S::Unknown,
            S::Accepted,
            S::Executing,
            S::Canceling,
            S::Succeeded,
            S::Canceled,
            S::Aborted,
        ];
        use GoalEvent as E;
        let events = [E::Execute, E::CancelGoal, E::Succeed, E::Abort, E::Canceled];
        let mut allowed = Vec::new();
        for s in states {
            for e in events {
                if let Some(to) = e.next(s) {
                    allowed.push((s, e, to));
                }
            }
        }
        assert_eq!(
            allowed,
            [
                (S::Accepted, E::Execute, S::Executing),
                (S::Accepted, E::CancelGoal, S::Canceling),
                (S::Executing, E::CancelGoal, S::Canceling),
                (S::Executing, E::Succeed, S::Succeeded),
                (S::Executing, E::Abort, S::Aborted),
                (S::Canceling, E::Succeed, S::Succeeded),
                (S::Canceling, E::Abort, S::Aborted),
                (S::Canceling, E::Canceled, S::Canceled),
            ]
        );
        for s in states {
            assert_eq!(GoalState::from_status(s.status()), s);
        }
    }

    #[test]
    fn uuids_print_as_ros_2_does() {
        let u = UUID {
            uuid: [
                0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0, 1, 2, 3, 4, 5, 6, 7,
            ],
        };
        assert_eq!(u.to_string(), "12345678-9abc-def0-0001-020304050607");
        assert!(UUID::default().is_zero());
        assert!(!UUID::random().is_zero());
    }
}

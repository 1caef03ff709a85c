//! The messages and the service every action speaks whatever its type
//! (`action_msgs`, `unique_identifier_msgs`), with their ROS names and
//! REP-2011 hashes, so a ROS 2 action client or server on rmw_zenoh talks
//! to a myelin one. The message crate re-exports them
//! (`myelin_msgs::action_msgs`), where a test checks every hash against
//! the `.msg`/`.srv` definitions.

use crate::message::{ros_msg, ros_srv};
use crate::time::Time;

ros_msg!(
    /// A goal's identity: 16 random bytes (a version-4 UUID) the client
    /// picks when it sends the goal.
    UUID = "unique_identifier_msgs/msg/UUID",
        "RIHS01_1b8e8aca958cbea28fe6ef60bf6c19b683c97a9ef60bb34752067d0f2f7ab437" {
        /// The bytes.
        uuid: [u8; 16],
    }
);

ros_msg!(
    /// Which goal, and when the server accepted it.
    GoalInfo = "action_msgs/msg/GoalInfo",
        "RIHS01_6398fe763154554353930716b225947f93b672f0fb2e49fdd01bb7a7e37933e9" {
        /// The goal's id.
        goal_id: UUID,
        /// When the server accepted it (its ROS time).
        stamp: Time,
    }
);

ros_msg!(
    /// Where one goal is in its life (a `STATUS_*` constant).
    GoalStatus = "action_msgs/msg/GoalStatus",
        "RIHS01_32f4cfd717735d17657e1178f24431c1ce996c878c515230f6c5b3476819dbb9" {
        /// The goal.
        goal_info: GoalInfo,
        /// A `STATUS_*` constant.
        status: i8,
    }
);

impl GoalStatus {
    /// Not known to the server (never sent, rejected, or its result
    /// expired).
    pub const STATUS_UNKNOWN: i8 = 0;
    /// Accepted, not yet executing.
    pub const STATUS_ACCEPTED: i8 = 1;
    /// Executing.
    pub const STATUS_EXECUTING: i8 = 2;
    /// The server accepted a cancel request and is winding down.
    pub const STATUS_CANCELING: i8 = 3;
    /// Done: the goal was achieved.
    pub const STATUS_SUCCEEDED: i8 = 4;
    /// Done: canceled at a client's request.
    pub const STATUS_CANCELED: i8 = 5;
    /// Done: the server gave up.
    pub const STATUS_ABORTED: i8 = 6;
}

ros_msg!(
    /// Every goal an action server tracks (its `_action/status` topic).
    GoalStatusArray = "action_msgs/msg/GoalStatusArray",
        "RIHS01_6c1684b00f177d37438febe6e709fc4e2b0d4248dca4854946f9ed8b30cda83e" {
        /// One entry per goal, terminal ones until their results expire.
        status_list: Vec<GoalStatus>,
    }
);

ros_srv!(
    /// Cancel one goal (`goal_id` set, `stamp` zero), every goal accepted
    /// at or before `stamp` (`goal_id` zero), both, or every goal (both
    /// zero): an action's `_action/cancel_goal` service.
    CancelGoal = "action_msgs/srv/CancelGoal",
        "RIHS01_573d8b0a534451d7bc2ac8c5ffde8ac14b8593b7001175d0cd6516dcbeb8689a" {
        CancelGoalRequest = "action_msgs/srv/CancelGoal_Request",
            "RIHS01_3d3c84653c1f96918086887e1dcb236faec88b81a5b14fd4cf4840065bcdf8af" {
            /// Which goals (see [`CancelGoal`]).
            goal_info: GoalInfo,
        }
        CancelGoalResponse = "action_msgs/srv/CancelGoal_Response",
            "RIHS01_35e682cf3f510e83c70a82a4aac888496dedee56773bf9d8e5e0aa81f9e1c960" {
            /// An `ERROR_*` constant.
            return_code: i8,
            /// The goals now canceling.
            goals_canceling: Vec<GoalInfo>,
        }
    }
);

impl CancelGoalResponse {
    /// The server accepted the request for at least one goal.
    pub const ERROR_NONE: i8 = 0;
    /// The server refused every goal asked for.
    pub const ERROR_REJECTED: i8 = 1;
    /// The goal asked for is not known to the server.
    pub const ERROR_UNKNOWN_GOAL_ID: i8 = 2;
    /// The goal asked for has already finished.
    pub const ERROR_GOAL_TERMINATED: i8 = 3;
}

//! The action server: goals in, status and feedback out, results kept
//! until they expire.

use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use super::msgs::{CancelGoal, CancelGoalRequest, CancelGoalResponse, GoalInfo, GoalStatus};
use super::{
    ActionError, ActionType, CancelResponse, CreateActionError, Endpoints, FEEDBACK_QOS,
    FeedbackMessage, GetResult, GetResultRequest, GetResultResponse, GoalEvent, GoalResponse,
    GoalState, GoalStatusArray, STATUS_QOS, SendGoal, SendGoalRequest, SendGoalResponse, UUID,
};
use crate::time::{Clock, Time};
use crate::{CallbackGroup, Node, Publisher, Service, ServiceOptions, ServiceReply, Timer};

/// Options of an action server.
#[derive(Clone, Debug)]
pub struct ActionServerOptions {
    /// How long a finished goal's result is kept for clients that ask
    /// late (default 15 minutes, as ROS 2). `Duration::MAX` keeps results
    /// for the server's life; zero forgets them once the clients waiting
    /// for them have them.
    pub result_timeout: Duration,
    /// The callback group of the action's services and its expiry timer
    /// (default: the node's).
    pub callback_group: Option<CallbackGroup>,
}

impl Default for ActionServerOptions {
    fn default() -> Self {
        ActionServerOptions {
            result_timeout: Duration::from_secs(15 * 60),
            callback_group: None,
        }
    }
}

/// One goal the server tracks.
struct Goal<A: ActionType> {
    info: GoalInfo,
    state: GoalState,
    goal: Arc<A::Goal>,
    /// Set when the goal ends.
    result: Option<A::Result>,
    /// `get_result` requests that came before the end.
    waiting: Vec<ServiceReply<GetResultResponse<A>>>,
    /// When it ended (the expiry clock starts).
    ended: Option<Instant>,
}

/// What the services, the timer and the goal handles share.
struct Shared<A: ActionType> {
    /// The action's fully qualified name.
    name: String,
    clock: Clock,
    result_timeout: Duration,
    status: Publisher<GoalStatusArray>,
    feedback: Publisher<FeedbackMessage<A>>,
    /// In the order the goals came.
    goals: Mutex<Vec<Goal<A>>>,
}

impl<A: ActionType> Shared<A> {
    fn lock(&self) -> MutexGuard<'_, Vec<Goal<A>>> {
        self.goals.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Publish every goal's status (under the goals' lock, so two updates
    /// never arrive in the other order).
    fn publish_status(&self, goals: &[Goal<A>]) {
        let msg = GoalStatusArray {
            status_list: goals
                .iter()
                .map(|g| GoalStatus {
                    goal_info: g.info.clone(),
                    status: g.state.status(),
                })
                .collect(),
        };
        if let Err(e) = self.status.publish(msg) {
            tracing::warn!("action {:?}: status not published: {e}", self.name);
        }
    }

    /// Move goal `id` by `event`; a terminal move stores `result` and
    /// answers the clients waiting for it.
    fn transition(
        &self,
        id: &UUID,
        event: GoalEvent,
        result: Option<A::Result>,
    ) -> Result<(), ActionError> {
        let mut goals = self.lock();
        let Some(g) = goals.iter_mut().find(|g| g.info.goal_id == *id) else {
            return Err(self.invalid(id, event, GoalState::Unknown));
        };
        let Some(to) = event.next(g.state) else {
            return Err(self.invalid(id, event, g.state));
        };
        g.state = to;
        let mut answer = Vec::new();
        if to.is_terminal() {
            let result = result.unwrap_or_default();
            g.ended = Some(Instant::now());
            answer = std::mem::take(&mut g.waiting)
                .into_iter()
                .map(|r| (r, result.clone()))
                .collect();
            g.result = Some(result);
        }
        self.publish_status(&goals);
        self.expire(&mut goals, false);
        drop(goals);
        for (reply, result) in answer {
            reply.send(GetResultResponse {
                status: to.status(),
                result,
            });
        }
        Ok(())
    }

    fn invalid(&self, id: &UUID, event: GoalEvent, state: GoalState) -> ActionError {
        ActionError::InvalidTransition {
            action: self.name.clone(),
            goal: id.clone(),
            event: event.to_string(),
            state,
        }
    }

    fn state_of(&self, id: &UUID) -> GoalState {
        self.lock()
            .iter()
            .find(|g| g.info.goal_id == *id)
            .map_or(GoalState::Unknown, |g| g.state)
    }

    /// Forget finished goals whose results are past the timeout; publish
    /// the status if any went (or `force`).
    fn expire(&self, goals: &mut Vec<Goal<A>>, force: bool) {
        let now = Instant::now();
        let before = goals.len();
        goals.retain(|g| match g.ended {
            Some(t) => t
                .checked_add(self.result_timeout)
                .is_none_or(|until| until > now),
            None => true,
        });
        if force || goals.len() != before {
            self.publish_status(goals);
        }
    }
}

/// An action server: answers goals, cancel requests and result requests
/// of the action `A` (see the [module docs](super)). Created by
/// [`Node::create_action_server`]; dropping it stops serving (goal handles
/// still held can finish their goals, but no client hears the results).
pub struct ActionServer<A: ActionType> {
    shared: Arc<Shared<A>>,
    _send_goal: Service<SendGoalRequest<A>, SendGoalResponse<A>>,
    _cancel_goal: Service<CancelGoalRequest, CancelGoalResponse>,
    _get_result: Service<GetResultRequest<A>, GetResultResponse<A>>,
    _expiry: Timer,
}

impl<A: ActionType> ActionServer<A> {
    /// The action's fully qualified name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The goals the server tracks (finished ones until their results
    /// expire), with their states, oldest first.
    pub fn goals(&self) -> Vec<(GoalInfo, GoalState)> {
        self.shared
            .lock()
            .iter()
            .map(|g| (g.info.clone(), g.state))
            .collect()
    }
}

impl<A: ActionType> std::fmt::Debug for ActionServer<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ActionServer")
            .field("name", &self.shared.name)
            .field("type", &A::NAMES.action)
            .field("goals", &self.shared.lock().len())
            .finish()
    }
}

/// One accepted goal, for the code that executes it: read the goal,
/// publish feedback, watch for a cancel request, and end it with
/// [`succeed`](Self::succeed), [`abort`](Self::abort) or
/// [`canceled`](Self::canceled). Dropping the handle of a goal that has
/// not ended cancels it with an empty result, as rclcpp does.
pub struct ServerGoalHandle<A: ActionType> {
    shared: Arc<Shared<A>>,
    info: GoalInfo,
    goal: Arc<A::Goal>,
}

impl<A: ActionType> ServerGoalHandle<A> {
    /// The goal's id.
    pub fn goal_id(&self) -> &UUID {
        &self.info.goal_id
    }

    /// When the server accepted it.
    pub fn stamp(&self) -> Time {
        self.info.stamp
    }

    /// The goal.
    pub fn goal(&self) -> &A::Goal {
        &self.goal
    }

    /// Where the goal is now.
    pub fn state(&self) -> GoalState {
        self.shared.state_of(&self.info.goal_id)
    }

    /// A client asked to cancel and the server accepted: wind down and
    /// call [`canceled`](Self::canceled).
    pub fn is_canceling(&self) -> bool {
        self.state() == GoalState::Canceling
    }

    /// Executing (not canceling, not ended).
    pub fn is_executing(&self) -> bool {
        self.state() == GoalState::Executing
    }

    /// Not ended.
    pub fn is_active(&self) -> bool {
        self.state().is_active()
    }

    /// Start a goal accepted with [`GoalResponse::AcceptAndDefer`].
    pub fn execute(&self) -> Result<(), ActionError> {
        self.shared
            .transition(&self.info.goal_id, GoalEvent::Execute, None)
    }

    /// Tell the clients how it goes.
    pub fn publish_feedback(&self, feedback: A::Feedback) -> Result<(), ActionError> {
        self.shared.feedback.publish(FeedbackMessage {
            goal_id: self.info.goal_id.clone(),
            feedback,
        })?;
        Ok(())
    }

    /// The goal is achieved (from executing or canceling).
    pub fn succeed(&self, result: A::Result) -> Result<(), ActionError> {
        self.shared
            .transition(&self.info.goal_id, GoalEvent::Succeed, Some(result))
    }

    /// The goal cannot be achieved (from executing or canceling).
    pub fn abort(&self, result: A::Result) -> Result<(), ActionError> {
        self.shared
            .transition(&self.info.goal_id, GoalEvent::Abort, Some(result))
    }

    /// The goal stopped at a client's request (only from canceling).
    pub fn canceled(&self, result: A::Result) -> Result<(), ActionError> {
        self.shared
            .transition(&self.info.goal_id, GoalEvent::Canceled, Some(result))
    }
}

impl<A: ActionType> Drop for ServerGoalHandle<A> {
    fn drop(&mut self) {
        let id = &self.info.goal_id;
        let state = self.shared.state_of(id);
        if !state.is_active() {
            return;
        }
        tracing::warn!(
            "action {:?}: the handle of goal {id} was dropped while {state}; canceling it",
            self.shared.name
        );
        if state != GoalState::Canceling {
            let _ = self.shared.transition(id, GoalEvent::CancelGoal, None);
        }
        let _ = self.shared.transition(id, GoalEvent::Canceled, None);
    }
}

impl<A: ActionType> std::fmt::Debug for ServerGoalHandle<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerGoalHandle")
            .field("action", &self.shared.name)
            .field("goal_id", &self.info.goal_id.to_string())
            .field("state", &self.state())
            .finish()
    }
}

/// Which goals a cancel request names (`rcl_action`'s rules): a zero id
/// and a zero stamp mean every goal; an id names that goal; a stamp names
/// every goal accepted at or before it; both name the union.
fn named_by(request: &GoalInfo, goal: &GoalInfo) -> bool {
    let any_id = request.goal_id.is_zero();
    let any_time = request.stamp == Time::default();
    if any_id && any_time {
        return true;
    }
    (!any_id && request.goal_id == goal.goal_id)
        || (!any_time && goal.stamp.nanos() <= request.stamp.nanos())
}

impl Node {
    /// Serve the action `name` of type `A` with rclcpp_action's three
    /// callbacks, all run by this node's executor:
    /// - `handle_goal(id, goal)`: accept or reject a new goal;
    /// - `handle_cancel(id, goal)`: accept or reject a request to cancel
    ///   an executing goal;
    /// - `handle_accepted(handle)`: an accepted goal's
    ///   [`ServerGoalHandle`], after the client has its answer; start the
    ///   work here (on a thread of its own for long work: the executor
    ///   serves the action's services meanwhile).
    ///
    /// See the [action module](crate::action) for an example.
    pub fn create_action_server<A: ActionType>(
        &self,
        name: &str,
        handle_goal: impl FnMut(&UUID, &A::Goal) -> GoalResponse + Send + 'static,
        handle_cancel: impl FnMut(&UUID, &A::Goal) -> CancelResponse + Send + 'static,
        handle_accepted: impl FnMut(ServerGoalHandle<A>) + Send + 'static,
    ) -> Result<ActionServer<A>, CreateActionError> {
        self.create_action_server_with(
            name,
            ActionServerOptions::default(),
            handle_goal,
            handle_cancel,
            handle_accepted,
        )
    }

    /// [`create_action_server`](Self::create_action_server) with options
    /// (result timeout, callback group).
    pub fn create_action_server_with<A: ActionType>(
        &self,
        name: &str,
        options: ActionServerOptions,
        mut handle_goal: impl FnMut(&UUID, &A::Goal) -> GoalResponse + Send + 'static,
        mut handle_cancel: impl FnMut(&UUID, &A::Goal) -> CancelResponse + Send + 'static,
        mut handle_accepted: impl FnMut(ServerGoalHandle<A>) + Send + 'static,
    ) -> Result<ActionServer<A>, CreateActionError> {
        let ep = Endpoints::of(name);
        let status = self.create_publisher::<GoalStatusArray>(&ep.status, STATUS_QOS)?;
        let feedback = self.create_publisher::<FeedbackMessage<A>>(&ep.feedback, FEEDBACK_QOS)?;
        let full = status
            .topic()
            .strip_suffix("/_action/status")
            .unwrap_or(status.topic())
            .to_string();
        let shared = Arc::new(Shared {
            name: full,
            clock: self.get_clock(),
            result_timeout: options.result_timeout,
            status,
            feedback,
            goals: Mutex::new(Vec::new()),
        });
        let service_options = match &options.callback_group {
            Some(g) => ServiceOptions::default().with_group(g),
            None => ServiceOptions::default(),
        };

        let s = shared.clone();
        let send_goal = self.create_deferred_service_for::<SendGoal<A>>(
            &ep.send_goal,
            service_options.clone(),
            move |req: SendGoalRequest<A>, reply| {
                let id = req.goal_id;
                if s.state_of(&id) != GoalState::Unknown {
                    tracing::warn!(
                        "action {:?}: rejected goal {id}: a goal with that id exists",
                        s.name
                    );
                    reply.send(SendGoalResponse::new(false, Time::default()));
                    return;
                }
                let decision = handle_goal(&id, &req.goal);
                let state = match decision {
                    GoalResponse::Reject => {
                        reply.send(SendGoalResponse::new(false, Time::default()));
                        return;
                    }
                    GoalResponse::AcceptAndExecute => GoalState::Executing,
                    GoalResponse::AcceptAndDefer => GoalState::Accepted,
                };
                let info = GoalInfo {
                    goal_id: id,
                    stamp: s.clock.now(),
                };
                let goal = Arc::new(req.goal);
                {
                    let mut goals = s.lock();
                    goals.push(Goal {
                        info: info.clone(),
                        state,
                        goal: goal.clone(),
                        result: None,
                        waiting: Vec::new(),
                        ended: None,
                    });
                    s.publish_status(&goals);
                }
                reply.send(SendGoalResponse::new(true, info.stamp));
                handle_accepted(ServerGoalHandle {
                    shared: s.clone(),
                    info,
                    goal,
                });
            },
        )?;

        let s = shared.clone();
        let cancel_goal = self.create_service_for_with::<CancelGoal>(
            &ep.cancel_goal,
            service_options.clone(),
            move |req: CancelGoalRequest| {
                let request = req.goal_info;
                // Ask the user about each cancelable goal without holding
                // the lock (the callback may look at goal handles).
                let (candidates, already, found_ended) = {
                    let goals = s.lock();
                    let mut candidates = Vec::new();
                    let mut already = Vec::new();
                    let mut found_ended = false;
                    for g in goals.iter().filter(|g| named_by(&request, &g.info)) {
                        match g.state {
                            GoalState::Accepted | GoalState::Executing => {
                                candidates.push((g.info.clone(), g.goal.clone()))
                            }
                            GoalState::Canceling => already.push(g.info.clone()),
                            _ => found_ended = true,
                        }
                    }
                    (candidates, already, found_ended)
                };
                if candidates.is_empty() && already.is_empty() {
                    let code = if request.goal_id.is_zero() {
                        CancelGoalResponse::ERROR_REJECTED
                    } else if found_ended {
                        CancelGoalResponse::ERROR_GOAL_TERMINATED
                    } else {
                        CancelGoalResponse::ERROR_UNKNOWN_GOAL_ID
                    };
                    return CancelGoalResponse {
                        return_code: code,
                        goals_canceling: Vec::new(),
                    };
                }
                let mut canceling = already;
                for (info, goal) in candidates {
                    if handle_cancel(&info.goal_id, &goal) == CancelResponse::Accept
                        && s.transition(&info.goal_id, GoalEvent::CancelGoal, None)
                            .is_ok()
                    {
                        canceling.push(info);
                    }
                }
                CancelGoalResponse {
                    return_code: if canceling.is_empty() {
                        CancelGoalResponse::ERROR_REJECTED
                    } else {
                        CancelGoalResponse::ERROR_NONE
                    },
                    goals_canceling: canceling,
                }
            },
        )?;

        let s = shared.clone();
        let get_result = self.create_deferred_service_for::<GetResult<A>>(
            &ep.get_result,
            service_options,
            move |req: GetResultRequest<A>, reply| {
                let mut goals = s.lock();
                match goals.iter_mut().find(|g| g.info.goal_id == req.goal_id) {
                    None => {
                        drop(goals);
                        reply.send(GetResultResponse {
                            status: GoalStatus::STATUS_UNKNOWN,
                            result: A::Result::default(),
                        });
                    }
                    Some(g) => match &g.result {
                        Some(result) => {
                            let answer = GetResultResponse {
                                status: g.state.status(),
                                result: result.clone(),
                            };
                            drop(goals);
                            reply.send(answer);
                        }
                        None => g.waiting.push(reply),
                    },
                }
            },
        )?;

        let weak: Weak<Shared<A>> = Arc::downgrade(&shared);
        let period =
            (options.result_timeout / 2).clamp(Duration::from_millis(10), Duration::from_secs(1));
        let expire = move || {
            if let Some(s) = weak.upgrade() {
                let mut goals = s.lock();
                s.expire(&mut goals, false);
            }
        };
        let expiry = match &options.callback_group {
            Some(g) => self.create_wall_timer_in(period, g, expire)?,
            None => self.create_wall_timer(period, expire)?,
        };
        // The status topic is transient local: a client that comes later
        // learns there are no goals yet.
        shared.expire(&mut shared.lock(), true);
        super::uses_action_type::<A>(self);
        Ok(ActionServer {
            shared,
            _send_goal: send_goal,
            _cancel_goal: cancel_goal,
            _get_result: get_result,
            _expiry: expiry,
        })
    }
}

//! The action client: send goals, hear feedback and status, get results,
//! cancel.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::msgs::{CancelGoal, CancelGoalRequest, CancelGoalResponse, GoalInfo};
use super::{
    ActionError, ActionType, CreateActionError, Endpoints, FEEDBACK_QOS, FeedbackMessage,
    GetResult, GetResultRequest, GoalState, GoalStatusArray, STATUS_QOS, SendGoal, SendGoalRequest,
    UUID,
};
use crate::time::Time;
use crate::{Client, Node, Subscription, SubscriptionOptions};

type FeedbackFn<A> = Box<dyn FnMut(<A as ActionType>::Feedback) + Send>;

/// What the client knows of one of its goals.
struct Track<A: ActionType> {
    state: GoalState,
    feedback: Option<Arc<Mutex<FeedbackFn<A>>>>,
}

/// The client's goals, fed by the status and feedback topics.
struct Tracked<A: ActionType> {
    goals: Mutex<HashMap<[u8; 16], Track<A>>>,
    changed: Condvar,
}

impl<A: ActionType> Tracked<A> {
    fn lock(&self) -> MutexGuard<'_, HashMap<[u8; 16], Track<A>>> {
        self.goals.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn on_status(&self, msg: GoalStatusArray) {
        let mut goals = self.lock();
        let mut any = false;
        for s in msg.status_list {
            if let Some(t) = goals.get_mut(&s.goal_info.goal_id.uuid) {
                let state = GoalState::from_status(s.status);
                // A status never takes a goal back out of its end.
                if !t.state.is_terminal() && t.state != state {
                    t.state = state;
                    any = true;
                }
            }
        }
        if any {
            self.changed.notify_all();
        }
    }

    fn on_feedback(&self, msg: FeedbackMessage<A>) {
        let f = self
            .lock()
            .get(&msg.goal_id.uuid)
            .and_then(|t| t.feedback.clone());
        if let Some(f) = f {
            (f.lock().unwrap_or_else(|e| e.into_inner()))(msg.feedback);
        }
    }

    fn set_state(&self, id: &UUID, state: GoalState) {
        if let Some(t) = self.lock().get_mut(&id.uuid) {
            t.state = state;
        }
        self.changed.notify_all();
    }
}

struct ClientInner<A: ActionType> {
    name: String,
    send_goal: Client<SendGoalRequest<A>, super::SendGoalResponse<A>>,
    cancel_goal: Client<CancelGoalRequest, CancelGoalResponse>,
    get_result: Client<GetResultRequest<A>, super::GetResultResponse<A>>,
    tracked: Arc<Tracked<A>>,
    feedback: Subscription<FeedbackMessage<A>>,
    status: Subscription<GoalStatusArray>,
}

/// An action client of the action `A` (see the [module docs](super)).
/// Created by [`Node::create_action_client`]. Its calls block the calling
/// thread until the answer or the timeout; it needs no executor. Cheap to
/// share between threads.
pub struct ActionClient<A: ActionType> {
    inner: Arc<ClientInner<A>>,
}

/// Options of one goal.
pub struct SendGoalOptions<A: ActionType> {
    feedback: Option<FeedbackFn<A>>,
}

impl<A: ActionType> Default for SendGoalOptions<A> {
    fn default() -> Self {
        SendGoalOptions { feedback: None }
    }
}

impl<A: ActionType> SendGoalOptions<A> {
    /// No feedback callback.
    pub fn new() -> Self {
        Self::default()
    }

    /// Call `f` with each feedback the server publishes for this goal
    /// (on the thread that delivers it: keep it short), from before the
    /// goal is sent until its handle is dropped.
    pub fn on_feedback(mut self, f: impl FnMut(A::Feedback) + Send + 'static) -> Self {
        self.feedback = Some(Box::new(f));
        self
    }
}

/// How a goal ended: its final state and its result.
pub struct GoalResult<A: ActionType> {
    /// Succeeded, canceled or aborted ([`GoalState::Unknown`] if the
    /// server did not know the goal, for instance after its result
    /// expired).
    pub state: GoalState,
    /// The result (the type's default if the server had none).
    pub result: A::Result,
}

impl<A: ActionType> Clone for GoalResult<A> {
    fn clone(&self) -> Self {
        GoalResult {
            state: self.state,
            result: self.result.clone(),
        }
    }
}

impl<A: ActionType> std::fmt::Debug for GoalResult<A>
where
    A::Result: std::fmt::Debug,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GoalResult")
            .field("state", &self.state)
            .field("result", &self.result)
            .finish()
    }
}

/// A goal the server accepted, for the client that sent it.
pub struct ClientGoalHandle<A: ActionType> {
    client: Arc<ClientInner<A>>,
    info: GoalInfo,
}

impl<A: ActionType> ActionClient<A> {
    /// The action's fully qualified name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Whether a server answers all three of the action's services now
    /// and its feedback and status topics reach this client (as
    /// `rcl_action_server_is_available` asks), so no early feedback is
    /// lost.
    pub fn action_server_is_ready(&self) -> bool {
        let c = &self.inner;
        c.send_goal.service_is_ready()
            && c.cancel_goal.service_is_ready()
            && c.get_result.service_is_ready()
            && c.feedback.matched_count() > 0
            && c.status.matched_count() > 0
    }

    /// Wait until a server is ready (see
    /// [`action_server_is_ready`](Self::action_server_is_ready)); returns
    /// whether one was within `timeout`.
    pub fn wait_for_action_server(&self, timeout: Duration) -> bool {
        let deadline = crate::clock::deadline_after(timeout);
        let c = &self.inner;
        let left = || deadline.saturating_duration_since(Instant::now());
        if !(c.send_goal.wait_for_service(left())
            && c.cancel_goal.wait_for_service(left())
            && c.get_result.wait_for_service(left()))
        {
            return false;
        }
        // The topics match within a discovery pass of the services.
        loop {
            if self.action_server_is_ready() {
                return true;
            }
            if left().is_zero() {
                return false;
            }
            std::thread::sleep(left().min(Duration::from_millis(2)));
        }
    }

    /// Send a goal and wait for the server to accept it (its
    /// [`ClientGoalHandle`]) or reject it ([`ActionError::Rejected`]).
    pub fn send_goal(
        &self,
        goal: A::Goal,
        timeout: Duration,
    ) -> Result<ClientGoalHandle<A>, ActionError> {
        self.send_goal_with(goal, SendGoalOptions::default(), timeout)
    }

    /// [`send_goal`](Self::send_goal) with options (a feedback callback).
    pub fn send_goal_with(
        &self,
        goal: A::Goal,
        options: SendGoalOptions<A>,
        timeout: Duration,
    ) -> Result<ClientGoalHandle<A>, ActionError> {
        let c = &self.inner;
        let id = UUID::random();
        // Track the goal before sending it: feedback and status may come
        // before the answer.
        c.tracked.lock().insert(
            id.uuid,
            Track {
                state: GoalState::Unknown,
                feedback: options.feedback.map(|f| Arc::new(Mutex::new(f))),
            },
        );
        let answer = c.send_goal.call(
            SendGoalRequest {
                goal_id: id.clone(),
                goal,
            },
            timeout,
        );
        match answer {
            Ok(r) if r.accepted => {
                {
                    let mut goals = c.tracked.lock();
                    if let Some(t) = goals.get_mut(&id.uuid)
                        && t.state == GoalState::Unknown
                    {
                        t.state = GoalState::Accepted;
                    }
                }
                Ok(ClientGoalHandle {
                    client: c.clone(),
                    info: GoalInfo {
                        goal_id: id,
                        stamp: r.stamp,
                    },
                })
            }
            Ok(_) => {
                c.tracked.lock().remove(&id.uuid);
                Err(ActionError::Rejected {
                    action: c.name.clone(),
                })
            }
            Err(e) => {
                c.tracked.lock().remove(&id.uuid);
                Err(e.into())
            }
        }
    }

    /// Ask the server to cancel every goal (of every client).
    pub fn cancel_all_goals(&self, timeout: Duration) -> Result<CancelGoalResponse, ActionError> {
        self.cancel(GoalInfo::default(), timeout)
    }

    /// Ask the server to cancel every goal it accepted at or before
    /// `stamp` (of every client).
    pub fn cancel_goals_before(
        &self,
        stamp: Time,
        timeout: Duration,
    ) -> Result<CancelGoalResponse, ActionError> {
        self.cancel(
            GoalInfo {
                goal_id: UUID::default(),
                stamp,
            },
            timeout,
        )
    }

    fn cancel(
        &self,
        goal_info: GoalInfo,
        timeout: Duration,
    ) -> Result<CancelGoalResponse, ActionError> {
        Ok(self
            .inner
            .cancel_goal
            .call(CancelGoalRequest { goal_info }, timeout)?)
    }
}

impl<A: ActionType> Clone for ActionClient<A> {
    fn clone(&self) -> Self {
        ActionClient {
            inner: self.inner.clone(),
        }
    }
}

impl<A: ActionType> std::fmt::Debug for ActionClient<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ActionClient")
            .field("name", &self.inner.name)
            .field("type", &A::NAMES.action)
            .field("server_ready", &self.action_server_is_ready())
            .finish()
    }
}

impl<A: ActionType> ClientGoalHandle<A> {
    /// The goal's id.
    pub fn goal_id(&self) -> &UUID {
        &self.info.goal_id
    }

    /// When the server accepted it.
    pub fn stamp(&self) -> Time {
        self.info.stamp
    }

    /// Where the goal is, as the server's status topic last said (or its
    /// result, once [`get_result`](Self::get_result) has it).
    pub fn state(&self) -> GoalState {
        self.client
            .tracked
            .lock()
            .get(&self.info.goal_id.uuid)
            .map_or(GoalState::Unknown, |t| t.state)
    }

    /// Wait until the status topic says `done(state)`, or `timeout`;
    /// returns the last state seen.
    pub fn wait_for_state(&self, done: impl Fn(GoalState) -> bool, timeout: Duration) -> GoalState {
        let deadline = crate::clock::deadline_after(timeout);
        let tracked = &self.client.tracked;
        let mut goals = tracked.lock();
        loop {
            let state = goals
                .get(&self.info.goal_id.uuid)
                .map_or(GoalState::Unknown, |t| t.state);
            let left = deadline.saturating_duration_since(Instant::now());
            if done(state) || left.is_zero() {
                return state;
            }
            goals = tracked
                .changed
                .wait_timeout(goals, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Wait for the goal to end and return how (the call waits up to
    /// `timeout` for the server's answer, which comes when the goal ends).
    /// Feedback that reached this process before the answer (all the
    /// server published before it ended the goal, in this process or over
    /// shared memory) is delivered before this returns, on this thread if
    /// the feedback topic's pump thread has not done it yet (waiting at
    /// most 100 ms for a pass of that thread in progress). Over zenoh a
    /// topic and a reply are not ordered: late feedback may follow.
    pub fn get_result(&self, timeout: Duration) -> Result<GoalResult<A>, ActionError> {
        let r = self
            .client
            .get_result
            .call(GetResultRequest::new(self.info.goal_id.clone()), timeout)?;
        let state = GoalState::from_status(r.status);
        // Feedback the server published before it sent the result is in
        // this process by now (over shared memory it was written before
        // the reply), but the feedback topic's pump thread and this reply
        // are two paths: deliver what waits on the topic here, so its
        // callbacks have run when the result is handed over. Bounded: a
        // pump pass that waits for a lock this caller holds is left to
        // finish later, and from inside a feedback callback nothing waits.
        self.client
            .feedback
            .inner
            .settle_links(std::time::Duration::from_millis(100));
        self.client.tracked.set_state(&self.info.goal_id, state);
        Ok(GoalResult {
            state,
            result: r.result,
        })
    }

    /// Ask the server to cancel this goal; the answer lists it in
    /// `goals_canceling` if the server accepted.
    pub fn cancel(&self, timeout: Duration) -> Result<CancelGoalResponse, ActionError> {
        Ok(self.client.cancel_goal.call(
            CancelGoalRequest {
                goal_info: GoalInfo {
                    goal_id: self.info.goal_id.clone(),
                    stamp: Time::default(),
                },
            },
            timeout,
        )?)
    }
}

impl<A: ActionType> Drop for ClientGoalHandle<A> {
    fn drop(&mut self) {
        self.client.tracked.lock().remove(&self.info.goal_id.uuid);
    }
}

impl<A: ActionType> std::fmt::Debug for ClientGoalHandle<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientGoalHandle")
            .field("action", &self.client.name)
            .field("goal_id", &self.info.goal_id.to_string())
            .field("state", &self.state())
            .finish()
    }
}

impl Node {
    /// A client of the action `name` of type `A`: it reaches servers in
    /// this process, in other processes and, with the network on, ROS 2
    /// action servers on rmw_zenoh. See the [action module](crate::action).
    pub fn create_action_client<A: ActionType>(
        &self,
        name: &str,
    ) -> Result<ActionClient<A>, CreateActionError> {
        let ep = Endpoints::of(name);
        let tracked = Arc::new(Tracked::<A> {
            goals: Mutex::new(HashMap::new()),
            changed: Condvar::new(),
        });
        let t = tracked.clone();
        let feedback = self.create_subscription_with(
            &ep.feedback,
            FEEDBACK_QOS,
            SubscriptionOptions::inline(),
            move |m: FeedbackMessage<A>| t.on_feedback(m),
        )?;
        let t = tracked.clone();
        let status = self.create_subscription_with(
            &ep.status,
            STATUS_QOS,
            SubscriptionOptions::inline(),
            move |m: GoalStatusArray| t.on_status(m),
        )?;
        let send_goal = self.create_client_for::<SendGoal<A>>(&ep.send_goal)?;
        let name = send_goal
            .name()
            .strip_suffix(super::SEND_GOAL_SUFFIX)
            .unwrap_or(send_goal.name())
            .to_string();
        super::uses_action_type::<A>(self);
        Ok(ActionClient {
            inner: Arc::new(ClientInner {
                name,
                send_goal,
                cancel_goal: self.create_client_for::<CancelGoal>(&ep.cancel_goal)?,
                get_result: self.create_client_for::<GetResult<A>>(&ep.get_result)?,
                tracked,
                feedback,
                status,
            }),
        })
    }
}

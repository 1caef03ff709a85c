"""The server side of an action (``rclpy.action.server``)."""

import enum
import threading
import time
import traceback

from myelin.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

# action_msgs/msg/GoalStatus
UNKNOWN, ACCEPTED, EXECUTING, CANCELING, SUCCEEDED, CANCELED, ABORTED = range(7)
_TERMINAL = (SUCCEEDED, CANCELED, ABORTED)
# action_msgs/srv/CancelGoal return codes
_CANCEL_NONE, _CANCEL_REJECTED, _CANCEL_UNKNOWN_GOAL, _CANCEL_TERMINATED = range(4)

# rcl_action's status topic: a late client sees every goal's state.
STATUS_QOS = QoSProfile(
    depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)


class GoalResponse(enum.Enum):
    """What a ``goal_callback`` answers."""

    REJECT = 1
    ACCEPT = 2


class CancelResponse(enum.Enum):
    """What a ``cancel_callback`` answers."""

    REJECT = 1
    ACCEPT = 2


def default_goal_callback(goal_request):
    return GoalResponse.ACCEPT


def default_cancel_callback(cancel_request):
    return CancelResponse.REJECT


def default_handle_accepted_callback(goal_handle):
    goal_handle.execute()


def _ns(stamp):
    return stamp.sec * 1_000_000_000 + stamp.nanosec


class ServerGoalHandle:
    """One goal on the server: its ``request`` (the goal message),
    ``goal_id`` and ``status``; ``publish_feedback``, and ``succeed``,
    ``abort`` or ``canceled`` to end it (the execute callback's return
    value is the result)."""

    def __init__(self, server, goal_id, request, stamp):
        self._server = server
        self.goal_id = goal_id
        self.request = request
        self._stamp = stamp
        self._status = ACCEPTED
        self._result = None
        self._waiting = []  # get_result replies to answer at the end
        self._ended_at = None

    @property
    def status(self):
        return self._status

    @property
    def is_active(self):
        return self._status in (ACCEPTED, EXECUTING, CANCELING)

    @property
    def is_cancel_requested(self):
        return self._status == CANCELING

    def execute(self, execute_callback=None):
        """Start executing (``ACCEPTED`` -> ``EXECUTING``) and run the
        execute callback on a thread of its own."""
        with self._server._lock:
            canceling = self._status == CANCELING
        # A goal canceled before it started still runs (its callback sees
        # is_cancel_requested and ends it), as in rclpy.
        if not canceling:
            self._transition(EXECUTING, (ACCEPTED,), "execute")
        callback = execute_callback or self._server._execute_callback
        threading.Thread(target=self._server._run, args=(self, callback), daemon=True).start()

    def publish_feedback(self, feedback):
        """Publish ``feedback`` (the action's ``Feedback`` message) to this
        goal's client."""
        msg = self._server._type.Impl.FeedbackMessage()
        msg.goal_id = self.goal_id
        msg.feedback = feedback
        self._server._feedback.publish(msg)

    def succeed(self):
        self._transition(SUCCEEDED, (EXECUTING, CANCELING), "succeed")

    def abort(self):
        self._transition(ABORTED, (EXECUTING, CANCELING), "abort")

    def canceled(self):
        self._transition(CANCELED, (CANCELING,), "canceled")

    def destroy(self):
        pass

    def _transition(self, to, allowed, what):
        with self._server._lock:
            if self._status not in allowed:
                raise RuntimeError(
                    f"goal {bytes(self.goal_id.uuid).hex()}: cannot {what} a goal in state {_NAMES[self._status]}"
                )
            self._status = to
            if to in _TERMINAL:
                self._ended_at = time.monotonic()
        self._server._publish_status()


_NAMES = ["UNKNOWN", "ACCEPTED", "EXECUTING", "CANCELING", "SUCCEEDED", "CANCELED", "ABORTED"]


class ActionServer:
    """An action server on ``node`` for ``action_type`` under
    ``action_name``, as rclpy's: ``goal_callback(goal)`` accepts or
    rejects (default: accept), ``handle_accepted_callback(goal_handle)``
    starts accepted goals (default: ``goal_handle.execute()``),
    ``cancel_callback(goal_handle)`` accepts or rejects a cancel request
    (default: reject, as rclpy), and ``execute_callback(goal_handle)``
    works the goal and returns its result. Results stay available for
    ``result_timeout`` seconds after a goal ends."""

    def __init__(
        self,
        node,
        action_type,
        action_name,
        execute_callback,
        *,
        callback_group=None,
        goal_callback=default_goal_callback,
        handle_accepted_callback=default_handle_accepted_callback,
        cancel_callback=default_cancel_callback,
        result_timeout=900,
        **_qos_profiles,
    ):
        from myelin.callback_groups import core_group

        self._node = node
        self._type = action_type
        self._name = action_name
        self._execute_callback = execute_callback
        self._goal_callback = goal_callback
        self._handle_accepted_callback = handle_accepted_callback
        self._cancel_callback = cancel_callback
        self._result_timeout = result_timeout
        self._lock = threading.Lock()
        self._goals = {}  # goal id bytes -> ServerGoalHandle
        impl = action_type.Impl
        base = f"{action_name}/_action"
        group = core_group(callback_group)
        core = node._node
        self._status_lock = threading.Lock()  # one status publication at a time, in order
        self._services = [
            core.create_deferred_service(impl.SendGoalService, f"{base}/send_goal", self._on_send_goal, group),
            core.create_service(impl.CancelGoalService, f"{base}/cancel_goal", self._on_cancel, group),
            core.create_deferred_service(impl.GetResultService, f"{base}/get_result", self._on_get_result, group),
        ]
        self._feedback = node.create_publisher(impl.FeedbackMessage, f"{base}/feedback", 10)
        self._status = node.create_publisher(impl.GoalStatusMessage, f"{base}/status", STATUS_QOS)

    # ------------------------------------------------------------ services

    def _on_send_goal(self, request, reply):
        response = self._type.Impl.SendGoalService.Response()
        key = bytes(request.goal_id.uuid)
        self._expire()
        with self._lock:
            known = key in self._goals
        if known or self._goal_callback(request.goal) != GoalResponse.ACCEPT:
            response.accepted = False
            reply.send(response)
            return
        stamp = self._node.get_clock().now().to_msg()
        handle = ServerGoalHandle(self, request.goal_id, request.goal, stamp)
        with self._lock:
            self._goals[key] = handle
        response.accepted = True
        response.stamp = stamp
        # The client learns of the acceptance before the goal starts, as
        # in rclpy.
        reply.send(response)
        self._publish_status()
        self._handle_accepted_callback(handle)

    def _on_cancel(self, request, response):
        """rcl_action's rules: a zero goal id cancels every goal accepted
        at or before the stamp (every goal when the stamp is zero too); a
        goal id cancels that goal, and with a stamp also those accepted at
        or before it. An unknown id (stamp zero) is ERROR_UNKNOWN_GOAL_ID,
        an ended one ERROR_GOAL_TERMINATED; when the cancel callback
        rejects every goal asked for, ERROR_REJECTED (rclcpp's)."""
        info = request.goal_info
        key = bytes(info.goal_id.uuid)
        before = _ns(info.stamp)
        with self._lock:
            goals = list(self._goals.values())
        target = next((g for g in goals if bytes(g.goal_id.uuid) == key), None) if any(key) else None
        if any(key) and before == 0:
            if target is None:
                response.return_code = _CANCEL_UNKNOWN_GOAL
                return response
            if not target.is_active:
                response.return_code = _CANCEL_TERMINATED
                return response
        if not any(key) and before == 0:
            asked = [g for g in goals if g.is_active]
        else:
            asked = [g for g in goals if g.is_active and before and _ns(g._stamp) <= before]
        if target is not None and target.is_active and target not in asked:
            asked.insert(0, target)
        canceling = []
        for g in asked:
            if g._status != CANCELING and self._cancel_callback(g) != CancelResponse.ACCEPT:
                continue
            with self._lock:
                if g._status in (ACCEPTED, EXECUTING):
                    g._status = CANCELING
                moved = g._status == CANCELING
            if moved:
                canceling.append(g)
        GoalInfo = type(info)
        response.goals_canceling = [GoalInfo(goal_id=g.goal_id, stamp=g._stamp) for g in canceling]
        response.return_code = _CANCEL_REJECTED if asked and not canceling else _CANCEL_NONE
        if canceling:
            self._publish_status()
        return response

    def _on_get_result(self, request, reply):
        key = bytes(request.goal_id.uuid)
        self._expire()
        with self._lock:
            goal = self._goals.get(key)
            # Until the execute callback has returned the result (a goal
            # ends, succeed() and the like, before its callback returns).
            if goal is not None and goal._result is None:
                goal._waiting.append(reply)
                return
        response = self._type.Impl.GetResultService.Response()
        if goal is None:
            response.status = UNKNOWN
        else:
            response.status = goal._status
            response.result = goal._result
        reply.send(response)

    # ----------------------------------------------------------- execution

    def _run(self, goal, callback):
        try:
            result = callback(goal)
        except Exception as e:
            self._node.get_logger().error(
                f"action {self._name}: the execute callback raised {e!r}:\n{traceback.format_exc()}"
            )
            result = None
        if goal.is_active:
            self._node.get_logger().warning(
                f"action {self._name}: goal {bytes(goal.goal_id.uuid).hex()} ended without succeed(), "
                "abort() or canceled(): aborted"
            )
            goal.abort()
        if not isinstance(result, self._type.Result):
            if result is not None:
                self._node.get_logger().error(
                    f"action {self._name}: the execute callback returned {type(result).__name__}, "
                    f"not a {self._type.Result._TYPE_NAME}: an empty result is sent"
                )
            result = self._type.Result()
        response = self._type.Impl.GetResultService.Response()
        response.status = goal._status
        response.result = result
        with self._lock:
            goal._result = result
            waiting, goal._waiting = goal._waiting, []
        for reply in waiting:
            reply.send(response)

    def _expire(self):
        """Forget goals whose result has been kept for result_timeout
        (checked at every goal, result request and status change)."""
        now = time.monotonic()
        with self._lock:
            for key in [
                k
                for k, g in self._goals.items()
                if g._ended_at is not None
                and g._result is not None
                and now - g._ended_at > self._result_timeout
                and not g._waiting
            ]:
                del self._goals[key]

    def _publish_status(self):
        self._expire()
        GoalStatus = _goal_status_class()
        # Snapshot and publish under one lock: publications from the
        # executor and from execute threads go out in the order of the
        # states they carry (the topic keeps only the last, for late
        # clients).
        with self._status_lock:
            with self._lock:
                states = [(g.goal_id, g._stamp, g._status) for g in self._goals.values()]
            msg = self._type.Impl.GoalStatusMessage()
            msg.status_list = [
                GoalStatus(goal_info=_goal_info(goal_id, stamp), status=status)
                for goal_id, stamp, status in states
            ]
            self._status.publish(msg)

    def destroy(self):
        self._services = []
        self._node.destroy_publisher(self._feedback)
        self._node.destroy_publisher(self._status)


def _goal_status_class():
    from myelin.msgs.action_msgs.msg import GoalStatus

    return GoalStatus


def _goal_info(goal_id, stamp):
    from myelin.msgs.action_msgs.msg import GoalInfo

    return GoalInfo(goal_id=goal_id, stamp=stamp)

"""The client side of an action (``rclpy.action.client``)."""

import os
import threading
import time
import weakref

from myelin.action.server import STATUS_QOS, UNKNOWN
from myelin.task import Future


class ClientGoalHandle:
    """A goal the server answered: ``accepted``, ``goal_id``, ``stamp``,
    ``status`` (from the server's status topic and the result), and
    ``get_result_async()`` / ``cancel_goal_async()`` (futures) or their
    blocking forms."""

    def __init__(self, client, goal_id, response):
        self._client = client
        self.goal_id = goal_id
        self.accepted = response.accepted
        self.stamp = response.stamp
        self._status = UNKNOWN

    @property
    def status(self):
        return self._status

    def get_result_async(self):
        """A future of the action's ``GetResult`` response (``status`` and
        ``result``)."""
        return self._client._get_result_async(self)

    def get_result(self, timeout_sec=None):
        """Wait for the result (another process's server needs no
        executor; one in this process must be spun by someone else)."""
        request = self._client._type.Impl.GetResultService.Request(goal_id=self.goal_id)
        response = self._client._get_result.call(request, timeout_sec=timeout_sec)
        if response is not None:
            self._status = response.status
        return response

    def cancel_goal_async(self):
        """A future of the ``CancelGoal`` response."""
        return self._client._cancel_goal_async(self)

    def cancel_goal(self, timeout_sec=None):
        return self._client._cancel.call(self._client._cancel_request(self), timeout_sec=timeout_sec)

    def __repr__(self):
        return f"ClientGoalHandle(goal_id={bytes(self.goal_id.uuid).hex()}, accepted={self.accepted}, status={self._status})"


class ActionClient:
    """An action client on ``node`` for ``action_type`` under
    ``action_name``, as rclpy's. ``send_goal_async(goal,
    feedback_callback)`` returns a future of a :class:`ClientGoalHandle`;
    the feedback callback gets each ``FeedbackMessage`` of that goal while
    an executor spins the node and the goal's handle lives."""

    def __init__(self, node, action_type, action_name, *, callback_group=None, **_qos_profiles):
        self._node = node
        self._type = action_type
        self._name = action_name
        self._lock = threading.Lock()
        # Goal id bytes -> callback, while the goal's handle lives (feedback
        # may be dispatched after the result is).
        self._feedback_callbacks = {}
        self._handles = weakref.WeakValueDictionary()  # goal id bytes -> handle
        impl = action_type.Impl
        base = f"{action_name}/_action"
        self._send_goal = node.create_client(impl.SendGoalService, f"{base}/send_goal")
        self._cancel = node.create_client(impl.CancelGoalService, f"{base}/cancel_goal")
        self._get_result = node.create_client(impl.GetResultService, f"{base}/get_result")
        self._feedback_sub = node.create_subscription(
            impl.FeedbackMessage, f"{base}/feedback", self._on_feedback, 10, callback_group=callback_group
        )
        self._status_sub = node.create_subscription(
            impl.GoalStatusMessage, f"{base}/status", self._on_status, STATUS_QOS, callback_group=callback_group
        )

    def server_is_ready(self):
        return all(c.service_is_ready() for c in (self._send_goal, self._cancel, self._get_result))

    def wait_for_server(self, timeout_sec=None):
        """Wait up to ``timeout_sec`` seconds (None: no end) for the
        server's three services; whether they are there."""
        end = None if timeout_sec is None else time.monotonic() + timeout_sec
        for c in (self._send_goal, self._cancel, self._get_result):
            left = None if end is None else max(0.0, end - time.monotonic())
            if not c.wait_for_service(timeout_sec=left):
                return False
        return True

    def send_goal_async(self, goal, feedback_callback=None, goal_uuid=None):
        """Send ``goal`` (the action's ``Goal`` message); a future of its
        :class:`ClientGoalHandle` (``accepted`` says whether the server
        took it)."""
        from myelin.msgs.unique_identifier_msgs.msg import UUID

        goal_id = goal_uuid if goal_uuid is not None else UUID(uuid=list(os.urandom(16)))
        key = bytes(goal_id.uuid)
        request = self._type.Impl.SendGoalService.Request(goal_id=goal_id, goal=goal)
        if feedback_callback is not None:
            # Before sending: feedback may come before the answer does.
            with self._lock:
                self._feedback_callbacks[key] = feedback_callback

        def handle(response):
            h = ClientGoalHandle(self, goal_id, response)
            with self._lock:
                if h.accepted:
                    self._handles[key] = h
                    weakref.finalize(h, self._forget, key)
                else:
                    self._feedback_callbacks.pop(key, None)
            return h

        future = Future(_pending=self._send_goal._live().call_async(request), _transform=handle)
        future._goal_key = key
        return future

    def send_goal(self, goal, feedback_callback=None, goal_uuid=None, timeout_sec=None):
        """Send ``goal`` and wait for its result (the ``GetResult``
        response), or None if it was rejected or an answer did not come
        within ``timeout_sec`` (which bounds each of the two waits: for
        the acceptance, then for the result). Feedback callbacks need the
        node spun elsewhere (another thread), as in rclpy."""
        future = self.send_goal_async(goal, feedback_callback, goal_uuid)
        pending = future._pending
        answer = pending.wait(timeout_sec)
        if answer is None:
            self._feedback_callbacks.pop(future._goal_key, None)
            return None
        future._settle(answer)
        h = future.result()
        if not h.accepted:
            return None
        return h.get_result(timeout_sec=timeout_sec)

    def _get_result_async(self, goal_handle):
        request = self._type.Impl.GetResultService.Request(goal_id=goal_handle.goal_id)

        def done(response):
            goal_handle._status = response.status
            return response

        return Future(_pending=self._get_result._live().call_async(request), _transform=done)

    def _cancel_request(self, goal_handle):
        request = self._type.Impl.CancelGoalService.Request()
        request.goal_info.goal_id = goal_handle.goal_id
        return request

    def _cancel_goal_async(self, goal_handle):
        return self._cancel.call_async(self._cancel_request(goal_handle))

    def _forget(self, key):
        # Without the lock: the handle may die (and this run) on a thread
        # that holds it. dict.pop is atomic under the GIL.
        self._feedback_callbacks.pop(key, None)

    def _on_feedback(self, msg):
        with self._lock:
            callback = self._feedback_callbacks.get(bytes(msg.goal_id.uuid))
        if callback is not None:
            callback(msg)

    def _on_status(self, msg):
        with self._lock:
            for s in msg.status_list:
                h = self._handles.get(bytes(s.goal_info.goal_id.uuid))
                if h is not None:
                    h._status = s.status

    def destroy(self):
        for c in (self._send_goal, self._cancel, self._get_result):
            self._node.destroy_client(c)
        self._node.destroy_subscription(self._feedback_sub)
        self._node.destroy_subscription(self._status_sub)

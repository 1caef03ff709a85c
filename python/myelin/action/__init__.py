"""Actions, as ``rclpy.action`` has them.

A long-running goal with feedback, a result and cancellation, on the five
endpoints ROS 2 makes an action of (``<name>/_action/send_goal``,
``cancel_goal`` and ``get_result`` services, ``feedback`` and ``status``
topics), so a Python action server or client meets Rust ones in other
processes and ROS 2 ones over rmw_zenoh::

    from myelin.action import ActionServer, ActionClient
    from myelin.msgs.example_interfaces.action import Fibonacci

    def execute(goal_handle):
        seq = [0, 1]
        for i in range(1, goal_handle.request.order):
            seq.append(seq[i] + seq[i - 1])
            goal_handle.publish_feedback(Fibonacci.Feedback(sequence=seq))
        goal_handle.succeed()
        return Fibonacci.Result(sequence=seq)

    server = ActionServer(node, Fibonacci, "fibonacci", execute)

One difference from rclpy, decided for robot code: an accepted goal's
``execute_callback`` runs on a thread of its own, not on the executor, so
a goal that takes minutes never stops the node's other callbacks (rclpy
needs a ``MultiThreadedExecutor`` and a reentrant group for that).
"""

from myelin.action.client import ActionClient, ClientGoalHandle
from myelin.action.server import ActionServer, CancelResponse, GoalResponse, ServerGoalHandle

__all__ = [
    "ActionServer",
    "ActionClient",
    "CancelResponse",
    "GoalResponse",
    "ServerGoalHandle",
    "ClientGoalHandle",
]

"""Actions from Python: goals, feedback, results and cancellation between
Python servers and clients, and with Rust ones in other processes."""

import subprocess
import threading
import time

import pytest

from myelin.action import ActionClient, ActionServer, CancelResponse, GoalResponse
from myelin.msgs import load_action
from myelin.msgs.action_msgs.msg import GoalStatus
from myelin.msgs.example_interfaces.action import Fibonacci
from myelin.msgs.unique_identifier_msgs.msg import UUID

from conftest import python_child, rust_example, spin_until

SUCCEEDED, CANCELED, ABORTED = GoalStatus.STATUS_SUCCEEDED, GoalStatus.STATUS_CANCELED, GoalStatus.STATUS_ABORTED


def fibonacci(order):
    seq = [0, 1]
    for i in range(1, order):
        seq.append(seq[i] + seq[i - 1])
    return seq


def execute(goal_handle):
    seq = [0, 1]
    for i in range(1, goal_handle.request.order):
        seq.append(seq[i] + seq[i - 1])
        goal_handle.publish_feedback(Fibonacci.Feedback(sequence=seq))
    goal_handle.succeed()
    return Fibonacci.Result(sequence=seq)


def wait_for(node, future):
    spin_until(node, future.done)
    return future.result()


def test_the_action_type_has_rclpy_s_shape():
    assert Fibonacci.Goal(order=3).order == 3
    assert list(Fibonacci.Result(sequence=[1, 2]).sequence) == [1, 2]
    impl = Fibonacci.Impl
    assert impl.SendGoalService._TYPE_NAME == "example_interfaces/action/Fibonacci_SendGoal"
    assert impl.GetResultService._TYPE_NAME == "example_interfaces/action/Fibonacci_GetResult"
    assert impl.CancelGoalService._TYPE_NAME == "action_msgs/srv/CancelGoal"
    assert impl.FeedbackMessage._TYPE_NAME == "example_interfaces/action/Fibonacci_FeedbackMessage"
    assert Fibonacci._ROS_HASH.startswith("RIHS01_")
    with pytest.raises(ImportError):
        from myelin.msgs.example_interfaces.action import Nope  # noqa: F401


def test_a_goal_gets_feedback_and_its_result(node):
    ActionServer(node, Fibonacci, "fibonacci", execute)
    client = ActionClient(node, Fibonacci, "fibonacci")
    assert client.wait_for_server(timeout_sec=30)
    feedback = []
    handle = wait_for(node, client.send_goal_async(Fibonacci.Goal(order=6), feedback_callback=feedback.append))
    assert handle.accepted and handle.stamp.sec > 0
    result = wait_for(node, handle.get_result_async())
    assert result.status == SUCCEEDED and handle.status == SUCCEEDED
    assert list(result.result.sequence) == fibonacci(6)
    # Each feedback message names the goal; they come in order.
    spin_until(node, lambda: len(feedback) == 5)
    assert all(bytes(f.goal_id.uuid) == bytes(handle.goal_id.uuid) for f in feedback)
    assert [len(f.feedback.sequence) for f in feedback] == [3, 4, 5, 6, 7]
    # The result stays: asked again, it is answered at once.
    again = wait_for(node, handle.get_result_async())
    assert again.status == SUCCEEDED and list(again.result.sequence) == fibonacci(6)


def test_rejected_goals_unknown_goals_and_failing_execute_callbacks(node):
    def only_small(goal):
        return GoalResponse.ACCEPT if goal.order <= 46 else GoalResponse.REJECT

    def broken(goal_handle):
        if goal_handle.request.order == 13:
            raise ValueError("unlucky")
        return None  # and no succeed(): aborted

    ActionServer(node, Fibonacci, "picky", broken, goal_callback=only_small)
    client = ActionClient(node, Fibonacci, "picky")
    assert client.wait_for_server(timeout_sec=30)
    rejected = wait_for(node, client.send_goal_async(Fibonacci.Goal(order=47)))
    assert not rejected.accepted
    for order in (13, 14):
        handle = wait_for(node, client.send_goal_async(Fibonacci.Goal(order=order)))
        result = wait_for(node, handle.get_result_async())
        assert result.status == ABORTED, order
        assert list(result.result.sequence) == []
    # A goal the server never saw: status unknown, at once.
    stranger = UUID(uuid=list(range(16)))
    req = Fibonacci.Impl.GetResultService.Request(goal_id=stranger)
    answer = wait_for(node, client._get_result.call_async(req))
    assert answer.status == GoalStatus.STATUS_UNKNOWN


def test_cancel_accepted_and_rejected(node):
    started = threading.Event()
    release = threading.Event()

    def slow(goal_handle):
        started.set()
        while not goal_handle.is_cancel_requested and not release.is_set():
            time.sleep(0.001)
        if goal_handle.is_cancel_requested:
            goal_handle.canceled()
        else:
            goal_handle.succeed()
        return Fibonacci.Result(sequence=[7])

    ActionServer(node, Fibonacci, "cancelable", slow, cancel_callback=lambda g: CancelResponse.ACCEPT)
    ActionServer(node, Fibonacci, "stubborn", slow)  # rclpy's default: reject
    client = ActionClient(node, Fibonacci, "cancelable")
    stubborn = ActionClient(node, Fibonacci, "stubborn")
    assert client.wait_for_server(timeout_sec=30) and stubborn.wait_for_server(timeout_sec=30)

    handle = wait_for(node, client.send_goal_async(Fibonacci.Goal(order=3)))
    assert started.wait(30)
    answer = wait_for(node, handle.cancel_goal_async())
    assert answer.return_code == 0
    assert [bytes(g.goal_id.uuid) for g in answer.goals_canceling] == [bytes(handle.goal_id.uuid)]
    result = wait_for(node, handle.get_result_async())
    assert result.status == CANCELED and list(result.result.sequence) == [7]
    # Canceling an ended goal: terminated.
    assert wait_for(node, handle.cancel_goal_async()).return_code == 3

    started.clear()
    handle = wait_for(node, stubborn.send_goal_async(Fibonacci.Goal(order=3)))
    assert started.wait(30)
    answer = wait_for(node, handle.cancel_goal_async())
    assert answer.return_code == 1 and len(answer.goals_canceling) == 0
    release.set()
    assert wait_for(node, handle.get_result_async()).status == SUCCEEDED


def test_a_loaded_action_type_works_end_to_end(node):
    Count = load_action("pytest_actions", "Count", "int32 to\n---\nint32 reached\n---\nint32 at")

    def count(goal_handle):
        for i in range(goal_handle.request.to):
            goal_handle.publish_feedback(Count.Feedback(at=i))
        goal_handle.succeed()
        return Count.Result(reached=goal_handle.request.to)

    ActionServer(node, Count, "count", count)
    client = ActionClient(node, Count, "count")
    assert client.wait_for_server(timeout_sec=30)
    handle = wait_for(node, client.send_goal_async(Count.Goal(to=4)))
    assert wait_for(node, handle.get_result_async()).result.reached == 4


def test_a_python_client_drives_a_rust_action_server(node, domain):
    exe = rust_example("fibonacci_action_server")
    env = {"MYELIN_TRANSPORT": "shm", "ROS_DOMAIN_ID": str(domain), "PATH": "/usr/bin:/bin"}
    server = subprocess.Popen([exe, "1"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        client = ActionClient(node, Fibonacci, "fibonacci")
        assert client.wait_for_server(timeout_sec=60)
        feedback = []
        handle = wait_for(node, client.send_goal_async(Fibonacci.Goal(order=5), feedback_callback=feedback.append))
        assert handle.accepted
        result = wait_for(node, handle.get_result_async())
        assert result.status == SUCCEEDED
        assert list(result.result.sequence) == fibonacci(5)
        spin_until(node, lambda: len(feedback) == 4)
        assert list(feedback[-1].feedback.sequence) == fibonacci(5)
        rejected = wait_for(node, client.send_goal_async(Fibonacci.Goal(order=47)))
        assert not rejected.accepted
    finally:
        server.kill()
        server.wait()


SERVER = """
import myelin
from myelin.action import ActionServer
from myelin.msgs.example_interfaces.action import Fibonacci
myelin.init()
node = myelin.create_node("py_fibonacci_server")
def execute(goal_handle):
    seq = [0, 1]
    for i in range(1, goal_handle.request.order):
        seq.append(seq[i] + seq[i - 1])
        goal_handle.publish_feedback(Fibonacci.Feedback(sequence=seq))
    goal_handle.succeed()
    return Fibonacci.Result(sequence=seq)
server = ActionServer(node, Fibonacci, "fibonacci", execute)
print("ready", flush=True)
try:
    myelin.spin(node)
except KeyboardInterrupt:
    pass
"""


def test_a_rust_client_drives_a_python_action_server(domain):
    server = python_child(SERVER, domain)
    try:
        assert server.stdout.readline().strip() == "ready"
        exe = rust_example("fibonacci_action_client")
        env = {"MYELIN_TRANSPORT": "shm", "ROS_DOMAIN_ID": str(domain), "PATH": "/usr/bin:/bin"}
        out = subprocess.run([exe, "6"], env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert "Goal accepted by server" in out.stdout
        assert "Result received: [0, 1, 1, 2, 3, 5, 8]" in out.stdout, out.stdout
        assert "Next number in sequence received" in out.stdout
    finally:
        server.kill()
        server.communicate()


def test_a_result_asked_for_between_succeed_and_return_waits_for_the_return(node):
    ended, release = threading.Event(), threading.Event()

    def late_return(goal_handle):
        goal_handle.succeed()
        ended.set()
        assert release.wait(30)
        return Fibonacci.Result(sequence=[42])

    server = ActionServer(node, Fibonacci, "late", late_return)
    client = ActionClient(node, Fibonacci, "late")
    assert client.wait_for_server(timeout_sec=30)
    handle = wait_for(node, client.send_goal_async(Fibonacci.Goal(order=1)))
    assert ended.wait(30)
    future = handle.get_result_async()
    goal = server._goals[bytes(handle.goal_id.uuid)]
    spin_until(node, lambda: goal._waiting)  # the request waits at the server
    release.set()
    result = wait_for(node, future)
    assert result.status == SUCCEEDED and list(result.result.sequence) == [42]


def test_cancel_rules_as_rcl_action_has_them(node):
    release = threading.Event()
    started = []

    def deferred(goal_handle):
        started.append(goal_handle)  # started later, by the test

    def wait_for_cancel(goal_handle):
        while not goal_handle.is_cancel_requested and not release.is_set():
            time.sleep(0.001)
        if goal_handle.is_cancel_requested:
            goal_handle.canceled()
        else:
            goal_handle.succeed()
        return Fibonacci.Result()

    ActionServer(
        node,
        Fibonacci,
        "rules",
        wait_for_cancel,
        handle_accepted_callback=deferred,
        cancel_callback=lambda g: CancelResponse.ACCEPT,
    )
    client = ActionClient(node, Fibonacci, "rules")
    assert client.wait_for_server(timeout_sec=30)
    CancelGoal = Fibonacci.Impl.CancelGoalService
    # Nothing to cancel: no error, an empty list.
    none = wait_for(node, client._cancel.call_async(CancelGoal.Request()))
    assert none.return_code == 0 and len(none.goals_canceling) == 0
    # An unknown goal id.
    req = CancelGoal.Request()
    req.goal_info.goal_id = UUID(uuid=[7] * 16)
    assert wait_for(node, client._cancel.call_async(req)).return_code == 2
    # A zero id and stamp cancels every goal, also one not started yet; a
    # goal canceled before it starts still runs, and ends canceled.
    a = wait_for(node, client.send_goal_async(Fibonacci.Goal(order=1)))
    b = wait_for(node, client.send_goal_async(Fibonacci.Goal(order=2)))
    spin_until(node, lambda: len(started) == 2)
    started[1].execute()
    every = wait_for(node, client._cancel.call_async(CancelGoal.Request()))
    assert every.return_code == 0
    assert {bytes(g.goal_id.uuid) for g in every.goals_canceling} == {bytes(a.goal_id.uuid), bytes(b.goal_id.uuid)}
    started[0].execute()
    for h in (a, b):
        assert wait_for(node, h.get_result_async()).status == CANCELED


def test_python_code_run_by_a_publish_can_neither_make_nor_release_a_view(node):
    import numpy
    from myelin.msgs.sensor_msgs.msg import Image
    from myelin.msgs.std_msgs.msg import Header

    class SneakyHeader(Header):
        """A header whose frame_id runs a hook when the encoder reads it."""

        __slots__ = ("_hook",)

        @property
        def frame_id(self):
            if self._hook is not None:
                self._hook()
            return "camera"

        @frame_id.setter
        def frame_id(self, value):
            pass

    header = SneakyHeader()
    header._hook = None
    got = []
    node.create_subscription(Image, "sneaky", got.append, 2)
    pub = node.create_publisher(Image, "sneaky", 2)
    loan = pub.loan(Image(header=header, height=1, width=16, encoding="mono8", step=16), data=16)
    loan.data[:] = numpy.arange(16)
    kept = []
    header._hook = lambda: kept.append(loan.data)
    with pytest.raises(ValueError, match="already published or released"):
        loan.publish()
    assert loan.open and not kept, "no view was made during the publish; the loan reopened"
    header._hook = loan.release
    loan.publish()  # the release during it found the loan publishing: no effect
    assert not loan.open
    spin_until(node, lambda: got)
    assert list(got[0].data) == list(range(16)) and got[0].header.frame_id == "camera"

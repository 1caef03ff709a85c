"""Services: Python servers and clients in one process and across
processes, with Rust servers and clients on the other side."""

import subprocess
import time

import pytest

import myelin
from myelin.msgs import load_srv
from myelin.msgs.example_interfaces.srv import AddTwoInts
from myelin.msgs.std_srvs.srv import Trigger

from conftest import python_child, rust_example, spin_until

SERVER = """
import myelin
from myelin.msgs.example_interfaces.srv import AddTwoInts
myelin.init()
node = myelin.create_node("py_adder")
def add(req, resp):
    if req.a < 0:
        raise ValueError("negative numbers are not served")
    resp.sum = req.a + req.b
    return resp
node.create_service(AddTwoInts, "add_two_ints", add)
print("ready", flush=True)
try:
    myelin.spin(node)
except KeyboardInterrupt:
    pass
except ValueError as e:
    print("callback raised:", e, flush=True)
    myelin.spin(node)
"""


def test_service_classes_are_rclpys():
    assert AddTwoInts._TYPE_NAME == "example_interfaces/srv/AddTwoInts"
    req = AddTwoInts.Request(a=2, b=3)
    assert (req.a, req.b) == (2, 3)
    assert repr(AddTwoInts.Response()) == "example_interfaces.srv.AddTwoInts_Response(sum=0)"
    # The REP 2011 hash ROS 2 (Jazzy) publishes for AddTwoInts.
    assert AddTwoInts._ROS_HASH == (
        "RIHS01_e118de6bf5eeb66a2491b5bda11202e7b68f198d6f67922cf30364858239c81a"
    )


def test_server_and_client_in_one_node(node):
    node.create_service(AddTwoInts, "add", lambda req, resp: AddTwoInts.Response(sum=req.a + req.b))
    client = node.create_client(AddTwoInts, "add")
    assert client.wait_for_service(timeout_sec=5.0)
    future = client.call_async(AddTwoInts.Request(a=40, b=2))
    ex = myelin.SingleThreadedExecutor(context=node.context)
    ex.add_node(node)
    ex.spin_until_future_complete(future, timeout_sec=30)
    assert future.done() and future.result().sum == 42


def test_no_server_and_timeouts(node):
    client = node.create_client(Trigger, "nobody")
    assert not client.service_is_ready()
    assert client.wait_for_service(timeout_sec=0.2) is False
    future = client.call_async(Trigger.Request())
    with pytest.raises(myelin.MyelinError, match="nobody"):
        future.result()


def test_a_callback_that_raises_answers_with_an_error_and_raises_in_spin(node):
    def broken(req, resp):
        raise KeyError("no such thing")

    node.create_service(Trigger, "broken", broken)
    client = node.create_client(Trigger, "broken")
    future = client.call_async(Trigger.Request())
    ex = myelin.SingleThreadedExecutor(context=node.context)
    ex.add_node(node)
    with pytest.raises(KeyError, match="no such thing"):
        ex.spin_until_future_complete(future, timeout_sec=30)
    spin_until(node, future.done, executor=ex)
    with pytest.raises(myelin.MyelinError, match="no such thing"):
        future.result()


def test_a_callback_must_return_the_response_type(node):
    node.create_service(Trigger, "wrong", lambda req, resp: "yes")
    client = node.create_client(Trigger, "wrong")
    future = client.call_async(Trigger.Request())
    ex = myelin.SingleThreadedExecutor(context=node.context)
    ex.add_node(node)
    with pytest.raises(TypeError, match="must return a std_srvs/srv/Trigger_Response"):
        ex.spin_until_future_complete(future, timeout_sec=30)


def test_user_service_type(node):
    Scale = load_srv("pytest_srvs", "Scale", "float64[] values\nfloat64 factor 2.0\n---\nfloat64[] values")
    node.create_service(Scale, "scale", lambda req, resp: Scale.Response(values=req.values * req.factor))
    client = node.create_client(Scale, "scale")
    future = client.call_async(Scale.Request(values=[1.0, 2.5]))
    ex = myelin.SingleThreadedExecutor(context=node.context)
    ex.add_node(node)
    ex.spin_until_future_complete(future, timeout_sec=30)
    assert future.result().values.tolist() == [2.0, 5.0]


def test_python_client_calls_a_python_server_in_another_process(node, domain):
    server = python_child(SERVER, domain)
    try:
        assert server.stdout.readline().strip() == "ready"
        client = node.create_client(AddTwoInts, "add_two_ints")
        assert client.wait_for_service(timeout_sec=30)
        # No executor: the answer comes from the other process.
        assert client.call(AddTwoInts.Request(a=5, b=7), timeout_sec=30).sum == 12
        future = client.call_async(AddTwoInts.Request(a=1, b=1))
        myelin.SingleThreadedExecutor(context=node.context).spin_until_future_complete(
            future, timeout_sec=30
        )
        assert future.result().sum == 2
        # The server's callback raises: the caller gets the message.
        with pytest.raises(myelin.MyelinError, match="negative numbers are not served"):
            client.call(AddTwoInts.Request(a=-1, b=0), timeout_sec=30)
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_rust_server_answers_a_python_client(node, domain):
    exe = rust_example("add_two_ints_server")
    env = {"MYELIN_TRANSPORT": "shm", "ROS_DOMAIN_ID": str(domain), "PATH": "/usr/bin:/bin"}
    server = subprocess.Popen([exe], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        client = node.create_client(AddTwoInts, "add_two_ints")
        assert client.wait_for_service(timeout_sec=30)
        assert client.call(AddTwoInts.Request(a=20, b=22), timeout_sec=30).sum == 42
    finally:
        server.kill()
        server.wait()


def test_python_server_answers_a_rust_client(domain):
    server = python_child(SERVER, domain)
    try:
        assert server.stdout.readline().strip() == "ready"
        exe = rust_example("add_two_ints_client")
        env = {"MYELIN_TRANSPORT": "shm", "ROS_DOMAIN_ID": str(domain), "PATH": "/usr/bin:/bin"}
        out = subprocess.run([exe, "19", "23"], env=env, capture_output=True, text=True, timeout=60)
        assert "Result of add_two_ints: 42" in out.stdout, out.stderr
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_introspection_events_reach_a_python_subscription(node):
    """With CONTENTS on the server and the client, one call publishes
    ROS 2's four events on ``<service>/_service_event``; a Python
    subscription of ``AddTwoInts.Event`` decodes them (the request and
    response inside, the client's gid and the request's number); METADATA
    leaves the contents out."""
    from myelin.service_introspection import ServiceIntrospectionState as State

    srv = node.create_service(AddTwoInts, "intro", lambda req, resp: AddTwoInts.Response(sum=req.a + req.b))
    client = node.create_client(AddTwoInts, "intro")
    events = []
    node.create_subscription(AddTwoInts.Event, "intro/_service_event", lambda e: events.append(e), 10)
    srv.configure_introspection(node.get_clock(), 10, State.CONTENTS)
    client.configure_introspection(node.get_clock(), None, State.CONTENTS)
    future = client.call_async(AddTwoInts.Request(a=2, b=3))
    spin_until(node, lambda: future.done() and len(events) >= 4, timeout=60)
    assert future.result().sum == 5
    assert sorted(e.info.event_type for e in events) == [0, 1, 2, 3]
    assert {bytes(e.info.client_gid) for e in events} == {bytes(events[0].info.client_gid)}
    assert {e.info.sequence_number for e in events} == {1}
    for e in events:
        if e.info.event_type in (0, 1):
            assert [(r.a, r.b) for r in e.request] == [(2, 3)] and len(e.response) == 0
        else:
            assert [r.sum for r in e.response] == [5] and len(e.request) == 0

    events.clear()
    srv.configure_introspection(node.get_clock(), 10, State.METADATA)
    client.configure_introspection(node.get_clock(), 10, State.OFF)
    future = client.call_async(AddTwoInts.Request(a=1, b=1))
    spin_until(node, lambda: future.done() and len(events) >= 2, timeout=60)
    assert sorted(e.info.event_type for e in events) == [1, 2]
    assert all(len(e.request) == 0 and len(e.response) == 0 for e in events)

    # A .srv loaded at run time has no description for its events.
    Foo = load_srv("intro_pkg", "Foo", "int64 x\n---\nint64 y\n")
    foo = node.create_service(Foo, "foo", lambda req, resp: resp)
    with pytest.raises(myelin.MyelinError, match="description"):
        foo.configure_introspection(node.get_clock(), 10, State.CONTENTS)


def _spin_until(ex, what, rounds=600):
    """``spin_once`` (at most 0.1 s each) until ``what()``; whether it came."""
    for _ in range(rounds):
        if what():
            return True
        ex.spin_once(timeout_sec=0.1)
    return what()


def test_done_callbacks_run_while_spinning(node):
    # rclpy's executor settles a call's future when the answer comes and
    # runs its done callbacks; nobody here asks the future itself.
    node.create_service(AddTwoInts, "add_cb", lambda req, resp: AddTwoInts.Response(sum=req.a + req.b))
    client = node.create_client(AddTwoInts, "add_cb")
    assert client.wait_for_service(timeout_sec=30.0)
    got = []
    future = client.call_async(AddTwoInts.Request(a=20, b=22))
    future.add_done_callback(lambda f: got.append(f.result().sum))
    ex = myelin.SingleThreadedExecutor(context=node.context)
    ex.add_node(node)
    assert _spin_until(ex, lambda: got), "the done callback never ran"
    assert got == [42]


def test_an_async_callback_awaits_a_call(node):
    # rclpy's "client_async_callback" shape: a timer's coroutine awaits a
    # call made inside it.
    node.create_service(AddTwoInts, "add_async", lambda req, resp: AddTwoInts.Response(sum=req.a * 10 + req.b))
    client = node.create_client(AddTwoInts, "add_async")
    assert client.wait_for_service(timeout_sec=30.0)
    sums = []

    async def tick():
        if sums:
            return
        sums.append(None)
        answer = await client.call_async(AddTwoInts.Request(a=4, b=2))
        sums[0] = answer.sum

    timer = node.create_timer(0.01, tick)
    ex = myelin.SingleThreadedExecutor(context=node.context)
    ex.add_node(node)
    assert _spin_until(ex, lambda: sums and sums[0] is not None), "the coroutine never resumed"
    timer.cancel()
    assert sums == [42]


def test_an_async_task_fails_like_a_callback(node):
    # An exception after the await comes out of the spin that resumed it.
    node.create_service(AddTwoInts, "add_fail", lambda req, resp: AddTwoInts.Response(sum=1))
    client = node.create_client(AddTwoInts, "add_fail")
    assert client.wait_for_service(timeout_sec=30.0)
    calls = []

    async def tick():
        if calls:
            return
        calls.append(1)
        await client.call_async(AddTwoInts.Request(a=1, b=1))
        raise RuntimeError("after the await")

    node.create_timer(0.01, tick)
    ex = myelin.SingleThreadedExecutor(context=node.context)
    ex.add_node(node)
    with pytest.raises(RuntimeError, match="after the await"):
        for _ in range(600):
            ex.spin_once(timeout_sec=0.1)


def test_an_async_service_callback_is_refused(node):
    async def add(req, resp):
        return resp

    with pytest.raises(TypeError, match="async def"):
        node.create_service(AddTwoInts, "add_refused", add)

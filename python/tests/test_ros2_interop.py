"""Python nodes next to ROS 2 nodes on rmw_zenoh, checked against the
independent rmw_zenoh peer (interop/rmw_zenoh_peer.py, written from
rmw_zenoh's design document). Both sides reach a zenoh router on a free
loopback port; multicast scouting is off, nothing leaves the machine."""

import json
import socket
import subprocess
import sys
import threading

import pytest

import myelin
from myelin.msgs.example_interfaces.srv import AddTwoInts
from myelin.msgs.std_msgs.msg import String

from conftest import REPO, spin_until

PEER = REPO / "interop" / "rmw_zenoh_peer.py"


@pytest.fixture
def router(tmp_path):
    zenoh = pytest.importorskip("zenoh")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    endpoint = f"tcp/127.0.0.1:{port}"
    conf = zenoh.Config()
    conf.insert_json5("mode", '"router"')
    conf.insert_json5("listen/endpoints", json.dumps([endpoint]))
    conf.insert_json5("scouting/multicast/enabled", "false")
    session = zenoh.open(conf)
    config = tmp_path / "session.json5"
    config.write_text(
        '{ mode: "peer", connect: { endpoints: ["%s"] }, listen: { endpoints: ["tcp/127.0.0.1:0"] },'
        " scouting: { multicast: { enabled: false }, gossip: { enabled: true } } }" % endpoint
    )
    yield endpoint, config
    session.close()


@pytest.fixture
def net(router, domain):
    _, config = router
    c = myelin.Context()
    c.init(domain_id=domain, shared_memory=False, network=True, zenoh_config=config)
    yield c
    c.try_shutdown()


def peer(router, domain, *args):
    endpoint, _ = router
    return subprocess.Popen(
        [sys.executable, str(PEER), *args, "--connect", endpoint, "--domain", str(domain)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def expect(p, prefix):
    seen = []
    for line in p.stdout:
        if line.startswith(prefix):
            return line.strip()
        seen.append(line.strip())
    raise AssertionError(f"the peer never printed {prefix!r}; it printed {seen!r} and exited {p.wait()}")


def spin_while_expecting(node, p, prefix):
    """Spin ``node`` until the peer prints a line starting with ``prefix``."""
    got = []

    def read():
        try:
            got.append(expect(p, prefix))
        except AssertionError as e:
            got.append(e)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    ex = myelin.SingleThreadedExecutor(context=node.context)
    ex.add_node(node)
    try:
        while reader.is_alive():
            ex.spin_once(timeout_sec=0.05)
    finally:
        ex.remove_node(node)
    if isinstance(got[0], AssertionError):
        raise got[0]
    return got[0]


def test_a_ros2_talker_reaches_a_python_listener(router, domain, net):
    node = myelin.create_node("py_listener", context=net)
    heard = []
    node.create_subscription(String, "chatter", lambda m: heard.append(m.data), 10)
    p = peer(router, domain, "talker")
    try:
        expect(p, "ready")
        spin_until(node, lambda: len(heard) >= 3, timeout=60)
        assert all(h.startswith("py talker ") for h in heard)
    finally:
        p.kill()
        p.wait()


def test_a_python_talker_reaches_a_ros2_listener(router, domain, net):
    node = myelin.create_node("py_talker", context=net)
    pub = node.create_publisher(String, "chatter", 10)
    p = peer(router, domain, "listener", "--count", "3", "--timeout", "60")
    try:
        expect(p, "ready")
        sent = []
        node.create_timer(0.05, lambda: sent.append(pub.publish(String(data=f"from python {len(sent)}"))))
        line = spin_while_expecting(node, p, "heard ")
        assert line.startswith("heard from python ")
    finally:
        p.kill()
        p.wait()


def test_a_ros2_client_calls_a_python_server_and_back(router, domain, net):
    node = myelin.create_node("py_adder", context=net)
    node.create_service(AddTwoInts, "add_two_ints", lambda req, resp: AddTwoInts.Response(sum=req.a + req.b))
    p = peer(router, domain, "client", "--a", "20", "--b", "22")
    try:
        assert spin_while_expecting(node, p, "sum ").startswith("sum 42")
    finally:
        p.kill()
        p.wait()
    # And a Python client calls a ROS 2 server.
    server = peer(router, domain, "server", "--service", "/add_two_ints_ros")
    try:
        expect(server, "ready")
        client = node.create_client(AddTwoInts, "add_two_ints_ros")
        assert client.wait_for_service(timeout_sec=60)
        assert client.call(AddTwoInts.Request(a=5, b=6), timeout_sec=60).sum == 11
    finally:
        server.kill()
        server.wait()


def test_a_ros2_action_client_drives_a_python_action_server_and_back(router, domain, net):
    from myelin.action import ActionClient, ActionServer
    from myelin.msgs.example_interfaces.action import Fibonacci
    from test_actions import execute

    node = myelin.create_node("fibonacci_action_server", context=net)
    ActionServer(node, Fibonacci, "fibonacci", execute)
    p = peer(router, domain, "action-client", "--order", "6", "--timeout", "60")
    try:
        assert spin_while_expecting(node, p, "server ") == "server fibonacci_action_server"
        assert spin_while_expecting(node, p, "result ") == "result 4 0,1,1,2,3,5,8"
    finally:
        p.kill()
        p.wait()

    # And a Python action client drives a ROS 2 action server.
    server = peer(router, domain, "action-server", "--action", "/fibonacci_ros", "--rate", "200")
    try:
        expect(server, "ready")
        client = ActionClient(node, Fibonacci, "fibonacci_ros")
        assert client.wait_for_server(timeout_sec=60)
        feedback = []
        future = client.send_goal_async(Fibonacci.Goal(order=5), feedback_callback=feedback.append)
        spin_until(node, future.done, timeout=60)
        handle = future.result()
        assert handle.accepted
        result = handle.get_result_async()
        spin_until(node, result.done, timeout=60)
        assert result.result().status == 4
        assert list(result.result().result.sequence) == [0, 1, 1, 2, 3, 5]
        spin_until(node, lambda: len(feedback) == 4, timeout=60)
        assert list(feedback[-1].feedback.sequence) == [0, 1, 1, 2, 3, 5]
    finally:
        server.kill()
        server.wait()

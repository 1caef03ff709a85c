"""Nodes, publishers, subscriptions, timers, QoS and executors in one
process, and the errors a user meets."""

import pytest

import myelin
from myelin.executors import SingleThreadedExecutor
from myelin.msgs.geometry_msgs.msg import Point
from myelin.msgs.std_msgs.msg import String
from myelin.node import Node
from myelin.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSProfile,
    ReliabilityPolicy,
    qos_profile_sensor_data,
)

from conftest import spin_until


def test_publish_and_receive_in_order(node):
    got = []
    node.create_subscription(String, "chatter", lambda m: got.append(m.data), 10)
    pub = node.create_publisher(String, "chatter", 10)
    assert pub.get_subscription_count() == 1
    for i in range(5):
        pub.publish(String(data=f"hello {i}"))
    spin_until(node, lambda: len(got) == 5)
    assert got == [f"hello {i}" for i in range(5)]


def test_a_two_parameter_callback_gets_the_message_info(node):
    got = []
    node.create_subscription(String, "info", lambda m, info: got.append((m.data, info)), 10)

    class Listener:
        def __init__(self):
            self.infos = []

        def on(self, msg, info):
            self.infos.append(info)

    listener = Listener()
    node.create_subscription(String, "info", listener.on, 10)
    pub = node.create_publisher(String, "info", 10)
    pub.publish(String(data="hi"))
    spin_until(node, lambda: got and listener.infos)
    data, info = got[0]
    assert data == "hi"
    assert info["from_intra_process"] is True
    # In-process delivery reads no clock (as rclcpp's): 0, as rmw says it.
    assert info["source_timestamp"] == 0
    assert info["publication_sequence_number"] == 0
    assert len(info["publisher_gid"]) == 16
    assert listener.infos[0]["publisher_gid"] == info["publisher_gid"]


def test_a_callback_that_cannot_take_a_message_is_refused_at_creation(node):
    with pytest.raises(TypeError, match=r"takes \(msg\) or \(msg, info\)"):
        node.create_subscription(String, "cb", lambda m, info, extra: None, 10)
    with pytest.raises(TypeError, match=r"takes \(msg\) or \(msg, info\)"):
        node.create_subscription(String, "cb", lambda: None, 10)
    # Defaults and *args are fine, as in rclpy.
    node.create_subscription(String, "cb", lambda m, extra=1: None, 10)
    node.create_subscription(String, "cb", lambda *args: None, 10)
    node.create_subscription(String, "cb", print, 10)  # a builtin: no signature to read


def test_raw_subscription_gets_cdr_bytes(node):
    got = []
    node.create_subscription(String, "raw", got.append, 10, raw=True)
    pub = node.create_publisher(String, "raw", 10)
    pub.publish(String(data="hi"))
    spin_until(node, lambda: got)
    assert got == [b"\x00\x01\x00\x00\x03\x00\x00\x00hi\x00"]
    # Publishing bytes sends them as they are.
    pub.publish(got[0])
    spin_until(node, lambda: len(got) == 2)


def test_keep_last_depth_drops_the_oldest(node):
    got = []
    node.create_subscription(String, "depth", lambda m: got.append(m.data), 2)
    pub = node.create_publisher(String, "depth", 10)
    for i in range(5):
        pub.publish(String(data=str(i)))
    ex = SingleThreadedExecutor(context=node.context)
    ex.add_node(node)
    for _ in range(10):
        ex.spin_once(timeout_sec=0.05)
    assert got == ["3", "4"]


def test_warm_delivers_nothing(node):
    got = []
    node.create_subscription(String, "warm", lambda m: got.append(m.data), 1)
    pub = node.create_publisher(String, "warm", 10)
    pub.publish(String(data="kept"))
    for _ in range(100):
        pub.warm()
    ex = SingleThreadedExecutor(context=node.context)
    ex.add_node(node)
    for _ in range(5):
        ex.spin_once(timeout_sec=0.02)
    assert got == ["kept"]


def test_transient_local_reaches_a_late_joiner(node):
    latched = QoSProfile(depth=2, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    pub = node.create_publisher(String, "latched", latched)
    for i in range(3):
        pub.publish(String(data=str(i)))
    got = []
    node.create_subscription(String, "latched", lambda m: got.append(m.data), latched)
    spin_until(node, lambda: len(got) == 2)
    assert got == ["1", "2"]


def test_best_effort_subscription_takes_a_reliable_publisher(node):
    got = []
    node.create_subscription(String, "mixed", lambda m: got.append(m.data), qos_profile_sensor_data)
    node.create_publisher(String, "mixed", 10).publish(String(data="x"))
    spin_until(node, lambda: got == ["x"])


def test_timer_fires_cancels_and_resets(node):
    ticks = []
    t = node.create_timer(0.01, lambda: ticks.append(1))
    assert t.timer_period_ns == 10_000_000
    spin_until(node, lambda: len(ticks) >= 3)
    t.cancel()
    assert t.is_canceled()
    n = len(ticks)
    ex = SingleThreadedExecutor(context=node.context)
    ex.add_node(node)
    for _ in range(5):
        ex.spin_once(timeout_sec=0.02)
    assert len(ticks) == n
    t.reset()
    ex.remove_node(node)
    spin_until(node, lambda: len(ticks) > n)


def test_a_callback_exception_comes_out_of_spin_once(node):
    def boom(msg):
        raise RuntimeError(f"bad message {msg.data}")

    node.create_subscription(String, "boom", boom, 10)
    node.create_publisher(String, "boom", 10).publish(String(data="x"))
    with pytest.raises(RuntimeError, match="bad message x"):
        spin_until(node, lambda: False, timeout=10)


def test_subclassed_node_and_module_level_api(domain, monkeypatch):
    monkeypatch.setenv("MYELIN_TRANSPORT", "shm")
    myelin.init(domain_id=domain, network=False)
    try:

        class Talker(Node):
            def __init__(self):
                super().__init__("talker", namespace="/robot")
                self.pub = self.create_publisher(String, "chatter", 10)
                self.count = 0
                self.timer = self.create_timer(0.01, self.tick)

            def tick(self):
                self.count += 1
                self.pub.publish(String(data=str(self.count)))

        talker = Talker()
        assert talker.get_fully_qualified_name() == "/robot/talker"
        got = []
        listener = myelin.create_node("listener", namespace="/robot")
        listener.create_subscription(String, "chatter", lambda m: got.append(m), 10)
        assert ("/robot/chatter", ["std_msgs/msg/String"]) in listener.get_topic_names_and_types()
        ex = SingleThreadedExecutor()
        ex.add_node(talker)
        ex.add_node(listener)
        while len(got) < 3:
            ex.spin_once(timeout_sec=1.0)
        myelin.spin_once(talker, timeout_sec=0.5)
        talker.get_logger().info("done")
    finally:
        myelin.shutdown()
    assert not myelin.ok()


def test_names_types_and_qos_errors_are_python_exceptions(node):
    with pytest.raises(myelin.InvalidNameError, match="invalid topic name"):
        node.create_publisher(String, "bad topic", 10)
    with pytest.raises(myelin.InvalidNameError):
        myelin.create_node("bad-name", context=node.context)
    node.create_publisher(String, "typed", 10)
    with pytest.raises(myelin.TypeMismatchError, match="std_msgs/msg/String"):
        node.create_subscription(Point, "typed", print, 10)
    pub = node.create_publisher(String, "typed2", 10)
    with pytest.raises(TypeError, match="expected std_msgs/msg/String, got geometry_msgs/msg/Point"):
        pub.publish(Point())
    with pytest.raises(myelin.InvalidQoSError):
        QoSProfile(history=HistoryPolicy.KEEP_LAST)
    with pytest.raises(myelin.InvalidQoSError):
        QoSProfile(depth=-1)
    with pytest.raises(myelin.InvalidQoSError):
        QoSProfile(depth=1, deadline=float("nan"))
    with pytest.raises(myelin.InvalidQoSError):
        node.create_publisher(String, "q", "ten")
    with pytest.raises(ValueError):
        QoSProfile(depth=1, reliability=7)
    with pytest.raises(TypeError, match="not a message type"):
        node.create_publisher(int, "t", 10)
    with pytest.raises(ValueError):
        node.create_timer(-1.0, lambda: None)


def test_absurd_qos_numbers_are_refused(node):
    # A depth no machine could hold, a deadline beyond ROS 2's infinite.
    with pytest.raises(myelin.InvalidQoSError, match="history"):
        node.create_subscription(String, "absurd", print, QoSProfile(depth=2**62))
    with pytest.raises(myelin.InvalidQoSError, match="deadline"):
        node.create_publisher(String, "absurd", QoSProfile(depth=1, deadline=1e12))
    with pytest.raises((myelin.InvalidQoSError, OverflowError)):
        node.create_publisher(String, "absurd", QoSProfile(depth=2**70))


def test_context_manager_and_shutdown(domain, monkeypatch):
    monkeypatch.setenv("MYELIN_TRANSPORT", "shm")
    monkeypatch.setenv("ROS_DOMAIN_ID", str(domain))
    c = myelin.Context()
    with c:
        assert c.ok() and c.get_domain_id() == domain
        n = myelin.create_node("scoped", context=c)
        assert n.get_name() == "scoped"
    assert not c.ok()
    with pytest.raises(RuntimeError, match="shut down"):
        myelin.create_node("late", context=c)
    with pytest.raises(RuntimeError, match="init"):
        myelin.create_node("never", context=myelin.Context())


def test_logger_once_skip_first_and_throttle(node):
    log = node.get_logger()
    assert [log.info("x", once=True) for _ in range(3)] == [True, False, False]
    assert [log.warning("y", skip_first=True) for _ in range(3)] == [False, True, True]
    assert [log.error("z", throttle_duration_sec=3600) for _ in range(3)] == [True, False, False]
    # As in rclpy: INFO and above by default; set_level changes it.
    assert log.debug("plain") is False
    log.set_level(myelin.logging.LoggingSeverity.DEBUG)
    assert log.debug("plain") is True
    assert log.get_effective_level() == myelin.logging.LoggingSeverity.DEBUG

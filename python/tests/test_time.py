"""Time, durations and clocks, on steady and simulated time."""

import pytest

import myelin
from myelin.msgs.rosgraph_msgs.msg import Clock as ClockMsg
from myelin.msgs.std_msgs.msg import Header
from myelin.time import Clock, ClockType, Duration, Time

from conftest import spin_until


def test_arithmetic_and_messages():
    t = Time(seconds=10, nanoseconds=5)
    assert t.nanoseconds == 10_000_000_005
    assert (t + Duration(seconds=0.5)).nanoseconds == 10_500_000_005
    assert t - Time(seconds=9) == Duration(seconds=1, nanoseconds=5)
    msg = t.to_msg()
    assert (msg.sec, msg.nanosec) == (10, 5)
    assert Time.from_msg(msg, clock_type=ClockType.SYSTEM_TIME) == t
    assert Duration(seconds=1) > Duration(nanoseconds=999_999_999)
    with pytest.raises(TypeError):
        Time(clock_type=ClockType.ROS_TIME) < Time(clock_type=ClockType.SYSTEM_TIME)
    with pytest.raises(ValueError):
        Time(seconds=-1)
    assert Clock().now().nanoseconds > 0


def test_a_nodes_clock_stamps_headers(node):
    a = node.get_clock().now()
    h = Header(stamp=node.get_clock().now().to_msg())
    assert Time.from_msg(h.stamp) >= a
    assert not node.get_clock().ros_time_is_active()
    # A timer's period may be a Duration.
    ticks = []
    t = node.create_timer(Duration(seconds=0.01), lambda: ticks.append(1))
    assert t.timer_period_ns == 10_000_000
    spin_until(node, lambda: ticks)


def test_simulated_time_follows_clock(ctx, domain):
    # /clock comes from another context (as from a simulator's process).
    sim_ctx = myelin.Context()
    sim_ctx.init(domain_id=domain, network=False, use_sim_time=True)
    try:
        node = myelin.create_node("sim", context=sim_ctx)
        clock = node.get_clock()
        assert clock.ros_time_is_active() and clock.now().nanoseconds == 0
        simulator = myelin.create_node("simulator", context=ctx)
        pub = simulator.create_publisher(ClockMsg, "/clock", 1)
        ticks = []
        node.create_timer(1.0, lambda: ticks.append(clock.now().nanoseconds))

        def at(sec):
            pub.publish(ClockMsg(clock=Time(seconds=sec).to_msg()))
            return clock.now().nanoseconds == sec * 1_000_000_000

        spin_until(node, lambda: at(100))
        # One simulated second later the 1 s timer fires, at once in wall time.
        spin_until(node, lambda: at(101) and ticks)
        assert ticks[0] == 101_000_000_000
    finally:
        sim_ctx.shutdown()

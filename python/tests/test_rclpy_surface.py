"""rclpy's smaller pieces that demo code uses: node keywords and parameter
overrides, rates, clock sleeps, loggers by name, QoS presets, a
destroyed node's handles, and submodules as attributes."""

import threading
import time

import pytest

import myelin
import myelin as rclpy
from myelin.exceptions import InvalidHandle
from myelin.logging import LoggingSeverity
from myelin.parameter import Parameter
from myelin.qos import QoSPresetProfiles, qos_profile_sensor_data
from myelin.time import Duration


def test_submodules_are_attributes():
    # As after `import rclpy`: rclpy.task.Future, rclpy.time.Time, ...
    assert rclpy.task.Future and rclpy.time.Time and rclpy.executors.Executor
    assert rclpy.qos.QoSProfile and rclpy.logging.get_logger and rclpy.timer.Rate


def test_parameter_overrides_and_their_declaration(ctx):
    node = myelin.Node(
        "overridden",
        context=ctx,
        parameter_overrides=[Parameter("speed", value=2.5), Parameter("mode", value="fast")],
        automatically_declare_parameters_from_overrides=True,
    )
    assert node.get_parameter("speed").value == 2.5
    assert node.get_parameter("mode").value == "fast"
    other = myelin.Node("overridden2", context=ctx, parameter_overrides=[Parameter("gain", value=7)])
    assert not other.has_parameter("gain")
    assert other.declare_parameter("gain", 1).value == 7
    assert other.declare_parameter("kept", 1, ignore_override=True).value == 1
    node.destroy_node()
    other.destroy_node()


def test_undeclared_parameters_when_allowed(ctx):
    node = myelin.Node("loose", context=ctx, allow_undeclared_parameters=True)
    assert node.set_parameters([Parameter("free", value=3)])[0].successful
    assert node.get_parameter("free").value == 3
    strict = myelin.Node("strict", context=ctx)
    assert not strict.set_parameters([Parameter("free", value=3)])[0].successful
    node.destroy_node()
    strict.destroy_node()


def test_unknown_node_keywords_are_refused_and_rclpys_accepted(ctx):
    with pytest.raises(TypeError, match="bogus"):
        myelin.Node("typo", context=ctx, bogus=1)
    n = myelin.Node("fine", context=ctx, use_global_arguments=True, enable_rosout=True, start_parameter_services=True)
    n.destroy_node()


def test_a_destroyed_node_refuses_new_endpoints(ctx):
    node = myelin.Node("gone", context=ctx)
    node.destroy_node()
    with pytest.raises(InvalidHandle, match="destroyed"):
        node.create_publisher(myelin.msgs.std_msgs.msg.String, "t", 10)
    with pytest.raises(InvalidHandle):
        node.create_timer(1.0, lambda: None)


def test_rate_sleeps_to_the_next_period(node):
    rate = node.create_rate(50.0)
    start = time.monotonic()
    for _ in range(5):
        assert rate.sleep()
    # Five periods of 20 ms: at least 80 ms after the first boundary.
    assert time.monotonic() - start >= 0.08
    with pytest.raises(ValueError, match="positive"):
        node.create_rate(0)
    assert node.destroy_rate(rate)
    assert rate.sleep() is False


def test_clock_sleep_for_and_shutdown_wakes_it(ctx, domain):
    node = myelin.Node("sleeper", context=ctx)
    clock = node.get_clock()
    t0 = clock.now().nanoseconds
    assert clock.sleep_for(Duration(seconds=0.05), context=ctx)
    assert clock.now().nanoseconds - t0 >= 50_000_000
    node.destroy_node()
    c = myelin.Context()
    c.init(domain_id=domain, network=False)
    done = []
    t = threading.Thread(target=lambda: done.append(myelin.time.Clock().sleep_for(Duration(seconds=3600), context=c)))
    t.start()
    c.shutdown()
    t.join(60)
    assert done == [False]


def test_loggers_by_name_and_levels(capfd):
    log = rclpy.logging.get_logger("surface.test")
    assert log.get_effective_level() == LoggingSeverity.INFO
    assert log.info("shown") and not log.debug("hidden")
    rclpy.logging.set_logger_level("surface", LoggingSeverity.ERROR)
    assert not log.warning("filtered by the parent")
    assert log.get_child("leaf").name == "surface.test.leaf"
    assert log.error("an error")
    err = capfd.readouterr().err
    assert "[INFO]" in err and "[surface.test]: shown" in err and "hidden" not in err
    assert "filtered" not in err and "[ERROR]" in err


def test_qos_presets():
    assert QoSPresetProfiles.SENSOR_DATA.value is qos_profile_sensor_data
    assert QoSPresetProfiles.get_from_short_key("sensor_data") is qos_profile_sensor_data

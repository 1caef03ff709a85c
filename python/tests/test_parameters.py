"""Parameters on Python nodes: rclpy's API, ROS 2's types and rules, and
the parameter services other processes use."""

import subprocess

import pytest

import myelin
from myelin.parameter import Parameter, SetParametersResult

from conftest import myelin_cli, python_child


def test_declare_get_and_set_every_type(node):
    values = {
        "flag": True,
        "count": 3,
        "rate": 30.0,
        "name": "cam",
        "blob": b"\x01\x02",
        "flags": [True, False],
        "ids": [1, 2, 3],
        "gains": [0.5, 1],
        "names": ["a", "b"],
    }
    for name, value in values.items():
        p = node.declare_parameter(name, value)
        assert p.name == name and p.value == value
        assert p.type_ == Parameter.Type.from_parameter_value(value)
    assert node.get_parameter("gains").value == [0.5, 1.0]
    assert node.get_parameter("gains").type_ == Parameter.Type.DOUBLE_ARRAY
    [r] = node.set_parameters([Parameter("rate", Parameter.Type.DOUBLE, 15.0)])
    assert r.successful and node.get_parameter("rate").value == 15.0
    assert node.has_parameter("rate") and not node.has_parameter("nope")
    assert node.get_parameter_or("nope", 7).value == 7


def test_errors_have_rclpys_names(node):
    with pytest.raises(myelin.ParameterNotDeclaredException, match='"missing" is not declared'):
        node.get_parameter("missing")
    node.declare_parameter("once", 1)
    with pytest.raises(myelin.ParameterAlreadyDeclaredException):
        node.declare_parameter("once", 2)
    [r] = node.set_parameters([Parameter("once", value="text")])
    assert not r.successful and "once" in r.reason
    with pytest.raises(TypeError, match="not a parameter value"):
        node.declare_parameter("weird", {"a": 1})
    with pytest.raises(TypeError, match="empty list"):
        node.declare_parameter("empty", [])
    with pytest.raises(myelin.InvalidNameError):
        node.declare_parameter("bad name", 1)


def test_an_on_set_callback_can_refuse(node):
    node.declare_parameter("mode", "idle")
    seen = []

    def check(params):
        seen.extend((p.name, p.value) for p in params)
        ok = all(p.value != "warp" for p in params)
        return SetParametersResult(successful=ok, reason="" if ok else "no warp drive")

    node.add_on_set_parameters_callback(check)
    [r] = node.set_parameters([Parameter("mode", value="warp")])
    assert not r.successful and "no warp drive" in r.reason
    assert node.get_parameter("mode").value == "idle"
    assert node.set_parameters_atomically([Parameter("mode", value="run")]).successful
    assert node.get_parameter("mode").value == "run"
    assert ("mode", "warp") in seen and ("mode", "run") in seen


def test_command_line_overrides_win(domain, monkeypatch):
    monkeypatch.setenv("MYELIN_TRANSPORT", "shm")
    ctx = myelin.Context()
    ctx.init(["prog", "--ros-args", "-p", "rate:=5.0", "-p", "name:=left"], domain_id=domain, network=False)
    try:
        node = myelin.create_node("camera", context=ctx)
        assert node.declare_parameter("rate", 30.0).value == 5.0
        assert node.declare_parameter("name", "cam").value == "left"
        assert node.declare_parameter("other", 1).value == 1
    finally:
        ctx.shutdown()


NODE = """
import myelin
myelin.init()
node = myelin.create_node("py_params")
node.declare_parameter("rate", 30.0)
node.declare_parameter("frame", "base")
print("ready", flush=True)
try:
    myelin.spin(node)
except KeyboardInterrupt:
    pass
"""


def test_the_myelin_cli_gets_and_sets_a_python_nodes_parameters(domain):
    cli = myelin_cli()
    child = python_child(NODE, domain)
    env = {"MYELIN_TRANSPORT": "shm", "ROS_DOMAIN_ID": str(domain), "PATH": "/usr/bin:/bin"}

    def run(*args):
        out = subprocess.run([cli, "param", *args], env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout

    try:
        assert child.stdout.readline().strip() == "ready"
        assert "30" in run("get", "/py_params", "rate")
        run("set", "/py_params", "frame", "odom")
        assert "odom" in run("get", "/py_params", "frame")
        listing = run("list", "/py_params")
        assert "rate" in listing and "frame" in listing
    finally:
        child.terminate()
        child.wait(timeout=30)

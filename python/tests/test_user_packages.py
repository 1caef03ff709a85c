"""A user's own ROS package of interfaces, loaded from its source folder
(msg/, srv/, action/ with package.xml), used in one process and between
two processes (each loads the folder; the type hashes must agree)."""

import pytest

import myelin
from myelin.msgs import load_package, load_packages

from conftest import python_child, spin_until

PACKAGE_XML = """<?xml version="1.0"?>
<package format="3"><name>{name}</name><version>0.1.0</version>
<description>test</description><maintainer email="a@b.c">a</maintainer>
<license>Apache-2.0</license></package>
"""


def make_package(root, name):
    """A package whose first file (alphabetically) needs a later one."""
    pkg = root / f"{name}_src"
    (pkg / "msg").mkdir(parents=True)
    (pkg / "srv").mkdir()
    (pkg / "action").mkdir()
    (pkg / "package.xml").write_text(PACKAGE_XML.format(name=name))
    (pkg / "msg" / "Arm.msg").write_text(f"std_msgs/Header header\n{name}/Joint[] joints\nstring label\n")
    (pkg / "msg" / "Joint.msg").write_text("string name\nfloat64 position\nint32 MAX=7\n")
    (pkg / "srv" / "Home.srv").write_text(f"{name}/Arm arm\n---\nbool ok\n")
    (pkg / "action" / "Reach.action").write_text("float64 target\n---\nbool reached\n---\nfloat64 at\n")
    return pkg


def test_a_package_folder_loads_in_dependency_order(tmp_path):
    pkg = make_package(tmp_path, "my_arm_msgs")
    types = load_package(str(pkg))
    assert set(types) == {
        "my_arm_msgs/msg/Arm",
        "my_arm_msgs/msg/Joint",
        "my_arm_msgs/srv/Home",
        "my_arm_msgs/action/Reach",
    }
    from myelin.msgs.my_arm_msgs.msg import Arm, Joint
    from myelin.msgs.my_arm_msgs.srv import Home

    assert Joint.MAX == 7
    arm = Arm(joints=[Joint(name="elbow", position=0.5)], label="left")
    assert arm.joints[0].position == 0.5
    assert Home.Request(arm=arm).arm.label == "left"
    assert types["my_arm_msgs/action/Reach"].Goal(target=1.0).target == 1.0


def test_a_broken_definition_names_its_file(tmp_path):
    pkg = make_package(tmp_path, "broken_arm_msgs")
    (pkg / "msg" / "Bad.msg").write_text("no_such_pkg/Thing thing\n")
    with pytest.raises(ValueError, match="Bad.msg"):
        load_packages(str(pkg))


CHILD = """
import sys, time
import myelin
from myelin.msgs import load_package
load_package(sys.argv[1])
from myelin.msgs.shared_arm_msgs.msg import Arm, Joint
myelin.init()
node = myelin.create_node("arm_talker")
pub = node.create_publisher(Arm, "arm", 10)
while pub.get_subscription_count() == 0:
    time.sleep(0.01)
print("matched", flush=True)
for i in range(200):
    pub.publish(Arm(joints=[Joint(name="wrist", position=float(i))], label="from the child"))
    time.sleep(0.01)
"""


def test_a_user_type_crosses_processes(tmp_path, node, domain):
    pkg = make_package(tmp_path, "shared_arm_msgs")
    load_package(str(pkg))
    from myelin.msgs.shared_arm_msgs.msg import Arm

    got = []
    node.create_subscription(Arm, "arm", got.append, 10)
    child = python_child(CHILD, domain, str(pkg))
    try:
        spin_until(node, lambda: got)
    finally:
        child.kill()
        out, err = child.communicate()
    assert got, f"nothing from the child: {out} {err}"
    assert got[0].label == "from the child" and got[0].joints[0].name == "wrist"

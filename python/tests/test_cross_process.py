"""Python and Rust nodes in separate processes, over shared memory: the
same topics, types and bytes whichever language is on either side."""

import signal
import subprocess
import time

import numpy
import pytest

from myelin.msgs.sensor_msgs.msg import CameraInfo, Image, LaserScan
from myelin.msgs.std_msgs.msg import String

from conftest import python_child, rust_example, spin_until

TALKER = """
import sys, myelin
from myelin.msgs.std_msgs.msg import String
myelin.init()
node = myelin.create_node("py_talker")
pub = node.create_publisher(String, "chatter", 10)
n = 0
def tick():
    global n
    n += 1
    pub.publish(String(data=f"Hello World: {n}"))
    print("published", n, flush=True)
node.create_timer(0.05, tick)
try:
    myelin.spin(node)
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""

CAMERA = """
import sys, numpy, myelin
from myelin.msgs.sensor_msgs.msg import Image
myelin.init()
node = myelin.create_node("py_camera")
pub = node.create_publisher(Image, "image", 2)
h, w = 1080, 1440  # 4.6 MB of rgb8
frame = numpy.arange(h * w * 3, dtype=numpy.uint64).astype(numpy.uint8)
seq = 0
def tick():
    global seq
    seq += 1
    img = Image(height=h, width=w, encoding="rgb8", step=w * 3, data=frame)
    img.header.frame_id = str(seq)
    pub.publish(img)
node.create_timer(0.05, tick)
try:
    myelin.spin(node)
except KeyboardInterrupt:
    pass
"""


def inside_shared_memory(address, size):
    """Whether [address, address + size) lies in a mapping of /dev/shm."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) >= 6 and fields[5].startswith("/dev/shm/"):
                lo, hi = (int(x, 16) for x in fields[0].split("-"))
                if lo <= address and address + size <= hi:
                    return True
    return False


def stop(child):
    child.send_signal(signal.SIGINT)
    try:
        out, err = child.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        child.kill()
        out, err = child.communicate()
        raise AssertionError(f"the child ignored Ctrl-C\n{err}")
    return out, err


def test_python_talker_to_python_listener(node, domain):
    child = python_child(TALKER, domain)
    try:
        got = []
        node.create_subscription(String, "chatter", lambda m: got.append(m.data), 10)
        spin_until(node, lambda: len(got) >= 3)
        first = int(got[0].rsplit(" ", 1)[1])
        assert got[:3] == [f"Hello World: {first + i}" for i in range(3)]
    finally:
        out, err = stop(child)
    # Ctrl-C in spin() is a KeyboardInterrupt, promptly.
    assert "interrupted" in out, err


def test_rust_talker_to_python_listener(node, domain):
    exe = rust_example("talker")
    env = {"MYELIN_TRANSPORT": "shm", "ROS_DOMAIN_ID": str(domain), "PATH": "/usr/bin:/bin"}
    child = subprocess.Popen([exe], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        got = []
        sub = node.create_subscription(String, "chatter", lambda m: got.append(m.data), 10)
        spin_until(node, lambda: len(got) >= 2)
        assert got[0].startswith("Hello World: ")
        # The publisher in the other process counts as matched.
        assert sub.get_publisher_count() == 1
    finally:
        child.kill()
        child.wait()


def test_a_message_from_another_process_says_when_it_was_sent(node, domain):
    exe = rust_example("talker")
    env = {"MYELIN_TRANSPORT": "shm", "ROS_DOMAIN_ID": str(domain), "PATH": "/usr/bin:/bin"}
    before = time.time_ns()
    child = subprocess.Popen([exe], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        got = []
        node.create_subscription(String, "chatter", lambda m, info: got.append(info), 10)
        spin_until(node, lambda: len(got) >= 2)
        info = got[0]
        # Shared memory stamps the send time on the publisher's clock.
        assert before <= info["source_timestamp"] <= time.time_ns()
        assert info["from_intra_process"] is False
        assert got[1]["publisher_gid"] == info["publisher_gid"]
        # The gid names the publisher's process (bytes 8..12).
        assert int.from_bytes(info["publisher_gid"][8:12], "little") == child.pid
    finally:
        child.kill()
        child.wait()


def test_graph_queries_count_a_publisher_in_another_process(node, domain):
    # rclpy's count_publishers / get_topic_names_and_types see the graph,
    # not only this process.
    exe = rust_example("talker")
    env = {"MYELIN_TRANSPORT": "shm", "ROS_DOMAIN_ID": str(domain), "PATH": "/usr/bin:/bin"}
    child = subprocess.Popen([exe], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        spin_until(node, lambda: node.count_publishers("chatter") == 1)
        assert node.count_subscribers("/chatter") == 0
        assert ("/chatter", ["std_msgs/msg/String"]) in node.get_topic_names_and_types()
        assert ("talker", "/") in node.get_node_names_and_namespaces()
        assert node.get_name() in node.get_node_names()
    finally:
        child.kill()
        child.wait()
    spin_until(node, lambda: node.count_publishers("chatter") == 0)


def test_a_rust_node_reads_its_ros_args(node, domain):
    # Context::new() reads the program's --ros-args, as rclcpp::init does.
    exe = rust_example("talker")
    env = {"MYELIN_TRANSPORT": "shm", "ROS_DOMAIN_ID": str(domain), "PATH": "/usr/bin:/bin"}
    args = [exe, "--ros-args", "-r", "chatter:=rust_chatter"]
    child = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        got = []
        node.create_subscription(String, "rust_chatter", lambda m: got.append(m.data), 10)
        spin_until(node, lambda: len(got) >= 1)
        assert got[0].startswith("Hello World: ")
    finally:
        child.kill()
        child.wait()


def test_python_talker_to_rust_listener(domain):
    exe = rust_example("listener")
    env = {"MYELIN_TRANSPORT": "shm", "ROS_DOMAIN_ID": str(domain), "PATH": "/usr/bin:/bin"}
    listener = subprocess.Popen([exe], env=env, stdout=subprocess.PIPE, text=True)
    talker = python_child(TALKER, domain)
    try:
        line = ""
        end = time.monotonic() + 30
        while "I heard" not in line:
            assert time.monotonic() < end, "the Rust listener heard nothing"
            line = listener.stdout.readline()
        assert "Hello World: " in line
    finally:
        stop(talker)
        listener.kill()
        listener.wait()


def check_frames_read_in_place(node):
    """Two 1440x1080 rgb8 frames of the camera pattern (byte i is i % 256)
    arrive on ``image``, intact, as read-only views of shared memory."""
    got = []
    node.create_subscription(Image, "image", got.append, 2)
    spin_until(node, lambda: len(got) >= 2)
    img = got[-1]
    h, w = 1080, 1440
    assert (img.height, img.width, img.encoding, img.step) == (h, w, "rgb8", w * 3)
    expected = numpy.arange(h * w * 3, dtype=numpy.uint64).astype(numpy.uint8)
    assert img.data.dtype == numpy.uint8 and numpy.array_equal(img.data, expected)
    assert int(got[-1].header.frame_id) > int(got[0].header.frame_id)
    # No copy: the array views the shared-memory chunk, read-only (other
    # subscriptions read the same bytes), and keeps it alive.
    address = img.data.ctypes.data
    assert inside_shared_memory(address, img.data.nbytes), hex(address)
    assert not img.data.flags.writeable
    with pytest.raises(ValueError):
        img.data[0] = 1
    # A copy is the user's to change.
    mine = img.data.copy()
    mine[0] = 1


SCANNER = """
import numpy, myelin
from myelin.msgs.sensor_msgs.msg import CameraInfo, LaserScan
myelin.init()
node = myelin.create_node("py_scanner")
scans = node.create_publisher(LaserScan, "scan", 2)
infos = node.create_publisher(CameraInfo, "info", 2)
ranges = numpy.arange(4000, dtype=numpy.float32) / 4
values = numpy.arange(1000, dtype=numpy.float64) / 8
def tick():
    scans.publish(LaserScan(ranges=ranges, intensities=ranges[::-1].copy()))
    infos.publish(CameraInfo(d=values))
node.create_timer(0.05, tick)
try:
    myelin.spin(node)
except KeyboardInterrupt:
    pass
"""


def test_large_float_arrays_are_read_in_place_when_aligned(node, domain):
    # A LaserScan's 4000 float32 ranges (16 kB) arrive as read-only views
    # of the shared-memory chunk, like image bytes; a float64 array is a
    # view only where its elements lie 8-aligned (CDR aligns them to the
    # payload after its 4-byte header), else a copy: never an unaligned
    # array.
    child = python_child(SCANNER, domain)
    try:
        scans, infos = [], []
        node.create_subscription(LaserScan, "scan", scans.append, 2)
        node.create_subscription(CameraInfo, "info", infos.append, 2)
        spin_until(node, lambda: scans and infos)
    finally:
        stop(child)
    ranges = scans[-1].ranges
    expected = numpy.arange(4000, dtype=numpy.float32) / 4
    assert ranges.dtype == numpy.float32 and numpy.array_equal(ranges, expected)
    assert numpy.array_equal(scans[-1].intensities, expected[::-1])
    assert inside_shared_memory(ranges.ctypes.data, ranges.nbytes), hex(ranges.ctypes.data)
    assert not ranges.flags.writeable and ranges.flags.aligned
    with pytest.raises(ValueError):
        ranges[0] = 1.0
    data = infos[-1].d
    assert data.dtype == numpy.float64
    assert numpy.array_equal(data, numpy.arange(1000, dtype=numpy.float64) / 8)
    assert data.flags.aligned
    in_place = inside_shared_memory(data.ctypes.data, data.nbytes)
    assert in_place == (not data.flags.writeable)


def test_a_4_6_mb_image_crosses_intact(node, domain):
    child = python_child(CAMERA, domain)
    try:
        check_frames_read_in_place(node)
    finally:
        stop(child)


def test_a_4_6_mb_image_from_a_rust_camera_is_read_in_place(node, domain):
    exe = rust_example("camera")
    env = {"MYELIN_TRANSPORT": "shm", "ROS_DOMAIN_ID": str(domain), "PATH": "/usr/bin:/bin"}
    child = subprocess.Popen([exe, "20"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        check_frames_read_in_place(node)
    finally:
        child.kill()
        child.wait()


REMAPPED = """
import myelin
myelin.init()
node = myelin.create_node("remapped")
pub = node.create_publisher(String := __import__("myelin.msgs.std_msgs.msg", fromlist=["String"]).String, "chatter", 10)
print(pub.topic_name, node.get_name(), node.declare_parameter("rate", 1.0).value, flush=True)
"""


def test_the_command_line_remaps_and_sets_parameters_as_in_rclpy(domain):
    child = python_child(
        REMAPPED, domain, "--ros-args", "-r", "chatter:=renamed", "-r", "__node:=talker2", "-p", "rate:=5.0"
    )
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    assert out.split() == ["/renamed", "talker2", "5.0"], out

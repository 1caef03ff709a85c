"""Message classes and their CDR: shapes, defaults, errors, and bytes
that agree with the Rust message crate and ROS 2."""

import random

import numpy
import pytest

from myelin.msgs import load_msg
from myelin.msgs.builtin_interfaces.msg import Time
from myelin.msgs.geometry_msgs.msg import Point, Pose, Twist
from myelin.msgs.sensor_msgs.msg import Image
from myelin.msgs.std_msgs.msg import Header, String
from myelin.serialization import deserialize_message, serialize_message


def test_defaults_keywords_equality_and_repr():
    p = Point(x=1.0)
    assert (p.x, p.y, p.z) == (1.0, 0.0, 0.0)
    assert p == Point(x=1.0, y=0.0, z=0.0)
    assert p != Point(x=2.0)
    assert repr(p) == "geometry_msgs.msg.Point(x=1.0, y=0.0, z=0.0)"
    pose = Pose()
    # The .msg default (Quaternion.w is 1), as in rclpy.
    assert pose.orientation.w == 1.0 and isinstance(pose.position, Point)
    # Each instance gets its own nested message and its own array.
    a, b = Image(), Image()
    a.header.frame_id = "cam"
    assert b.header.frame_id == ""
    assert isinstance(a.data, numpy.ndarray) and a.data.dtype == numpy.uint8
    assert Point.get_fields_and_field_types() == {"x": "float64", "y": "float64", "z": "float64"}


def test_unknown_field_is_a_type_error():
    with pytest.raises(TypeError, match="has no field"):
        Point(w=1.0)
    with pytest.raises(AttributeError):
        Point().w = 1.0


def test_type_hashes_are_ros_2s():
    assert String._ROS_HASH == (
        "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18"
    )
    assert Image._ROS_HASH.startswith("RIHS01_")


def test_cdr_bytes_are_ros_2s():
    # std_msgs/String "hello": encapsulation (CDR LE), length 6, bytes, NUL.
    assert serialize_message(String(data="hello")) == b"\x00\x01\x00\x00\x06\x00\x00\x00hello\x00"
    # Header: stamp (two u32-aligned ints), then the string.
    h = Header(stamp=Time(sec=1, nanosec=2), frame_id="f")
    assert serialize_message(h) == (
        b"\x00\x01\x00\x00" b"\x01\x00\x00\x00" b"\x02\x00\x00\x00" b"\x02\x00\x00\x00f\x00"
    )
    # Point: three float64 at offsets 0, 8 and 16 after the header.
    assert serialize_message(Point(x=1.0)) == b"\x00\x01\x00\x00" + numpy.array(
        [1.0, 0.0, 0.0], "<f8"
    ).tobytes()


def test_round_trips():
    img = Image(
        height=2, width=3, encoding="rgb8", step=9, data=numpy.arange(18, dtype=numpy.uint8)
    )
    img.header.frame_id = "camera"
    back = deserialize_message(serialize_message(img), Image)
    assert back == img and back.data.dtype == numpy.uint8
    t = Twist()
    t.linear.x, t.angular.z = 1.5, -0.5
    assert deserialize_message(serialize_message(t), Twist) == t
    # Lists, bytes and numpy arrays of another dtype are accepted for arrays.
    assert deserialize_message(serialize_message(Image(data=b"\x01\x02")), Image).data.tolist() == [1, 2]
    assert deserialize_message(serialize_message(Image(data=[3, 4])), Image).data.tolist() == [3, 4]


def test_values_out_of_range_or_of_the_wrong_type_are_refused():
    with pytest.raises(ValueError, match="out of range for uint32"):
        serialize_message(Image(height=-1))
    with pytest.raises(ValueError, match="out of range for uint8"):
        serialize_message(Image(data=[1, 256]))
    with pytest.raises(TypeError, match=r"Point.x: expected float, got str"):
        serialize_message(Point(x="1"))
    with pytest.raises(TypeError, match=r"Image.encoding: expected str, got int"):
        serialize_message(Image(encoding=5))
    with pytest.raises(TypeError, match=r"Pose.position: expected geometry_msgs/msg/Point, got std_msgs/msg/String"):
        serialize_message(Pose(position=String()))
    with pytest.raises(ValueError, match="NUL"):
        serialize_message(String(data="a\0b"))


def test_user_message_with_arrays_bounds_constants_and_defaults():
    Reading = load_msg(
        "pytest_msgs",
        "Reading",
        "\n".join(
            [
                "uint8 MODE_IDLE=0",
                "uint8 MODE_RUN=1",
                "std_msgs/Header header",
                "float32[3] xyz",
                "int16[<=2] small",
                "string<=4 tag 'abc'",
                "bool ok true",
                "string[] names",
                "geometry_msgs/Point[] points",
            ]
        ),
    )
    r = Reading()
    assert Reading.MODE_RUN == 1 and r.tag == "abc" and r.ok is True
    assert r.xyz.shape == (3,) and r.xyz.dtype == numpy.float32
    r.names = ["a", "b"]
    r.points = [Point(x=1.0), Point(y=2.0)]
    r.small = [1, -2]
    assert deserialize_message(serialize_message(r), Reading) == r
    from myelin.msgs.pytest_msgs.msg import Reading as Imported

    assert Imported is Reading
    with pytest.raises(ValueError, match="exactly 3 elements"):
        serialize_message(Reading(xyz=[1.0]))
    with pytest.raises(ValueError, match="at most 2 elements"):
        serialize_message(Reading(small=[1, 2, 3]))
    with pytest.raises(ValueError, match="at most 4 characters"):
        serialize_message(Reading(tag="toolong"))
    with pytest.raises(ValueError, match="not loaded"):
        load_msg("pytest_msgs", "Bad", "pytest_msgs/Missing m")
    with pytest.raises(ValueError):
        load_msg("pytest_msgs", "Worse", "float64 x y z")


def test_corrupt_bytes_raise_and_never_crash():
    good = serialize_message(
        Image(height=1, width=4, encoding="mono8", step=4, data=numpy.arange(4, dtype=numpy.uint8))
    )
    for n in range(len(good)):
        with pytest.raises(ValueError):
            deserialize_message(good[:n], Image)
    # A sequence count far beyond the bytes left must not allocate it.
    huge = b"\x00\x01\x00\x00" + b"\xff\xff\xff\x7f"
    from myelin.msgs.std_msgs.msg import Header as H

    with pytest.raises(ValueError):
        deserialize_message(huge, H)
    rng = random.Random(7)
    for _ in range(2000):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(64)))
        try:
            deserialize_message(b"\x00\x01\x00\x00" + data, Image)
        except ValueError:
            pass


def test_packages_list_their_types():
    import myelin.msgs.example_interfaces.srv as srv
    import myelin.msgs.std_msgs.msg as msg

    assert "String" in dir(msg) and "Header" in dir(msg)
    assert "AddTwoInts" in dir(srv)
    with pytest.raises(AttributeError, match="no message type std_msgs/msg/Nope"):
        msg.Nope

"""Loaned messages: a Python publisher fills a message's large arrays in
place in shared memory (writable numpy views) and publishes without a
copy; a view can never write into a published message."""

import gc

import numpy
import pytest

from myelin.msgs import load_msg
from myelin.msgs.sensor_msgs.msg import CameraInfo, Image

from conftest import python_child, spin_until
from test_cross_process import check_frames_read_in_place, inside_shared_memory, stop

H, W = 1080, 1440


def frame_pattern():
    return numpy.arange(H * W * 3, dtype=numpy.uint64).astype(numpy.uint8)


def image():
    return Image(height=H, width=W, encoding="rgb8", step=W * 3)


def test_a_loaned_image_is_filled_in_shared_memory_and_arrives_intact(node):
    got = []
    node.create_subscription(Image, "image", got.append, 2)
    pub = node.create_publisher(Image, "image", 2)
    msg = image()
    msg.header.frame_id = "camera"
    loan = pub.loan(msg, data=H * W * 3)
    view = loan.data
    assert view.dtype == numpy.uint8 and view.shape == (H * W * 3,)
    assert view.flags.writeable
    assert inside_shared_memory(view.ctypes.data, view.nbytes), hex(view.ctypes.data)
    numpy.copyto(view, frame_pattern())
    # Another view sees the same bytes: one chunk, no copies.
    assert loan.data.ctypes.data == view.ctypes.data
    del view
    # Fields other than the arrays are read at publish: a stamp set now
    # counts.
    loan.msg.header.stamp.sec = 7
    loan.publish()
    assert not loan.open
    spin_until(node, lambda: got)
    img = got[0]
    assert (img.height, img.width, img.encoding, img.step) == (H, W, "rgb8", W * 3)
    assert (img.header.frame_id, img.header.stamp.sec) == ("camera", 7)
    assert numpy.array_equal(img.data, frame_pattern())


def test_publish_refuses_while_a_view_is_alive(node):
    got = []
    node.create_subscription(Image, "image", got.append, 2)
    pub = node.create_publisher(Image, "image", 2)
    loan = pub.loan(image(), data=H * W * 3)
    view = loan.data
    view.fill(3)
    part = view[10:20].view(numpy.uint16)  # views of views count too
    del view
    with pytest.raises(BufferError, match="still view the loaned message"):
        loan.publish()
    assert loan.open, "a refused publish keeps the loan"
    del part
    loan.publish()
    spin_until(node, lambda: got)
    assert (got[0].data == 3).all()
    # Published: no new views, no second publish.
    with pytest.raises(ValueError, match="already published"):
        loan.data
    with pytest.raises(ValueError, match="already published"):
        loan.publish()


def test_a_with_block_publishes_at_its_end_and_releases_when_it_raises(node):
    got = []
    node.create_subscription(Image, "image", got.append, 4)
    pub = node.create_publisher(Image, "image", 4)
    with pub.loan(image(), data=H * W * 3) as loan:
        loan.data[:] = 9
    assert not loan.open
    with pytest.raises(RuntimeError, match="camera failed"):
        with pub.loan(image(), data=H * W * 3) as failed:
            failed.data[:] = 1
            raise RuntimeError("camera failed")
    assert not failed.open
    with pytest.raises(ValueError):
        failed.publish()
    # A marker after the failed loan: when it arrives, anything the failed
    # loan had sent would have arrived before it.
    with pub.loan(image(), data=H * W * 3) as marker:
        marker.data[:] = 4
    spin_until(node, lambda: len(got) >= 2)
    assert [int(m.data[0]) for m in got] == [9, 4]
    assert (got[0].data == 9).all()


def test_a_view_that_outlives_a_released_loan_stays_valid(node):
    pub = node.create_publisher(Image, "image", 2)
    loan = pub.loan(image(), data=1024)
    view = loan.data
    loan.release()
    assert not loan.open
    # The chunk stays the view's until it dies (never reused under it).
    view[:] = 5
    assert (view == 5).all()
    del view
    gc.collect()
    # The pool has the chunk back: loans keep working.
    for _ in range(64):
        with pub.loan(image(), data=1024) as again:
            again.data[:] = 1


def test_float64_arrays_and_fields_around_a_loaned_array(node):
    Samples = load_msg(
        "pytest_msgs", "Samples", "string label\nuint32[] dims\nfloat64[] data\nint8 after\nstring tail"
    )
    got = []
    node.create_subscription(Samples, "values", got.append, 2)
    pub = node.create_publisher(Samples, "values", 2)
    msg = Samples(label="x", dims=numpy.array([10, 100], dtype=numpy.uint32), tail="tail")
    with pub.loan(msg, data=1000) as loan:
        values = loan.data
        assert values.dtype == numpy.float64 and values.shape == (1000,)
        values[:] = numpy.arange(1000) / 8
        del values
        # Numbers may change; strings and sequences only keep their
        # length (the chunk's length and the array's place depend on it).
        loan.msg.after = -3
        loan.msg.tail = "same"
    spin_until(node, lambda: got)
    assert numpy.array_equal(got[0].data, numpy.arange(1000) / 8)
    assert got[0].label == "x" and list(got[0].dims) == [10, 100]
    assert got[0].after == -3 and got[0].tail == "same"

    # Two arrays of one message, one of them fixed-size.
    infos = []
    node.create_subscription(CameraInfo, "info", infos.append, 2)
    info_pub = node.create_publisher(CameraInfo, "info", 2)
    with info_pub.loan(CameraInfo(distortion_model="plumb_bob"), d=5, k=9) as loan:
        loan.d[:] = [1, 2, 3, 4, 5]
        loan.k[:] = numpy.eye(3).ravel()
    spin_until(node, lambda: infos)
    assert list(infos[0].d) == [1, 2, 3, 4, 5]
    assert numpy.array_equal(infos[0].k, numpy.eye(3).ravel())
    assert infos[0].distortion_model == "plumb_bob"


def test_bad_loans_raise_with_the_field_named(node):
    pub = node.create_publisher(Image, "image", 2)
    with pytest.raises(ValueError, match='no field named "pixels"'):
        pub.loan(image(), pixels=10)
    with pytest.raises(TypeError, match="Image.height: not an array"):
        pub.loan(image(), height=10)
    with pytest.raises(TypeError, match="only arrays of numbers"):
        pub.loan(image(), encoding=10)
    with pytest.raises(TypeError):
        pub.loan(CameraInfo(), data=10)  # not the publisher's type
    info = node.create_publisher(CameraInfo, "info", 2)
    with pytest.raises(ValueError, match="exactly 9 elements, got 4"):
        info.loan(CameraInfo(), k=4)
    Bounded = load_msg("pytest_msgs", "Bounded", "uint8[<=8] data")
    bounded = node.create_publisher(Bounded, "bounded", 2)
    with pytest.raises(ValueError, match="at most 8 elements, got 9"):
        bounded.loan(Bounded(), data=9)
    with pytest.raises(ValueError, match="do not fit CDR"):
        pub.loan(image(), data=2**33)
    # Absurd but representable: the pool says no, as a publish would.
    with pytest.raises(Exception, match="shared memory|memory"):
        pub.loan(image(), data=2**32 - 1)

    # A string that changes length would move the array or outgrow the
    # chunk: the publish refuses, the loan stays open, and fixing it lets
    # it go.
    loan = pub.loan(image(), data=16)
    loan.msg.encoding = "a much longer encoding name"
    with pytest.raises(ValueError, match="changed length after loan"):
        loan.publish()
    assert loan.open
    loan.msg.encoding = "rgb8"
    loan.data[:] = 0
    loan.publish()
    with pytest.raises(AttributeError, match="not an array this loan fills"):
        pub.loan(image(), data=16).height_view


LOANED_CAMERA = """
import numpy, myelin
from myelin.msgs.sensor_msgs.msg import Image
myelin.init()
node = myelin.create_node("py_loaned_camera")
pub = node.create_publisher(Image, "image", 2)
h, w = 1080, 1440
frame = numpy.arange(h * w * 3, dtype=numpy.uint64).astype(numpy.uint8)
seq = 0
def tick():
    global seq
    seq += 1
    img = Image(height=h, width=w, encoding="rgb8", step=w * 3)
    img.header.frame_id = str(seq)
    with pub.loan(img, data=h * w * 3) as loan:
        numpy.copyto(loan.data, frame)
node.create_timer(0.05, tick)
try:
    myelin.spin(node)
except KeyboardInterrupt:
    pass
"""


def test_a_loaned_4_6_mb_image_from_another_python_process_is_read_in_place(node, domain):
    child = python_child(LOANED_CAMERA, domain)
    try:
        check_frames_read_in_place(node)
    finally:
        out, err = stop(child)
    assert "Traceback" not in err, err

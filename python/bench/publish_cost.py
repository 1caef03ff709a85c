"""CPU cost of one publish from Python, in process (no subscriber): a
64 B and a 4.6 MB ``sensor_msgs/Image`` by ``publish()`` (encoded, the
array copied into the chunk) and by a loan (``with pub.loan(...)``, the
array left to fill in place).

    python python/bench/publish_cost.py [--calls 20000]
"""

import argparse
import os
import time

import numpy

import myelin
from myelin.msgs.sensor_msgs.msg import Image

FRAME = 1440 * 1080 * 3


def per_call(f, calls):
    """Mean ns per call of ``f`` over ``calls`` calls, after 1,000 of
    warm-up."""
    for _ in range(min(calls, 1000)):
        f()
    t0 = time.perf_counter_ns()
    for _ in range(calls):
        f()
    return (time.perf_counter_ns() - t0) / calls


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=20000)
    a = ap.parse_args()
    os.environ["MYELIN_TRANSPORT"] = "shm"
    myelin.init(domain_id=150 + os.getpid() % 50, network=False)
    node = myelin.create_node("publish_cost")
    pub = node.create_publisher(Image, "frames", 2)

    def image(size):
        return Image(encoding="mono8", height=1, width=size, step=size, data=numpy.zeros(size, dtype=numpy.uint8))

    def loaned(header, size):
        with pub.loan(header, data=size):
            pass

    for label, size, calls in (("64 B", 64, a.calls), ("4.6 MB", FRAME, max(50, a.calls // 100))):
        img = image(size)
        plain = per_call(lambda: pub.publish(img), calls)
        loan = per_call(lambda: loaned(img, size), calls)
        print(f"{label:7} publish() {plain / 1e3:9.2f} us   loan {loan / 1e3:7.2f} us   ({calls} calls)")
    myelin.shutdown()


if __name__ == "__main__":
    main()

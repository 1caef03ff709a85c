"""Python callback throughput between two processes: how many 64 B
messages a Python subscription's callback takes per second, and the
subscriber process's CPU per message, myelin vs eclipse-zenoh's Python API.

A child process publishes as fast as it can; this process counts
callbacks for `--seconds` after a warm-up second. myelin: a
std_msgs/String over shared memory, reliable keep-all (the publisher
waits for room, so nothing is lost and the rate is the slower side's);
the callback gets the decoded message. zenoh-python: raw bytes between
two peers on loopback TCP (scouting off); the callback gets the sample.
The `myelin-raw` row is myelin with `raw=True` (the callback gets the CDR
bytes, as zenoh's gets its payload).

    python python/bench/throughput.py [--seconds 3]
"""

import argparse
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from pingpong import zenoh_session  # noqa: E402

PAYLOAD = "x" * 56  # 64 B of CDR with the header and the length


def myelin_flood(domain):
    import myelin
    from myelin.msgs.std_msgs.msg import String
    from myelin.qos import HistoryPolicy, QoSProfile

    myelin.init(domain_id=domain, network=False)
    node = myelin.create_node("flood")
    pub = node.create_publisher(String, "flood", QoSProfile(history=HistoryPolicy.KEEP_ALL))
    while pub.get_subscription_count() == 0:
        time.sleep(0.01)
    print("ready", flush=True)
    msg = String(data=PAYLOAD)
    while True:
        try:
            pub.publish(msg)
        except myelin.MyelinError:
            pass  # the subscriber's queue stayed full: try again


def myelin_count(domain, raw=False):
    """A subscription counting callbacks, and how to run it (`spin`, until
    `stop` is called from another thread)."""
    import myelin
    from myelin.msgs.std_msgs.msg import String
    from myelin.qos import HistoryPolicy, QoSProfile

    myelin.init(domain_id=domain, network=False)
    node = myelin.create_node("count")
    n = [0]

    def cb(msg):
        n[0] += 1

    node.create_subscription(String, "flood", cb, QoSProfile(history=HistoryPolicy.KEEP_ALL), raw=raw)
    ex = myelin.SingleThreadedExecutor()
    ex.add_node(node)
    # What users run: spin() until the context shuts down.
    return ex.spin, myelin.shutdown, n


def zenoh_flood(port):
    s = zenoh_session([], [f"tcp/127.0.0.1:{port}"])
    pub = s.declare_publisher("bench/flood")
    payload = PAYLOAD.encode().ljust(64, b"\0")
    print("ready", flush=True)
    while True:
        pub.put(payload)


def zenoh_count(port):
    s = zenoh_session([f"tcp/127.0.0.1:{port}"], [])
    n = [0]

    def cb(sample):
        n[0] += 1

    sub = s.declare_subscriber("bench/flood", cb)
    done = threading.Event()

    def run(keep=(s, sub)):  # the session and subscriber live as long as this
        done.wait()

    return run, done.set, n


def run(system, seconds):
    """Callbacks per second and the subscriber's CPU per message, over
    `seconds` after a warm-up second."""
    # A domain per row: endpoints of a shut-down context may still be
    # announced for a moment, and a keep-all publisher would wait on them.
    domain = 150 + (os.getpid() + len(system)) % 50
    port = 18500 + os.getpid() % 1000
    env = dict(os.environ, MYELIN_TRANSPORT="shm")
    os.environ["MYELIN_TRANSPORT"] = "shm"
    ours = system.startswith("myelin")
    arg = domain if ours else port
    if ours:
        spin, stop, n = myelin_count(arg, raw=system == "myelin-raw")
    else:
        spin, stop, n = zenoh_count(arg)
    child = subprocess.Popen(
        [sys.executable, __file__, "--flood", "myelin" if ours else "zenoh", str(arg)],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    marks = []

    def sample():
        assert child.stdout.readline().strip() == "ready"
        for wait in (1.0, seconds):  # warm-up, then the window
            time.sleep(wait)
            marks.append((time.monotonic(), time.process_time(), n[0]))
        stop()

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        spin()
        sampler.join()
    finally:
        child.kill()
        child.wait()
    (t0, c0, n0), (t1, c1, n1) = marks
    got = n1 - n0
    return got / (t1 - t0), (c1 - c0) / max(got, 1) * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--flood", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.flood:
        system, arg = a.flood
        (myelin_flood if system == "myelin" else zenoh_flood)(int(arg))
        return
    rows = []
    for system in ("myelin", "myelin-raw", "zenoh-python"):
        print(f"{system} ...", file=sys.stderr, flush=True)
        rows.append((system, *run(system.removesuffix("-python"), a.seconds)))
    print(f"{'system':13} {'callbacks/s':>12} {'subscriber CPU/msg':>19}")
    for system, rate, cpu in rows:
        print(f"{system:13} {rate:12,.0f} {cpu:16.2f} us")


if __name__ == "__main__":
    main()

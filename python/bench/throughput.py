"""Python callback throughput between two processes: how many 64 B
messages a Python subscription's callback takes per second, and the
subscriber process's CPU per message, myelin vs eclipse-zenoh's and
CycloneDDS's Python APIs, and vs the Rust path.

A child process publishes as fast as it can; this process counts
callbacks for `--seconds` after a warm-up second. myelin: a
std_msgs/String over shared memory, reliable keep-all (the publisher
waits for room, so nothing is lost and the rate is the slower side's);
the callback gets the decoded message. zenoh-python: raw bytes between
two peers on loopback TCP (scouting off); the callback gets the sample.
The `myelin-raw` row is myelin with `raw=True` (the callback gets the CDR
bytes, as zenoh's gets its payload). The `myelin-rust` row is the Rust
path: the same Python flood, counted by a Rust subscription's callback
(`cargo build --release -p myelin --example count_callbacks`; its CPU read
from /proc). CycloneDDS (`cyclonedds` on PyPI, when installed): a struct
with a sequence<uint8> of 56 bytes, reliable keep-all on `lo`; its
listener takes what is there and counts each sample as a callback.

    python python/bench/throughput.py [--seconds 3] [--json out.jsonl]
"""

import argparse
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from pingpong import CYCLONE_XML, cyclone_types, zenoh_session  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COUNT_BIN = os.environ.get(
    "MYELIN_COUNT_CALLBACKS", os.path.join(REPO, "target", "release", "examples", "count_callbacks")
)

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


def cyclone_qos():
    from cyclonedds.core import Policy, Qos

    return Qos(Policy.Reliability.Reliable(max_blocking_time=1_000_000_000), Policy.History.KeepAll)


def cyclone_flood(domain):
    from cyclonedds.domain import DomainParticipant
    from cyclonedds.pub import DataWriter
    from cyclonedds.topic import Topic

    Frame = cyclone_types()
    dp = DomainParticipant(domain)
    writer = DataWriter(dp, Topic(dp, "flood", Frame), qos=cyclone_qos())
    sample = Frame(data=[0] * 56)
    print("ready", flush=True)
    while True:
        writer.write(sample)


def cyclone_count(domain):
    from cyclonedds.core import Listener
    from cyclonedds.domain import DomainParticipant
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic

    n = [0]
    made = {}

    class Count(Listener):
        def on_data_available(self, reader):
            # Called with None while the reader is being made.
            reader = reader or made.get("reader")
            if reader is not None:
                n[0] += len(reader.take(N=256))

    Frame = cyclone_types()
    dp = DomainParticipant(domain)
    reader = DataReader(dp, Topic(dp, "flood", Frame), qos=cyclone_qos(), listener=Count())
    made["reader"] = reader
    done = threading.Event()

    def run(keep=(dp, reader)):  # they live as long as this
        done.wait()

    return run, done.set, n


def rust_count(domain):
    """The Rust path: a child process whose Rust callback counts; its
    count and CPU are read at each mark."""
    child = subprocess.Popen(
        [COUNT_BIN, str(domain)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout.readline().strip() == "ready"
    done = threading.Event()

    class Count:
        def __getitem__(self, _i):
            child.stdin.write("\n")
            child.stdin.flush()
            return int(child.stdout.readline())

    def cpu():
        with open(f"/proc/{child.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop():
        child.stdin.close()
        child.wait()
        done.set()

    return done.wait, stop, Count(), cpu


def run(system, seconds):
    """Callbacks per second and the subscriber's CPU per message, over
    `seconds` after a warm-up second."""
    # A domain per row: endpoints of a shut-down context may still be
    # announced for a moment, and a keep-all publisher would wait on them.
    domain = 150 + (os.getpid() + len(system)) % 50
    port = 18500 + os.getpid() % 1000
    env = dict(os.environ, MYELIN_TRANSPORT="shm")
    os.environ["MYELIN_TRANSPORT"] = "shm"
    env["CYCLONEDDS_URI"] = CYCLONE_XML
    os.environ["CYCLONEDDS_URI"] = CYCLONE_XML
    ours = system.startswith("myelin")
    arg = port if system == "zenoh" else domain
    cpu = time.process_time
    if system == "myelin-rust":
        spin, stop, n, cpu = rust_count(arg)
    elif ours:
        spin, stop, n = myelin_count(arg, raw=system == "myelin-raw")
    elif system == "zenoh":
        spin, stop, n = zenoh_count(arg)
    else:
        spin, stop, n = cyclone_count(arg)
    flood = "myelin" if ours else system
    child = subprocess.Popen(
        [sys.executable, __file__, "--flood", flood, str(arg)],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    marks = []

    def sample():
        assert child.stdout.readline().strip() == "ready"
        for wait in (1.0, seconds):  # warm-up, then the window
            time.sleep(wait)
            marks.append((time.monotonic(), cpu(), n[0]))
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
    ap.add_argument("--json", help="append one JSON record per row to this file")
    ap.add_argument("--flood", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.flood:
        system, arg = a.flood
        {"myelin": myelin_flood, "zenoh": zenoh_flood, "cyclonedds": cyclone_flood}[system](int(arg))
        return
    systems = ["myelin", "myelin-raw", "zenoh-python"]
    if os.path.exists(COUNT_BIN):
        systems.insert(2, "myelin-rust")
    else:
        print(f"no {COUNT_BIN}: the myelin-rust row is skipped", file=sys.stderr)
    try:
        import cyclonedds  # noqa: F401

        systems.append("cyclonedds-python")
    except ImportError:
        print("cyclonedds is not installed: pip install cyclonedds", file=sys.stderr)
    rows = []
    for system in systems:
        print(f"{system} ...", file=sys.stderr, flush=True)
        rows.append((system, *run(system.removesuffix("-python"), a.seconds)))
    print(f"{'system':17} {'callbacks/s':>12} {'subscriber CPU/msg':>19}")
    for system, rate, cpu in rows:
        print(f"{system:17} {rate:12,.0f} {cpu:16.2f} us")
        if a.json:
            import json

            with open(a.json, "a") as f:
                rec = {"bench": "throughput", "system": system, "callbacks_per_s": rate, "cpu_us_per_msg": cpu}
                f.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main()

"""Python ping-pong between two processes: myelin vs eclipse-zenoh and
CycloneDDS (their Python APIs).

One process publishes a ping and waits for its pong from an echo process;
the one-way latency is half the round trip. Payloads: 64 B and a 4.6 MB
frame (1440x1080 rgb8). myelin sends a sensor_msgs/Image (the echo
decodes it and publishes it back, as a user's node would); zenoh-python
sends the same number of raw bytes (as its users do); CycloneDDS's
Python API (`cyclonedds` on PyPI) a struct with a sequence<uint8> of that
size. All on this host only: myelin over shared memory, zenoh peers on
loopback TCP with scouting off, CycloneDDS on `lo` with multicast off
(the same configuration as `myelin bench`'s ddsperf).

    python python/bench/pingpong.py [--rounds 2000] [--json out.jsonl]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

SIZES = {"64 B": 64, "4.6 MB": 1440 * 1080 * 3}


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def time_rounds(rounds, send, wait):
    """One-way latencies (half of each round trip) of ``rounds`` round
    trips after ``rounds // 10`` of warm-up: ``send()`` a ping, ``wait()``
    for its pong."""
    samples = []
    for i in range(rounds + rounds // 10):
        t0 = time.perf_counter_ns()
        send()
        wait()
        t1 = time.perf_counter_ns()
        if i >= rounds // 10:
            samples.append((t1 - t0) / 2)
    return samples


def until_echoed(send, arrived):
    """Ping until the echo answers (it may not have matched yet)."""
    while True:
        arrived.clear()
        send()
        if arrived.wait(0.2):
            return


# ---------------------------------------------------------------- myelin


def myelin_image(size):
    import numpy
    from myelin.msgs.sensor_msgs.msg import Image

    img = Image(encoding="mono8", height=1, width=size, step=size)
    img.data = numpy.zeros(size, dtype=numpy.uint8)
    return img


def loaned(pub, header, size):
    """Publish a loaned frame of ``size`` bytes with ``header``'s other
    fields, its bytes left as the chunk holds them (a camera driver would
    write them in place): no copy anywhere."""
    with pub.loan(header, data=size):
        pass


def myelin_echo(domain, loan=False):
    import myelin
    from myelin.msgs.sensor_msgs.msg import Image

    myelin.init(domain_id=domain, network=False)
    node = myelin.create_node("echo")
    pong = node.create_publisher(Image, "pong", 2)
    if loan:
        # Answer with a loaned frame of the size received (a node that
        # makes a frame of its own), rather than copying the one read.
        header = myelin_image(0)
        node.create_subscription(Image, "ping", lambda m: loaned(pong, header, len(m.data)), 2)
    else:
        node.create_subscription(Image, "ping", pong.publish, 2)
    print("ready", flush=True)
    try:
        myelin.spin(node)
    except KeyboardInterrupt:
        pass


def myelin_ping(domain, size, rounds, loan=False):
    import myelin
    from myelin.msgs.sensor_msgs.msg import Image

    myelin.init(domain_id=domain, network=False)
    node = myelin.create_node("ping")
    ping = node.create_publisher(Image, "ping", 2)
    got = []
    node.create_subscription(Image, "pong", got.append, 2)
    ex = myelin.SingleThreadedExecutor()
    ex.add_node(node)
    while ping.get_subscription_count() == 0 or node._subscriptions[0].get_publisher_count() == 0:
        time.sleep(0.01)
    msg = myelin_image(size)

    def send():
        got.clear()
        if loan:
            loaned(ping, msg, size)
        else:
            ping.publish(msg)

    def wait():
        while not got:
            ex.spin_once(timeout_sec=5.0)

    samples = time_rounds(rounds, send, wait)
    myelin.shutdown()
    return samples


# ------------------------------------------------------------------ zenoh


def zenoh_session(listen, connect):
    import zenoh

    conf = zenoh.Config()
    conf.insert_json5("mode", '"peer"')
    conf.insert_json5("scouting/multicast/enabled", "false")
    conf.insert_json5("scouting/gossip/enabled", "false")
    conf.insert_json5("listen/endpoints", json.dumps(listen))
    conf.insert_json5("connect/endpoints", json.dumps(connect))
    return zenoh.open(conf)


def zenoh_echo(port):
    import threading

    s = zenoh_session([f"tcp/127.0.0.1:{port}"], [])
    pub = s.declare_publisher("bench/pong")
    s.declare_subscriber("bench/ping", lambda sample: pub.put(sample.payload))
    print("ready", flush=True)
    threading.Event().wait()


def zenoh_ping(port, size, rounds):
    import threading

    s = zenoh_session([], [f"tcp/127.0.0.1:{port}"])
    pub = s.declare_publisher("bench/ping")
    arrived = threading.Event()
    s.declare_subscriber("bench/pong", lambda sample: arrived.set())
    payload = bytes(size)

    def send():
        arrived.clear()
        pub.put(payload)

    until_echoed(lambda: pub.put(payload), arrived)
    samples = time_rounds(rounds, send, lambda: arrived.wait(5.0))
    s.close()
    return samples


# -------------------------------------------------------------- CycloneDDS

CYCLONE_XML = """<CycloneDDS><Domain id="any">
  <General><Interfaces><NetworkInterface name="lo"/></Interfaces>
  <AllowMulticast>false</AllowMulticast></General>
  <Discovery><ParticipantIndex>auto</ParticipantIndex>
  <MaxAutoParticipantIndex>20</MaxAutoParticipantIndex>
  <Peers><Peer address="127.0.0.1"/></Peers></Discovery>
</Domain></CycloneDDS>"""


def cyclone_types():
    from dataclasses import dataclass

    from cyclonedds.idl import IdlStruct
    from cyclonedds.idl.types import sequence, uint8

    # Its Python API serialises a sequence<uint8> element by element
    # (about 175 ms for 4.6 MB here; sequence[byte] and int8 alike, and a
    # `bytes` field cannot make a topic's type object).
    @dataclass
    class Frame(IdlStruct, typename="bench::Frame"):
        data: sequence[uint8]

    return Frame


def cyclone_endpoints(domain, out_topic, in_topic, listener=None):
    from cyclonedds.core import Qos, Policy
    from cyclonedds.domain import DomainParticipant
    from cyclonedds.pub import DataWriter
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic

    Frame = cyclone_types()
    qos = Qos(Policy.Reliability.Reliable(max_blocking_time=1_000_000_000), Policy.History.KeepLast(2))
    dp = DomainParticipant(domain)
    writer = DataWriter(dp, Topic(dp, out_topic, Frame), qos=qos)
    reader = DataReader(dp, Topic(dp, in_topic, Frame), qos=qos, listener=listener)
    return Frame, dp, writer, reader


def cyclone_echo(domain):
    import threading

    from cyclonedds.core import Listener

    state = {}

    class Echo(Listener):
        def on_data_available(self, reader):
            for sample in reader.take():
                # Skip the invalid sample a disposed writer leaves.
                if hasattr(sample, "data"):
                    state["writer"].write(sample)

    _, dp, writer, reader = cyclone_endpoints(domain, "pong", "ping", Echo())
    state["writer"] = writer
    print("ready", flush=True)
    threading.Event().wait()


def cyclone_ping(domain, size, rounds):
    import threading

    from cyclonedds.core import Listener

    arrived = threading.Event()

    class Pong(Listener):
        def on_data_available(self, reader):
            reader.take()
            arrived.set()

    Frame, dp, writer, reader = cyclone_endpoints(domain, "ping", "pong", Pong())
    frame = Frame(data=[0] * size)

    def send():
        arrived.clear()
        writer.write(frame)

    until_echoed(lambda: writer.write(frame), arrived)
    return time_rounds(rounds, send, lambda: arrived.wait(5.0))

def run(system, size, rounds):
    domain = 150 + os.getpid() % 50
    port = 17500 + os.getpid() % 1000
    env = dict(os.environ, MYELIN_TRANSPORT="shm", CYCLONEDDS_URI=CYCLONE_XML)
    os.environ["CYCLONEDDS_URI"] = CYCLONE_XML
    arg = str(port if system == "zenoh" else domain)
    echo = subprocess.Popen(
        [sys.executable, __file__, "--echo", system.removesuffix("-loan"), arg]
        + (["--loan"] if system == "myelin-loan" else []),
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert echo.stdout.readline().strip() == "ready"
        if system.startswith("myelin"):
            os.environ["MYELIN_TRANSPORT"] = "shm"
            return myelin_ping(domain, size, rounds, loan=system == "myelin-loan")
        if system == "cyclonedds":
            return cyclone_ping(domain, size, rounds)
        return zenoh_ping(port, size, rounds)
    finally:
        echo.kill()
        echo.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2000)
    ap.add_argument("--json", help="append one JSON record per row to this file")
    ap.add_argument("--echo", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--loan", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.echo:
        system, arg = a.echo
        if system == "myelin":
            myelin_echo(int(arg), loan=a.loan)
            return
        {"zenoh": zenoh_echo, "cyclonedds": cyclone_echo}[system](int(arg))
        return
    try:
        import cyclonedds  # noqa: F401

        systems = ("myelin", "myelin-loan", "zenoh-python", "cyclonedds-python")
    except ImportError:
        print("cyclonedds is not installed: pip install cyclonedds", file=sys.stderr)
        systems = ("myelin", "myelin-loan", "zenoh-python")
    rows = []
    for label, size in SIZES.items():
        for system in systems:
            rounds = a.rounds if size < 10_000 else max(50, a.rounds // 10)
            print(f"{system:17} {label:7} {rounds} rounds ...", file=sys.stderr, flush=True)
            xs = run(system.removesuffix("-python"), size, rounds)
            rows.append((label, system, statistics.median(xs) / 1e3, pct(xs, 90) / 1e3, len(xs)))
    print(f"{'payload':8} {'system':17} {'one-way P50':>12} {'P90':>10} {'samples':>8}")
    for label, system, p50, p90, n in rows:
        print(f"{label:8} {system:17} {p50:9.1f} us {p90:7.1f} us {n:8}")
    for label in SIZES:
        m = next(r for r in rows if r[0] == label and r[1] == "myelin")
        for other in systems[2:]:
            o = next(r for r in rows if r[0] == label and r[1] == other)
            print(f"{label}: myelin / {other} P50 = {m[2] / o[2]:.2f}")
    for system in ("myelin", "myelin-loan"):
        small = next(r for r in rows if r[0] == "64 B" and r[1] == system)
        big = next(r for r in rows if r[0] == "4.6 MB" and r[1] == system)
        print(f"{system} 4.6 MB - 64 B P50 = {big[2] - small[2]:.1f} us (the goal: <= 10 us, no copy)")
    if a.json:
        with open(a.json, "a") as f:
            for label, system, p50, p90, n in rows:
                f.write(json.dumps({"payload": label, "system": system, "p50_us": p50, "p90_us": p90, "samples": n}) + "\n")


if __name__ == "__main__":
    main()

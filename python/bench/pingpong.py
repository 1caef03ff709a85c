"""Python ping-pong between two processes: myelin vs eclipse-zenoh.

One process publishes a ping and waits for its pong from an echo process;
the one-way latency is half the round trip. Payloads: 64 B and a 4.6 MB
frame (1440x1080 rgb8). myelin sends a sensor_msgs/Image (the echo
decodes it and publishes it back, as a user's node would); zenoh-python
sends the same number of raw bytes (as its users do). Both on this host
only: myelin over shared memory, zenoh peers on loopback TCP with
scouting off.

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


# ---------------------------------------------------------------- myelin


def myelin_image(size):
    import numpy
    from myelin.msgs.sensor_msgs.msg import Image

    img = Image(encoding="mono8", height=1, width=size, step=size)
    img.data = numpy.zeros(size, dtype=numpy.uint8)
    return img


def myelin_echo(domain):
    import myelin
    from myelin.msgs.sensor_msgs.msg import Image

    myelin.init(domain_id=domain, network=False)
    node = myelin.create_node("echo")
    pong = node.create_publisher(Image, "pong", 2)
    node.create_subscription(Image, "ping", pong.publish, 2)
    print("ready", flush=True)
    try:
        myelin.spin(node)
    except KeyboardInterrupt:
        pass


def myelin_ping(domain, size, rounds):
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
    samples = []
    for i in range(rounds + rounds // 10):
        got.clear()
        t0 = time.perf_counter_ns()
        ping.publish(msg)
        while not got:
            ex.spin_once(timeout_sec=5.0)
        t1 = time.perf_counter_ns()
        if i >= rounds // 10:
            samples.append((t1 - t0) / 2)
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
    # Wait until the echo answers.
    while True:
        arrived.clear()
        pub.put(payload)
        if arrived.wait(0.2):
            break
    samples = []
    for i in range(rounds + rounds // 10):
        arrived.clear()
        t0 = time.perf_counter_ns()
        pub.put(payload)
        arrived.wait(5.0)
        t1 = time.perf_counter_ns()
        if i >= rounds // 10:
            samples.append((t1 - t0) / 2)
    s.close()
    return samples


def run(system, size, rounds):
    domain = 150 + os.getpid() % 50
    port = 17500 + os.getpid() % 1000
    env = dict(os.environ, MYELIN_TRANSPORT="shm")
    arg = str(domain if system == "myelin" else port)
    echo = subprocess.Popen(
        [sys.executable, __file__, "--echo", system, arg],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert echo.stdout.readline().strip() == "ready"
        if system == "myelin":
            os.environ["MYELIN_TRANSPORT"] = "shm"
            return myelin_ping(domain, size, rounds)
        return zenoh_ping(port, size, rounds)
    finally:
        echo.kill()
        echo.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2000)
    ap.add_argument("--json", help="append one JSON record per row to this file")
    ap.add_argument("--echo", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.echo:
        system, arg = a.echo
        (myelin_echo if system == "myelin" else zenoh_echo)(int(arg))
        return
    rows = []
    for label, size in SIZES.items():
        for system in ("myelin", "zenoh-python"):
            rounds = a.rounds if size < 10_000 else max(50, a.rounds // 10)
            print(f"{system:13} {label:7} {rounds} rounds ...", file=sys.stderr, flush=True)
            xs = run("myelin" if system == "myelin" else "zenoh", size, rounds)
            rows.append((label, system, statistics.median(xs) / 1e3, pct(xs, 90) / 1e3, len(xs)))
    print(f"{'payload':8} {'system':13} {'one-way P50':>12} {'P90':>10} {'samples':>8}")
    for label, system, p50, p90, n in rows:
        print(f"{label:8} {system:13} {p50:9.1f} us {p90:7.1f} us {n:8}")
    for label in SIZES:
        m = next(r for r in rows if r[0] == label and r[1] == "myelin")
        z = next(r for r in rows if r[0] == label and r[1] == "zenoh-python")
        print(f"{label}: myelin / zenoh-python P50 = {m[2] / z[2]:.2f}")
    if a.json:
        with open(a.json, "a") as f:
            for label, system, p50, p90, n in rows:
                f.write(json.dumps({"payload": label, "system": system, "p50_us": p50, "p90_us": p90, "samples": n}) + "\n")


if __name__ == "__main__":
    main()

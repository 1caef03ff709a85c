"""The Python bindings' benchmark in one run: Python pub -> Python sub
one-way latency at 64 B and 4.6 MB (myelin's publish and loan,
eclipse-zenoh's and CycloneDDS's Python APIs), Python callback throughput
(the same systems and the Rust path), and the Rust path's latency
(`myelin perf` between two processes over shared memory), one after the
other on one machine; then the table and the two goals:

- 64 B one way: myelin within 2x of zenoh-python (P50);
- 4.6 MB one way (loaned: no copy) no slower than 64 B published + 10 us
  (P50).

    cargo build --release -p myelin-cli -p myelin --example count_callbacks
    python python/bench/acceptance.py [--rounds 2000] [--seconds 3]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
MYELIN = os.environ.get("MYELIN_CLI", os.path.join(REPO, "target", "release", "myelin"))


def rust_perf(size, seconds):
    """P50 and P90 one way (us) of `myelin perf ping` against a `perf pong`
    child, both blocking, over shared memory."""
    domain = str(150 + os.getpid() % 50)
    pong = subprocess.Popen([MYELIN, "perf", "pong", "--domain", domain], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        out = subprocess.run(
            [MYELIN, "perf", "ping", "--domain", domain, "--size", str(size), "--duration", str(seconds)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    finally:
        pong.kill()
        pong.wait()
    row = next(line.split() for line in out.splitlines() if line.rstrip().endswith("all"))
    return float(row[4]), float(row[5])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2000)
    ap.add_argument("--seconds", type=float, default=3.0)
    a = ap.parse_args()
    records = tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False).name
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    py = sys.executable
    subprocess.run([py, os.path.join(HERE, "pingpong.py"), "--rounds", str(a.rounds), "--json", records], check=True)
    subprocess.run([py, os.path.join(HERE, "throughput.py"), "--seconds", str(a.seconds), "--json", records], check=True)
    rust = {}
    if os.path.exists(MYELIN):
        for label, size in (("64 B", 64), ("4.6 MB", 1440 * 1080 * 3)):
            print(f"myelin-rust perf {label} ...", file=sys.stderr, flush=True)
            rust[label] = rust_perf(size, max(2, int(a.seconds)))
    else:
        print(f"no {MYELIN}: the Rust latency rows are skipped", file=sys.stderr)
    with open(records) as f:
        rows = [json.loads(line) for line in f]
    os.unlink(records)
    lat = {(r["payload"], r["system"]): r for r in rows if "payload" in r}
    thr = [r for r in rows if r.get("bench") == "throughput"]
    print(f"\n# One run, started {started}, nproc {os.cpu_count()}")
    print(f"{'one way':8} {'system':17} {'P50 us':>9} {'P90 us':>9}")
    for (label, system), r in lat.items():
        print(f"{label:8} {system:17} {r['p50_us']:9.1f} {r['p90_us']:9.1f}")
    for label, (p50, p90) in rust.items():
        print(f"{label:8} {'rust (perf)':17} {p50:9.1f} {p90:9.1f}")
    print(f"\n{'callbacks':17} {'per s':>12} {'CPU/msg us':>11}")
    for r in thr:
        print(f"{r['system']:17} {r['callbacks_per_s']:12,.0f} {r['cpu_us_per_msg']:11.2f}")
    ok = True
    m64, z64 = lat[("64 B", "myelin")]["p50_us"], lat[("64 B", "zenoh-python")]["p50_us"]
    good = m64 <= 2 * z64
    ok &= good
    print(f"\n64 B: myelin {m64:.1f} us vs zenoh-python {z64:.1f} us = {m64 / z64:.2f}x (goal <= 2x): {'met' if good else 'NOT met'}")
    # Against the fastest 64 B path (publish, not a loan).
    small, big = lat[("64 B", "myelin")]["p50_us"], lat[("4.6 MB", "myelin-loan")]["p50_us"]
    good = big <= small + 10
    ok &= good
    print(f"4.6 MB loaned {big:.1f} us vs 64 B published {small:.1f} us + 10 (goal): {'met' if good else 'NOT met'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

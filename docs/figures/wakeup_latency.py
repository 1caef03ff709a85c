"""Plot two `myelin bench --json` reports of the same build, one run
without and one with `--cpu-wakeup-latency 0`: P50 and P90 of the rows
whose cost is a wake-up. Usage:
python wakeup_latency.py OFF.json ON.json OUT.png"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

# (scenario, system, config, label); relay rows are the 5-hop chain end to end.
ROWS = [
    ("image", "raw", "futex-handoff 30Hz", "raw futex hand-off, 30 Hz"),
    ("image", "myelin", "callback 1440x1080", "executor callback, 30 Hz"),
    ("image", "myelin", "waiter 1440x1080", "wait_for_message, 30 Hz"),
    ("image", "myelin", "anticipate 1440x1080", "IdleWait::Anticipate, 30 Hz"),
    ("image", "myelin", "inline 1440x1080", "inline callback (publisher's wake-up), 30 Hz"),
    ("relay", "raw", "futex-handoff 100Hz", "raw futex hand-off, 100 Hz"),
    ("relay", "myelin", "thread-per-node 100Hz 64B", "relay, thread per node, 100 Hz (5 hops)"),
    ("relay", "myelin", "single-threaded 100Hz 64B", "relay, one executor, 100 Hz (5 hops)"),
    ("relay", "zenoh", "shared-session 100Hz 64B", "relay, zenoh one session, 100 Hz (5 hops)"),
]


def load(path):
    with open(path) as f:
        report = json.load(f)
    return {(r["scenario"], r["system"], r["config"]): r["latency_ns"] for r in report["records"]}


off, on = load(sys.argv[1]), load(sys.argv[2])
rows = [r for r in ROWS if r[:3] in off and r[:3] in on]
fig, ax = plt.subplots(figsize=(10, 0.55 * len(rows) + 1.4))
y = list(range(len(rows)))
h = 0.38
for shift, data, colour, name in [(-h / 2, off, "tab:grey", "idle CPUs halt"), (h / 2, on, "tab:blue", "idle CPUs poll (--cpu-wakeup-latency 0)")]:
    p50 = [data[r[:3]]["p50"] / 1000 for r in rows]
    p90 = [data[r[:3]]["p90"] / 1000 for r in rows]
    ax.barh([v + shift for v in y], p90, height=h, color=colour, alpha=0.35)
    ax.barh([v + shift for v in y], p50, height=h, color=colour, label=f"{name}: P50 (P90 light)")
ax.set_yticks(y)
ax.set_yticklabels([r[3] for r in rows])
ax.invert_yaxis()
ax.set_xscale("log")
ax.set_xlabel("latency (us, log scale)")
ax.set_title("A wake-up on a 2-vCPU VM: the halted idle vCPU is most of it")
ax.grid(True, axis="x", which="both", alpha=0.3)
ax.legend(loc="upper center", bbox_to_anchor=(0.4, -0.1), ncol=2, fontsize=8, frameon=False)
fig.tight_layout()
fig.savefig(sys.argv[3], dpi=110)

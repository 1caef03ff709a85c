"""Plot the output of `cargo run --release -p myelin --example keep_all_pacing`
(with and without `nowait`): a slow reliable keep_all reader sets the
writer's pace. Usage: python keep_all_pacing.py WAIT.csv NOWAIT.csv OUT.png"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import matplotlib.ticker


def load(path):
    with open(path) as f:
        return list(csv.DictReader(f))


wait, nowait = load(sys.argv[1]), load(sys.argv[2])
fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
r = [float(x["reader_hz"]) for x in wait]
a.plot(r, r, "--", color="grey", label="writer = reader")
a.plot(r, [float(x["writer_hz"]) for x in wait], "o-", label="writer, max_blocking_time 1 s")
a.set_xscale("log")
a.set_yscale("log")
a.set_xlabel("reader's rate (messages/s)")
a.set_ylabel("writer's achieved rate (messages/s)")
a.set_title("The slow reader sets the writer's pace")
a.legend()
a.grid(True, which="both", alpha=0.3)


def pct(rows, key):
    return [100.0 * float(x[key]) / (float(x["published_ok"]) + float(x["refused"])) for x in rows]


b.plot(r, pct(wait, "received"), "o-", label="received, waiting (1 s)")
b.plot(r, pct(wait, "lost"), "o-", label="lost, waiting (1 s)")
b.plot(r, pct(nowait, "received"), "s--", label="received, no wait (refused at once)")
b.plot(r, pct(nowait, "refused"), "s--", label="refused, no wait")
b.set_xscale("log")
b.set_ylim(-5, 105)
b.set_xlabel("reader's rate (messages/s)")
b.set_ylabel("% of the writer's messages")
b.set_title("Nothing lost when the writer may wait")
b.legend(fontsize=8)
b.grid(True, which="both", alpha=0.3)
for ax in (a, b):
    ax.set_xticks(r)
    ax.set_xticklabels([f"{int(x)}" for x in r])
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
a.set_yticks(r)
a.set_yticklabels([f"{int(x)}" for x in r])
a.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
fig.suptitle("Reliable keep_all across processes (shared memory, depth 16), 2 s per rate")
fig.tight_layout()
fig.savefig(sys.argv[3], dpi=110)

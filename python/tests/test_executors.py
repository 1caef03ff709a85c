"""The multi-threaded executor: callbacks of different nodes overlap."""

import threading
import time

import pytest

import myelin
from myelin.executors import MultiThreadedExecutor, SingleThreadedExecutor
from myelin.msgs.example_interfaces.srv import AddTwoInts


def test_a_blocked_callback_does_not_stop_another_nodes_callbacks(ctx):
    a = myelin.create_node("blocker", context=ctx)
    b = myelin.create_node("helper", context=ctx)
    released = threading.Event()
    outcome = []

    def block():
        # Waits (GIL released) for the other node's timer: only a second
        # worker thread can run it meanwhile.
        outcome.append(released.wait(timeout=30))
        timer_a.cancel()

    timer_a = a.create_timer(0.01, block)
    b.create_timer(0.01, released.set)
    ex = MultiThreadedExecutor(num_threads=2, context=ctx)
    assert ex.num_threads == 2
    ex.add_node(a)
    ex.add_node(b)
    while not outcome:
        ex.spin_once(timeout_sec=1.0)
    assert outcome == [True]
    ex.shutdown()


def test_service_call_completes_under_the_multi_threaded_executor(ctx):
    node = myelin.create_node("mt_adder", context=ctx)
    node.create_service(AddTwoInts, "add", lambda req, resp: AddTwoInts.Response(sum=req.a + req.b))
    client = node.create_client(AddTwoInts, "add")
    ex = MultiThreadedExecutor(context=ctx)
    ex.add_node(node)
    future = client.call_async(AddTwoInts.Request(a=1, b=2))
    ex.spin_until_future_complete(future, timeout_sec=30)
    assert future.result().sum == 3


@pytest.mark.parametrize("kind", ["single", "multi"])
def test_spin_returns_when_the_context_shuts_down(domain, monkeypatch, kind):
    monkeypatch.setenv("MYELIN_TRANSPORT", "shm")
    ctx = myelin.Context()
    ctx.init(domain_id=domain, network=False)
    node = myelin.create_node("spinner", context=ctx)
    ticks = []
    node.create_timer(0.01, lambda: ticks.append(1))
    ex = (SingleThreadedExecutor if kind == "single" else MultiThreadedExecutor)(context=ctx)
    ex.add_node(node)
    done = threading.Event()

    def run():
        ex.spin()
        done.set()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    while len(ticks) < 3:
        time.sleep(0.01)
    ctx.shutdown()
    assert done.wait(timeout=30), "spin() kept running after the context shut down"

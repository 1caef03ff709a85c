"""The multi-threaded executor: callbacks of different nodes overlap."""

import math
import os
import sys
import threading
import time

import pytest

import myelin
from myelin.executors import MultiThreadedExecutor, SingleThreadedExecutor
from myelin.msgs.example_interfaces.srv import AddTwoInts
from myelin.msgs.std_msgs.msg import Int32


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


def _two_timers_meet(ctx, group, patience):
    """Two timers of one node in ``group`` each wait (GIL released) at a
    barrier for the other; what each saw: True if they met."""
    node = myelin.create_node("grouped", context=ctx)
    barrier = threading.Barrier(2, timeout=patience)
    seen = []
    timers = {}

    def meet(which):
        timers[which].cancel()  # once each
        try:
            barrier.wait()
            seen.append(True)
        except threading.BrokenBarrierError:
            seen.append(False)

    for which in ("a", "b"):
        timers[which] = node.create_timer(0.01, lambda w=which: meet(w), callback_group=group)
    ex = MultiThreadedExecutor(num_threads=2, context=ctx)
    ex.add_node(node)
    end = time.monotonic() + 60  # a bound on a hang, not a speed expectation
    while len(seen) < 2:
        assert time.monotonic() < end, f"the timers ran {len(seen)} times"
        ex.spin_once(timeout_sec=1.0)
    ex.shutdown()
    return seen


def test_a_reentrant_group_lets_two_timers_of_one_node_overlap(ctx):
    from myelin.callback_groups import ReentrantCallbackGroup

    assert _two_timers_meet(ctx, ReentrantCallbackGroup(), patience=30) == [True, True]


def test_a_mutually_exclusive_group_never_lets_them_overlap(ctx):
    from myelin.callback_groups import MutuallyExclusiveCallbackGroup

    # The second callback can only start once the first gave up waiting.
    assert _two_timers_meet(ctx, MutuallyExclusiveCallbackGroup(), patience=0.5) == [False, False]


def test_a_callback_group_must_be_one(ctx):
    node = myelin.create_node("ungrouped", context=ctx)
    with pytest.raises(TypeError, match="CallbackGroup"):
        node.create_timer(1.0, lambda: None, callback_group="reentrant")


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


@pytest.mark.parametrize("kind", [SingleThreadedExecutor, MultiThreadedExecutor])
def test_an_anticipating_executor_runs_every_periodic_message(ctx, kind):
    node = myelin.create_node("anticipating", context=ctx)
    got = []
    node.create_subscription(Int32, "periodic", lambda m: got.append(m.data), 100)
    pub = node.create_publisher(Int32, "periodic", 100)
    ex = kind(context=ctx)
    ex.set_idle_wait("anticipate")
    ex.add_node(node)
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            ex.spin_once(timeout_sec=0.05)

    spinner = threading.Thread(target=spin)
    spinner.start()
    for i in range(40):
        pub.publish(Int32(data=i))
        time.sleep(0.005)
    end = time.monotonic() + 60  # a bound on a hang, not a speed expectation
    while len(got) < 40 and time.monotonic() < end:
        time.sleep(0.01)
    stop.set()
    spinner.join()
    learned = ex.anticipation()
    ex.shutdown()
    assert got == list(range(40))
    assert set(learned) == {"period", "caught", "missed"}
    # Each burst found while the period was steady is caught or missed.
    assert 0 <= learned["caught"] + learned["missed"] <= 40
    assert learned["period"] is None or learned["period"] > 0


def test_a_new_executor_has_learned_nothing(ctx):
    for kind in (SingleThreadedExecutor, MultiThreadedExecutor):
        ex = kind(context=ctx)
        assert ex.anticipation() == {"period": None, "caught": 0, "missed": 0}
        ex.shutdown()


def test_an_unknown_idle_wait_is_refused(ctx):
    ex = SingleThreadedExecutor(context=ctx)
    with pytest.raises(ValueError, match="anticipate"):
        ex.set_idle_wait("sometimes")


def _policy_seen(ctx, configure):
    """Spin a 2-worker executor with a timer that records the CPUs and
    scheduling class of the thread it ran on; what it saw (or the
    exception spinning raised)."""
    node = myelin.create_node("rt", context=ctx)
    seen = []

    def tick():
        seen.append((os.sched_getaffinity(0), os.sched_getscheduler(0), os.sched_getparam(0).sched_priority))

    node.create_timer(0.001, tick)
    ex = MultiThreadedExecutor(num_threads=2, context=ctx)
    configure(ex)
    ex.add_node(node)
    end = time.monotonic() + 30
    while not seen and time.monotonic() < end:
        ex.spin_once(timeout_sec=0.1)
    ex.shutdown()
    return seen


def test_worker_threads_run_on_the_cpus_of_their_policy(ctx):
    before = os.sched_getaffinity(0)
    last = max(before)
    seen = _policy_seen(ctx, lambda ex: ex.set_thread_policy(cpus=[last]))
    assert seen and seen[0][0] == {last}
    # The thread that spun gets its own CPUs back.
    assert os.sched_getaffinity(0) == before


@pytest.mark.skipif(os.geteuid() != 0, reason="SCHED_FIFO needs root here")
def test_worker_threads_run_under_sched_fifo(ctx):
    seen = _policy_seen(ctx, lambda ex: ex.set_thread_policy(fifo=10))
    assert seen and seen[0][1:] == (os.SCHED_FIFO, 10)
    assert os.sched_getscheduler(0) == os.SCHED_OTHER


def test_an_absurd_priority_is_refused_at_once(ctx):
    ex = MultiThreadedExecutor(num_threads=2, context=ctx)
    with pytest.raises(ValueError, match="1 to 99"):
        ex.set_thread_policy(fifo=0)
    with pytest.raises(OverflowError):
        ex.set_thread_policy(fifo=1000)


def test_a_cpu_the_process_lacks_fails_spin_before_any_callback(ctx):
    beyond = max(os.sched_getaffinity(0)) + 1
    with pytest.raises(myelin.MyelinError, match=f"CPU {beyond} cannot run this thread"):
        _policy_seen(ctx, lambda ex: ex.set_thread_policy(cpus=[beyond]))


def test_the_cpu_wakeup_latency_request_is_held_inside_its_block():
    if os.geteuid() != 0:
        with pytest.raises(PermissionError, match="cpu_dma_latency"):
            myelin.CpuWakeupLatency(0)
        return

    def in_force():
        with open("/dev/cpu_dma_latency", "rb") as f:
            return int.from_bytes(f.read(4), sys.byteorder, signed=True)

    before = in_force()
    if before <= 3:
        pytest.skip(f"a request of {before} us is already in force here")
    with myelin.CpuWakeupLatency(3) as held:
        assert held.max_us == 3
        assert in_force() == 3
    assert held.max_us is None
    assert in_force() == before
    with pytest.raises(ValueError, match="out of range"):
        myelin.CpuWakeupLatency(10**12)


def test_a_timer_callback_that_takes_an_argument_gets_rclpys_timer_info(ctx):
    from myelin.timer import TimerInfo

    node = myelin.create_node("timed", context=ctx)
    infos, plain = [], []

    class Controller:
        def tick(self, info):
            infos.append(info)

    node.create_timer(0.002, Controller().tick)
    node.create_timer(0.002, lambda: plain.append(1))
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(node)
    end = time.monotonic() + 30
    while (len(infos) < 3 or not plain) and time.monotonic() < end:
        ex.spin_once(timeout_sec=0.1)
    assert len(infos) >= 3 and plain
    for info in infos:
        assert isinstance(info, TimerInfo)
        late = info.actual_call_time.nanoseconds - info.expected_call_time.nanoseconds
        assert late >= 0
        assert info.actual_call_time.clock_type == node.get_clock().clock_type


def test_an_infinite_timeout_is_forever_and_returns_with_the_work(ctx):
    """``math.inf`` (or a timeout past what the clock can hold) waits
    forever: no ValueError, no panic; each call returns once a callback
    ran (a 10 ms timer keeps work coming, so none can wait long)."""
    node = myelin.create_node("forever", context=ctx)
    got = []
    node.create_subscription(Int32, "ticks", lambda m: got.append(m.data), 10)
    node.create_timer(0.01, lambda: None)
    pub = node.create_publisher(Int32, "ticks", 10)
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(node)
    pub.publish(Int32(data=1))
    pub.publish(Int32(data=2))
    # 1e19 s is a valid Duration that no clock instant is that far from.
    for timeout in [math.inf, 1e19] * 100:
        if len(got) == 2:
            break
        ex.spin_once(timeout_sec=timeout)
    assert got == [1, 2]
    with pytest.raises(ValueError):
        node.create_timer(math.inf, lambda: None)
    ex.shutdown()


def test_a_negative_timeout_is_rclpys_forever_for_spins_and_no_wait_for_waits(ctx):
    """rclpy: ``spin_once`` and ``spin_until_future_complete`` block
    forever on a negative ``timeout_sec``; a client's waits return at
    once. (Each spin below has a 50 ms timer coming: none can block long.)"""
    node = myelin.create_node("negative", context=ctx)
    fired = []
    node.create_timer(0.05, lambda: fired.append(1))
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(node)
    ex.spin_once(timeout_sec=-1)
    assert fired, "spin_once(-1) returned before the timer"
    future = myelin.task.Future()
    node.create_timer(0.05, lambda: future.set_result(7))
    ex.spin_until_future_complete(future, timeout_sec=-1.0)
    assert future.done() and future.result() == 7
    client = node.create_client(AddTwoInts, "nobody_serves")
    assert client.wait_for_service(timeout_sec=-1) is False
    # As a zero timeout: no server now, said at once (not a ValueError).
    with pytest.raises(Exception, match="no server"):
        client.call(AddTwoInts.Request(a=1, b=2), timeout_sec=-1)
    ex.shutdown()

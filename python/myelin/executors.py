"""Executors: what runs the callbacks of nodes (``rclpy.executors``).

The waiting and the dispatch are the Rust core's; the GIL is released
while an executor waits, and a callback holds it only while its Python
code runs. An exception raised in a callback comes out of the
``spin_once`` (or ``spin``) that ran it.
"""

import time

from myelin import _myelin
from myelin import task as _task

__all__ = [
    "Executor",
    "SingleThreadedExecutor",
    "MultiThreadedExecutor",
    "ExternalShutdownException",
]


class ExternalShutdownException(Exception):
    """The context shut down while spinning."""


class Executor:
    """Runs the callbacks of the nodes added to it, one at a time."""

    def __init__(self, *, context=None):
        from myelin import get_default_context

        self._context = context if context is not None else get_default_context()
        self._exec = _myelin.Executor()
        self._nodes = []

    @property
    def context(self):
        return self._context

    def add_node(self, node):
        """Add ``node``; False if it was already added. A node is in one
        executor at a time: as in rclpy, adding it here takes it out of
        the one it was in."""
        if node in self._nodes:
            return False
        for other in list(node._executors):
            other.remove_node(node)
        self._exec.add_node(node._node)
        self._nodes.append(node)
        node._executors.add(self)
        return True

    def remove_node(self, node):
        if node in self._nodes:
            self._nodes.remove(node)
            self._exec.remove_node(node._node)
            node._executors.discard(self)

    def get_nodes(self):
        return list(self._nodes)

    def set_idle_wait(self, mode):
        """How the executor waits when there is no work (a myelin
        extension): ``"block"`` (the default: asleep in the kernel),
        ``"anticipate"`` (learn the period of periodic work, such as a
        30 Hz camera, sleep until shortly before the next message is due
        and spin until it comes: lower latency for a short spin per
        period) or ``"busy_poll"`` (``"busy-poll"`` too: never sleep; one
        core busy). Raises ValueError for another name."""
        self._exec.set_idle_wait(mode)

    def anticipation(self):
        """What an executor set to ``"anticipate"`` learned (a myelin
        extension), as a dict: ``"period"`` (seconds, None until the work
        came at a steady period), ``"caught"`` (bursts of work found by
        the thread spinning in its window: no wake-up paid) and
        ``"missed"`` (bursts that came, at a steady period, while it
        slept). Shows whether the mode pays off for this work."""
        return self._exec.anticipation()

    def spin_once(self, timeout_sec=None):
        """Run one ready callback, waiting up to ``timeout_sec`` seconds
        (None or negative: until one runs or the context shuts down, as
        rclpy; 0: only what is ready)."""
        if _task._settle(self._exec):
            return
        if timeout_sec is None or timeout_sec < 0:
            while self._context.ok():
                ran = self._spin_slice(3600.0)
                if _task._settle(self._exec) or ran:
                    return
            return
        self._spin_slice(max(0.0, float(timeout_sec)))
        _task._settle(self._exec)

    def spin(self):
        """Run callbacks until the context shuts down."""
        while self._context.ok():
            _task._settle(self._exec)
            self._exec.spin_for(3600.0)

    def spin_until_future_complete(self, future, timeout_sec=None):
        """Run callbacks until ``future`` is done, or ``timeout_sec`` passes
        (None or negative: no end, as rclpy)."""
        if timeout_sec is not None and timeout_sec < 0:
            timeout_sec = None
        pending = getattr(future, "_pending", None)
        if pending is not None and not future.done():
            # A service call: the answer itself wakes the executor.
            try:
                answer = self._exec.spin_until_answered(
                    pending, None if timeout_sec is None else float(timeout_sec)
                )
            except _myelin.MyelinError as e:
                if future._pending is not pending:
                    raise
                future.set_exception(e)
                return
            future._settle(answer)
            return
        end = None if timeout_sec is None else time.monotonic() + timeout_sec
        while self._context.ok() and not future.done():
            left = 0.1 if end is None else min(0.1, end - time.monotonic())
            if left <= 0:
                return
            if not _task._settle(self._exec):
                self._spin_slice(left)
                _task._settle(self._exec)

    def _spin_slice(self, seconds):
        """Run one callback, waiting up to ``seconds`` for it; whether one
        ran."""
        return self._exec.spin_once(seconds)

    def shutdown(self, timeout_sec=None):
        for node in list(self._nodes):
            self.remove_node(node)
        return True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()


class SingleThreadedExecutor(Executor):
    """rclpy's name for the one-thread executor."""


class MultiThreadedExecutor(Executor):
    """Runs callbacks on ``num_threads`` worker threads (None: one per
    CPU). As in rclpy, callbacks of one node's default (mutually
    exclusive) group still run one at a time, and Python code takes turns
    on the GIL; what overlaps is waiting, I/O and the core's own work."""

    def __init__(self, num_threads=None, *, context=None):
        from myelin import get_default_context

        self._context = context if context is not None else get_default_context()
        self._exec = _myelin.MultiThreadedExecutor(0 if num_threads is None else int(num_threads))
        self._nodes = []

    @property
    def num_threads(self):
        return self._exec.threads()

    def set_thread_policy(self, *, cpus=None, fifo=None):
        """Run every worker thread on the CPUs ``cpus`` (an iterable of CPU
        numbers; None: unchanged) under ``SCHED_FIFO`` at priority ``fifo``
        (1-99; None: unchanged), a myelin extension. The thread that calls
        ``spin`` gets its own scheduling back when it returns. A priority
        outside 1-99 is a ValueError here; a policy the process may not
        have (no root, ``CAP_SYS_NICE`` or rtprio limit; a CPU outside its
        set) raises MyelinError when spinning starts, before any callback
        runs. For a single-threaded executor, set the spinning thread's
        own policy with ``os.sched_setaffinity`` / ``os.sched_setscheduler``."""
        self._exec.set_thread_policy(None if cpus is None else [int(c) for c in cpus], fifo)

    def spin(self):
        # Workers keep running between callbacks (no stop after each one).
        while self._context.ok():
            _task._settle(self._exec)
            self._exec.spin_for(3600.0, False)

    def _spin_slice(self, seconds):
        return self._exec.spin_for(seconds, True)

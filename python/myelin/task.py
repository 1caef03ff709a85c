"""Futures and tasks (``rclpy.task``): what ``Client.call_async``
returns, and what runs an ``async def`` callback.

A future of a call with done callbacks is watched: every executor's spin
loop settles it when the answer comes (the answer ends the executor's
wait), and runs its callbacks there, as rclpy's executor does. A
coroutine callback runs as a :class:`Task` that resumes each time a
future it awaits is done.
"""

__all__ = ["Future", "Task"]

# Futures of calls that have done callbacks and no answer yet.
_watched = set()
# Tasks that awaited ``None`` (rclpy's "yield to the executor").
_ready = []


class Future:
    """The eventual result of a call: ``done()``, ``result()``,
    ``exception()``, ``add_done_callback(fn)``, as in rclpy. A service
    call's future completes when its answer has come and someone looks:
    ``spin_until_future_complete`` (which wakes at the answer), ``done()``,
    or ``result()``."""

    def __init__(self, *, _pending=None, _transform=None):
        self._pending = _pending
        # What the answer of the pending call becomes (an action client's
        # goal handle, made from the send_goal answer).
        self._transform = _transform
        self._done = False
        self._cancelled = False
        self._result = None
        self._exception = None
        self._callbacks = []

    def _look(self):
        if self._done or self._pending is None:
            return
        try:
            answer = self._pending.poll()
        except Exception as e:  # the call failed: its error is the result
            self.set_exception(e)
            return
        if answer is not None:
            self._answer(answer)

    def _answer(self, answer):
        if self._transform is not None:
            try:
                answer = self._transform(answer)
            except Exception as e:
                self.set_exception(e)
                return
        self.set_result(answer)

    def done(self):
        self._look()
        return self._done

    def cancelled(self):
        return self._cancelled

    def cancel(self):
        if not self._done:
            self._cancelled = True
            self._pending = None
            self._set_done()

    def result(self):
        """The result (None while not done); raises the call's error."""
        self._look()
        if self._exception is not None:
            raise self._exception
        return self._result

    def exception(self):
        self._look()
        return self._exception

    def set_result(self, result):
        self._result = result
        self._set_done()

    def set_exception(self, exception):
        self._exception = exception
        self._set_done()

    def add_done_callback(self, callback):
        if self.done():
            callback(self)
        else:
            self._callbacks.append(callback)
            if self._pending is not None:
                _watched.add(self)

    def _set_done(self):
        self._done = True
        self._pending = None
        callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            cb(self)

    def _settle(self, answer):
        """The answer a waiter took from the pending call."""
        if answer is not None and not self._done:
            self._answer(answer)

    def __await__(self):
        # Inside a Task: it resumes once this future is done.
        while not self.done():
            yield self
        return self.result()


class Task(Future):
    """A coroutine run by the executors: started at once, resumed each
    time a future it awaits is done (while an executor spins); its result
    is the coroutine's return value. An exception in it is its
    ``exception()`` and comes out of the spin that ran it."""

    def __init__(self, coroutine):
        super().__init__()
        self._coro = coroutine
        self._step()

    def _step(self, _done=None):
        if self._done:
            return
        try:
            awaited = self._coro.send(None)
        except StopIteration as stop:
            self.set_result(stop.value)
            return
        except BaseException as e:
            self.set_exception(e)
            raise
        if awaited is None:
            _ready.append(self)
        elif isinstance(awaited, Future):
            awaited.add_done_callback(self._step)
        else:
            self._coro.close()
            e = TypeError(f"a myelin Task can await myelin futures, not {type(awaited).__name__}")
            self.set_exception(e)
            raise e

    def cancel(self):
        if not self._done:
            self._coro.close()
        super().cancel()


def _settle(executor):
    """Settle the watched futures whose answer came (their done callbacks
    run now) and resume the tasks that yielded; whether anything did.
    ``executor`` is the core executor that spins, woken by later answers."""
    # Called around every spin slice: nothing to do is the common case.
    if not _ready and not _watched:
        return False
    from myelin import _myelin

    did = False
    while _ready:
        did = True
        _ready.pop(0)._step()
    for fut in list(_watched):
        pending = fut._pending
        if fut._done or pending is None:
            _watched.discard(fut)
            continue
        try:
            answer = executor.watch(pending)
        except _myelin.MyelinError as e:
            _watched.discard(fut)
            fut.set_exception(e)
            did = True
            continue
        if answer is not None:
            _watched.discard(fut)
            fut._settle(answer)
            did = True
    return did


def _coroutine_aware(callback):
    """``callback`` as the core calls it: an ``async def`` function runs as
    a :class:`Task` each time it is called; anything else is unchanged."""
    import inspect

    if not inspect.iscoroutinefunction(callback):
        return callback

    def run(*args):
        Task(callback(*args))

    return run

"""Futures (``rclpy.task``): what ``Client.call_async`` returns."""

__all__ = ["Future"]


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
        raise NotImplementedError("await a myelin Future is not supported yet; use spin_until_future_complete")

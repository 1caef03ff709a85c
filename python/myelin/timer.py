"""Timers' companions (``rclpy.timer``): :class:`Rate`, what
``node.create_rate(hz)`` returns. Timers themselves are
``node.create_timer``'s (:class:`myelin.node.Timer`)."""

from myelin.node import Timer  # noqa: F401
from myelin.time import Duration, Time

__all__ = ["Rate", "Timer", "TimerInfo"]


class TimerInfo:
    """What a timer callback that takes one argument is given (rclpy's
    ``TimerInfo``): ``expected_call_time``, when the tick was due, and
    ``actual_call_time``, when the callback started, both on the node's
    clock; their difference is how late the tick ran."""

    __slots__ = ("expected_call_time", "actual_call_time")

    def __init__(self, *, expected_call_time, actual_call_time):
        self.expected_call_time = expected_call_time
        self.actual_call_time = actual_call_time

    @classmethod
    def _lateness_on(cls, actual, lateness_ns):
        expected = Time(nanoseconds=actual.nanoseconds - lateness_ns, clock_type=actual.clock_type)
        return cls(expected_call_time=expected, actual_call_time=actual)

    def __repr__(self):
        return (
            f"TimerInfo(expected_call_time={self.expected_call_time!r}, "
            f"actual_call_time={self.actual_call_time!r})"
        )


class Rate:
    """Sleep at ``frequency`` Hz on ``clock``: ``sleep()`` returns at the
    next multiple of the period since the rate was made (a late call
    skips the periods it missed, as rclpy's). Sleeping follows the clock,
    so a node's clock under simulated time sleeps in simulated time."""

    def __init__(self, frequency, clock, context=None):
        if not frequency > 0:
            raise ValueError(f"a rate's frequency must be positive, not {frequency!r}")
        self._period_ns = max(1, round(1e9 / frequency))
        self._clock = clock
        self._context = context
        self._start = clock.now().nanoseconds
        self._destroyed = False

    def sleep(self):
        """Sleep until the next period; False if the context shut down
        (or the rate was destroyed) first."""
        if self._destroyed:
            return False
        elapsed = self._clock.now().nanoseconds - self._start
        periods = elapsed // self._period_ns + 1
        target = self._start + periods * self._period_ns
        return self._clock.sleep_for(
            Duration(nanoseconds=target - self._clock.now().nanoseconds), context=self._context
        )

    def destroy(self):
        self._destroyed = True

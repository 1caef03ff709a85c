"""Time, durations and clocks (``rclpy.time``, ``rclpy.duration``,
``rclpy.clock``), in integer nanoseconds.

    msg.header.stamp = node.get_clock().now().to_msg()
    age = node.get_clock().now() - Time.from_msg(msg.header.stamp)
    if age > Duration(seconds=0.1): ...

A node's clock is ROS time: steady system time, or ``/clock`` when the
context uses simulated time (``--ros-args -p use_sim_time:=true`` is not
read here; pass ``use_sim_time=True`` to ``myelin.init``).
"""

import enum
import functools
import time as _time

__all__ = ["Time", "Duration", "Clock", "ClockType"]


class ClockType(enum.IntEnum):
    UNINITIALIZED = 0
    ROS_TIME = 1
    SYSTEM_TIME = 2
    STEADY_TIME = 3


def _ns(seconds, nanoseconds):
    return int(round(seconds * 1e9)) + int(nanoseconds) if isinstance(seconds, float) else int(seconds) * 1_000_000_000 + int(nanoseconds)


@functools.total_ordering
class Duration:
    """A span of time: ``Duration(seconds=1.5)``, ``Duration(nanoseconds=10)``."""

    __slots__ = ("_ns",)

    def __init__(self, *, seconds=0, nanoseconds=0):
        self._ns = _ns(seconds, nanoseconds)

    @property
    def nanoseconds(self):
        return self._ns

    def to_msg(self):
        from myelin.msgs.builtin_interfaces.msg import Duration as Msg

        sec, nsec = divmod(self._ns, 1_000_000_000)
        return Msg(sec=sec, nanosec=nsec)

    @classmethod
    def from_msg(cls, msg):
        return cls(seconds=msg.sec, nanoseconds=msg.nanosec)

    def __add__(self, other):
        if isinstance(other, Duration):
            return Duration(nanoseconds=self._ns + other._ns)
        return NotImplemented

    def __sub__(self, other):
        if isinstance(other, Duration):
            return Duration(nanoseconds=self._ns - other._ns)
        return NotImplemented

    def __mul__(self, k):
        if isinstance(k, (int, float)):
            return Duration(nanoseconds=int(self._ns * k))
        return NotImplemented

    def __eq__(self, other):
        return isinstance(other, Duration) and self._ns == other._ns

    def __lt__(self, other):
        if isinstance(other, Duration):
            return self._ns < other._ns
        return NotImplemented

    def __hash__(self):
        return hash(self._ns)

    def __repr__(self):
        return f"Duration(nanoseconds={self._ns})"


@functools.total_ordering
class Time:
    """A point in time: ``Time(seconds=..., nanoseconds=...)``."""

    __slots__ = ("_ns", "_clock_type")

    def __init__(self, *, seconds=0, nanoseconds=0, clock_type=ClockType.SYSTEM_TIME):
        ns = _ns(seconds, nanoseconds)
        if ns < 0:
            raise ValueError("a Time cannot be negative")
        self._ns = ns
        self._clock_type = ClockType(clock_type)

    @property
    def nanoseconds(self):
        return self._ns

    @property
    def clock_type(self):
        return self._clock_type

    def seconds_nanoseconds(self):
        return divmod(self._ns, 1_000_000_000)

    def to_msg(self):
        from myelin.msgs.builtin_interfaces.msg import Time as Msg

        sec, nsec = divmod(self._ns, 1_000_000_000)
        return Msg(sec=sec, nanosec=nsec)

    @classmethod
    def from_msg(cls, msg, clock_type=ClockType.ROS_TIME):
        return cls(seconds=msg.sec, nanoseconds=msg.nanosec, clock_type=clock_type)

    def __add__(self, other):
        if isinstance(other, Duration):
            return Time(nanoseconds=self._ns + other.nanoseconds, clock_type=self._clock_type)
        return NotImplemented

    __radd__ = __add__

    def __sub__(self, other):
        if isinstance(other, Time):
            if other._clock_type != self._clock_type:
                raise TypeError("cannot subtract times of different clock types")
            return Duration(nanoseconds=self._ns - other._ns)
        if isinstance(other, Duration):
            return Time(nanoseconds=self._ns - other.nanoseconds, clock_type=self._clock_type)
        return NotImplemented

    def __eq__(self, other):
        if not isinstance(other, Time):
            return NotImplemented
        if other._clock_type != self._clock_type:
            raise TypeError("cannot compare times of different clock types")
        return self._ns == other._ns

    def __lt__(self, other):
        if not isinstance(other, Time):
            return NotImplemented
        if other._clock_type != self._clock_type:
            raise TypeError("cannot compare times of different clock types")
        return self._ns < other._ns

    def __hash__(self):
        return hash((self._ns, self._clock_type))

    def __repr__(self):
        return f"Time(nanoseconds={self._ns}, clock_type={self._clock_type.name})"


class Clock:
    """A clock: ``Clock()`` is system time, ``node.get_clock()`` the
    node's ROS time."""

    def __init__(self, *, clock_type=ClockType.SYSTEM_TIME, _node=None):
        self._type = ClockType(clock_type)
        self._node = _node

    @property
    def clock_type(self):
        return self._type

    def now(self):
        if self._node is not None:
            ns, _ = self._node.now_ns()
            return Time(nanoseconds=ns, clock_type=self._type)
        if self._type == ClockType.STEADY_TIME:
            return Time(nanoseconds=_time.monotonic_ns(), clock_type=self._type)
        return Time(nanoseconds=_time.time_ns(), clock_type=self._type)

    def ros_time_is_active(self):
        """Whether this clock follows ``/clock`` (simulated time)."""
        return self._node is not None and self._node.now_ns()[1]

    def sleep_until(self, until, context=None):
        """Sleep until this clock reads ``until`` (a :class:`Time`); False
        if the context shut down first. Simulated time is followed as it
        advances."""
        import myelin

        target = until.nanoseconds
        while True:
            if not myelin.ok(context=context):
                return False
            left = target - self.now().nanoseconds
            if left <= 0:
                return True
            # Simulated time may jump: look at least every 10 ms.
            step = min(left / 1e9, 0.01) if self.ros_time_is_active() else min(left / 1e9, 0.1)
            _time.sleep(step)

    def sleep_for(self, rel, context=None):
        """Sleep for ``rel`` (a :class:`Duration`) on this clock; False if
        the context shut down first."""
        return self.sleep_until(Time(nanoseconds=self.now().nanoseconds + rel.nanoseconds, clock_type=self._type), context)


class ROSClock(Clock):
    """A node's clock."""

    def __init__(self, node):
        super().__init__(clock_type=ClockType.ROS_TIME, _node=node)

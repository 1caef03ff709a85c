"""QoS profiles, named as in rclpy (``rclpy.qos``).

A profile is what a publisher or subscription asks of delivery::

    from myelin.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data

    reliable = QoSProfile(depth=10)
    sensor = qos_profile_sensor_data            # best effort, keep last 5
    latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)

Where rclpy takes a profile it also takes a depth (an int): keep last that
many, reliable, volatile.
"""

import enum
import math

from myelin._myelin import InvalidQoSError

__all__ = [
    "HistoryPolicy",
    "ReliabilityPolicy",
    "DurabilityPolicy",
    "LivelinessPolicy",
    "QoSProfile",
    "qos_profile_system_default",
    "qos_profile_sensor_data",
    "qos_profile_services_default",
    "qos_profile_parameters",
    "qos_profile_parameter_events",
    "QoSPresetProfiles",
    "InvalidQoSError",
]


class HistoryPolicy(enum.IntEnum):
    SYSTEM_DEFAULT = 0
    KEEP_LAST = 1
    KEEP_ALL = 2


class ReliabilityPolicy(enum.IntEnum):
    SYSTEM_DEFAULT = 0
    RELIABLE = 1
    BEST_EFFORT = 2


class DurabilityPolicy(enum.IntEnum):
    SYSTEM_DEFAULT = 0
    TRANSIENT_LOCAL = 1
    VOLATILE = 2


class LivelinessPolicy(enum.IntEnum):
    SYSTEM_DEFAULT = 0
    AUTOMATIC = 1
    MANUAL_BY_TOPIC = 3


def _seconds(name, value):
    """A duration in seconds from a number (seconds) or anything with
    ``nanoseconds`` (rclpy's Duration); None or 0 means unset."""
    if value is None:
        return None
    if hasattr(value, "nanoseconds"):
        value = value.nanoseconds / 1e9
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidQoSError(f"{name}: expected seconds, got {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise InvalidQoSError(f"{name}: {value} is not a duration")
    return None if value == 0 else float(value)


class QoSProfile:
    """A QoS profile. ``depth`` is required with KEEP_LAST history (the
    default), as in rclpy."""

    __slots__ = (
        "history",
        "depth",
        "reliability",
        "durability",
        "deadline",
        "lifespan",
        "liveliness",
        "liveliness_lease_duration",
    )

    def __init__(
        self,
        *,
        history=HistoryPolicy.KEEP_LAST,
        depth=None,
        reliability=ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.VOLATILE,
        deadline=None,
        lifespan=None,
        liveliness=LivelinessPolicy.AUTOMATIC,
        liveliness_lease_duration=None,
    ):
        history = HistoryPolicy(history)
        if history == HistoryPolicy.KEEP_LAST and depth is None:
            raise InvalidQoSError("a KEEP_LAST profile needs a depth")
        if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 0):
            raise InvalidQoSError(f"depth: {depth!r} is not a non-negative int")
        self.history = history
        self.depth = 0 if depth is None else depth
        self.reliability = ReliabilityPolicy(reliability)
        self.durability = DurabilityPolicy(durability)
        self.deadline = _seconds("deadline", deadline)
        self.lifespan = _seconds("lifespan", lifespan)
        self.liveliness = LivelinessPolicy(liveliness)
        self.liveliness_lease_duration = _seconds(
            "liveliness_lease_duration", liveliness_lease_duration
        )

    def __eq__(self, other):
        return isinstance(other, QoSProfile) and all(
            getattr(self, s) == getattr(other, s) for s in self.__slots__
        )

    def __repr__(self):
        fields = ", ".join(f"{s}={getattr(self, s)!r}" for s in self.__slots__)
        return f"QoSProfile({fields})"

    def _tuple(self):
        """The form the core takes."""
        history = "keep_all" if self.history == HistoryPolicy.KEEP_ALL else "keep_last"
        reliability = (
            "best_effort" if self.reliability == ReliabilityPolicy.BEST_EFFORT else "reliable"
        )
        durability = (
            "transient_local"
            if self.durability == DurabilityPolicy.TRANSIENT_LOCAL
            else "volatile"
        )
        liveliness = (
            "manual_by_topic"
            if self.liveliness == LivelinessPolicy.MANUAL_BY_TOPIC
            else "automatic"
        )
        return (
            history,
            self.depth,
            reliability,
            durability,
            self.deadline,
            self.lifespan,
            liveliness,
            self.liveliness_lease_duration,
        )


def _profile(qos):
    """A profile from a profile or a depth."""
    if isinstance(qos, QoSProfile):
        return qos
    if isinstance(qos, int) and not isinstance(qos, bool):
        return QoSProfile(depth=qos)
    raise InvalidQoSError(f"expected a QoSProfile or a depth (int), got {type(qos).__name__}")


qos_profile_system_default = QoSProfile(depth=10)
qos_profile_sensor_data = QoSProfile(depth=5, reliability=ReliabilityPolicy.BEST_EFFORT)
qos_profile_services_default = QoSProfile(depth=10)
qos_profile_parameters = QoSProfile(depth=1000)
qos_profile_parameter_events = QoSProfile(depth=1000)

# rclpy's older names, still common in code written for it.
QoSHistoryPolicy = HistoryPolicy
QoSReliabilityPolicy = ReliabilityPolicy
QoSDurabilityPolicy = DurabilityPolicy
QoSLivelinessPolicy = LivelinessPolicy
__all__ += ["QoSHistoryPolicy", "QoSReliabilityPolicy", "QoSDurabilityPolicy", "QoSLivelinessPolicy"]


class QoSPresetProfiles(enum.Enum):
    """rclpy's named presets: ``QoSPresetProfiles.SENSOR_DATA.value`` is
    :data:`qos_profile_sensor_data`; ``get_from_short_key("sensor_data")``."""

    SYSTEM_DEFAULT = qos_profile_system_default
    SENSOR_DATA = qos_profile_sensor_data
    SERVICES_DEFAULT = qos_profile_services_default
    PARAMETERS = qos_profile_parameters
    PARAMETER_EVENTS = qos_profile_parameter_events

    @classmethod
    def short_keys(cls):
        return [m.name.lower() for m in cls]

    @classmethod
    def get_from_short_key(cls, name):
        return cls[name.upper()].value

"""QoS event callbacks, named as in rclpy (``rclpy.event_handler``).

Give a publisher or subscription callbacks for the QoS events it raises;
the executor spinning its node calls them, with an info object whose
attributes are rclpy's::

    from myelin.event_handler import SubscriptionEventCallbacks

    def on_deadline(info):           # QoSRequestedDeadlineMissedInfo
        print("late:", info.total_count, info.total_count_change)

    node.create_subscription(
        Imu, "imu", on_imu, QoSProfile(depth=10, deadline=0.01),
        event_callbacks=SubscriptionEventCallbacks(deadline=on_deadline),
    )

Events and their info attributes:

* ``deadline``: ``total_count``, ``total_count_change`` (requested on a
  subscription, offered on a publisher);
* ``liveliness`` (subscription): ``alive_count``, ``not_alive_count``,
  ``alive_count_change``, ``not_alive_count_change``;
* ``matched``: ``total_count``, ``total_count_change``, ``current_count``,
  ``current_count_change``;
* ``incompatible_qos``: ``total_count``, ``total_count_change``,
  ``last_policy_kind`` (a :class:`QoSPolicyKind`);
* ``incompatible_type``: ``total_count``, ``total_count_change``.

The ``*_change`` fields count since the previous event of that kind, as in
rclpy. As in rclpy, an incompatible-QoS event without a callback of its
own logs a warning (``use_default_callbacks=False`` turns that off).

Two of rclpy's callbacks have no event behind them here and are refused
with :class:`UnsupportedEventTypeError` rather than never called: a
subscription's ``message_lost`` (myelin counts lost messages:
``Subscription.lost()`` in Rust) and a publisher's ``liveliness``
(liveliness lost: myelin publishers assert liveliness with each publish
and by their process being alive).
"""

import enum

__all__ = [
    "QoSPolicyKind",
    "SubscriptionEventCallbacks",
    "PublisherEventCallbacks",
    "UnsupportedEventTypeError",
    "QoSRequestedDeadlineMissedInfo",
    "QoSOfferedDeadlineMissedInfo",
    "QoSLivelinessChangedInfo",
    "QoSRequestedIncompatibleQoSInfo",
    "QoSOfferedIncompatibleQoSInfo",
    "IncompatibleTypeInfo",
    "MatchedInfo",
]


class UnsupportedEventTypeError(Exception):
    """An event callback was given for an event myelin does not raise."""


class QoSPolicyKind(enum.IntEnum):
    """The QoS policy an incompatible-QoS event names (rmw's values)."""

    INVALID = 1 << 0
    DURABILITY = 1 << 1
    DEADLINE = 1 << 2
    LIVELINESS = 1 << 3
    RELIABILITY = 1 << 4
    HISTORY = 1 << 5
    LIFESPAN = 1 << 6


class _Info:
    """An event's status: the fields as attributes."""

    _fields = ()

    def __init__(self, **fields):
        for name in self._fields:
            setattr(self, name, fields.get(name, 0))

    def __repr__(self):
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._fields)
        return f"{type(self).__name__}({inner})"

    def __eq__(self, other):
        return type(self) is type(other) and all(
            getattr(self, n) == getattr(other, n) for n in self._fields
        )


class QoSRequestedDeadlineMissedInfo(_Info):
    _fields = ("total_count", "total_count_change")


class QoSOfferedDeadlineMissedInfo(_Info):
    _fields = ("total_count", "total_count_change")


class QoSLivelinessChangedInfo(_Info):
    _fields = ("alive_count", "not_alive_count", "alive_count_change", "not_alive_count_change")


class QoSRequestedIncompatibleQoSInfo(_Info):
    _fields = ("total_count", "total_count_change", "last_policy_kind")


class QoSOfferedIncompatibleQoSInfo(_Info):
    _fields = ("total_count", "total_count_change", "last_policy_kind")


class IncompatibleTypeInfo(_Info):
    _fields = ("total_count", "total_count_change")


class MatchedInfo(_Info):
    _fields = ("total_count", "total_count_change", "current_count", "current_count_change")


def _policy(name):
    return QoSPolicyKind.INVALID if name is None else QoSPolicyKind[name]


class _EventCallbacks:
    _infos = {}
    _unsupported = {}
    _incompatible_qos_warning = ""

    def __init__(self, use_default_callbacks, **callbacks):
        for name, cb in callbacks.items():
            if cb is None:
                continue
            if name in self._unsupported:
                raise UnsupportedEventTypeError(self._unsupported[name])
            if not callable(cb):
                raise TypeError(f"the {name} event callback must be callable")
        self._callbacks = {k: v for k, v in callbacks.items() if v is not None}
        self.use_default_callbacks = use_default_callbacks
        for name in self._infos:
            setattr(self, name, self._callbacks.get(name))

    def _dispatcher(self, logger):
        """The ``on_event(kind, fields)`` the core calls, or ``None`` when
        nothing would be done with any event."""
        callbacks = dict(self._callbacks)
        if self.use_default_callbacks and "incompatible_qos" not in callbacks:
            warning = self._incompatible_qos_warning

            def warn(info):
                logger.warning(warning.format(policy=info.last_policy_kind.name))

            callbacks["incompatible_qos"] = warn
        if not callbacks:
            return None
        infos = self._infos

        def on_event(kind, fields):
            cb = callbacks.get(kind)
            if cb is None:
                return
            if "last_policy_kind" in fields:
                fields = dict(fields, last_policy_kind=_policy(fields["last_policy_kind"]))
            cb(infos[kind](**fields))

        return on_event


class SubscriptionEventCallbacks(_EventCallbacks):
    """Callbacks for a subscription's QoS events (rclpy's names)."""

    _infos = {
        "deadline": QoSRequestedDeadlineMissedInfo,
        "liveliness": QoSLivelinessChangedInfo,
        "matched": MatchedInfo,
        "incompatible_qos": QoSRequestedIncompatibleQoSInfo,
        "incompatible_type": IncompatibleTypeInfo,
    }
    _unsupported = {
        "message_lost": "myelin raises no message_lost event: a subscription counts "
        "what it lost instead (overwritten, refused, expired, undecodable)",
    }
    _incompatible_qos_warning = (
        "New publisher discovered on this topic, offering incompatible QoS. "
        "No messages will be received from it. Last incompatible policy: {policy}"
    )

    def __init__(
        self,
        *,
        deadline=None,
        incompatible_qos=None,
        liveliness=None,
        message_lost=None,
        incompatible_type=None,
        matched=None,
        use_default_callbacks=True,
    ):
        super().__init__(
            use_default_callbacks,
            deadline=deadline,
            incompatible_qos=incompatible_qos,
            liveliness=liveliness,
            message_lost=message_lost,
            incompatible_type=incompatible_type,
            matched=matched,
        )


class PublisherEventCallbacks(_EventCallbacks):
    """Callbacks for a publisher's QoS events (rclpy's names)."""

    _infos = {
        "deadline": QoSOfferedDeadlineMissedInfo,
        "matched": MatchedInfo,
        "incompatible_qos": QoSOfferedIncompatibleQoSInfo,
        "incompatible_type": IncompatibleTypeInfo,
    }
    _unsupported = {
        "liveliness": "myelin raises no liveliness-lost event on a publisher: it is "
        "alive while its process is, and a manual-by-topic one while it publishes",
    }
    _incompatible_qos_warning = (
        "New subscription discovered on this topic, requesting incompatible QoS. "
        "No messages will be sent to it. Last incompatible policy: {policy}"
    )

    def __init__(
        self,
        *,
        deadline=None,
        incompatible_qos=None,
        liveliness=None,
        incompatible_type=None,
        matched=None,
        use_default_callbacks=True,
    ):
        super().__init__(
            use_default_callbacks,
            deadline=deadline,
            incompatible_qos=incompatible_qos,
            liveliness=liveliness,
            incompatible_type=incompatible_type,
            matched=matched,
        )

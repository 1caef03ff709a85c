"""Callback groups, as rclpy's ``rclpy.callback_groups``: which callbacks
a :class:`~myelin.executors.MultiThreadedExecutor` may run at the same
time.

* :class:`MutuallyExclusiveCallbackGroup` (every node's default): one
  callback of the group at a time.
* :class:`ReentrantCallbackGroup`: callbacks of different entities of the
  group may run at once (one subscription's or timer's own callback never
  overlaps itself, and its messages stay in order).

Python code still takes turns on the GIL; what overlaps is what releases
it (waiting, sleeping, I/O, numpy, myelin's own work). A single-threaded
executor runs one callback at a time whatever the group.

Pass a group as ``callback_group=`` to ``create_subscription``,
``create_timer`` and ``create_service``; a client's group is accepted and
has no effect (a client's answers resolve its futures wherever they
arrive).
"""

from myelin import _myelin


class CallbackGroup:
    """A callback group (see the module's documentation)."""

    _reentrant = False

    def __init__(self):
        self._core = _myelin.CallbackGroup(self._reentrant)

    def __repr__(self):
        return f"{type(self).__name__}()"


class MutuallyExclusiveCallbackGroup(CallbackGroup):
    """At most one callback of the group runs at a time."""

    _reentrant = False


class ReentrantCallbackGroup(CallbackGroup):
    """Callbacks of different entities of the group may run at once."""

    _reentrant = True


def core_group(group):
    """The core group of ``group`` (``None``: the node's default)."""
    if group is None:
        return None
    if not isinstance(group, CallbackGroup):
        raise TypeError(f"callback_group must be a myelin CallbackGroup, not {type(group).__name__}")
    return group._core

"""Service introspection states, as ``rclpy.service_introspection``.

A server or client configured with ``METADATA`` or ``CONTENTS``
(``service.configure_introspection(node.get_clock(), qos, state)``)
publishes an event for each request and response on
``<service>/_service_event``; ``myelin service echo`` and ``ros2 service
echo`` print them, ``myelin bag record --all-services`` records them.
"""

import enum


class ServiceIntrospectionState(enum.IntEnum):
    """What a service or client publishes about its calls."""

    OFF = 0
    METADATA = 1
    CONTENTS = 2


def _configure(core, clock, qos_profile, state):
    """Configure ``core`` (a server or client of the extension)."""
    from myelin.qos import _profile, qos_profile_system_default

    state = ServiceIntrospectionState(state)
    qos = qos_profile_system_default if qos_profile is None else _profile(qos_profile)
    # The events are stamped with the node's clock (ROS time, simulated
    # under use_sim_time), whichever clock is passed, as rcl does for the
    # node clock rclpy passes in practice.
    del clock
    core.configure_introspection(state.name.lower(), qos._tuple())

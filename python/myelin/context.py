"""Contexts: a process's membership in a ROS domain (``rclpy.context``)."""

import sys

from myelin import _myelin

__all__ = ["Context"]


class Context:
    """A context; :func:`myelin.init` initialises the default one.

    ``domain_id`` defaults to ``ROS_DOMAIN_ID`` (else 0). ``shared_memory``
    and ``network`` default to what ``MYELIN_TRANSPORT`` allows (both when
    unset): shared memory reaches other processes on this host, the
    network (zenoh, rmw_zenoh's wire format) other hosts and ROS 2 nodes.
    ``zenoh_config`` is a zenoh session configuration file (default:
    ``MYELIN_ZENOH_CONFIG``, else myelin's: a peer of the local router).
    """

    def __init__(self):
        self._ctx = None
        self._on_shutdown = []

    def init(
        self,
        args=None,
        *,
        domain_id=None,
        shared_memory=None,
        network=None,
        use_sim_time=False,
        zenoh_config=None,
    ):
        if self._ctx is not None and self._ctx.ok():
            raise RuntimeError("the context is already initialised")
        self._ctx = _myelin.Context(
            domain_id=domain_id,
            shared_memory=shared_memory,
            network=network,
            # As rclpy: no args means the process's command line, so
            # `--ros-args -r chatter:=other -p rate:=5` works as it does there.
            args=list(args) if args is not None else list(sys.argv),
            use_sim_time=use_sim_time,
            zenoh_config=None if zenoh_config is None else str(zenoh_config),
        )

    def ok(self):
        """Whether the context is initialised and not shut down."""
        return self._ctx is not None and self._ctx.ok()

    def shutdown(self):
        """Shut down: executors stop, endpoints close."""
        if self._ctx is None:
            raise RuntimeError("the context is not initialised")
        self._ctx.shutdown()
        callbacks, self._on_shutdown = self._on_shutdown, []
        for cb in callbacks:
            cb()

    def try_shutdown(self):
        """Shut down if initialised and not yet shut down."""
        if self.ok():
            self.shutdown()

    def on_shutdown(self, callback):
        """Call ``callback()`` when the context shuts down."""
        self._on_shutdown.append(callback)

    def get_domain_id(self):
        return self._core().domain_id()

    def _core(self):
        if self._ctx is None:
            raise RuntimeError("myelin.init() has not been called")
        if not self._ctx.ok():
            raise RuntimeError("the context has been shut down")
        return self._ctx

    def __enter__(self):
        if not self.ok():
            self.init()
        return self

    def __exit__(self, *exc):
        self.try_shutdown()

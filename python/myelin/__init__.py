"""myelin for Python: rclpy's API on myelin's bus.

rclpy programs run with their imports changed::

    import myelin as rclpy
    from myelin.node import Node
    from myelin.msgs.std_msgs.msg import String

    rclpy.init()
    node = rclpy.create_node("listener")
    node.create_subscription(String, "chatter", lambda m: print(m.data), 10)
    rclpy.spin(node)

Python nodes meet Rust nodes of this host over shared memory and other
hosts and ROS 2 nodes (rmw_zenoh) over zenoh, on the same topics with the
same type hashes.
"""

import threading

from myelin import _myelin
from myelin._myelin import (
    CpuWakeupLatency,
    InvalidNameError,
    InvalidParameterValueException,
    InvalidQoSError,
    MyelinError,
    ParameterAlreadyDeclaredException,
    ParameterNotDeclaredException,
    TypeMismatchError,
)
# rclpy's submodules, reachable as attributes after ``import myelin as rclpy``
# (``rclpy.task.Future``, ``rclpy.time.Time``, ...).
from myelin import (  # noqa: F401
    callback_groups,
    event_handler,
    exceptions,
    executors,
    logging,
    parameter,
    qos,
    task,
    time,
    timer,
)
from myelin.context import Context
from myelin.executors import Executor, MultiThreadedExecutor, SingleThreadedExecutor
from myelin.node import Node

__all__ = [
    "init",
    "shutdown",
    "try_shutdown",
    "ok",
    "create_node",
    "spin",
    "spin_once",
    "spin_until_future_complete",
    "get_default_context",
    "get_global_executor",
    "Context",
    "Node",
    "Executor",
    "SingleThreadedExecutor",
    "MultiThreadedExecutor",
    "CpuWakeupLatency",
    "MyelinError",
    "InvalidNameError",
    "InvalidQoSError",
    "TypeMismatchError",
    "ParameterNotDeclaredException",
    "ParameterAlreadyDeclaredException",
    "InvalidParameterValueException",
]

_default_context = Context()
_global_executor = None
_lock = threading.Lock()


def get_default_context():
    """The context :func:`init` initialises."""
    return _default_context


def init(
    *,
    args=None,
    context=None,
    domain_id=None,
    shared_memory=None,
    network=None,
    use_sim_time=False,
    zenoh_config=None,
):
    """Initialise ``context`` (the default one): ``args`` are the
    command line (``--ros-args -r from:=to -p name:=value``), ``domain_id``
    defaults to ``ROS_DOMAIN_ID``; ``use_sim_time`` makes the nodes' clocks
    and timers follow ``/clock``."""
    global _global_executor
    ctx = context if context is not None else _default_context
    ctx.init(
        args,
        domain_id=domain_id,
        shared_memory=shared_memory,
        network=network,
        use_sim_time=use_sim_time,
        zenoh_config=zenoh_config,
    )
    if ctx is _default_context:
        with _lock:
            _global_executor = None


def ok(*, context=None):
    return (context if context is not None else _default_context).ok()


def shutdown(*, context=None):
    """Shut ``context`` (the default one) down."""
    (context if context is not None else _default_context).shutdown()


def try_shutdown(*, context=None):
    (context if context is not None else _default_context).try_shutdown()


def create_node(node_name, *, context=None, namespace=None, **kwargs):
    """A :class:`~myelin.node.Node` (rclpy's ``create_node``)."""
    return Node(node_name, context=context, namespace=namespace, **kwargs)


def get_global_executor():
    """The executor :func:`spin` and :func:`spin_once` use by default."""
    global _global_executor
    with _lock:
        if _global_executor is None:
            _global_executor = SingleThreadedExecutor(context=_default_context)
        return _global_executor


def _with_node(node, executor, run):
    executor = executor if executor is not None else get_global_executor()
    added = node is not None and executor.add_node(node)
    try:
        return run(executor)
    finally:
        if added:
            executor.remove_node(node)


def spin(node=None, executor=None):
    """Run ``node``'s callbacks until the context shuts down (Ctrl-C raises
    KeyboardInterrupt, as in rclpy)."""
    _with_node(node, executor, lambda e: e.spin())


def spin_once(node=None, *, executor=None, timeout_sec=None):
    """Run one of ``node``'s callbacks, waiting up to ``timeout_sec``."""
    _with_node(node, executor, lambda e: e.spin_once(timeout_sec=timeout_sec))


def spin_until_future_complete(node, future, executor=None, timeout_sec=None):
    """Run ``node``'s callbacks until ``future`` is done."""
    _with_node(
        node, executor, lambda e: e.spin_until_future_complete(future, timeout_sec=timeout_sec)
    )

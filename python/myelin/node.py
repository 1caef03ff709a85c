"""Nodes (``rclpy.node``): publishers, subscriptions, timers and a logger.

A node can be made with :func:`myelin.create_node` or subclassed::

    import myelin
    from myelin.node import Node
    from myelin.msgs.std_msgs.msg import String

    class Talker(Node):
        def __init__(self):
            super().__init__("talker")
            self.pub = self.create_publisher(String, "chatter", 10)
            self.timer = self.create_timer(0.5, self.tick)

        def tick(self):
            self.pub.publish(String(data="hello"))
"""

import inspect

from myelin import _myelin
from myelin.callback_groups import core_group
from myelin.event_handler import PublisherEventCallbacks, SubscriptionEventCallbacks
from myelin.logging import LoggingSeverity, RcutilsLogger
from myelin.parameter import Parameter
from myelin.qos import _profile
from myelin.task import _coroutine_aware

__all__ = ["Node", "Publisher", "Subscription", "Timer", "Service", "Client"]



def _takes_info(callback):
    """Whether a subscription callback takes ``(msg, info)``: two
    parameters, as rclpy tells its callback kinds apart."""
    try:
        params = inspect.signature(callback).parameters.values()
    except (TypeError, ValueError):
        return False
    params = list(params)
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
    # Refused here rather than at the first message: a callback that
    # cannot take (msg) nor (msg, info).
    if len(required) > 2 or (not positional and not varargs):
        raise TypeError(
            f"a subscription callback takes (msg) or (msg, info); {getattr(callback, '__name__', callback)!s} "
            f"takes {len(required)} required positional argument(s)"
        )
    return len(required) == 2

class Publisher:
    """A publisher (``Node.create_publisher``)."""

    def __init__(self, core, msg_type, qos_profile):
        self._core = core
        self.msg_type = msg_type
        self.qos_profile = qos_profile

    def publish(self, msg):
        """Publish ``msg``, an instance of the publisher's message type (or
        its serialised CDR as ``bytes``)."""
        self._live().publish(msg)

    def loan(self, msg, /, **sizes):
        """Loan shared memory for ``msg`` and fill its large arrays in place.

        ``sizes`` names each numeric array field to fill in place with its
        element count (``data=height * step``). The message is encoded
        straight into a shared-memory chunk; each named array is a
        writable numpy view of its place in the chunk (``loan.data``), to
        fill without a copy (``numpy.copyto(loan.data, frame)``, or a
        camera driver reading into it). ``loan.publish()`` hands the chunk
        to subscribers in every process without a copy, with ``msg``'s
        other fields as they are then (set a stamp after filling).

        As a context manager it publishes at the end of the block, and
        gives the chunk back if the block raised::

            with pub.loan(Image(height=h, width=w, encoding="rgb8", step=w * 3),
                          data=h * w * 3) as loan:
                camera.read_into(loan.data)
                loan.msg.header.stamp = node.get_clock().now().to_msg()

        A view must be gone before publish (subscribers read the chunk
        from then on): ``publish`` raises ``BufferError`` while a numpy
        array still views the loan; delete it first. Strings and
        sequences must keep their length after ``loan`` (they fix where
        the arrays lie and how long the chunk is); numbers may change. The arrays' contents
        start as whatever the chunk held before: fill every element.
        Arrays of 8-byte numbers are unaligned views (CDR places them 4
        bytes off an 8-byte boundary in a chunk); numpy handles them,
        some libraries (torch) refuse them.
        """
        return self._live().loan(msg, list(sizes.items()))

    @property
    def topic_name(self):
        return self._live().topic()

    @property
    def topic(self):
        return self.topic_name

    def get_subscription_count(self):
        return self._live().subscription_count()

    def assert_liveliness(self):
        self._live().assert_liveliness()

    def warm(self):
        """Warm the path of the next publish without publishing: called
        shortly (about 100 us) before a message is due, a busy-polling
        executor this publisher feeds runs the subscription's path with
        no message, so the message finds it in the caches (in this
        process, and in other processes on the host over shared memory).
        Nothing is delivered, stored or counted; sleeping executors are
        not woken. A myelin extension (rclpy has no such call)."""
        self._live().warm()

    def destroy(self):
        self._core = None

    def _live(self):
        if self._core is None:
            raise RuntimeError("the publisher has been destroyed")
        return self._core


class Subscription:
    """A subscription (``Node.create_subscription``)."""

    def __init__(self, core, msg_type, callback, qos_profile):
        self._core = core
        self.msg_type = msg_type
        self.callback = callback
        self.qos_profile = qos_profile

    @property
    def topic_name(self):
        return self._core.topic()

    @property
    def topic(self):
        return self.topic_name

    def get_publisher_count(self):
        return self._core.publisher_count()

    def destroy(self):
        self._core = None


class Service:
    """A service server (``Node.create_service``)."""

    def __init__(self, core, srv_type, srv_name, callback):
        self._core = core
        self.srv_type = srv_type
        self.srv_name = srv_name
        self.callback = callback

    def configure_introspection(self, clock, service_event_qos_profile, introspection_state):
        """Publish this server's ``REQUEST_RECEIVED`` and ``RESPONSE_SENT``
        events (:class:`~myelin.service_introspection.ServiceIntrospectionState`),
        as rclpy's. The events carry the node's clock."""
        from myelin.service_introspection import _configure

        if self._core is None:
            raise RuntimeError("the service has been destroyed")
        _configure(self._core, clock, service_event_qos_profile, introspection_state)

    def destroy(self):
        self._core = None


class Client:
    """A service client (``Node.create_client``). A call needs no executor
    when the server is in another process; a server in this process needs
    its node spun (``spin_until_future_complete`` does it)."""

    def __init__(self, core, srv_type, srv_name, node):
        self._core = core
        self.srv_type = srv_type
        self.srv_name = srv_name
        self._node = node

    def service_is_ready(self):
        return self._live().service_is_ready()

    def configure_introspection(self, clock, service_event_qos_profile, introspection_state):
        """Publish this client's ``REQUEST_SENT`` and ``RESPONSE_RECEIVED``
        events, as rclpy's (see :meth:`Service.configure_introspection`)."""
        from myelin.service_introspection import _configure

        _configure(self._live(), clock, service_event_qos_profile, introspection_state)

    def wait_for_service(self, timeout_sec=None):
        """Wait up to ``timeout_sec`` seconds (None: no end; negative: no
        wait, as rclpy) for a server; whether one is there."""
        return self._live().wait_for_service(_timeout(timeout_sec))

    def call_async(self, request):
        """Send ``request``; returns a :class:`~myelin.task.Future`."""
        from myelin.task import Future

        return Future(_pending=self._live().call_async(request))

    def call(self, request, timeout_sec=None):
        """Send ``request`` and wait for the answer (None after
        ``timeout_sec`` seconds without one). The server must be spun by
        someone else (another process, or another thread), as in rclpy."""
        pending = self._live().call_async(request)
        return pending.wait(_timeout(timeout_sec))

    def destroy(self):
        self._core = None

    def _live(self):
        if self._core is None:
            raise RuntimeError("the client has been destroyed")
        return self._core


class Timer:
    """A timer (``Node.create_timer``)."""

    def __init__(self, core, callback):
        self._core = core
        self.callback = callback

    @property
    def timer_period_ns(self):
        return self._core.period_ns()

    def cancel(self):
        self._core.cancel()

    def is_canceled(self):
        return self._core.is_canceled()

    def reset(self):
        self._core.reset()

    def destroy(self):
        self._core.cancel()
        self._core = None


class Logger(RcutilsLogger):
    """A node's logger (named after the node, as rclpy's): messages go to
    stderr and ``/rosout``. As in rclpy, each call takes ``once=True``,
    ``skip_first=True`` and ``throttle_duration_sec=...`` (per call site),
    and ``set_level`` filters by severity (``myelin.logging``)."""

    _CORE = {
        LoggingSeverity.DEBUG: "debug",
        LoggingSeverity.INFO: "info",
        LoggingSeverity.WARN: "warn",
        LoggingSeverity.ERROR: "error",
        LoggingSeverity.FATAL: "fatal",
    }

    def __init__(self, node):
        ns = node.namespace().strip("/").replace("/", ".")
        super().__init__(f"{ns}.{node.name()}" if ns else node.name())
        self._node = node

    def _emit(self, severity, msg):
        self._node.log(self._CORE[severity], str(msg))


class Node:
    """A node named ``node_name`` in ``namespace`` (default: the root)."""

    # rclpy's keywords that change nothing here: global arguments are
    # always used, /rosout is always on, intra-process is always the path
    # between nodes of one process, and the parameter services are
    # the core's.
    _IGNORED = frozenset(
        {
            "cli_args",
            "use_global_arguments",
            "enable_rosout",
            "rosout_qos_profile",
            "start_parameter_services",
            "parameter_services_qos_profile",
            "use_intra_process_comms",
            "enable_logger_service",
        }
    )

    def __init__(
        self,
        node_name,
        *,
        context=None,
        namespace=None,
        parameter_overrides=None,
        allow_undeclared_parameters=False,
        automatically_declare_parameters_from_overrides=False,
        **kwargs,
    ):
        from myelin import get_default_context

        unknown = sorted(set(kwargs) - self._IGNORED)
        if unknown:
            raise TypeError(f"Node() got an unexpected keyword argument {unknown[0]!r}")
        self._context = context if context is not None else get_default_context()
        self._node = _myelin.Node(self._context._core(), node_name, namespace)
        self._destroyed = False
        self._overrides = {}
        for p in parameter_overrides or ():
            if not isinstance(p, Parameter):
                raise TypeError("parameter_overrides must be a list of Parameter")
            self._overrides[p.name] = p.value
        self._allow_undeclared = bool(allow_undeclared_parameters)
        self._executors = set()
        self._publishers = []
        self._subscriptions = []
        self._timers = []
        self._services = []
        self._clients = []
        self._parameter_callbacks = []
        self._rates = []
        self._logger = Logger(self._node)
        if automatically_declare_parameters_from_overrides:
            for name, value in self._overrides.items():
                self.declare_parameter(name, value)

    @property
    def context(self):
        return self._context

    @property
    def publishers(self):
        return iter(self._publishers)

    @property
    def subscriptions(self):
        return iter(self._subscriptions)

    @property
    def timers(self):
        return iter(self._timers)

    def get_name(self):
        return self._node.name()

    def get_namespace(self):
        return self._node.namespace()

    def get_fully_qualified_name(self):
        return self._node.fully_qualified_name()

    def get_logger(self):
        return self._logger

    def get_clock(self):
        """The node's clock (ROS time; ``/clock`` under simulated time)."""
        from myelin.time import ROSClock

        return ROSClock(self._node)

    def create_publisher(
        self, msg_type, topic, qos_profile, *, callback_group=None, event_callbacks=None, **kwargs
    ):
        """A publisher of ``msg_type`` on ``topic``; ``qos_profile`` is a
        :class:`~myelin.qos.QoSProfile` or a depth; ``event_callbacks`` a
        :class:`~myelin.event_handler.PublisherEventCallbacks`."""
        self._check_live()
        qos = _profile(qos_profile)
        on_event = self._events(event_callbacks, PublisherEventCallbacks)
        core = self._node.create_publisher(msg_type, topic, qos._tuple(), on_event)
        p = Publisher(core, msg_type, qos)
        self._publishers.append(p)
        return p

    def create_subscription(
        self,
        msg_type,
        topic,
        callback,
        qos_profile,
        *,
        callback_group=None,
        event_callbacks=None,
        raw=False,
        **kwargs,
    ):
        """A subscription of ``msg_type`` on ``topic``: an executor spinning
        this node calls ``callback(msg)`` with each message (its CDR
        ``bytes`` if ``raw``), or ``callback(msg, info)`` if the callback
        takes two parameters (as rclpy's), and the callbacks of
        ``event_callbacks`` (a
        :class:`~myelin.event_handler.SubscriptionEventCallbacks`) with its
        QoS events.

        ``info`` is a dict with rclpy's ``MessageInfo`` keys
        (``source_timestamp``, ``received_timestamp``,
        ``publication_sequence_number``, ``reception_sequence_number``: ns
        or counts, 0 when the transport does not say) plus
        ``publisher_gid`` (16 bytes) and ``from_intra_process``."""
        self._check_live()
        qos = _profile(qos_profile)
        if not callable(callback):
            raise TypeError("callback must be callable")
        on_event = self._events(event_callbacks, SubscriptionEventCallbacks)
        core = self._node.create_subscription(
            msg_type,
            topic,
            qos._tuple(),
            _coroutine_aware(callback),
            raw,
            on_event,
            core_group(callback_group),
            _takes_info(callback),
        )
        s = Subscription(core, msg_type, callback, qos)
        self._subscriptions.append(s)
        return s

    def _events(self, callbacks, kind):
        """The core's ``on_event`` for ``callbacks`` (rclpy's default when
        ``None``: incompatible QoS is logged as a warning)."""
        if callbacks is None:
            callbacks = kind()
        elif not isinstance(callbacks, kind):
            raise TypeError(f"event_callbacks must be a {kind.__name__}")
        return callbacks._dispatcher(self._logger)

    def create_timer(self, timer_period_sec, callback, callback_group=None, clock=None):
        """A timer that calls ``callback()`` every ``timer_period_sec``
        seconds while an executor spins this node; a callback that takes
        one argument gets a :class:`myelin.timer.TimerInfo` (when the tick
        was due and when it started, on the node's clock), as rclpy's."""
        self._check_live()
        if not callable(callback):
            raise TypeError("callback must be callable")
        if hasattr(timer_period_sec, "nanoseconds"):
            timer_period_sec = timer_period_sec.nanoseconds / 1e9
        run = _coroutine_aware(callback)
        with_info = _takes_one_argument(callback)
        if with_info:
            from myelin.timer import TimerInfo

            node_clock = self.get_clock()
            user = run

            def run(lateness_ns):
                user(TimerInfo._lateness_on(node_clock.now(), lateness_ns))

        core = self._node.create_timer(
            float(timer_period_sec), run, core_group(callback_group), with_info
        )
        t = Timer(core, callback)
        self._timers.append(t)
        return t

    def create_service(self, srv_type, srv_name, callback, *, qos_profile=None, callback_group=None):
        """A server of ``srv_type`` on ``srv_name``: an executor spinning
        this node calls ``callback(request, response)`` and sends what it
        returns. An exception in the callback answers the caller with an
        error and comes out of the ``spin`` that ran it."""
        self._check_live()
        if not callable(callback):
            raise TypeError("callback must be callable")
        if inspect.iscoroutinefunction(callback):
            # The core sends what the callback returns, at once.
            raise TypeError("a service callback must be a plain function (async def is not supported)")
        core = self._node.create_service(srv_type, srv_name, callback, core_group(callback_group))
        s = Service(core, srv_type, srv_name, callback)
        self._services.append(s)
        return s

    def create_client(self, srv_type, srv_name, *, qos_profile=None, callback_group=None):
        """A client of ``srv_type`` for the service ``srv_name`` (its
        ``callback_group`` is checked and has no effect: answers resolve
        the client's futures wherever they arrive)."""
        self._check_live()
        core_group(callback_group)
        c = Client(self._node.create_client(srv_type, srv_name), srv_type, srv_name, self)
        self._clients.append(c)
        return c

    def destroy_service(self, service):
        if service in self._services:
            self._services.remove(service)
            service.destroy()
            return True
        return False

    def destroy_client(self, client):
        if client in self._clients:
            self._clients.remove(client)
            client.destroy()
            return True
        return False

    def destroy_publisher(self, publisher):
        if publisher in self._publishers:
            self._publishers.remove(publisher)
            publisher.destroy()
            return True
        return False

    def destroy_subscription(self, subscription):
        if subscription in self._subscriptions:
            self._subscriptions.remove(subscription)
            subscription.destroy()
            return True
        return False

    def destroy_timer(self, timer):
        if timer in self._timers:
            self._timers.remove(timer)
            timer.destroy()
            return True
        return False

    # ------------------------------------------------------------ parameters

    def declare_parameter(self, name, value=None, descriptor=None, ignore_override=False):
        """Declare ``name`` with ``value`` (a ``--ros-args -p name:=value``
        override wins) and return it as a :class:`~myelin.parameter.Parameter`."""
        if isinstance(value, Parameter):
            value = value.value
        if not ignore_override and name in self._overrides:
            # The node's parameter_overrides win over the default.
            value = self._overrides[name]
        v, t = self._node.declare_parameter(name, value)
        return Parameter(name, Parameter.Type(t), v)

    def declare_parameters(self, namespace, parameters, ignore_override=False):
        """Declare ``(name, value)`` pairs, each under ``namespace.``."""
        prefix = f"{namespace}." if namespace else ""
        out = []
        for p in parameters:
            name, value = (p[0], p[1] if len(p) > 1 else None)
            out.append(self.declare_parameter(prefix + name, value))
        return out

    def has_parameter(self, name):
        return self._node.has_parameter(name)

    def get_parameter(self, name):
        """The parameter ``name`` (``ParameterNotDeclaredException`` if it
        is not declared)."""
        v, t = self._node.get_parameter(name)
        return Parameter(name, Parameter.Type(t), v)

    def get_parameter_or(self, name, alternative_value=None):
        if not self.has_parameter(name):
            return alternative_value if isinstance(alternative_value, Parameter) else Parameter(name, value=alternative_value)
        return self.get_parameter(name)

    def get_parameters(self, names):
        return [self.get_parameter(n) for n in names]

    def undeclare_parameter(self, name):
        self._node.undeclare_parameter(name)

    def set_parameters(self, parameters):
        """Set each parameter; one result per parameter, as rclpy returns
        them (``successful`` and ``reason``)."""
        from myelin.parameter import SetParametersResult

        results = []
        for p in parameters:
            try:
                if self._allow_undeclared and not self.has_parameter(p.name):
                    self.declare_parameter(p.name, p.value)
                    results.append(SetParametersResult(successful=True))
                    continue
                self._node.set_parameters([(p.name, p.value)])
                results.append(SetParametersResult(successful=True))
            except _myelin.MyelinError as e:
                results.append(SetParametersResult(successful=False, reason=str(e)))
        return results

    def set_parameters_atomically(self, parameters):
        """Set all the parameters or none."""
        from myelin.parameter import SetParametersResult

        try:
            self._node.set_parameters([(p.name, p.value) for p in parameters])
            return SetParametersResult(successful=True)
        except _myelin.MyelinError as e:
            return SetParametersResult(successful=False, reason=str(e))

    def add_on_set_parameters_callback(self, callback):
        """Call ``callback(parameters)`` before parameters change; it
        returns an object with ``successful`` and ``reason`` (rclpy's
        ``SetParametersResult``), and a change it refuses is not made."""

        def bridge(changes):
            result = callback([Parameter(n, Parameter.Type(t), v) for n, v, t in changes])
            return (bool(result.successful), str(getattr(result, "reason", "") or ""))

        handle = self._node.add_on_set_parameters_callback(bridge)
        self._parameter_callbacks.append((callback, handle))
        return callback

    def remove_on_set_parameters_callback(self, callback):
        self._parameter_callbacks = [(c, h) for c, h in self._parameter_callbacks if c is not callback]

    def get_topic_names_and_types(self):
        """The topics of the graph with their types, as rclpy lists them:
        this process's and those of the other processes and hosts its
        transports see (shared memory: this host; zenoh: the domain)."""
        return [(t, list(types)) for t, types in self._node.topic_names_and_types()]

    def get_node_names_and_namespaces(self):
        """The graph's nodes as (name, namespace) pairs, as rclpy's."""
        out = []
        for fqn in self._node.node_names():
            ns, _, name = fqn.rpartition("/")
            out.append((name, ns or "/"))
        return out

    def get_node_names(self):
        """The graph's node names (without namespaces), as rclpy's."""
        return [name for name, _ in self.get_node_names_and_namespaces()]

    def count_publishers(self, topic_name):
        """Publishers on a topic (any type), graph-wide, as rclpy's."""
        return self._node.count_publishers(topic_name)

    def count_subscribers(self, topic_name):
        """Subscriptions on a topic (any type), graph-wide, as rclpy's."""
        return self._node.count_subscribers(topic_name)

    def create_rate(self, frequency, clock=None):
        """A :class:`~myelin.timer.Rate` of ``frequency`` Hz: its
        ``sleep()`` returns at the next multiple of the period since it
        was created (as rclpy's; call it from a thread other than the one
        spinning this node)."""
        from myelin.timer import Rate

        self._check_live()
        r = Rate(frequency, clock if clock is not None else self.get_clock(), self._context)
        self._rates.append(r)
        return r

    def destroy_rate(self, rate):
        if rate in self._rates:
            self._rates.remove(rate)
            rate.destroy()
            return True
        return False

    def _check_live(self):
        if self._destroyed:
            from myelin.exceptions import InvalidHandle

            raise InvalidHandle(f"node {self.get_fully_qualified_name()!r} was destroyed")

    def destroy_node(self):
        self._destroyed = True
        for r in self._rates:
            r.destroy()
        self._rates = []
        for e in list(self._executors):
            e.remove_node(self)
        for p in self._publishers:
            p.destroy()
        for s in self._subscriptions:
            s.destroy()
        for t in self._timers:
            t.destroy()
        for x in self._services + self._clients:
            x.destroy()
        self._publishers, self._subscriptions, self._timers = [], [], []
        self._services, self._clients = [], []
        return True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy_node()


def _takes_one_argument(callback):
    """Whether ``callback`` must be called with one positional argument
    (rclpy passes a TimerInfo to such a timer callback)."""
    import inspect

    try:
        params = inspect.signature(callback).parameters.values()
    except (TypeError, ValueError):
        return False
    required = [
        p
        for p in params
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    return len(required) == 1


def _timeout(timeout_sec):
    """rclpy's ``timeout_sec`` for a wait: None is no end, a negative one
    no wait (its ``threading.Event.wait`` returns at once)."""
    return None if timeout_sec is None else max(0.0, float(timeout_sec))

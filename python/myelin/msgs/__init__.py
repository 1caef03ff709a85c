"""Message classes, as rclpy's generated ones look.

Every type myelin ships is importable as ``myelin.msgs.<package>.msg``::

    from myelin.msgs.std_msgs.msg import String
    from myelin.msgs.sensor_msgs.msg import Image

Classes are built on first import from the ``.msg`` definitions (the same
ones the Rust message crate hashes), so their REP 2011 hashes agree with
ROS 2's. A class takes its fields as keywords (missing ones get their
defaults), compares by value and prints like rclpy's::

    >>> from myelin.msgs.geometry_msgs.msg import Point
    >>> Point(x=1.0)
    geometry_msgs.msg.Point(x=1.0, y=0.0, z=0.0)

Numeric arrays and sequences (``uint8[]``, ``float64[9]``...) are numpy
arrays; any sequence of numbers (or ``bytes`` for ``uint8[]``) is accepted
when assigning them.

Your own types: :func:`load_msg` adds a ``.msg`` definition at run time,
after the types it uses::

    from myelin.msgs import load_msg
    Reading = load_msg("my_pkg", "Reading", "std_msgs/Header header\\nfloat64 value")
"""

import ast
import re
import importlib.abc
import importlib.machinery
import sys
import types

import numpy

from myelin import _myelin

__all__ = ["load_msg", "load_srv", "load_action", "get_message", "get_service", "get_action", "Message"]

_classes = {}

_NUMPY = {
    "byte": numpy.uint8,
    "char": numpy.uint8,
    "uint8": numpy.uint8,
    "int8": numpy.int8,
    "int16": numpy.int16,
    "uint16": numpy.uint16,
    "int32": numpy.int32,
    "uint32": numpy.uint32,
    "int64": numpy.int64,
    "uint64": numpy.uint64,
    "float32": numpy.float32,
    "float64": numpy.float64,
}

_ZERO = {"bool": False, "byte": b"\x00", "char": "\x00", "string": "", "wstring": ""}


class Message:
    """The base of every message class."""

    __slots__ = ()
    _TYPE_NAME = None
    _FIELDS = ()

    def __init__(self, **kwargs):
        unknown = set(kwargs) - set(self.__slots__)
        if unknown:
            raise TypeError(
                f"{self._TYPE_NAME} has no field(s) {', '.join(sorted(unknown))}; "
                f"its fields are {', '.join(self.__slots__) or 'none'}"
            )
        for name, make in self._DEFAULTS:
            setattr(self, name, kwargs[name] if name in kwargs else make())

    def __eq__(self, other):
        if type(self) is not type(other):
            return NotImplemented
        for name in self.__slots__:
            a, b = getattr(self, name), getattr(other, name)
            if isinstance(a, numpy.ndarray) or isinstance(b, numpy.ndarray):
                if not numpy.array_equal(numpy.asarray(a), numpy.asarray(b)):
                    return False
            elif a != b:
                return False
        return True

    def __repr__(self):
        pkg, kind, name = self._TYPE_NAME.split("/")
        parts = []
        for f in self.__slots__:
            v = getattr(self, f)
            if isinstance(v, numpy.ndarray):
                v = v.tolist() if v.size <= 16 else f"array(<{v.size} x {v.dtype}>)"
                parts.append(f"{f}={v}")
            else:
                parts.append(f"{f}={v!r}")
        return f"{pkg}.{kind}.{name}({', '.join(parts)})"

    @classmethod
    def get_fields_and_field_types(cls):
        """The fields and their ROS types, as rclpy's classes give them."""
        return dict(cls._FIELDS)


def _literal(text, base):
    """A .msg default or constant value (one value or a ``[...]`` list), as
    Python."""
    text = text.strip()
    if base == "bool":
        text = re.sub(r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", text, flags=re.I), flags=re.I)
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        if base in ("string", "wstring"):
            # An unquoted string default.
            return text
        raise
    if base == "bool":
        return [bool(v) for v in value] if isinstance(value, (list, tuple)) else bool(value)
    return value


def _default_maker(base, nested, coll, size, default):
    """A function that makes a field's default value (a fresh one each
    time, so that instances never share a list or an array)."""
    if nested is not None:
        cls = get_message(nested)
        if coll == "single":
            return cls
        if coll == "array":
            return lambda: [cls() for _ in range(size)]
        return list
    if coll == "single":
        if default is not None:
            value = _literal(default, base)
        else:
            value = _ZERO.get(base, 0.0 if base.startswith("float") else 0)
        if base.startswith("float"):
            value = float(value)
        return lambda: value
    dtype = _NUMPY.get(base)
    if default is not None:
        values = _literal(default, base)
        if dtype is not None:
            return lambda: numpy.array(values, dtype=dtype)
        return lambda: list(values)
    if dtype is not None:
        n = size if coll == "array" else 0
        return lambda: numpy.zeros(n, dtype=dtype)
    if coll == "array":
        zero = _ZERO.get(base, 0)
        return lambda: [zero] * size
    return list


def get_message(type_name):
    """The class of ``pkg/msg/Name`` (built and registered on first use)."""
    cls = _classes.get(type_name)
    if cls is not None:
        return cls
    fields, constants = _myelin.type_info(type_name)
    pkg, kind, name = type_name.split("/")
    defaults = []
    for fname, ftype, base, nested, coll, size, default in fields:
        defaults.append((fname, _default_maker(base, nested, coll, size, default)))
    namespace = {
        "__slots__": tuple(f[0] for f in fields),
        "__module__": f"myelin.msgs.{pkg}.{kind}",
        "__qualname__": name,
        "_TYPE_NAME": type_name,
        "_FIELDS": tuple((f[0], f[1]) for f in fields),
        "_DEFAULTS": tuple(defaults),
    }
    for cname, ctype, value in constants:
        namespace[cname] = _literal(value, ctype)
    cls = type(name, (Message,), namespace)
    _myelin.register_type(cls, type_name)
    cls._ROS_HASH = _myelin.type_hash(type_name)
    _classes[type_name] = cls
    return cls


def load_msg(package, name, text):
    """Add the ``.msg`` definition ``text`` as ``package/msg/name`` and return
    its class (also importable as ``myelin.msgs.<package>.msg.<name>``)."""
    type_name = _myelin.load_msg(package, name, text)
    return get_message(type_name)


def _package_name(path):
    """A package's name: ``package.xml``'s ``<name>``, else its folder's."""
    import os
    import re

    xml = os.path.join(path, "package.xml")
    if os.path.exists(xml):
        with open(xml, encoding="utf-8") as f:
            m = re.search(r"<name>\s*([A-Za-z0-9_]+)\s*</name>", f.read())
        if m:
            return m.group(1)
    return os.path.basename(os.path.normpath(path))


def load_packages(*paths):
    """Load the interfaces of ROS packages from their source folders, as
    colcon would generate them: each folder's ``msg/*.msg``,
    ``srv/*.srv`` and ``action/*.action`` (the package's name from its
    ``package.xml``, else the folder's name). Types may use each other
    and the message crate's types, in any order of files and packages.
    Returns ``{type name: class}``; afterwards the classes import as
    ``from myelin.msgs.<package>.msg import <Type>``.

    A definition that cannot load (a syntax error, a type no package
    defines) raises ``ValueError`` naming its file and why."""
    import os

    kinds = (("msg", ".msg", load_msg), ("srv", ".srv", load_srv), ("action", ".action", load_action))
    loaded = {}
    for kind, ext, load in kinds:
        pending = []
        for path in paths:
            pkg = _package_name(path)
            folder = os.path.join(path, kind)
            if not os.path.isdir(folder):
                continue
            for fname in sorted(os.listdir(folder)):
                if fname.endswith(ext):
                    with open(os.path.join(folder, fname), encoding="utf-8") as f:
                        pending.append((pkg, fname[: -len(ext)], f.read(), os.path.join(folder, fname)))
        # Dependencies first: load what can load, then retry the rest
        # while each pass loads something.
        while pending:
            failed = []
            for pkg, name, text, file in pending:
                try:
                    cls = load(pkg, name, text)
                except Exception as e:  # noqa: BLE001 - retried, then reported
                    failed.append((pkg, name, text, file, e))
                    continue
                loaded[f"{pkg}/{kind}/{name}"] = cls
            if len(failed) == len(pending):
                pkg, name, text, file, e = failed[0]
                raise ValueError(f"{file}: {e}") from e
            pending = [f[:4] for f in failed]
    return loaded


def load_package(path):
    """:func:`load_packages` for one package folder."""
    return load_packages(path)


_services = {}


def get_service(type_name):
    """The class of the service ``pkg/srv/Name``: its ``Request``,
    ``Response`` and ``Event`` message classes, as rclpy's service classes
    have them."""
    cls = _services.get(type_name)
    if cls is not None:
        return cls
    request, response, ros_hash = _myelin.srv_info(type_name)
    pkg, _, name = type_name.split("/")
    namespace = {
        "__module__": f"myelin.msgs.{pkg}.srv",
        "__qualname__": name,
        "__slots__": (),
        "_TYPE_NAME": type_name,
        "_ROS_HASH": ros_hash,
        "Request": get_message(request),
        "Response": get_message(response),
    }
    # The service introspection event (rclpy's ``Event``), for the
    # services of the message crate (a loaded .srv has none yet).
    try:
        namespace["Event"] = get_message(f"{type_name}_Event")
    except ValueError:
        pass
    cls = type(name, (), namespace)
    _services[type_name] = cls
    return cls


def load_srv(package, name, text):
    """Add the ``.srv`` definition ``text`` as ``package/srv/name`` and
    return its class (also importable as ``myelin.msgs.<package>.srv``)."""
    return get_service(_myelin.load_srv(package, name, text))


_actions = {}


def get_action(type_name):
    """The class of the action ``pkg/action/Name``, as rclpy's action
    classes are: its ``Goal``, ``Result`` and ``Feedback`` message classes,
    and in ``Impl`` the services and messages the action is made of
    (``SendGoalService``, ``GetResultService``, ``CancelGoalService``,
    ``FeedbackMessage``, ``GoalStatusMessage``)."""
    cls = _actions.get(type_name)
    if cls is not None:
        return cls
    if not _myelin.knows_action(type_name):
        raise ValueError(f"unknown action type {type_name}")
    pkg, _, name = type_name.split("/")
    impl = type(
        "Impl",
        (),
        {
            "__module__": f"myelin.msgs.{pkg}.action",
            "__qualname__": f"{name}.Impl",
            "SendGoalService": get_service(f"{type_name}_SendGoal"),
            "GetResultService": get_service(f"{type_name}_GetResult"),
            "CancelGoalService": get_service("action_msgs/srv/CancelGoal"),
            "FeedbackMessage": get_message(f"{type_name}_FeedbackMessage"),
            "GoalStatusMessage": get_message("action_msgs/msg/GoalStatusArray"),
        },
    )
    cls = type(
        name,
        (),
        {
            "__module__": f"myelin.msgs.{pkg}.action",
            "__qualname__": name,
            "__slots__": (),
            "_TYPE_NAME": type_name,
            "_ROS_HASH": _myelin.type_hash(type_name),
            "Goal": get_message(f"{type_name}_Goal"),
            "Result": get_message(f"{type_name}_Result"),
            "Feedback": get_message(f"{type_name}_Feedback"),
            "Impl": impl,
        },
    )
    _actions[type_name] = cls
    return cls


def load_action(package, name, text):
    """Add the ``.action`` definition ``text`` (goal, result and feedback
    separated by ``---``) as ``package/action/name`` and return its class
    (also importable as ``myelin.msgs.<package>.action``)."""
    return get_action(_myelin.load_action(package, name, text))


class _InterfaceModule(types.ModuleType):
    """``myelin.msgs.<package>.msg`` (or ``.srv``): classes on attribute
    access."""

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        type_name = f"{self._package}/{self._kind}/{attr}"
        if self._kind == "srv":
            if not _myelin.knows_srv(type_name):
                raise AttributeError(f"no service type {type_name}")
            cls = get_service(type_name)
        elif self._kind == "action":
            if not _myelin.knows_action(type_name):
                raise AttributeError(f"no action type {type_name}")
            cls = get_action(type_name)
        else:
            if not _myelin.knows_type(type_name):
                raise AttributeError(f"no message type {type_name}")
            cls = get_message(type_name)
        setattr(self, attr, cls)
        return cls

    def __dir__(self):
        prefix = f"{self._package}/{self._kind}/"
        names = {
            "srv": _myelin.bundled_services,
            "action": _myelin.bundled_actions,
        }.get(self._kind, _myelin.bundled_types)()
        return [t[len(prefix):] for t in names if t.startswith(prefix)]


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports ``myelin.msgs.<package>`` and ``myelin.msgs.<package>.msg``."""

    def find_spec(self, fullname, path, target=None):
        parts = fullname.split(".")
        if parts[:2] != ["myelin", "msgs"] or len(parts) not in (3, 4):
            return None
        if len(parts) == 4 and parts[3] not in ("msg", "srv", "action"):
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=len(parts) == 3)

    def create_module(self, spec):
        parts = spec.name.split(".")
        if len(parts) == 4:
            m = _InterfaceModule(spec.name)
            m._package = parts[2]
            m._kind = parts[3]
            return m
        return types.ModuleType(spec.name)

    def exec_module(self, module):
        pass


sys.meta_path.append(_Finder())

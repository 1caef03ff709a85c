"""Loggers by name (``rclpy.logging``): ``get_logger(name)``, severities,
and levels per logger name. A node's logger (``node.get_logger()``) is
one of them, named after the node, that also publishes on ``/rosout``."""

import enum
import sys
import time

__all__ = [
    "LoggingSeverity",
    "RcutilsLogger",
    "get_logger",
    "get_logger_level",
    "set_logger_level",
]


class LoggingSeverity(enum.IntEnum):
    """rcutils' severities."""

    UNSET = 0
    DEBUG = 10
    INFO = 20
    WARN = 30
    ERROR = 40
    FATAL = 50


# Levels set by name; a name without one takes its parent's ("a.b" ->
# "a"), and the root's default is INFO, as in rcutils.
_levels = {}
_DEFAULT = LoggingSeverity.INFO


def set_logger_level(name, level):
    _levels[name] = LoggingSeverity(level)


def get_logger_level(name):
    return _levels.get(name, LoggingSeverity.UNSET)


def _effective(name):
    while True:
        level = _levels.get(name, LoggingSeverity.UNSET)
        if level != LoggingSeverity.UNSET:
            return level
        if "." not in name:
            return _DEFAULT
        name = name.rsplit(".", 1)[0]


class RcutilsLogger:
    """A logger named ``name``: ``debug`` ... ``fatal`` (each with rclpy's
    ``once=True``, ``skip_first=True`` and ``throttle_duration_sec=...``
    per call site), ``set_level``, ``get_effective_level``, ``get_child``,
    ``is_enabled_for``. Lines go to stderr as ``[LEVEL] [time] [name]: msg``."""

    def __init__(self, name=""):
        self.name = name
        self._sites = {}

    def get_child(self, name):
        return RcutilsLogger(f"{self.name}.{name}" if self.name else name)

    def set_level(self, level):
        set_logger_level(self.name, level)

    def get_effective_level(self):
        return _effective(self.name)

    def is_enabled_for(self, severity):
        return LoggingSeverity(severity) >= self.get_effective_level()

    def _filter(self, severity, once, skip_first, throttle_duration_sec):
        if not self.is_enabled_for(severity):
            return False
        if once or skip_first or throttle_duration_sec:
            caller = sys._getframe(2)
            site = (caller.f_code.co_filename, caller.f_lineno, int(severity))
            seen = self._sites.get(site)
            now = time.monotonic()
            if seen is None:
                self._sites[site] = now
                if skip_first:
                    return False
            elif once:
                return False
            elif throttle_duration_sec and now - seen < throttle_duration_sec:
                return False
            else:
                self._sites[site] = now
        return True

    def _emit(self, severity, msg):
        print(f"[{severity.name}] [{time.time():.9f}] [{self.name}]: {msg}", file=sys.stderr, flush=True)

    def log(self, msg, severity, once=False, skip_first=False, throttle_duration_sec=None, **_):
        severity = LoggingSeverity(severity)
        if not self._filter(severity, once, skip_first, throttle_duration_sec):
            return False
        self._emit(severity, msg)
        return True

    def _at(severity):
        def method(self, msg, once=False, skip_first=False, throttle_duration_sec=None, **_):
            if not self._filter(severity, once, skip_first, throttle_duration_sec):
                return False
            self._emit(severity, msg)
            return True

        return method

    debug = _at(LoggingSeverity.DEBUG)
    info = _at(LoggingSeverity.INFO)
    warning = warn = _at(LoggingSeverity.WARN)
    error = _at(LoggingSeverity.ERROR)
    fatal = _at(LoggingSeverity.FATAL)
    del _at


def get_logger(name):
    """The logger named ``name``."""
    return RcutilsLogger(name)

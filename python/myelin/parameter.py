"""Parameters (``rclpy.parameter``): a name, a value and its type.

    node.declare_parameter("rate", 30.0)
    rate = node.get_parameter("rate").value
    node.set_parameters([Parameter("rate", Parameter.Type.DOUBLE, 15.0)])

Values are None, bool, int, float, str, bytes, or lists of bool, int,
float or str, as ROS 2's parameter types. Parameters declared on a Python
node are served over ROS 2's parameter services (``myelin param get``,
``ros2 param get``) and announced on ``/parameter_events``, by the core.
"""

import enum

__all__ = ["Parameter"]


class Parameter:
    """A parameter: ``Parameter(name, type_, value)`` or
    ``Parameter(name, value=value)`` (the type follows the value)."""

    class Type(enum.IntEnum):
        NOT_SET = 0
        BOOL = 1
        INTEGER = 2
        DOUBLE = 3
        STRING = 4
        BYTE_ARRAY = 5
        BOOL_ARRAY = 6
        INTEGER_ARRAY = 7
        DOUBLE_ARRAY = 8
        STRING_ARRAY = 9

        @classmethod
        def from_parameter_value(cls, value):
            """The type of a Python value (ValueError if none fits)."""
            if value is None:
                return cls.NOT_SET
            if isinstance(value, bool):
                return cls.BOOL
            if isinstance(value, int):
                return cls.INTEGER
            if isinstance(value, float):
                return cls.DOUBLE
            if isinstance(value, str):
                return cls.STRING
            if isinstance(value, bytes):
                return cls.BYTE_ARRAY
            if isinstance(value, (list, tuple)) and value:
                if all(isinstance(v, bool) for v in value):
                    return cls.BOOL_ARRAY
                if all(isinstance(v, int) and not isinstance(v, bool) for v in value):
                    return cls.INTEGER_ARRAY
                if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
                    return cls.DOUBLE_ARRAY
                if all(isinstance(v, str) for v in value):
                    return cls.STRING_ARRAY
            raise ValueError(f"{value!r} is not a parameter value")

    def __init__(self, name, type_=None, value=None):
        if type_ is not None and not isinstance(type_, Parameter.Type):
            # Parameter(name, value) as a positional pair.
            type_, value = None, type_
        if type_ is None:
            type_ = Parameter.Type.from_parameter_value(value)
        elif value is not None and Parameter.Type.from_parameter_value(value) != type_:
            if not (type_ == Parameter.Type.DOUBLE_ARRAY and isinstance(value, (list, tuple))):
                raise ValueError(f"parameter {name!r}: {value!r} is not of type {type_.name}")
        self._name = name
        self._type = Parameter.Type(type_)
        self._value = value

    @property
    def name(self):
        return self._name

    @property
    def type_(self):
        return self._type

    @property
    def value(self):
        return self._value

    def __eq__(self, other):
        return (
            isinstance(other, Parameter)
            and (self.name, self.type_, self.value) == (other.name, other.type_, other.value)
        )

    def __repr__(self):
        return f"Parameter({self.name!r}, {self.type_.name}, {self.value!r})"


class SetParametersResult:
    """What an on-set-parameters callback returns (rcl_interfaces'
    ``SetParametersResult``: ``successful`` and ``reason``)."""

    def __init__(self, successful=False, reason=""):
        self.successful = successful
        self.reason = reason

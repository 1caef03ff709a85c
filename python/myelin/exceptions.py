"""Exceptions under rclpy's names (``rclpy.exceptions``)."""

from myelin._myelin import (  # noqa: F401
    InvalidNameError as InvalidTopicNameException,
    InvalidParameterValueException,
    MyelinError,
    ParameterAlreadyDeclaredException,
    ParameterNotDeclaredException,
)

"""Exceptions under rclpy's names (``rclpy.exceptions``)."""

from myelin._myelin import (  # noqa: F401
    InvalidNameError as InvalidTopicNameException,
    InvalidParameterValueException,
    MyelinError,
    ParameterAlreadyDeclaredException,
    ParameterNotDeclaredException,
)


class InvalidHandle(RuntimeError):
    """An object used after it was destroyed (``node.create_publisher``
    after ``destroy_node()``), as rclpy's ``InvalidHandle``."""

"""CDR of messages (``rclpy.serialization``)."""

from myelin import _myelin

__all__ = ["serialize_message", "deserialize_message"]


def serialize_message(message):
    """The CDR bytes of ``message``, as ROS 2 puts it on the wire."""
    return _myelin.serialize(message)


def deserialize_message(serialized_message, message_type):
    """A ``message_type`` from its CDR bytes."""
    return _myelin.deserialize(bytes(serialized_message), message_type)

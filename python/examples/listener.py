"""ROS 2's demo listener (demo_nodes_py), with only its imports changed.

    python python/examples/listener.py
"""

import myelin as rclpy
from myelin.executors import ExternalShutdownException
from myelin.msgs.std_msgs.msg import String
from myelin.node import Node


class Listener(Node):
    def __init__(self):
        super().__init__("listener")
        self.sub = self.create_subscription(String, "chatter", self.chatter_callback, 10)

    def chatter_callback(self, msg):
        self.get_logger().info(f'I heard: [{msg.data}]')


def main(args=None):
    rclpy.init(args=args)
    node = Listener()
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()

"""ROS 2's demo talker (demo_nodes_py), with only its imports changed.

    python python/examples/talker.py
"""

import myelin as rclpy
from myelin.executors import ExternalShutdownException
from myelin.msgs.std_msgs.msg import String
from myelin.node import Node


class Talker(Node):
    def __init__(self):
        super().__init__("talker")
        self.i = 0
        self.pub = self.create_publisher(String, "chatter", 10)
        self.tmr = self.create_timer(1.0, self.timer_callback)

    def timer_callback(self):
        msg = String()
        msg.data = f"Hello World: {self.i}"
        self.i += 1
        self.get_logger().info(f'Publishing: "{msg.data}"')
        self.pub.publish(msg)


def main(args=None):
    rclpy.init(args=args)
    node = Talker()
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()

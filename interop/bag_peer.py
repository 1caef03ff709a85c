"""An independent reader and writer of ROS 2 MCAP bags, for myelin's tests.

It uses only the MCAP project's Python packages (`mcap`, `mcap-ros2-support`),
which know nothing of myelin: a bag myelin writes must decode here field by
field, and a bag written here must play through myelin.

    python bag_peer.py read FILE.mcap        # one JSON line per message
    python bag_peer.py channels FILE.mcap    # one JSON line per channel
    python bag_peer.py write FILE.mcap N     # N std_msgs/String + N Twist
    python bag_peer.py write_by_topic FILE.mcap N
        # the same, but all Twists first, then all Strings, in small chunks:
        # the file is not in time order (as a writer that buffers per topic
        # leaves it); its chunk index says where each time range is
"""

import json
import sys

from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory
from mcap_ros2.writer import Writer


def plain(value):
    """A decoded ROS message as JSON-able values."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return list(bytes(value))
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "__slots__"):
        return {k: plain(getattr(value, k)) for k in value.__slots__}
    if hasattr(value, "tolist"):  # numpy arrays, if any
        return value.tolist()
    return value


def read(path):
    with open(path, "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        for schema, channel, message, decoded in reader.iter_decoded_messages():
            print(
                json.dumps(
                    {
                        "topic": channel.topic,
                        "type": schema.name,
                        "log_time": message.log_time,
                        "sequence": message.sequence,
                        "value": plain(decoded),
                    }
                )
            )


def channels(path):
    with open(path, "rb") as f:
        reader = make_reader(f)
        header = reader.get_header()
        summary = reader.get_summary()
        for ch in summary.channels.values():
            schema = summary.schemas.get(ch.schema_id)
            print(
                json.dumps(
                    {
                        "profile": header.profile,
                        "topic": ch.topic,
                        "encoding": ch.message_encoding,
                        "schema": schema.name,
                        "schema_encoding": schema.encoding,
                        "metadata": dict(ch.metadata),
                        "count": summary.statistics.channel_message_counts.get(ch.id, 0),
                    }
                )
            )
        for m in reader.iter_metadata():
            first = m.metadata.get("serialized_metadata", "").splitlines()[:1]
            print(json.dumps({"metadata_record": m.name, "keys": sorted(m.metadata), "first_line": first}))


TWIST = """geometry_msgs/Vector3 linear
geometry_msgs/Vector3 angular
================================================================================
MSG: geometry_msgs/Vector3
float64 x
float64 y
float64 z
"""


def write(path, n, by_topic=False):
    start = 1_700_000_000_000_000_000
    with open(path, "wb") as f:
        w = Writer(f, chunk_size=512) if by_topic else Writer(f)
        string = w.register_msgdef("std_msgs/msg/String", "string data\n")
        twist = w.register_msgdef("geometry_msgs/msg/Twist", TWIST)

        def chatter(i):
            t = start + i * 10_000_000  # 100 Hz
            w.write_message("/py_chatter", string, {"data": f"py {i}"}, t, t, i)

        def cmd_vel(i):
            t = start + i * 10_000_000 + 1
            w.write_message(
                "/py_cmd_vel",
                twist,
                {"linear": {"x": float(i), "y": 0.5, "z": 0.0}, "angular": {"x": 0.0, "y": 0.0, "z": -1.0}},
                t,
                t,
                i,
            )

        if by_topic:
            for i in range(n):
                cmd_vel(i)
            for i in range(n):
                chatter(i)
        else:
            for i in range(n):
                chatter(i)
                cmd_vel(i)
        w.finish()


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "read":
        read(sys.argv[2])
    elif cmd == "channels":
        channels(sys.argv[2])
    elif cmd == "write":
        write(sys.argv[2], int(sys.argv[3]))
    elif cmd == "write_by_topic":
        write(sys.argv[2], int(sys.argv[3]), by_topic=True)
    else:
        sys.exit(f"unknown command {cmd}")

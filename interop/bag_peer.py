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
from mcap_ros2._dynamic import generate_dynamic
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


SEPARATOR = "\n" + "=" * 80 + "\n"

# service_msgs/msg/ServiceEventInfo and builtin_interfaces/msg/Time as ROS 2
# defines them (service_msgs/msg/ServiceEventInfo.msg, without comments).
SERVICE_EVENT_INFO = "uint8 event_type\nbuiltin_interfaces/Time stamp\nchar[16] client_gid\nint64 sequence_number\n"
TIME = "int32 sec\nuint32 nanosec\n"


def event_definition(schema_name, text):
    """A service event's type as .msg text the decoder reads.

    rosbag2 stores the schema of `pkg/srv/Name_Event` as the .srv text
    (request, a `---` line, response) followed by the messages both parts
    use. The event itself is rosidl's: `ServiceEventInfo info`, then the
    request and the response, each a sequence of at most one. The MCAP
    decoder takes no `_` in type names, so the parts are named
    `pkg/NameRequest` and `pkg/NameResponse` here.
    """
    pkg, _, name = schema_name.split("/")
    base = name[: -len("_Event")]
    srv, *deps = text.split(SEPARATOR)
    lines = srv.split("\n")
    cut = lines.index("---") if "---" in lines else len(lines)
    request, response = "\n".join(lines[:cut]), "\n".join(lines[cut + 1 :])
    req, resp = f"{pkg}/{base}Request", f"{pkg}/{base}Response"
    root = f"service_msgs/ServiceEventInfo info\n{req}[<=1] request\n{resp}[<=1] response\n"
    parts = [
        root,
        f"MSG: {req}\n{request}",
        f"MSG: {resp}\n{response}",
        f"MSG: service_msgs/ServiceEventInfo\n{SERVICE_EVENT_INFO}",
        f"MSG: builtin_interfaces/Time\n{TIME}",
        *deps,
    ]
    return f"{pkg}/{base}Event", SEPARATOR.join(parts)


def decoder_for(schema):
    """The decoder of one schema: the MCAP project's, from the schema's
    text (a service event's rewritten as `event_definition` says)."""
    name, text = schema.name, schema.data.decode()
    if "/srv/" in name and name.endswith("_Event"):
        name, text = event_definition(name, text)
    return generate_dynamic(name, text)[name]


def read(path):
    decoders = {}
    with open(path, "rb") as f:
        reader = make_reader(f)
        for schema, channel, message in reader.iter_messages():
            if schema.id not in decoders:
                decoders[schema.id] = decoder_for(schema)
            decoded = decoders[schema.id](message.data)
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

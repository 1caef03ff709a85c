#!/usr/bin/env python3
"""An independent ROS 2 peer in rmw_zenoh's wire format, for interop tests.

Written from rmw_zenoh's design document (docs/design.md in ros2/rmw_zenoh)
and its source, not from myelin's code: it shares no code with myelin, so
a test where myelin and this peer talk checks myelin against the
specification, the way a ROS 2 node on rmw_zenoh would see it.

What it does (all on one zenoh session, client mode, to a given router,
multicast scouting off so nothing leaves the machine):

  server  serve example_interfaces/srv/AddTwoInts: a complete queryable on
          the service key and an SS liveliness token; each reply echoes
          the request's sequence number and the client's gid. Prints
          "ready", then one "request seq=N gid=HEX a=A b=B" line per call.
          --hang: take requests and never answer.
  client  wait for an SS token of the service (as wait_for_service does),
          print "server NODE TOKEN", then call it with the given numbers
          (a get on the service key, target ALL_COMPLETE, no
          consolidation, with an SC token declared first). Prints
          "sum S seq=N" per call; exits 1 on no reply. --garbage: the
          first request is three bytes of garbage (expects an error reply).
  talker  publish std_msgs/msg/String "py talker N" (N = 0, 1, ...) on
          --topic at --rate Hz with an MP token and the attachment, as
          demo_nodes_cpp's talker on rmw_zenoh. Prints "ready"; runs until
          stdin closes.
  listener  subscribe to std_msgs/msg/String on --topic with an MS token;
          prints "ready", then "heard TEXT" per message; exits after
          --count messages (exit 1 if they do not come within --timeout).

  param-get  as `ros2 param get`: call the node's ~/get_parameters
          (rcl_interfaces/srv/GetParameters) for --names (comma-separated)
          on node --target, decoding the CDR reply by hand; prints
          "param NAME TYPE VALUE" per name (TYPE the ParameterType number).

  --transient-local (talker, listener): TRANSIENT_LOCAL durability as
          rmw_zenoh implements it with zenoh-ext's advanced publisher and
          subscriber. The talker publishes --count messages and prints
          "published N" (then stays until stdin closes), from a cache of
          depth 10 (publisher detection; sequence numbers with a 500 ms
          sporadic heartbeat, as for a reliable publisher). The listener
          asks every publisher's cache for its last 10 samples, late
          publishers too (history with late-publisher detection, heartbeat
          recovery, subscriber detection). The tokens' QoS says durability
          1 (transient local).

Keys and tokens (rmw_zenoh, zenoh 1.x):
  service key  <domain>/<name without outer '/'>/<pkg>::srv::dds_::<Srv>_/<RIHS01 hash of the srv>
  token        @ros2_lv/<domain>/<zid>/<nid>/<eid>/<SS|SC>/<enclave>/<namespace>/<node>/<name>/<type>/<hash>/<qos>
               ('/' inside a name becomes '%', an empty part is '%')
  attachment   int64 LE sequence number, int64 LE source timestamp (ns),
               varint 16, 16-byte gid (zenoh-ext serialization)
  payload      CDR: 00 01 00 00 (little endian), then the fields
"""

import argparse
import hashlib
import os
import struct
import sys
import threading
import time

import zenoh
import zenoh.ext

SRV_TYPE = "example_interfaces::srv::dds_::AddTwoInts_"
# REP 2011 hash of example_interfaces/srv/AddTwoInts, as rmw_zenoh's design
# document shows it in its example key expression.
SRV_HASH = "RIHS01_e118de6bf5eeb66a2491b5bda11202e7b68f198d6f67922cf30364858239c81a"
# ROS 2's services default QoS (reliable, volatile, keep last 10) in the
# token's form, defaults left empty.
SERVICE_QOS = "::,10:,:,:,,"
CDR_LE = b"\x00\x01\x00\x00"
MSG_TYPE = "std_msgs::msg::dds_::String_"
# REP 2011 hash of std_msgs/msg/String.
MSG_HASH = "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18"
# rclcpp's default publisher/subscription QoS: reliable, volatile, keep
# last 10 (defaults left empty).
TOPIC_QOS = "::,10:,:,:,,"
# The same with durability TRANSIENT_LOCAL (1).
TOPIC_QOS_TL = ":1:,10:,:,:,,"


def mangle(name):
    """A name inside a token: '/' becomes '%', empty becomes '%'."""
    return name.replace("/", "%") if name else "%"


def service_key(domain, service):
    return f"{domain}/{service.strip('/')}/{SRV_TYPE}/{SRV_HASH}"


def token(domain, zid, eid, kind, node, service):
    return "/".join([
        "@ros2_lv", str(domain), zid, "0", str(eid), kind,
        "%", "%", node, mangle(service), SRV_TYPE, SRV_HASH, SERVICE_QOS,
    ])


def topic_key(domain, topic):
    return f"{domain}/{topic.strip('/')}/{MSG_TYPE}/{MSG_HASH}"


def topic_token(domain, zid, eid, kind, node, topic, qos=TOPIC_QOS):
    return "/".join([
        "@ros2_lv", str(domain), zid, "0", str(eid), kind,
        "%", "%", node, mangle(topic), MSG_TYPE, MSG_HASH, qos,
    ])


def cdr_string(text):
    data = text.encode() + b"\x00"
    return CDR_LE + struct.pack("<I", len(data)) + data


def read_cdr_string(payload):
    if payload[:4] != CDR_LE or len(payload) < 9:
        raise ValueError(f"not a CDR string: {payload.hex()}")
    (n,) = struct.unpack_from("<I", payload, 4)
    body = payload[8:8 + n]
    if n == 0 or len(body) != n or body[-1] != 0:
        raise ValueError(f"bad CDR string length {n}")
    return body[:-1].decode()


def talk(args):
    session = open_session(args.connect)
    zid = str(session.zid())
    gid = hashlib.sha256(f"{zid}/talker".encode()).digest()[:16]
    _n = session.liveliness().declare_token(
        "/".join(["@ros2_lv", str(args.domain), zid, "0", "0", "NN", "%", "%", args.node]))
    qos = TOPIC_QOS_TL if args.transient_local else TOPIC_QOS
    _t = session.liveliness().declare_token(
        topic_token(args.domain, zid, 12, "MP", args.node, args.topic, qos))
    if args.transient_local:
        pub = zenoh.ext.declare_advanced_publisher(
            session,
            topic_key(args.domain, args.topic),
            cache=zenoh.ext.CacheConfig(max_samples=10),
            sample_miss_detection=zenoh.ext.MissDetectionConfig(sporadic_heartbeat=0.5),
            publisher_detection=True,
        )
    else:
        pub = session.declare_publisher(topic_key(args.domain, args.topic))
    print("ready", flush=True)
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    if args.transient_local:
        for n in range(args.count):
            pub.put(cdr_string(f"py talker {n}"), attachment=attachment(n + 1, gid))
        print(f"published {args.count}", flush=True)
        stop.wait(args.lifetime)
        session.close()
        return
    n = 0
    deadline = time.time() + args.lifetime
    while not stop.is_set() and time.time() < deadline:
        pub.put(cdr_string(f"py talker {n}"), attachment=attachment(n + 1, gid))
        n += 1
        stop.wait(1.0 / args.rate)
    session.close()


def listen(args):
    session = open_session(args.connect)
    zid = str(session.zid())
    heard = []
    done = threading.Event()

    def on_sample(sample):
        try:
            read_attachment(sample.attachment.to_bytes() if sample.attachment is not None else None)
            text = read_cdr_string(sample.payload.to_bytes())
        except ValueError as e:
            print(f"error {e}", flush=True)
            return
        print(f"heard {text}", flush=True)
        heard.append(text)
        if len(heard) >= args.count:
            done.set()

    if args.transient_local:
        _s = zenoh.ext.declare_advanced_subscriber(
            session,
            topic_key(args.domain, args.topic),
            on_sample,
            history=zenoh.ext.HistoryConfig(detect_late_publishers=True, max_samples=10),
            recovery=zenoh.ext.RecoveryConfig(heartbeat=True),
            subscriber_detection=True,
        )
        qos = TOPIC_QOS_TL
    else:
        _s = session.declare_subscriber(topic_key(args.domain, args.topic), on_sample)
        qos = TOPIC_QOS
    _t = session.liveliness().declare_token(
        topic_token(args.domain, zid, 13, "MS", args.node, args.topic, qos))
    print("ready", flush=True)
    ok = done.wait(args.timeout)
    session.close()
    sys.exit(0 if ok else 1)


def parse_token(key):
    """The fields of an rmw_zenoh entity token (None if it is not one)."""
    parts = key.split("/")
    if len(parts) != 13 or parts[0] != "@ros2_lv":
        return None
    names = ["prefix", "domain", "zid", "nid", "eid", "kind", "enclave",
             "namespace", "node", "name", "type", "hash", "qos"]
    t = dict(zip(names, parts))
    t["name"] = t["name"].replace("%", "/")
    return t


def attachment(seq, gid):
    assert len(gid) == 16
    return struct.pack("<qqB", seq, time.time_ns(), 16) + gid


def read_attachment(b):
    if b is None or len(b) != 33 or b[16] != 16:
        raise ValueError(f"not an rmw_zenoh attachment: {b!r}")
    seq, stamp = struct.unpack_from("<qq", b, 0)
    return seq, stamp, bytes(b[17:33])


def open_session(connect):
    conf = zenoh.Config()
    conf.insert_json5("mode", '"client"')
    conf.insert_json5("connect/endpoints", f'["{connect}"]')
    conf.insert_json5("scouting/multicast/enabled", "false")
    return zenoh.open(conf)


def serve(args):
    session = open_session(args.connect)
    zid = str(session.zid())
    key = service_key(args.domain, args.service)
    lock = threading.Lock()
    held = []

    def on_query(query):
        payload = query.payload.to_bytes() if query.payload is not None else b""
        att = query.attachment.to_bytes() if query.attachment is not None else None
        try:
            seq, _, gid = read_attachment(att)
            if payload[:4] != CDR_LE or len(payload) != 20:
                raise ValueError(f"bad request payload {payload.hex()}")
            a, b = struct.unpack_from("<qq", payload, 4)
        except ValueError as e:
            with lock:
                print(f"error {e}", flush=True)
            query.reply_err(str(e).encode())
            return
        with lock:
            print(f"request seq={seq} gid={gid.hex()} a={a} b={b}", flush=True)
        if args.hang:
            # Keep the query open and never answer (a server that hangs
            # or is about to be killed).
            held.append(query)
            return
        query.reply(query.key_expr, CDR_LE + struct.pack("<q", a + b),
                    attachment=attachment(seq, gid))

    _q = session.declare_queryable(key, on_query, complete=True)
    _t = session.liveliness().declare_token(
        token(args.domain, zid, 10, "SS", args.node, args.service))
    print("ready", flush=True)
    # Serve until stdin closes (the test ends) or the time is up.
    deadline = time.time() + args.lifetime
    while time.time() < deadline:
        if sys.stdin.readline() == "":
            break
    session.close()


def wait_for_server(session, domain, service, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        for reply in session.liveliness().get(f"@ros2_lv/{domain}/**", timeout=1.0):
            if reply.ok is None:
                continue
            t = parse_token(str(reply.ok.key_expr))
            if (t and t["kind"] == "SS" and t["name"] == service
                    and t["type"] == SRV_TYPE and t["hash"] == SRV_HASH):
                return t, str(reply.ok.key_expr)
        time.sleep(0.1)
    return None, None


def call(args):
    session = open_session(args.connect)
    zid = str(session.zid())
    gid = hashlib.sha256(f"{zid}/client".encode()).digest()[:16]
    _t = session.liveliness().declare_token(
        token(args.domain, zid, 11, "SC", args.node, args.service))
    server, key_of_token = wait_for_server(session, args.domain, args.service, args.timeout)
    if server is None:
        print("no server", flush=True)
        sys.exit(1)
    print(f"server {server['node']} {key_of_token}", flush=True)
    key = service_key(args.domain, args.service)
    for seq in range(1, args.calls + 1):
        request = CDR_LE + struct.pack("<qq", args.a, args.b + seq - 1)
        if args.garbage and seq == 1:
            # Not a CDR AddTwoInts request: the server must say so, not
            # crash or hang.
            request = b"\xff" * 3
        got = None
        for reply in session.get(key, payload=request, attachment=attachment(seq, gid),
                                 target=zenoh.QueryTarget.ALL_COMPLETE,
                                 consolidation=zenoh.ConsolidationMode.NONE,
                                 timeout=args.timeout):
            if reply.ok is None:
                print(f"error reply {reply.err.payload.to_bytes()!r}", flush=True)
                continue
            body = reply.ok.payload.to_bytes()
            att = reply.ok.attachment.to_bytes() if reply.ok.attachment is not None else None
            rseq, _, rgid = read_attachment(att)
            if rgid != gid:
                print(f"reply for another client {rgid.hex()}", flush=True)
                continue
            if body[:4] != CDR_LE or len(body) != 12:
                print(f"bad reply payload {body.hex()}", flush=True)
                continue
            got = (struct.unpack_from("<q", body, 4)[0], rseq)
        if got is None and args.garbage and seq == 1:
            continue
        if got is None:
            print("no reply", flush=True)
            sys.exit(1)
        print(f"sum {got[0]} seq={got[1]}", flush=True)
    session.close()


# rcl_interfaces/srv/GetParameters: its REP 2011 hash as ROS 2 Jazzy has
# it (computed from rcl_interfaces' .srv by the type description rules).
GET_PARAMS_TYPE = "rcl_interfaces::srv::dds_::GetParameters_"
GET_PARAMS_HASH = "RIHS01_bf9803d5c74cf989a5de3e0c2e99444599a627c7ff75f97b8c05b01003675cbc"


class CdrReader:
    """Little-endian CDR after the 4-byte header: primitives aligned to
    their size relative to the end of the header."""

    def __init__(self, payload):
        if payload[:4] != CDR_LE:
            raise ValueError(f"not little-endian CDR: {payload[:4].hex()}")
        self.b = payload[4:]
        self.i = 0

    def _take(self, fmt, size):
        self.i += (-self.i) % size
        (v,) = struct.unpack_from(fmt, self.b, self.i)
        self.i += size
        return v

    def u8(self):
        return self._take("<B", 1)

    def boolean(self):
        return self._take("<B", 1) != 0

    def u32(self):
        return self._take("<I", 4)

    def i64(self):
        return self._take("<q", 8)

    def f64(self):
        return self._take("<d", 8)

    def string(self):
        n = self.u32()
        s = self.b[self.i:self.i + n]
        self.i += n
        if n == 0 or s[-1] != 0:
            raise ValueError("bad CDR string")
        return s[:-1].decode()

    def seq(self, item):
        return [item() for _ in range(self.u32())]


def cdr_string_seq(items):
    out = bytearray(CDR_LE) + struct.pack("<I", len(items))
    for s in items:
        data = s.encode() + b"\x00"
        out += b"\x00" * ((-(len(out) - 4)) % 4)
        out += struct.pack("<I", len(data)) + data
    return bytes(out)


def parameter_value(r):
    """rcl_interfaces/msg/ParameterValue, field by field."""
    kind = r.u8()
    fields = [r.boolean(), r.i64(), r.f64(), r.string(), r.seq(r.u8), r.seq(r.boolean),
              r.seq(r.i64), r.seq(r.f64), r.seq(r.string)]
    value = {0: None, 1: fields[0], 2: fields[1], 3: fields[2], 4: fields[3],
             5: fields[4], 6: fields[5], 7: fields[6], 8: fields[7], 9: fields[8]}.get(kind)
    return kind, value


def param_get(args):
    session = open_session(args.connect)
    zid = str(session.zid())
    gid = hashlib.sha256(f"{zid}/param".encode()).digest()[:16]
    names = args.names.split(",")
    key = f"{args.domain}/{args.target.strip('/')}/get_parameters/{GET_PARAMS_TYPE}/{GET_PARAMS_HASH}"
    deadline = time.time() + args.timeout
    while time.time() < deadline:
        for reply in session.get(key, payload=cdr_string_seq(names),
                                 attachment=attachment(1, gid),
                                 target=zenoh.QueryTarget.ALL_COMPLETE,
                                 consolidation=zenoh.ConsolidationMode.NONE,
                                 timeout=2.0):
            if reply.ok is None:
                continue
            r = CdrReader(reply.ok.payload.to_bytes())
            values = r.seq(lambda: parameter_value(r))
            for name, (kind, value) in zip(names, values):
                print(f"param {name} {kind} {value}", flush=True)
            session.close()
            return
        time.sleep(0.2)
    print("no reply", flush=True)
    session.close()
    sys.exit(1)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("role", choices=["server", "client", "talker", "listener", "param-get"])
    p.add_argument("--target", default="/talker", help="param-get: the node")
    p.add_argument("--names", default="", help="param-get: comma-separated parameter names")
    p.add_argument("--connect", required=True, help="router endpoint, e.g. tcp/127.0.0.1:7447")
    p.add_argument("--domain", type=int, default=int(os.environ.get("ROS_DOMAIN_ID", "0")))
    p.add_argument("--service", default="/add_two_ints")
    p.add_argument("--node", default="py_peer")
    p.add_argument("--a", type=int, default=2)
    p.add_argument("--b", type=int, default=3)
    p.add_argument("--calls", type=int, default=1)
    p.add_argument("--topic", default="/chatter")
    p.add_argument("--rate", type=float, default=20.0)
    p.add_argument("--count", type=int, default=10)
    p.add_argument("--timeout", type=float, default=30.0)
    p.add_argument("--lifetime", type=float, default=120.0)
    p.add_argument("--hang", action="store_true", help="server: never answer")
    p.add_argument("--transient-local", action="store_true",
                   help="talker/listener: TRANSIENT_LOCAL via zenoh-ext's advanced pub/sub")
    p.add_argument("--garbage", action="store_true",
                   help="client: make the first request malformed")
    args = p.parse_args()
    {"server": serve, "client": call, "talker": talk, "listener": listen,
     "param-get": param_get}[args.role](args)


if __name__ == "__main__":
    main()

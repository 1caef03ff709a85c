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
          demo_nodes_cpp's talker on rmw_zenoh. Prints "ready" (then,
          with --print-gid, "gid HEX": its attachment's gid); runs until
          stdin closes.
  listener  subscribe to std_msgs/msg/String on --topic with an MS token;
          prints "ready", then "heard TEXT" per message; exits after
          --count messages (exit 1 if they do not come within --timeout).

  param-get  as `ros2 param get`: call the node's ~/get_parameters
          (rcl_interfaces/srv/GetParameters) for --names (comma-separated)
          on node --target, decoding the CDR reply by hand; prints
          "param NAME TYPE VALUE" per name (TYPE the ParameterType number).
  type-description  as a tool learning a type at run time (REP 2016): call
          node --target's ~/get_type_description for --type-name
          (--type-hash), decode the TypeDescription by hand and recompute
          its REP 2011 hash from it (sha256 of rosidl's JSON); prints
          "described NAME HASH FIELDS NREFS SOURCE_ENCODINGS" or "failed
          REASON".

  action-server  serve example_interfaces/action/Fibonacci on --action as
          rclcpp's demo fibonacci_action_server: queryables and SS tokens
          for <action>/_action/{send_goal,cancel_goal,get_result}, MP
          tokens and publishers for _action/feedback and _action/status
          (transient local: an advanced publisher caching 1), an NN token.
          Prints "ready"; "accepted UUID order N" or "rejected UUID" per
          goal (order > 46 is rejected); "cancel CODE N" per cancel
          request; "succeeded UUID" or "canceled UUID" when a goal ends.
          A goal makes order-1 steps, one each 1/--rate s, with a feedback
          each. get_result of a running goal is answered when it ends.
          Runs until stdin closes or --lifetime.
  action-client  send one goal (--order) as rclcpp's demo client: SC tokens
          for the three services, MS tokens and subscribers for feedback
          and status (status: advanced subscriber with history). Prints
          "server NODE" once the three services are up; "accepted UUID SEC
          NANOSEC" or "rejected" (exit 0); then "feedback 0,1,1,..." and
          "status S" (when this goal's status changes), "cancel CODE N" after
          --cancel-after K feedbacks (K > 0), and last "result S 0,1,1,...";
          exits 1 on no server or no reply within --timeout.

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
               (an action's parts: <domain>/<action>/_action/<part>/<type>/<hash>,
               e.g. example_interfaces::action::dds_::Fibonacci_SendGoal_)
  token        @ros2_lv/<domain>/<zid>/<nid>/<eid>/<SS|SC>/<enclave>/<namespace>/<node>/<name>/<type>/<hash>/<qos>
               ('/' inside a name becomes '%', an empty part is '%')
  attachment   int64 LE sequence number, int64 LE source timestamp (ns),
               varint 16, 16-byte gid (zenoh-ext serialization)
  payload      CDR: 00 01 00 00 (little endian), then the fields
"""

import argparse
import hashlib
import os
import queue
import struct
import sys
import threading
import time
import uuid

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


def service_key(domain, service, srv_type=SRV_TYPE, srv_hash=SRV_HASH):
    return f"{domain}/{service.strip('/')}/{srv_type}/{srv_hash}"


def token(domain, zid, eid, kind, node, service, srv_type=SRV_TYPE, srv_hash=SRV_HASH,
          qos=SERVICE_QOS):
    return "/".join([
        "@ros2_lv", str(domain), zid, "0", str(eid), kind,
        "%", "%", node, mangle(service), srv_type, srv_hash, qos,
    ])


def topic_key(domain, topic, msg_type=MSG_TYPE, msg_hash=MSG_HASH):
    return f"{domain}/{topic.strip('/')}/{msg_type}/{msg_hash}"


def topic_token(domain, zid, eid, kind, node, topic, qos=TOPIC_QOS, msg_type=MSG_TYPE,
                msg_hash=MSG_HASH):
    return "/".join([
        "@ros2_lv", str(domain), zid, "0", str(eid), kind,
        "%", "%", node, mangle(topic), msg_type, msg_hash, qos,
    ])


def node_token(domain, zid, node):
    return "/".join(["@ros2_lv", str(domain), zid, "0", "0", "NN", "%", "%", node])


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
    if args.print_gid:
        # Only when asked: callers that read "ready" and close the pipe
        # would otherwise kill this process with the next line.
        print(f"gid {gid.hex()}", flush=True)
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


def wait_for_server(session, domain, service, timeout, srv_type=SRV_TYPE, srv_hash=SRV_HASH):
    deadline = time.time() + timeout
    while time.time() < deadline:
        for reply in session.liveliness().get(f"@ros2_lv/{domain}/**", timeout=1.0):
            if reply.ok is None:
                continue
            t = parse_token(str(reply.ok.key_expr))
            if (t and t["kind"] == "SS" and t["name"] == service
                    and t["type"] == srv_type and t["hash"] == srv_hash):
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

    def i8(self):
        return self._take("<b", 1)

    def i32(self):
        return self._take("<i", 4)

    def u32(self):
        return self._take("<I", 4)

    def raw(self, n):
        """n bytes as they are (a uint8[n] array: no length, no alignment)."""
        if self.i + n > len(self.b):
            raise ValueError(f"CDR payload too short for {n} bytes")
        out = bytes(self.b[self.i:self.i + n])
        self.i += n
        return out

    def i64(self):
        return self._take("<q", 8)

    def u64(self):
        return self._take("<Q", 8)

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


# type_description_interfaces/srv/GetTypeDescription (REP 2016), every
# node's ~/get_type_description, and its REP 2011 hash (Jazzy).
GET_TYPE_DESC_TYPE = "type_description_interfaces::srv::dds_::GetTypeDescription_"
GET_TYPE_DESC_HASH = "RIHS01_69b9c19c1021405984cc60dbbb1edceb147a6538b411d812ba6afabeed962cd5"


def individual_type_description(r):
    """type_description_interfaces/msg/IndividualTypeDescription."""
    name = r.string()

    def field():
        fname = r.string()
        ftype = {"type_id": r.u8(), "capacity": r.u64(), "string_capacity": r.u64(),
                 "nested_type_name": r.string()}
        r.string()  # default_value: not part of the hash
        return {"name": fname, "type": ftype}

    return {"type_name": name, "fields": r.seq(field)}


def rihs01(description, referenced):
    """REP 2011: sha256 of the description as rosidl writes it in JSON
    (Python's json.dumps, ', ' and ': ' separators, referenced types sorted
    by name), default values left out."""
    import json
    doc = {"type_description": description,
           "referenced_type_descriptions": sorted(referenced, key=lambda t: t["type_name"])}
    text = json.dumps(doc, separators=(", ", ": "), ensure_ascii=True)
    return "RIHS01_" + hashlib.sha256(text.encode()).hexdigest()


def type_description(args):
    """As a tool would: ask node --target for the description of
    --type-name, recompute its hash from the answer, print "described
    NAME HASH FIELDS REFS SOURCES" (or "failed REASON")."""
    session = open_session(args.connect)
    zid = str(session.zid())
    gid = hashlib.sha256(f"{zid}/typedesc".encode()).digest()[:16]
    key = (f"{args.domain}/{args.target.strip('/')}/get_type_description/"
           f"{GET_TYPE_DESC_TYPE}/{GET_TYPE_DESC_HASH}")
    w = CdrWriter()
    for text in (args.type_name, args.type_hash):
        data = text.encode() + b"\x00"
        w.u32(len(data)).raw(data)
    w.boolean(True)
    deadline = time.time() + args.timeout
    while time.time() < deadline:
        for reply in session.get(key, payload=w.to_bytes(), attachment=attachment(1, gid),
                                 target=zenoh.QueryTarget.ALL_COMPLETE,
                                 consolidation=zenoh.ConsolidationMode.NONE,
                                 timeout=2.0):
            if reply.ok is None:
                continue
            r = CdrReader(reply.ok.payload.to_bytes())
            ok = r.boolean()
            reason = r.string()
            desc = individual_type_description(r)
            refs = r.seq(lambda: individual_type_description(r))
            sources = r.seq(lambda: (r.string(), r.string(), r.string()))
            r.seq(lambda: (r.string(), r.string()))  # extra_information
            if not ok:
                print(f"failed {reason}", flush=True)
            else:
                fields = ",".join(f["name"] for f in desc["fields"])
                print(f"described {desc['type_name']} {rihs01(desc, refs)} {fields} "
                      f"{len(refs)} {','.join(enc for _, enc, _ in sources)}", flush=True)
            session.close()
            return
        time.sleep(0.2)
    print("no reply", flush=True)
    session.close()
    sys.exit(1)


class CdrWriter:
    """Little-endian CDR: the header, then primitives aligned to their size
    relative to the end of the header."""

    def __init__(self):
        self.b = bytearray()

    def _put(self, fmt, size, v):
        self.b += b"\x00" * ((-len(self.b)) % size)
        self.b += struct.pack(fmt, v)
        return self

    def i8(self, v):
        return self._put("<b", 1, v)

    def boolean(self, v):
        return self._put("<B", 1, 1 if v else 0)

    def i32(self, v):
        return self._put("<i", 4, v)

    def u32(self, v):
        return self._put("<I", 4, v)

    def raw(self, data):
        self.b += data
        return self

    def to_bytes(self):
        return CDR_LE + bytes(self.b)


# example_interfaces/action/Fibonacci as rclcpp_action puts it on rmw_zenoh:
# three services and two topics under <action>/_action/, each with its own
# type and REP 2011 hash (the CancelGoal service and the GoalStatusArray
# topic are action_msgs' own, the same for every action).
ACTION_PARTS = {
    "send_goal": ("example_interfaces::action::dds_::Fibonacci_SendGoal_",
                  "RIHS01_d1a57fb2a4afe8c21e34fb10db206f16ce6729b28531141472df92277c55b557"),
    "cancel_goal": ("action_msgs::srv::dds_::CancelGoal_",
                    "RIHS01_573d8b0a534451d7bc2ac8c5ffde8ac14b8593b7001175d0cd6516dcbeb8689a"),
    "get_result": ("example_interfaces::action::dds_::Fibonacci_GetResult_",
                   "RIHS01_1b0de0d5d29dc955d92f546706568428632771db13ec84c15ec1c1a59f424a57"),
    "feedback": ("example_interfaces::action::dds_::Fibonacci_FeedbackMessage_",
                 "RIHS01_c1de71afd52e49a89c53d8262366884185bc0a02f78ce051c4e46b0a7fe59bb2"),
    "status": ("action_msgs::msg::dds_::GoalStatusArray_",
               "RIHS01_6c1684b00f177d37438febe6e709fc4e2b0d4248dca4854946f9ed8b30cda83e"),
}
# rcl_action's status QoS: reliable, TRANSIENT_LOCAL, keep last 1. The
# services and the feedback topic use ROS's defaults (SERVICE_QOS,
# TOPIC_QOS).
STATUS_QOS = ":1:,1:,:,:,,"
# action_msgs/msg/GoalStatus.
STATUS_UNKNOWN, STATUS_ACCEPTED, STATUS_EXECUTING, STATUS_CANCELING = 0, 1, 2, 3
STATUS_SUCCEEDED, STATUS_CANCELED, STATUS_ABORTED = 4, 5, 6
TERMINAL = (STATUS_SUCCEEDED, STATUS_CANCELED, STATUS_ABORTED)
# action_msgs/srv/CancelGoal's return codes.
CANCEL_NONE, CANCEL_REJECTED, CANCEL_UNKNOWN_GOAL, CANCEL_TERMINATED = 0, 1, 2, 3
# The demo server's limit: the 47th Fibonacci number overflows int32.
MAX_ORDER = 46
ZERO_UUID = bytes(16)


def action_entity(action, part):
    """The name of one of an action's services or topics: /<action>/_action/<part>."""
    return "/" + action.strip("/") + "/_action/" + part


def action_key(domain, action, part):
    t, h = ACTION_PARTS[part]
    return service_key(domain, action_entity(action, part), t, h)


def action_service_token(domain, zid, eid, kind, node, action, part):
    t, h = ACTION_PARTS[part]
    return token(domain, zid, eid, kind, node, action_entity(action, part), t, h)


def action_topic_token(domain, zid, eid, kind, node, action, part, qos):
    t, h = ACTION_PARTS[part]
    return topic_token(domain, zid, eid, kind, node, action_entity(action, part), qos,
                       msg_type=t, msg_hash=h)


def now_stamp():
    """builtin_interfaces/Time of now: (sec, nanosec)."""
    return divmod(time.time_ns(), 1_000_000_000)


def join_seq(seq):
    return ",".join(str(v) for v in seq)


def goal_status_array(goals):
    """action_msgs/msg/GoalStatusArray of (uuid, (sec, nanosec), status)."""
    w = CdrWriter().u32(len(goals))
    for uuid_, (sec, nsec), status in goals:
        w.raw(uuid_).i32(sec).u32(nsec).i8(status)
    return w.to_bytes()


def read_goal_status_array(payload):
    r = CdrReader(payload)
    return r.seq(lambda: (r.raw(16), (r.i32(), r.u32()), r.i8()))


def action_server(args):
    """Serve example_interfaces/action/Fibonacci as rclcpp's demo
    fibonacci_action_server does."""
    session = open_session(args.connect)
    zid = str(session.zid())
    domain, action, node = args.domain, args.action, args.node
    lock = threading.RLock()
    stop = threading.Event()
    # uuid -> goal, in acceptance order (the status array's order).
    goals = {}
    fb_gid = hashlib.sha256(f"{zid}/action_server/feedback".encode()).digest()[:16]
    st_gid = hashlib.sha256(f"{zid}/action_server/status".encode()).digest()[:16]
    counters = {"feedback": 0, "status": 0}

    def say(line):
        with lock:
            print(line, flush=True)

    def publish_status():
        with lock:
            payload = goal_status_array(
                [(g["uuid"], g["stamp"], g["status"]) for g in goals.values()])
            counters["status"] += 1
            status_pub.put(payload, attachment=attachment(counters["status"], st_gid))

    def publish_feedback(g):
        with lock:
            w = CdrWriter().raw(g["uuid"]).u32(len(g["sequence"]))
            for v in g["sequence"]:
                w.i32(v)
            counters["feedback"] += 1
            feedback_pub.put(w.to_bytes(), attachment=attachment(counters["feedback"], fb_gid))

    def result_payload(status, sequence):
        w = CdrWriter().i8(status).u32(len(sequence))
        for v in sequence:
            w.i32(v)
        return w.to_bytes()

    def answer(query, seq, gid, payload):
        query.reply(query.key_expr, payload, attachment=attachment(seq, gid))
        # The final reply: the client's get ends here, not at its timeout.
        query.drop()

    def take(query, length):
        """The request's (CdrReader, seq, gid), or None after an error reply."""
        payload = query.payload.to_bytes() if query.payload is not None else b""
        att = query.attachment.to_bytes() if query.attachment is not None else None
        try:
            seq, _, gid = read_attachment(att)
            if payload[:4] != CDR_LE or len(payload) < 4 + length:
                raise ValueError(f"bad request payload {payload.hex()}")
            return CdrReader(payload), seq, gid
        except ValueError as e:
            say(f"error {e}")
            query.reply_err(str(e).encode())
            query.drop()
            return None

    def finish(g, status):
        with lock:
            g["status"] = status
            say(f"{'succeeded' if status == STATUS_SUCCEEDED else 'canceled'} {g['uuid'].hex()}")
            publish_status()
            waiting, g["waiting"] = g["waiting"], []
            for query, seq, gid in waiting:
                answer(query, seq, gid, result_payload(status, g["sequence"]))

    def execute(g):
        sequence = [0, 1]
        g["sequence"] = list(sequence)
        for i in range(1, g["order"]):
            if stop.wait(1.0 / args.rate):
                return
            with lock:
                if g["status"] == STATUS_CANCELING:
                    finish(g, STATUS_CANCELED)
                    return
                sequence.append(sequence[i] + sequence[i - 1])
                g["sequence"] = list(sequence)
                publish_feedback(g)
        finish(g, STATUS_SUCCEEDED)

    def on_send_goal(query):
        got = take(query, 20)
        if got is None:
            return
        r, seq, gid = got
        goal_id, order = r.raw(16), r.i32()
        with lock:
            if order > MAX_ORDER or goal_id in goals:
                say(f"rejected {goal_id.hex()}")
                answer(query, seq, gid, CdrWriter().boolean(False).i32(0).u32(0).to_bytes())
                return
            g = {"uuid": goal_id, "order": order, "stamp": now_stamp(),
                 "status": STATUS_EXECUTING, "sequence": [0, 1], "waiting": []}
            goals[goal_id] = g
            say(f"accepted {goal_id.hex()} order {order}")
            sec, nsec = g["stamp"]
            answer(query, seq, gid, CdrWriter().boolean(True).i32(sec).u32(nsec).to_bytes())
            publish_status()
        threading.Thread(target=execute, args=(g,), daemon=True).start()

    def on_get_result(query):
        got = take(query, 16)
        if got is None:
            return
        r, seq, gid = got
        goal_id = r.raw(16)
        with lock:
            g = goals.get(goal_id)
            if g is None:
                answer(query, seq, gid, result_payload(STATUS_UNKNOWN, []))
            elif g["status"] in TERMINAL:
                answer(query, seq, gid, result_payload(g["status"], g["sequence"]))
            else:
                # Keep the query open; finish() answers it from the goal's
                # thread.
                g["waiting"].append((query, seq, gid))

    def on_cancel_goal(query):
        got = take(query, 24)
        if got is None:
            return
        r, seq, gid = got
        goal_id, stamp = r.raw(16), (r.i32(), r.u32())
        with lock:
            by_id = goal_id != ZERO_UUID
            by_stamp = stamp != (0, 0)
            if not by_id and not by_stamp:
                chosen = list(goals.values())
            else:
                chosen = [g for g in goals.values()
                          if (by_id and g["uuid"] == goal_id)
                          or (by_stamp and g["stamp"] <= stamp)]
            canceling = [g for g in chosen
                         if g["status"] in (STATUS_ACCEPTED, STATUS_EXECUTING)]
            if canceling:
                code = CANCEL_NONE
            elif by_id and goal_id not in goals:
                code = CANCEL_UNKNOWN_GOAL
            elif by_id and goals[goal_id]["status"] in TERMINAL:
                code = CANCEL_TERMINATED
            else:
                code = CANCEL_REJECTED
            w = CdrWriter().i8(code).u32(len(canceling))
            for g in canceling:
                g["status"] = STATUS_CANCELING
                w.raw(g["uuid"]).i32(g["stamp"][0]).u32(g["stamp"][1])
            say(f"cancel {code} {len(canceling)}")
            answer(query, seq, gid, w.to_bytes())
            if canceling:
                publish_status()

    feedback_pub = session.declare_publisher(action_key(domain, action, "feedback"))
    status_pub = zenoh.ext.declare_advanced_publisher(
        session,
        action_key(domain, action, "status"),
        cache=zenoh.ext.CacheConfig(max_samples=1),
        sample_miss_detection=zenoh.ext.MissDetectionConfig(sporadic_heartbeat=0.5),
        publisher_detection=True,
    )
    handlers = {"send_goal": on_send_goal, "cancel_goal": on_cancel_goal,
                "get_result": on_get_result}
    keep = [session.liveliness().declare_token(node_token(domain, zid, node))]
    for eid, (part, handler) in enumerate(handlers.items(), start=20):
        keep.append(session.declare_queryable(action_key(domain, action, part), handler,
                                              complete=True))
        keep.append(session.liveliness().declare_token(
            action_service_token(domain, zid, eid, "SS", node, action, part)))
    keep.append(session.liveliness().declare_token(
        action_topic_token(domain, zid, 23, "MP", node, action, "feedback", TOPIC_QOS)))
    keep.append(session.liveliness().declare_token(
        action_topic_token(domain, zid, 24, "MP", node, action, "status", STATUS_QOS)))
    say("ready")
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    stop.wait(args.lifetime)
    stop.set()
    session.close()


def call_once(session, key, payload, seq, gid, timeout):
    """One service call as rmw_zenoh's client makes it: the reply's body
    (CDR) for this client, or None."""
    body = None
    for reply in session.get(key, payload=payload, attachment=attachment(seq, gid),
                             target=zenoh.QueryTarget.ALL_COMPLETE,
                             consolidation=zenoh.ConsolidationMode.NONE,
                             timeout=timeout):
        if reply.ok is None:
            print(f"error reply {reply.err.payload.to_bytes()!r}", flush=True)
            continue
        att = reply.ok.attachment.to_bytes() if reply.ok.attachment is not None else None
        try:
            rseq, _, rgid = read_attachment(att)
        except ValueError as e:
            print(f"error {e}", flush=True)
            continue
        if rgid != gid or rseq != seq:
            print(f"reply for another request {rgid.hex()} seq={rseq}", flush=True)
            continue
        body = reply.ok.payload.to_bytes()
    return body


def action_client(args):
    """Send one Fibonacci goal as rclcpp's demo fibonacci_action_client
    does; optionally cancel it after some feedback."""
    session = open_session(args.connect)
    zid = str(session.zid())
    domain, action, node = args.domain, args.action, args.node
    gids = {part: hashlib.sha256(f"{zid}/action_client/{part}".encode()).digest()[:16]
            for part in ACTION_PARTS}
    goal_id = uuid.uuid4().bytes
    events = queue.Queue()
    cond = threading.Condition()
    state = {"status": None, "feedback": 0}
    cancel_now = threading.Event()

    def on_feedback(sample):
        try:
            r = CdrReader(sample.payload.to_bytes())
            gid_, seq = r.raw(16), r.seq(r.i32)
        except (ValueError, struct.error) as e:
            events.put(("error", f"bad feedback: {e}"))
            return
        if gid_ == goal_id:
            events.put(("feedback", seq))

    def on_status(sample):
        try:
            goals = read_goal_status_array(sample.payload.to_bytes())
        except (ValueError, struct.error) as e:
            events.put(("error", f"bad status: {e}"))
            return
        for gid_, _, status in goals:
            if gid_ == goal_id:
                events.put(("status", status))

    def printer():
        # One thread prints what the subscribers hear, in order, and only
        # once "accepted" is out.
        while True:
            kind, value = events.get()
            if kind == "feedback":
                with cond:
                    print(f"feedback {join_seq(value)}", flush=True)
                    state["feedback"] += 1
                    if state["feedback"] == args.cancel_after:
                        cancel_now.set()
                    cond.notify_all()
            elif kind == "status":
                with cond:
                    if value != state["status"]:
                        state["status"] = value
                        print(f"status {value}", flush=True)
                        cond.notify_all()
            else:
                with cond:
                    print(f"error {value}", flush=True)

    keep = [session.liveliness().declare_token(node_token(domain, zid, node))]
    for eid, part in enumerate(["send_goal", "cancel_goal", "get_result"], start=30):
        keep.append(session.liveliness().declare_token(
            action_service_token(domain, zid, eid, "SC", node, action, part)))
    keep.append(session.declare_subscriber(action_key(domain, action, "feedback"), on_feedback))
    keep.append(session.liveliness().declare_token(
        action_topic_token(domain, zid, 33, "MS", node, action, "feedback", TOPIC_QOS)))
    keep.append(zenoh.ext.declare_advanced_subscriber(
        session,
        action_key(domain, action, "status"),
        on_status,
        history=zenoh.ext.HistoryConfig(detect_late_publishers=True, max_samples=1),
        recovery=zenoh.ext.RecoveryConfig(heartbeat=True),
        subscriber_detection=True,
    ))
    keep.append(session.liveliness().declare_token(
        action_topic_token(domain, zid, 34, "MS", node, action, "status", STATUS_QOS)))

    # As rclcpp_action's wait_for_action_server: all three services served.
    deadline = time.time() + args.timeout
    server = None
    for part in ["send_goal", "cancel_goal", "get_result"]:
        t, h = ACTION_PARTS[part]
        found, _ = wait_for_server(session, domain, action_entity(action, part),
                                   max(0.0, deadline - time.time()), t, h)
        if found is None:
            print("no server", flush=True)
            session.close()
            sys.exit(1)
        server = server or found
    print(f"server {server['node']}", flush=True)

    def fail(what):
        print(what, flush=True)
        session.close()
        sys.exit(1)

    body = call_once(session, action_key(domain, action, "send_goal"),
                     CdrWriter().raw(goal_id).i32(args.order).to_bytes(),
                     1, gids["send_goal"], args.timeout)
    if body is None:
        fail("no reply")
    r = CdrReader(body)
    accepted, sec, nsec = r.boolean(), r.i32(), r.u32()
    if not accepted:
        print("rejected", flush=True)
        session.close()
        return
    print(f"accepted {goal_id.hex()} {sec} {nsec}", flush=True)
    threading.Thread(target=printer, daemon=True).start()

    # As rclcpp's client with a result callback: ask for the result at
    # once; the server answers when the goal ends.
    result = {}
    result_done = threading.Event()

    def get_result():
        got = call_once(session, action_key(domain, action, "get_result"),
                        CdrWriter().raw(goal_id).to_bytes(), 1, gids["get_result"],
                        args.timeout)
        if got is not None:
            result["body"] = got
        result_done.set()

    threading.Thread(target=get_result, daemon=True).start()

    if args.cancel_after > 0:
        while not cancel_now.is_set() and not result_done.is_set():
            cancel_now.wait(0.05)
        if cancel_now.is_set():
            body = call_once(session, action_key(domain, action, "cancel_goal"),
                             CdrWriter().raw(goal_id).i32(0).u32(0).to_bytes(),
                             1, gids["cancel_goal"], args.timeout)
            if body is None:
                fail("no reply")
            r = CdrReader(body)
            code = r.i8()
            canceling = r.seq(lambda: (r.raw(16), r.i32(), r.u32()))
            with cond:
                print(f"cancel {code} {len(canceling)}", flush=True)

    result_done.wait(args.timeout + 1.0)
    if "body" not in result:
        fail("no reply")
    r = CdrReader(result["body"])
    status, sequence = r.i8(), r.seq(r.i32)
    # The feedback and status topics may still be on their way when the
    # reply comes (nothing orders one subscriber's samples against
    # another's, or against a reply): give them a second, so that "result"
    # is the last line. Each feedback has one number more than the one
    # before, the first has 3, and the result is the last one's sequence.
    feedbacks = max(0, len(sequence) - 2)
    with cond:
        cond.wait_for(lambda: state["feedback"] >= feedbacks
                      and (status == STATUS_UNKNOWN or state["status"] == status), 1.0)
        print(f"result {status} {join_seq(sequence)}", flush=True)
    session.close()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("role", choices=["server", "client", "talker", "listener", "param-get",
                                    "type-description", "action-server", "action-client"])
    p.add_argument("--target", default="/talker", help="param-get, type-description: the node")
    p.add_argument("--type-name", default="std_msgs/msg/String",
                   help="type-description: the type to ask for")
    p.add_argument("--type-hash", default="", help="type-description: its hash (empty: any)")
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
    p.add_argument("--print-gid", action="store_true",
                   help="talker: print its gid after ready")
    p.add_argument("--count", type=int, default=10)
    p.add_argument("--timeout", type=float, default=30.0)
    p.add_argument("--lifetime", type=float, default=120.0)
    p.add_argument("--hang", action="store_true", help="server: never answer")
    p.add_argument("--transient-local", action="store_true",
                   help="talker/listener: TRANSIENT_LOCAL via zenoh-ext's advanced pub/sub")
    p.add_argument("--garbage", action="store_true",
                   help="client: make the first request malformed")
    p.add_argument("--action", default="/fibonacci", help="action-server/-client: the action")
    p.add_argument("--order", type=int, default=10, help="action-client: the goal's order")
    p.add_argument("--cancel-after", type=int, default=0,
                   help="action-client: cancel the goal after this many feedback messages")
    args = p.parse_args()
    {"server": serve, "client": call, "talker": talk, "listener": listen,
     "param-get": param_get, "type-description": type_description,
     "action-server": action_server,
     "action-client": action_client}[args.role](args)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        # SIGINT is how tests stop a long-running role: exit quietly.
        sys.exit(130)

//! `myelin topic ...` and `myelin node ...`: what runs in a domain, on this
//! host (shared-memory discovery) and on other hosts (zenoh liveliness
//! tokens, through the router this process reaches: `tcp/127.0.0.1:7447`
//! by default, or `MYELIN_ZENOH_CONFIG`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use myelin::{AnyMessage, DiscoveredEndpoint, Message, QoS, SharedBytes};

use crate::cli::{NodeCommand, TopicCommand};

type Res = Result<(), Box<dyn std::error::Error>>;

/// Calls macro `$m` with every type `echo` decodes and `pub` parses: the
/// standard messages of myelin-msgs, then the builtins.
macro_rules! standard_types {
    ($m:ident) => {
        myelin_msgs::for_all_types!($m);
        $m!(
            String,
            bool,
            u8,
            i8,
            u16,
            i16,
            u32,
            i32,
            u64,
            i64,
            f32,
            f64,
            Vec<u8>,
        );
    };
}

fn check_domain(domain: u32) -> Result<(), String> {
    if domain > myelin::MAX_DOMAIN_ID {
        return Err(format!(
            "invalid --domain {domain}: ROS 2 domain ids are 0 to 232"
        ));
    }
    Ok(())
}

/// The tool's own context on `domain` (its transports follow
/// `MYELIN_TRANSPORT` and `MYELIN_ZENOH_CONFIG`, as any process's do).
pub(crate) fn tool_ctx(domain: u32) -> Result<myelin::Context, Box<dyn std::error::Error>> {
    check_domain(domain)?;
    Ok(myelin::Context::builder().domain_id(domain).build()?)
}

/// How long the network is asked for the current graph.
pub(crate) const DISCOVERY_WAIT: Duration = Duration::from_millis(1000);

/// User endpoints (not the internal service topics) of other processes and
/// hosts.
pub(crate) fn visible(ctx: &myelin::Context) -> Vec<DiscoveredEndpoint> {
    ctx.discover(DISCOVERY_WAIT)
        .into_iter()
        .filter(|e| !e.topic.starts_with("/_srv/") && e.type_name != "*")
        .collect()
}

/// Where an endpoint runs: `pid N` on this host, `zenoh <zid>` elsewhere.
fn place(e: &DiscoveredEndpoint) -> String {
    match (&e.zid, e.pid) {
        (None, pid) => format!("pid {pid}"),
        (Some(z), 0) => format!("zenoh {z}"),
        (Some(z), pid) => format!("pid {pid} via zenoh {z}"),
    }
}

/// A hidden name, by ROS 2's rule: one of its parts starts with `_`
/// (`/fibonacci/_action/status`). `topic list` and `service list` leave
/// them out unless asked.
pub(crate) fn is_hidden(name: &str) -> bool {
    name.split('/').any(|part| part.starts_with('_'))
}

pub(crate) fn absolute(topic: &str) -> String {
    if topic.starts_with('/') {
        topic.to_string()
    } else {
        format!("/{topic}")
    }
}

fn find(ctx: &myelin::Context, topic: &str) -> Result<(String, Vec<DiscoveredEndpoint>), String> {
    let domain = ctx.domain_id();
    let t = absolute(topic);
    let all = visible(ctx);
    let eps: Vec<_> = all.iter().filter(|e| e.topic == t).cloned().collect();
    if eps.is_empty() {
        return Err(format!(
            "topic {t:?}: nothing publishes or subscribes to it on domain {domain}{} (`myelin topic list --domain {domain}` shows what exists)",
            close_to(&t, all.iter().map(|e| e.topic.as_str()))
        ));
    }
    Ok((t, eps))
}

/// `" (did you mean X?)"` for the name among `names` closest to `name`
/// (a typo's distance), or nothing.
pub(crate) fn close_to<'a>(name: &str, names: impl IntoIterator<Item = &'a str>) -> String {
    let names: BTreeSet<&str> = names.into_iter().filter(|n| *n != name).collect();
    myelin::names::did_you_mean(name, names)
        .map(|n| format!(" (did you mean {n}?)"))
        .unwrap_or_default()
}

fn qos_line(q: &QoS) -> String {
    format!(
        "{:?}, {:?}, {:?}{}",
        q.history,
        q.reliability,
        q.durability,
        q.deadline
            .map_or(String::new(), |d| format!(", deadline {d:?}"))
    )
}

/// `myelin topic ...`.
pub fn run(cmd: TopicCommand) -> Res {
    match cmd {
        TopicCommand::List {
            show_types,
            include_hidden,
            domain,
        } => {
            let ctx = tool_ctx(domain)?;
            let mut topics: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            for e in visible(&ctx)
                .into_iter()
                .filter(|e| include_hidden || !is_hidden(&e.topic))
            {
                topics.entry(e.topic).or_default().insert(e.type_name);
            }
            if topics.is_empty() {
                eprintln!(
                    "no topics on domain {domain} (nothing on this host, and no zenoh router reached with other hosts' topics)"
                );
            }
            for (t, types) in topics {
                if show_types {
                    let types: Vec<_> = types.into_iter().collect();
                    println!("{t} [{}]", types.join(", "));
                } else {
                    println!("{t}");
                }
            }
            Ok(())
        }
        TopicCommand::Info { topic, domain } => {
            let ctx = tool_ctx(domain)?;
            let (t, eps) = find(&ctx, &topic)?;
            let types: BTreeSet<_> = eps.iter().map(|e| e.type_name.clone()).collect();
            println!("Topic: {t}");
            println!("Type: {}", types.into_iter().collect::<Vec<_>>().join(", "));
            for (label, is_pub) in [("Publisher", true), ("Subscription", false)] {
                let of: Vec<_> = eps.iter().filter(|e| e.is_publisher == is_pub).collect();
                println!("{label} count: {}", of.len());
                for e in of {
                    println!("  node {} ({}): {}", e.node, place(e), qos_line(&e.qos));
                }
            }
            Ok(())
        }
        TopicCommand::Echo {
            topic,
            type_name,
            count,
            domain,
        } => match type_name {
            Some(t) => echo_typed(&topic, &t, count, domain),
            None => echo(&topic, count, domain),
        },
        TopicCommand::Hz {
            topic,
            duration,
            domain,
        } => hz(&topic, duration, domain),
        TopicCommand::Bw {
            topic,
            duration,
            domain,
        } => bw(&topic, duration, domain),
        TopicCommand::Pub {
            topic,
            type_name,
            value,
            rate,
            count,
            domain,
        } => publish(&topic, &type_name, &value, rate, count, domain),
    }
}

/// Parse `yaml` as `T` (`what` names it in the error, with a did-you-mean
/// for a misspelt field): the message and its wire bytes. The one step
/// of `topic pub` and `service call` done per type; publishing or calling
/// with the bytes is not, so the CLI does not compile a typed endpoint
/// for each of the types it knows (that was half of the CLI crate's own
/// compile time).
pub(crate) fn yaml_to_wire<T: Message + serde::de::DeserializeOwned>(
    yaml: &str,
    what: &str,
) -> Result<(T, Vec<u8>), String> {
    let msg: T = serde_yaml::from_str(yaml).map_err(|e| {
        let e = e.to_string();
        let hint = myelin::names::did_you_mean_field(&e, &[])
            .map(|f| format!(" (did you mean `{f}`?)"))
            .unwrap_or_default();
        format!("{what} is not a {} in YAML: {e}{hint}", T::TYPE_NAME)
    })?;
    let mut bytes = vec![0u8; msg.wire_len().map_err(|e| e.to_string())?];
    msg.wire_encode(&mut bytes).map_err(|e| e.to_string())?;
    Ok((msg, bytes))
}

/// Wire bytes decoded as `T` and printed as YAML (as `ros2 topic echo`
/// does).
pub(crate) fn wire_to_yaml<T: Message + serde::Serialize>(bytes: &[u8]) -> Result<String, String> {
    let m = T::wire_decode(SharedBytes::copy_from(bytes)).map_err(|e| e.to_string())?;
    serde_yaml::to_string(&m)
        .map(|s| s.trim_end().to_string())
        .map_err(|e| e.to_string())
}

/// Publish `bytes` (a message of type `ty`) on `topic`: once, `count`
/// times, or at `rate` until Ctrl-C.
fn publish_bytes(
    node: &myelin::Node,
    topic: &str,
    ty: &myelin::RawType,
    bytes: Vec<u8>,
    rate: Option<f64>,
    count: Option<u64>,
    ctx: &myelin::Context,
) -> Res {
    let p = node.create_raw_publisher(topic, ty, QoS::keep_last(10))?;
    let msg = AnyMessage(bytes.into());
    // Give subscribers a moment to connect (discovery is event-driven;
    // over zenoh the tokens come through the router).
    let deadline = Instant::now() + Duration::from_millis(1000);
    while p.subscription_count() == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let period = rate.map(|r| Duration::from_secs_f64(1.0 / r));
    let total = count.unwrap_or(if period.is_some() { u64::MAX } else { 1 });
    let mut next = Instant::now();
    let mut n = 0u64;
    while n < total && !ctx.is_shut_down() {
        p.publish(msg.clone())?;
        n += 1;
        println!("publishing #{n}: {}", ty.name());
        match period {
            Some(per) => {
                next += per;
                while Instant::now() < next && !ctx.is_shut_down() {
                    std::thread::sleep((next - Instant::now()).min(Duration::from_millis(50)));
                }
            }
            None if n < total => std::thread::sleep(Duration::from_millis(100)),
            None => {}
        }
    }
    // Let subscriptions in other processes read the last message before
    // the publisher (and its shared memory) goes away.
    std::thread::sleep(Duration::from_millis(200));
    Ok(())
}

fn publish(
    topic: &str,
    type_name: &str,
    yaml: &str,
    rate: Option<f64>,
    count: Option<u64>,
    domain: u32,
) -> Res {
    check_domain(domain)?;
    // A period of at most 1000 s keeps every deadline computable.
    if let Some(r) = rate
        && !(r.is_finite() && (1e-3..=1e5).contains(&r))
    {
        return Err(format!("invalid --rate {r}: must be 0.001 to 100000 Hz").into());
    }
    let (ty, bytes) = parse(type_name, yaml)?;
    let t = absolute(topic);
    let ctx = tool_ctx(domain)?;
    let node = ctx.create_node(&format!("myelin_cli_pub_{}", std::process::id()))?;
    publish_bytes(&node, &t, &ty, bytes, rate, count, &ctx)
}

/// `yaml` as a message of the known type `type_name`: the type and the
/// message's wire bytes.
fn parse(type_name: &str, yaml: &str) -> Result<(myelin::RawType, Vec<u8>), String> {
    macro_rules! known {
        ($($t:ty),* $(,)?) => {
            $(
                if type_name == <$t as Message>::TYPE_NAME {
                    let (_, bytes) = yaml_to_wire::<$t>(yaml, "the value")?;
                    return Ok((myelin::RawType::of::<$t>(), bytes));
                }
            )*
        };
    }
    standard_types!(known);
    Err(unknown_type(type_name))
}

/// The known type `type_name` as a raw type.
fn raw_type(type_name: &str) -> Option<myelin::RawType> {
    macro_rules! known {
        ($($t:ty),* $(,)?) => {
            $(
                if type_name == <$t as Message>::TYPE_NAME {
                    return Some(myelin::RawType::of::<$t>());
                }
            )*
        };
    }
    standard_types!(known);
    None
}

/// What `echo` and `hz` read from: the context, topic, its type, and an
/// any-type subscription.
pub(crate) type Tap = (
    myelin::Context,
    String,
    String,
    myelin::Subscription<AnyMessage>,
);

/// Wait until `topic` has an endpoint (saying so once), or Ctrl-C.
fn wait_for_topic(
    ctx: &myelin::Context,
    topic: &str,
) -> Result<(String, Vec<DiscoveredEndpoint>), Box<dyn std::error::Error>> {
    let mut said = false;
    loop {
        match find(ctx, topic) {
            Ok(found) => return Ok(found),
            Err(why) if ctx.is_shut_down() => return Err(why.into()),
            Err(_) => {
                if !said {
                    let t = absolute(topic);
                    eprintln!(
                        "waiting for {t} to appear on domain {}{} (Ctrl-C to stop)",
                        ctx.domain_id(),
                        close_to(&t, visible(ctx).iter().map(|e| e.topic.as_str()))
                    );
                    said = true;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
}

pub(crate) fn subscribe(
    topic: &str,
    domain: u32,
    wait: bool,
) -> Result<Tap, Box<dyn std::error::Error>> {
    let ctx = tool_ctx(domain)?;
    let (t, eps) = if wait {
        wait_for_topic(&ctx, topic)?
    } else {
        find(&ctx, topic)?
    };
    let type_name = eps
        .iter()
        .find(|e| e.is_publisher)
        .or(eps.first())
        .map(|e| e.type_name.clone())
        .unwrap_or_default();
    let node = ctx.create_node(&format!("myelin_cli_{}", std::process::id()))?;
    // Best effort and volatile: compatible with every publisher.
    let sub = node.create_polling_subscription::<AnyMessage>(
        &t,
        QoS::keep_last(100).best_effort().volatile(),
        Default::default(),
    )?;
    Ok((ctx, t, type_name, sub))
}

/// Decode a message of a known type and print it as YAML (as `ros2 topic
/// echo` does); `None` if the type is unknown.
fn render(type_name: &str, bytes: &[u8]) -> Option<Result<String, String>> {
    macro_rules! known {
        ($($t:ty),* $(,)?) => {
            $(
                if type_name == <$t as Message>::TYPE_NAME {
                    return Some(wire_to_yaml::<$t>(bytes));
                }
            )*
        };
    }
    standard_types!(known);
    None
}

/// A message as `echo` prints it: YAML for a known type; the bytes in hex
/// for an unknown one, or after why they do not decode.
fn shown(type_name: &str, bytes: &[u8]) -> String {
    match render(type_name, bytes) {
        Some(Ok(s)) => s,
        Some(Err(e)) => format!("(cannot decode as {type_name}: {e}) {}", hex(bytes)),
        None => hex(bytes),
    }
}

fn hex(bytes: &[u8]) -> String {
    let shown: Vec<String> = bytes.iter().take(64).map(|b| format!("{b:02x}")).collect();
    let more = if bytes.len() > 64 { " ..." } else { "" };
    format!("{} bytes: {}{more}", bytes.len(), shown.join(" "))
}

fn echo(topic: &str, count: Option<u64>, domain: u32) -> Res {
    let (ctx, t, type_name, sub) = subscribe(topic, domain, true)?;
    eprintln!("echoing {t} [{type_name}] on domain {domain}; Ctrl-C to stop");
    let mut n = 0u64;
    while count.is_none_or(|c| n < c) {
        match sub.wait_for_message(Duration::from_millis(500)) {
            Ok(m) => {
                println!("{}\n---", shown(&type_name, m.bytes()));
                n += 1;
            }
            Err(myelin::WaitError::ContextShutDown(_)) => break,
            Err(_) if ctx.is_shut_down() => break,
            Err(_) => {}
        }
    }
    Ok(())
}

/// `topic echo TOPIC TYPE`: a subscription of that type from the start
/// (no publisher needed yet; the graph shows the type, not a wildcard).
/// It takes the messages as bytes and prints them as `echo` does, so the
/// CLI compiles no typed subscription per known type.
fn echo_typed(topic: &str, type_name: &str, count: Option<u64>, domain: u32) -> Res {
    let ty = raw_type(type_name).ok_or_else(|| unknown_type(type_name))?;
    let ctx = tool_ctx(domain)?;
    let t = absolute(topic);
    let node = ctx.create_node(&format!("myelin_cli_{}", std::process::id()))?;
    let (tx, rx) = std::sync::mpsc::channel::<AnyMessage>();
    let _sub = node.create_raw_subscription(
        &t,
        &ty,
        QoS::keep_last(100).best_effort().volatile(),
        Default::default(),
        move |m: AnyMessage| {
            let _ = tx.send(m);
        },
    )?;
    eprintln!("echoing {t} [{type_name}] on domain {domain}; Ctrl-C to stop");
    let mut exec = myelin::Executor::new();
    exec.add_node(&node)?;
    let mut n = 0u64;
    while count.is_none_or(|c| n < c) && !ctx.is_shut_down() {
        if let Err(e) = exec.spin_once(Duration::from_millis(500)) {
            if ctx.is_shut_down() {
                break;
            }
            return Err(e.into());
        }
        while let Ok(m) = rx.try_recv() {
            println!("{}\n---", shown(type_name, m.bytes()));
            n += 1;
            if count.is_some_and(|c| n >= c) {
                break;
            }
        }
    }
    Ok(())
}

/// The error for a type `echo`/`pub` do not know, with the nearest name.
fn unknown_type(type_name: &str) -> String {
    macro_rules! names {
        ($($t:ty),* $(,)?) => { [$(<$t as Message>::TYPE_NAME),*] };
    }
    let all = myelin_msgs::for_all_types!(names);
    let hint = myelin::names::did_you_mean(type_name, all.iter().copied())
        .map(|n| format!(" (did you mean {n}?)"))
        .unwrap_or_default();
    format!(
        "unknown type {type_name:?}{hint}: the standard types are known (e.g. std_msgs/msg/String, geometry_msgs/msg/Twist)"
    )
}

fn hz(topic: &str, duration: Option<f64>, domain: u32) -> Res {
    let (ctx, t, type_name, sub) = subscribe(topic, domain, false)?;
    eprintln!("measuring the rate of {t} [{type_name}]; Ctrl-C to stop");
    let end = duration.map(|d| Instant::now() + Duration::from_secs_f64(d.max(0.0)));
    let mut stamps: Vec<Instant> = Vec::new();
    let mut next_print = Instant::now() + Duration::from_secs(1);
    // Messages since the last line: none means the publisher went silent,
    // and the old rate is not repeated.
    let mut fresh = 0u64;
    while !ctx.is_shut_down() && end.is_none_or(|e| Instant::now() < e) {
        if sub.wait_for_message(Duration::from_millis(100)).is_ok() {
            fresh += 1;
            stamps.push(Instant::now());
            if stamps.len() > 10_000 {
                stamps.drain(..stamps.len() - 10_000);
            }
        }
        if Instant::now() >= next_print {
            next_print += Duration::from_secs(1);
            if std::mem::take(&mut fresh) == 0 || stamps.len() < 2 {
                println!("no new messages");
                continue;
            }
            let periods: Vec<f64> = stamps
                .windows(2)
                .map(|w| w[1].duration_since(w[0]).as_secs_f64())
                .collect();
            let mean = periods.iter().sum::<f64>() / periods.len() as f64;
            let var =
                periods.iter().map(|p| (p - mean).powi(2)).sum::<f64>() / periods.len() as f64;
            let min = periods.iter().cloned().fold(f64::INFINITY, f64::min);
            let max = periods.iter().cloned().fold(0.0, f64::max);
            println!(
                "average rate: {:.3}\n\tmin: {:.6}s max: {:.6}s std dev: {:.6}s window: {}",
                1.0 / mean,
                min,
                max,
                var.sqrt(),
                stamps.len()
            );
        }
    }
    Ok(())
}

fn human_bytes(b: f64) -> String {
    if b >= 1e6 {
        format!("{:.2} MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.2} KB", b / 1e3)
    } else {
        format!("{b:.0} B")
    }
}

/// `topic bw`: bytes per second over a sliding window of messages, with
/// the mean, min and max message size (as `ros2 topic bw`).
fn bw(topic: &str, duration: Option<f64>, domain: u32) -> Res {
    let (ctx, t, type_name, sub) = subscribe(topic, domain, false)?;
    eprintln!("measuring the bandwidth of {t} [{type_name}]; Ctrl-C to stop");
    let end = duration.map(|d| Instant::now() + Duration::from_secs_f64(d.max(0.0)));
    let mut window: std::collections::VecDeque<(Instant, usize)> = Default::default();
    let mut next_print = Instant::now() + Duration::from_secs(1);
    let mut fresh = 0u64;
    while !ctx.is_shut_down() && end.is_none_or(|e| Instant::now() < e) {
        if let Ok(m) = sub.wait_for_message(Duration::from_millis(100)) {
            fresh += 1;
            window.push_back((Instant::now(), m.bytes().len()));
            if window.len() > 100 {
                window.pop_front();
            }
        }
        if Instant::now() >= next_print {
            next_print += Duration::from_secs(1);
            let (Some(first), Some(last)) = (window.front(), window.back()) else {
                println!("no new messages");
                continue;
            };
            if std::mem::take(&mut fresh) == 0 {
                println!("no new messages");
                continue;
            }
            let span = last.0.duration_since(first.0).as_secs_f64();
            let total: usize = window.iter().map(|w| w.1).sum();
            let sizes = window.iter().map(|w| w.1);
            let (min, max) = (sizes.clone().min().unwrap_or(0), sizes.max().unwrap_or(0));
            let rate = if span > 0.0 && window.len() > 1 {
                (total - first.1) as f64 / span
            } else {
                0.0
            };
            println!(
                "{}/s from {} messages\n\tMessage size mean: {} min: {} max: {}",
                human_bytes(rate),
                window.len(),
                human_bytes(total as f64 / window.len() as f64),
                human_bytes(min as f64),
                human_bytes(max as f64),
            );
        }
    }
    Ok(())
}

/// `myelin node ...`.
pub fn run_node(cmd: NodeCommand) -> Res {
    match cmd {
        NodeCommand::List { domain } => {
            let ctx = tool_ctx(domain)?;
            // Nodes with topics, and nodes that only serve or call
            // services; a node is its name in one process (this host) or
            // one zenoh session (elsewhere), so two nodes that share a
            // name are listed twice, as `ros2 node list` does.
            let mut nodes: BTreeSet<(String, u32, Option<String>)> = visible(&ctx)
                .into_iter()
                .map(|e| (e.node, e.pid, e.zid))
                .collect();
            nodes.extend(
                ctx.discover_services(DISCOVERY_WAIT)
                    .into_iter()
                    .map(|s| (s.node, s.pid, s.zid)),
            );
            if nodes.is_empty() {
                eprintln!("no nodes on domain {domain}");
            }
            let names: Vec<&String> = nodes.iter().map(|(n, _, _)| n).collect();
            if names.windows(2).any(|w| w[0] == w[1]) {
                eprintln!(
                    "WARNING: Be aware that there are nodes in the graph that share an exact name, \
                     which can have unintended side effects."
                );
            }
            for n in names {
                println!("{n}");
            }
            Ok(())
        }
        NodeCommand::Info { node, domain } => {
            let name = absolute(&node);
            let ctx = tool_ctx(domain)?;
            let all_eps: Vec<_> = visible(&ctx)
                .into_iter()
                .filter(|e| e.node == name)
                .collect();
            let all_services: Vec<_> = ctx
                .discover_services(DISCOVERY_WAIT)
                .into_iter()
                .filter(|s| s.node == name)
                .collect();
            if all_eps.is_empty() && all_services.is_empty() {
                let nodes: Vec<String> = visible(&ctx).into_iter().map(|e| e.node).collect();
                return Err(format!(
                    "node {name:?}: not found on domain {domain}{} (`myelin node list --domain {domain}`)",
                    close_to(&name, nodes.iter().map(String::as_str))
                )
                .into());
            }
            // Hidden names (an action's own topics and services) are left
            // out; the actions are listed by their send_goal service, as
            // `ros2 node info` lists them.
            let eps: Vec<_> = all_eps.iter().filter(|e| !is_hidden(&e.topic)).collect();
            let services: Vec<_> = all_services
                .iter()
                .filter(|s| !is_hidden(&s.name))
                .collect();
            println!("{name}");
            for (label, is_pub) in [("Publishers", true), ("Subscribers", false)] {
                println!("  {label}:");
                let mut seen = BTreeSet::new();
                for e in eps.iter().filter(|e| e.is_publisher == is_pub) {
                    if seen.insert((e.topic.clone(), e.type_name.clone())) {
                        println!("    {}: {}", e.topic, e.type_name);
                    }
                }
            }
            for (label, server) in [("Service Servers", true), ("Service Clients", false)] {
                println!("  {label}:");
                for s in services.iter().filter(|s| s.is_server == server) {
                    let ty = s.type_name.as_deref().unwrap_or("(type not announced)");
                    println!("    {}: {ty}", s.name);
                }
            }
            for (label, server) in [("Action Servers", true), ("Action Clients", false)] {
                println!("  {label}:");
                let mut seen = BTreeSet::new();
                for s in all_services.iter().filter(|s| s.is_server == server) {
                    let Some(action) = s.name.strip_suffix(myelin::action::SEND_GOAL_SUFFIX) else {
                        continue;
                    };
                    if !seen.insert(action) {
                        continue;
                    }
                    // The type: the send_goal service's, else the feedback
                    // topic's (shared memory does not name service types).
                    let ty = s
                        .type_name
                        .as_deref()
                        .and_then(|t| t.strip_suffix("_SendGoal"))
                        .or_else(|| {
                            all_eps
                                .iter()
                                .find(|e| e.topic == format!("{action}/_action/feedback"))
                                .and_then(|e| e.type_name.strip_suffix("_FeedbackMessage"))
                        })
                        .unwrap_or("(type not announced)");
                    println!("    {action}: {ty}");
                }
            }
            Ok(())
        }
    }
}

//! `myelin service ...`: the services of a domain, calling one from the
//! command line, and printing its introspection events (as `ros2 service
//! list|call|echo`). Services of ROS 2 nodes
//! on rmw_zenoh are seen and called through the router this process
//! reaches (`tcp/127.0.0.1:7447` by default, or `MYELIN_ZENOH_CONFIG`).

use std::collections::BTreeMap;
use std::time::Duration;

use myelin::ServiceType;

use super::topic::{
    DISCOVERY_WAIT, absolute, is_hidden, subscribe, tool_ctx, visible, wire_to_yaml, yaml_to_wire,
};
use crate::cli::ServiceCommand;

type Res = Result<(), Box<dyn std::error::Error>>;

/// Run a `myelin service` subcommand.
pub fn run(cmd: ServiceCommand) -> Res {
    match cmd {
        ServiceCommand::List {
            show_types,
            include_hidden,
            domain,
        } => list(show_types, include_hidden, domain),
        ServiceCommand::Type { service, domain } => service_type(&service, domain),
        ServiceCommand::Call {
            service,
            type_name,
            request,
            timeout,
            domain,
        } => call(&service, &type_name, &request, timeout, domain),
        ServiceCommand::Echo {
            service,
            count,
            no_arr,
            domain,
        } => echo(&service, count, no_arr, domain),
    }
}

/// `service echo`: the events on `<service>/_service_event`, decoded with
/// the service type's description (the type its publishers announce).
fn echo(service: &str, count: Option<u64>, no_arr: bool, domain: u32) -> Res {
    let service = absolute(service);
    let topic = format!("{service}{}", myelin::introspection::SERVICE_EVENT_SUFFIX);
    eprintln!(
        "the events of {service} appear when its server or a client has service introspection on"
    );
    let (ctx, t, type_name, sub) = subscribe(&topic, domain, true)?;
    let srv = type_name
        .strip_suffix("_Event")
        .filter(|s| s.contains("/srv/"))
        .ok_or_else(|| format!("{t} carries {type_name:?}, not a service's events"))?;
    let described = myelin_msgs::describe(srv).ok_or_else(|| {
        format!("{srv}: not a service type myelin knows (myelin interface list shows them)")
    })?;
    // Decoded with this build's definition of the type: a publisher that
    // announces another hash has another definition of it.
    let ours = myelin_msgs::ros_hash_of(&type_name);
    for e in visible(&ctx)
        .iter()
        .filter(|e| e.topic == t && e.is_publisher)
    {
        if let (Some(theirs), Some(ours)) = (&e.ros_hash, &ours)
            && theirs != ours
        {
            eprintln!(
                "warning: {} publishes {type_name} with hash {theirs}, not {ours} as myelin \
                 defines it: its events may print wrong",
                e.node
            );
        }
    }
    eprintln!("echoing {t} [{type_name}] on domain {domain}; Ctrl-C to stop");
    let mut n = 0u64;
    while count.is_none_or(|c| n < c) {
        match sub.wait_for_message(Duration::from_millis(500)) {
            Ok(m) => {
                match myelin::dynamic::decode(&described.description, &type_name, m.bytes()) {
                    Ok(v) => print!("{}", event_yaml(&v, srv, no_arr)),
                    Err(e) => println!("(cannot decode as {type_name}: {e})"),
                }
                println!("---");
                n += 1;
            }
            Err(myelin::WaitError::ContextShutDown(_)) => break,
            Err(_) if ctx.is_shut_down() => break,
            Err(_) => {}
        }
    }
    Ok(())
}

/// An event as `ros2 service echo` prints it: the event type by name;
/// with `no_arr`, the gid and the request and response as their type and
/// length.
fn event_yaml(v: &myelin::dynamic::Value, srv: &str, no_arr: bool) -> String {
    use myelin::dynamic::Value;
    use serde_yaml::Value as Y;
    let mut y = v.to_yaml();
    let len = |f: &str| match v.field(f) {
        Some(Value::Sequence(items)) => items.len(),
        _ => 0,
    };
    if let Some(info) = y.get_mut("info") {
        if let Some(Value::UInt8(k)) = v.field("info").and_then(|i| i.field("event_type"))
            && let Some(name) = myelin::introspection::event_type_name(*k)
        {
            info["event_type"] = Y::String(name.into());
        }
        if no_arr {
            info["client_gid"] = Y::String("<array type: uint8[16]>".into());
        }
    }
    if no_arr {
        for (field, part) in [("request", "Request"), ("response", "Response")] {
            y[field] = Y::String(format!(
                "<sequence type: {srv}_{part}[1], length: {}>",
                len(field)
            ));
        }
    }
    serde_yaml::to_string(&y).unwrap_or_else(|e| format!("(cannot print: {e})\n"))
}

fn list(show_types: bool, include_hidden: bool, domain: u32) -> Res {
    let ctx = tool_ctx(domain)?;
    // service -> (type, server nodes)
    let mut found: BTreeMap<String, (Option<String>, Vec<String>)> = BTreeMap::new();
    for s in ctx
        .discover_services(DISCOVERY_WAIT)
        .into_iter()
        .filter(|s| include_hidden || !is_hidden(&s.name))
    {
        let entry = found.entry(s.name.clone()).or_default();
        if entry.0.is_none() {
            entry.0 = s.type_name.clone();
        }
        if s.is_server && !entry.1.contains(&s.node) {
            entry.1.push(s.node.clone());
        }
    }
    for (name, (ty, servers)) in found {
        let servers = if servers.is_empty() {
            "no server".to_string()
        } else {
            servers.join(", ")
        };
        match (show_types, ty) {
            (true, Some(t)) => println!("{name} [{t}]  ({servers})"),
            (true, None) => println!("{name} [type not announced]  ({servers})"),
            (false, _) => println!("{name}"),
        }
    }
    Ok(())
}

/// Print the type of `service` (as `ros2 service type`).
fn service_type(service: &str, domain: u32) -> Res {
    let ctx = tool_ctx(domain)?;
    let service = absolute(service);
    let all = ctx.discover_services(DISCOVERY_WAIT);
    let found: Vec<_> = all.iter().filter(|s| s.name == service).collect();
    if found.is_empty() {
        return Err(format!(
            "service {service:?}: not found on domain {domain}{} (`myelin service list --domain {domain}`)",
            super::topic::close_to(&service, all.iter().map(|s| s.name.as_str()))
        )
        .into());
    }
    let types: std::collections::BTreeSet<&str> = found
        .iter()
        .filter_map(|s| s.type_name.as_deref())
        .collect();
    if types.is_empty() {
        return Err(format!(
            "service {service:?} does not announce its type (a myelin service without a \
             service type, seen over shared memory)"
        )
        .into());
    }
    for t in types {
        println!("{t}");
    }
    Ok(())
}

/// A request parsed for a known service type: the one step of `service
/// call` done per type (the call itself goes through one raw client, so
/// the CLI does not compile a typed client for each type it knows).
struct Request {
    ty: myelin::RawServiceType,
    bytes: Vec<u8>,
    /// The request as `ros2 service call` shows it.
    shown: String,
    /// The response's wire bytes as YAML.
    show_response: fn(&[u8]) -> Result<String, String>,
}

/// `yaml` parsed as `S`'s request.
fn parse_as<S: ServiceType>(yaml: &str) -> Result<Request, String>
where
    S::Request: serde::de::DeserializeOwned + std::fmt::Debug,
    S::Response: serde::Serialize,
{
    let (req, bytes) = yaml_to_wire::<S::Request>(yaml, "the request")?;
    Ok(Request {
        ty: myelin::RawServiceType::of::<S>(),
        bytes,
        shown: format!("{req:?}"),
        show_response: wire_to_yaml::<S::Response>,
    })
}

/// Call `service` with `req`; print the answer.
fn call_raw(ctx: &myelin::Context, service: &str, req: Request, timeout: Duration) -> Res {
    let node = ctx.create_node(&format!("myelin_cli_call_{}", std::process::id()))?;
    let client = node.create_raw_client(service, &req.ty)?;
    if !client.wait_for_service(timeout) {
        return Err(format!(
            "no server of {service} ({}) appeared within {:.1} s",
            req.ty.name(),
            timeout.as_secs_f64()
        )
        .into());
    }
    println!("requester: making request: {}", req.shown);
    let answer = client.call(myelin::AnyMessage(req.bytes.into()), timeout)?;
    let text = (req.show_response)(answer.bytes())
        .map_err(|e| format!("the response is not a {}: {e}", req.ty.response().name()))?;
    println!("response:\n{text}");
    Ok(())
}

fn call(service: &str, type_name: &str, yaml: &str, timeout: f64, domain: u32) -> Res {
    if !(timeout.is_finite() && (0.001..=3600.0).contains(&timeout)) {
        return Err(format!("invalid --timeout {timeout}: must be 0.001 to 3600 s").into());
    }
    let timeout = Duration::from_secs_f64(timeout);
    let ctx = tool_ctx(domain)?;
    let service = absolute(service);
    macro_rules! known {
        ($($t:ty),* $(,)?) => {
            $(
                if type_name == <$t as ServiceType>::TYPE_NAME {
                    let req = parse_as::<$t>(yaml)?;
                    return call_raw(&ctx, &service, req, timeout);
                }
            )*
        };
    }
    myelin_msgs::for_all_services!(known);
    let mut all = Vec::new();
    macro_rules! names {
        ($($t:ty),* $(,)?) => { $( all.push(<$t as ServiceType>::TYPE_NAME); )* };
    }
    myelin_msgs::for_all_services!(names);
    let hint = myelin::names::did_you_mean(type_name, all.iter().copied())
        .map(|t| format!(" (did you mean {t}?)"))
        .unwrap_or_default();
    Err(format!(
        "unknown service type {type_name:?}{hint}: `service call` knows {}",
        all.join(", ")
    )
    .into())
}

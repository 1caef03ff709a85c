//! `myelin service ...`: the services of a domain, and calling one from
//! the command line (as `ros2 service list|call`). Services of ROS 2 nodes
//! on rmw_zenoh are seen and called through the router this process
//! reaches (`tcp/127.0.0.1:7447` by default, or `MYELIN_ZENOH_CONFIG`).

use std::collections::BTreeMap;
use std::time::Duration;

use myelin::ServiceType;

use super::topic::{DISCOVERY_WAIT, absolute, is_hidden, tool_ctx, wire_to_yaml, yaml_to_wire};
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
    }
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

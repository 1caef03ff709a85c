//! `myelin service ...`: the services of a domain, and calling one from
//! the command line (as `ros2 service list|call`). Services of ROS 2 nodes
//! on rmw_zenoh are seen and called through the router this process
//! reaches (`tcp/127.0.0.1:7447` by default, or `MYELIN_ZENOH_CONFIG`).

use std::collections::BTreeMap;
use std::time::Duration;

use myelin::{Message, ServiceType};

use super::topic::{DISCOVERY_WAIT, absolute, is_hidden, tool_ctx};
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

/// Call `service` with `yaml` parsed as `S`'s request; print the answer.
fn call_as<S: ServiceType>(
    ctx: &myelin::Context,
    service: &str,
    yaml: &str,
    timeout: Duration,
) -> Res
where
    S::Request: serde::de::DeserializeOwned + std::fmt::Debug,
    S::Response: serde::Serialize,
{
    let req: S::Request = serde_yaml::from_str(yaml).map_err(|e| {
        let e = e.to_string();
        let hint = myelin::names::did_you_mean_field(&e, &[])
            .map(|f| format!(" (did you mean `{f}`?)"))
            .unwrap_or_default();
        format!(
            "the request is not a {} in YAML: {e}{hint}",
            S::Request::TYPE_NAME
        )
    })?;
    let node = ctx.create_node(&format!("myelin_cli_call_{}", std::process::id()))?;
    let client = node.create_client_for::<S>(service)?;
    if !client.wait_for_service(timeout) {
        return Err(format!(
            "no server of {service} ({}) appeared within {:.1} s",
            S::TYPE_NAME,
            timeout.as_secs_f64()
        )
        .into());
    }
    println!("requester: making request: {req:?}");
    let answer = client.call(req, timeout)?;
    println!("response:\n{}", serde_yaml::to_string(&answer)?.trim_end());
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
                    return call_as::<$t>(&ctx, &service, yaml, timeout);
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

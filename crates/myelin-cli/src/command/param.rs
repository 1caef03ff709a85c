//! `myelin param ...`: a node's parameters through its parameter services
//! (rcl_interfaces, as `ros2 param` calls them), for myelin nodes and ROS 2
//! nodes on rmw_zenoh alike.

use std::time::Duration;

use myelin::ServiceType;
use myelin::parameter::ParameterValue;
use myelin::rcl_interfaces as rcl;

use super::topic::{absolute, tool_ctx};
use crate::cli::ParamCommand;

type Res = Result<(), Box<dyn std::error::Error>>;

/// How long to wait for the node's services and answers.
const TIMEOUT: Duration = Duration::from_secs(5);

/// Run a `myelin param` subcommand.
pub fn run(cmd: ParamCommand) -> Res {
    match cmd {
        ParamCommand::List {
            node,
            show_types,
            domain,
        } => list(&node, show_types, domain),
        ParamCommand::Get { node, name, domain } => get(&node, &name, domain),
        ParamCommand::Set {
            node,
            name,
            value,
            domain,
        } => set(&node, &name, &value, domain),
        ParamCommand::Dump { node, domain } => dump(&node, domain),
        ParamCommand::Load { node, file, domain } => load(&node, &file, domain),
    }
}

/// Call `node`'s service `S` (`~/<suffix>`) once.
fn call<S: ServiceType>(
    ctx: &myelin::Context,
    node: &str,
    suffix: &str,
    req: S::Request,
) -> Result<S::Response, Box<dyn std::error::Error>> {
    let me = ctx.create_node(&format!("myelin_cli_param_{}", std::process::id()))?;
    let service = format!("{}/{suffix}", absolute(node).trim_end_matches('/'));
    let client = me.create_client_for::<S>(&service)?;
    if !client.wait_for_service(TIMEOUT) {
        return Err(format!(
            "node {} serves no {service} (is it running, and does it have parameters?)",
            absolute(node)
        )
        .into());
    }
    Ok(client.call(req, TIMEOUT)?)
}

fn names(ctx: &myelin::Context, node: &str) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    Ok(
        call::<rcl::ListParameters>(ctx, node, "list_parameters", Default::default())?
            .result
            .names,
    )
}

fn values(
    ctx: &myelin::Context,
    node: &str,
    names: &[String],
) -> Result<Vec<ParameterValue>, Box<dyn std::error::Error>> {
    let got = call::<rcl::GetParameters>(
        ctx,
        node,
        "get_parameters",
        rcl::GetParametersRequest {
            names: names.to_vec(),
        },
    )?;
    Ok(got
        .values
        .iter()
        .map(|v| ParameterValue::from_msg(v).unwrap_or_default())
        .collect())
}

fn list(node: &str, show_types: bool, domain: u32) -> Res {
    let ctx = tool_ctx(domain)?;
    let names = names(&ctx, node)?;
    if show_types {
        let types = call::<rcl::GetParameterTypes>(
            &ctx,
            node,
            "get_parameter_types",
            rcl::GetParameterTypesRequest {
                names: names.clone(),
            },
        )?
        .types;
        for (n, t) in names.iter().zip(types) {
            println!("  {n} (type: {})", myelin::parameter::type_name(t));
        }
    } else {
        for n in names {
            println!("  {n}");
        }
    }
    Ok(())
}

fn get(node: &str, name: &str, domain: u32) -> Res {
    let ctx = tool_ctx(domain)?;
    let v = values(&ctx, node, &[name.to_string()])?;
    match v.first() {
        Some(ParameterValue::NotSet) | None => {
            Err(format!("parameter {name:?} is not set on {}", absolute(node)).into())
        }
        Some(v) => {
            let kind = v.type_name();
            let mut kind_cap = kind.to_string();
            kind_cap[..1].make_ascii_uppercase();
            println!("{kind_cap} value is: {v}");
            Ok(())
        }
    }
}

/// Set `params` all at once; an error with the node's reason if refused.
fn set_all(ctx: &myelin::Context, node: &str, params: Vec<rcl::Parameter>) -> Res {
    let r = call::<rcl::SetParametersAtomically>(
        ctx,
        node,
        "set_parameters_atomically",
        rcl::SetParametersAtomicallyRequest { parameters: params },
    )?
    .result;
    if r.successful {
        Ok(())
    } else {
        Err(format!("setting parameter failed: {}", r.reason).into())
    }
}

fn set(node: &str, name: &str, value: &str, domain: u32) -> Res {
    let ctx = tool_ctx(domain)?;
    let value = ParameterValue::from_yaml_str(value);
    set_all(
        &ctx,
        node,
        vec![rcl::Parameter {
            name: name.to_string(),
            value: value.to_msg(),
        }],
    )?;
    println!("Set parameter successful");
    Ok(())
}

/// A value as YAML.
fn yaml(v: &ParameterValue) -> serde_yaml::Value {
    use serde_yaml::Value as Y;
    match v {
        ParameterValue::NotSet => Y::Null,
        ParameterValue::Bool(b) => Y::Bool(*b),
        ParameterValue::Integer(i) => Y::from(*i),
        ParameterValue::Double(d) => Y::from(*d),
        ParameterValue::String(s) => Y::from(s.clone()),
        ParameterValue::ByteArray(b) => Y::Sequence(b.iter().map(|x| Y::from(*x)).collect()),
        ParameterValue::BoolArray(b) => Y::Sequence(b.iter().map(|x| Y::Bool(*x)).collect()),
        ParameterValue::IntegerArray(b) => Y::Sequence(b.iter().map(|x| Y::from(*x)).collect()),
        ParameterValue::DoubleArray(b) => Y::Sequence(b.iter().map(|x| Y::from(*x)).collect()),
        ParameterValue::StringArray(b) => {
            Y::Sequence(b.iter().map(|x| Y::from(x.clone())).collect())
        }
    }
}

fn dump(node: &str, domain: u32) -> Res {
    let ctx = tool_ctx(domain)?;
    let names = names(&ctx, node)?;
    let vals = values(&ctx, node, &names)?;
    // Nested maps for `a.b` names, as ros2 param dump writes them.
    let mut params = serde_yaml::Mapping::new();
    for (name, v) in names.iter().zip(&vals) {
        let mut map = &mut params;
        let parts: Vec<&str> = name.split('.').collect();
        for p in &parts[..parts.len() - 1] {
            let key = serde_yaml::Value::from(*p);
            if !map.get(&key).is_some_and(serde_yaml::Value::is_mapping) {
                map.insert(key.clone(), serde_yaml::Value::Mapping(Default::default()));
            }
            map = map
                .get_mut(&key)
                .and_then(serde_yaml::Value::as_mapping_mut)
                .expect("just inserted");
        }
        map.insert(serde_yaml::Value::from(parts[parts.len() - 1]), yaml(v));
    }
    let mut body = serde_yaml::Mapping::new();
    body.insert("ros__parameters".into(), serde_yaml::Value::Mapping(params));
    let mut doc = serde_yaml::Mapping::new();
    doc.insert(
        serde_yaml::Value::from(absolute(node)),
        serde_yaml::Value::Mapping(body),
    );
    print!("{}", serde_yaml::to_string(&doc)?);
    Ok(())
}

fn load(node: &str, file: &std::path::Path, domain: u32) -> Res {
    // The file's rules, read as a context reads `--params-file`.
    let probe = myelin::Context::builder()
        .handle_signals(false)
        .shared_memory(false)
        .network(false)
        .ros_args([
            "myelin",
            "--ros-args",
            "--params-file",
            &file.to_string_lossy(),
        ])
        .build()?;
    let ctx = tool_ctx(domain)?;
    let fqn = absolute(node);
    let names = names(&ctx, node)?;
    let mut params = Vec::new();
    for name in &names {
        if let Some(v) = probe.parameter_override(&fqn, name) {
            params.push(rcl::Parameter {
                name: name.clone(),
                value: v.to_msg(),
            });
        }
    }
    let n = params.len();
    set_all(&ctx, node, params)?;
    println!("Set {n} parameters of {fqn} from {}", file.display());
    Ok(())
}

//! `myelin action ...`: the actions of a domain, and sending one a goal
//! from the command line (as `ros2 action list|info|send_goal`). An
//! action is found by its `<name>/_action/send_goal` service, so ROS 2
//! action servers and clients on rmw_zenoh show up through the router this
//! process reaches, as myelin's do.

use std::collections::BTreeMap;
use std::time::Duration;

use myelin::Message;
use myelin::action::{ActionError, ActionType, GoalState, SEND_GOAL_SUFFIX, SendGoalOptions};

use super::topic::{DISCOVERY_WAIT, absolute, tool_ctx};
use crate::cli::ActionCommand;

type Res = Result<(), Box<dyn std::error::Error>>;

/// Run a `myelin action` subcommand.
pub fn run(cmd: ActionCommand) -> Res {
    match cmd {
        ActionCommand::List { show_types, domain } => list(show_types, domain),
        ActionCommand::Info {
            action,
            show_types,
            domain,
        } => info(&action, show_types, domain),
        ActionCommand::SendGoal {
            action,
            type_name,
            goal,
            feedback,
            timeout,
            domain,
        } => send_goal(&action, &type_name, &goal, feedback, timeout, domain),
    }
}

/// One action as the graph shows it.
#[derive(Default)]
struct Seen {
    type_name: Option<String>,
    servers: Vec<String>,
    clients: Vec<String>,
}

/// The actions of the domain, by name.
fn actions(domain: u32) -> Result<BTreeMap<String, Seen>, Box<dyn std::error::Error>> {
    let ctx = tool_ctx(domain)?;
    let mut found: BTreeMap<String, Seen> = BTreeMap::new();
    for s in ctx.discover_services(DISCOVERY_WAIT) {
        let Some(action) = s.name.strip_suffix(SEND_GOAL_SUFFIX) else {
            continue;
        };
        let seen = found.entry(action.to_string()).or_default();
        if seen.type_name.is_none() {
            seen.type_name = s
                .type_name
                .as_deref()
                .and_then(|t| t.strip_suffix("_SendGoal"))
                .map(str::to_string);
        }
        let list = if s.is_server {
            &mut seen.servers
        } else {
            &mut seen.clients
        };
        if !list.contains(&s.node) {
            list.push(s.node.clone());
        }
    }
    // myelin's services over shared memory do not name their type; the
    // action's feedback topic does (`pkg/action/Name_FeedbackMessage`).
    if found.values().any(|s| s.type_name.is_none()) {
        for e in ctx.discover(Duration::ZERO) {
            let Some(action) = e.topic.strip_suffix("/_action/feedback") else {
                continue;
            };
            if let Some(seen) = found.get_mut(action)
                && seen.type_name.is_none()
            {
                seen.type_name = e
                    .type_name
                    .strip_suffix("_FeedbackMessage")
                    .map(str::to_string);
            }
        }
    }
    Ok(found)
}

fn type_label(t: &Option<String>) -> &str {
    t.as_deref().unwrap_or("type not announced")
}

fn list(show_types: bool, domain: u32) -> Res {
    for (name, seen) in actions(domain)? {
        if show_types {
            println!("{name} [{}]", type_label(&seen.type_name));
        } else {
            println!("{name}");
        }
    }
    Ok(())
}

fn info(action: &str, show_types: bool, domain: u32) -> Res {
    let action = absolute(action);
    let all = actions(domain)?;
    let seen = all.get(&action);
    println!("Action: {action}");
    let empty = Seen::default();
    let seen = seen.unwrap_or(&empty);
    for (label, nodes) in [
        ("Action clients", &seen.clients),
        ("Action servers", &seen.servers),
    ] {
        println!("{label}: {}", nodes.len());
        for n in nodes {
            if show_types {
                println!("    {n} [{}]", type_label(&seen.type_name));
            } else {
                println!("    {n}");
            }
        }
    }
    Ok(())
}

/// Indent YAML by `n` spaces, as `ros2 action send_goal` prints messages.
fn indented<T: serde::Serialize>(v: &T, n: usize) -> String {
    let pad = " ".repeat(n);
    serde_yaml::to_string(v)
        .unwrap_or_else(|e| format!("<{e}>"))
        .lines()
        .map(|l| format!("{pad}{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Send `yaml` as a goal of `A`; print feedback (with `feedback`), the
/// result and the final status. The goal's result is waited for as long
/// as it takes.
fn send_as<A: ActionType>(
    ctx: &myelin::Context,
    action: &str,
    yaml: &str,
    feedback: bool,
    timeout: Duration,
) -> Res {
    let goal: A::Goal = serde_yaml::from_str(yaml).map_err(|e| {
        let e = e.to_string();
        let hint = myelin::names::did_you_mean_field(&e, &[])
            .map(|f| format!(" (did you mean `{f}`?)"))
            .unwrap_or_default();
        format!(
            "the goal is not a {} in YAML: {e}{hint}",
            A::Goal::TYPE_NAME
        )
    })?;
    let node = ctx.create_node(&format!("myelin_cli_send_goal_{}", std::process::id()))?;
    let client = node.create_action_client::<A>(action)?;
    println!("Waiting for an action server to become available...");
    if !client.wait_for_action_server(timeout) {
        return Err(format!(
            "no server of action {action} ({}) appeared within {:.1} s",
            A::NAMES.action,
            timeout.as_secs_f64()
        )
        .into());
    }
    println!("Sending goal:\n{}\n", indented(&goal, 5));
    let mut options = SendGoalOptions::new();
    // Feedback arrives on its own topic and may trail the result: the time
    // of the last one lets the result wait for the stream to settle, and
    // `done` keeps feedback from printing after the result.
    let printed = std::sync::Arc::new(std::sync::Mutex::new((std::time::Instant::now(), false)));
    if feedback {
        let printed = printed.clone();
        options = options.on_feedback(move |f: A::Feedback| {
            let mut p = printed.lock().unwrap_or_else(|e| e.into_inner());
            if !p.1 {
                println!("Feedback:\n{}\n", indented(&f, 4));
                p.0 = std::time::Instant::now();
            }
        });
    }
    let handle = match client.send_goal_with(goal, options, timeout) {
        Ok(h) => h,
        Err(ActionError::Rejected { .. }) => {
            println!("Goal was rejected.");
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    let id: String = handle
        .goal_id()
        .uuid
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    println!("Goal accepted with ID: {id}\n");
    let done = loop {
        match handle.get_result(Duration::from_secs(3600)) {
            Err(ActionError::Call(myelin::CallError::Timeout { .. })) => continue,
            other => break other?,
        }
    };
    if feedback {
        // Up to a second for feedback already sent to arrive (quiet for
        // 100 ms ends the wait), then no more of it.
        let until = std::time::Instant::now() + Duration::from_secs(1);
        while std::time::Instant::now() < until
            && printed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .0
                .elapsed()
                < Duration::from_millis(100)
        {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let mut p = printed.lock().unwrap_or_else(|e| e.into_inner());
    p.1 = true;
    println!("Result:\n{}\n", indented(&done.result, 4));
    println!("Goal finished with status: {}", done.state);
    if done.state == GoalState::Unknown {
        return Err("the server no longer knew the goal".into());
    }
    Ok(())
}

fn send_goal(
    action: &str,
    type_name: &str,
    yaml: &str,
    feedback: bool,
    timeout: f64,
    domain: u32,
) -> Res {
    if !(timeout.is_finite() && (0.001..=3600.0).contains(&timeout)) {
        return Err(format!("invalid --timeout {timeout}: must be 0.001 to 3600 s").into());
    }
    let timeout = Duration::from_secs_f64(timeout);
    let ctx = tool_ctx(domain)?;
    let action = absolute(action);
    macro_rules! known {
        ($($t:ty),* $(,)?) => {
            $(
                if type_name == <$t as ActionType>::NAMES.action {
                    return send_as::<$t>(&ctx, &action, yaml, feedback, timeout);
                }
            )*
        };
    }
    myelin_msgs::for_all_actions!(known);
    let mut all = Vec::new();
    macro_rules! names {
        ($($t:ty),* $(,)?) => { $( all.push(<$t as ActionType>::NAMES.action); )* };
    }
    myelin_msgs::for_all_actions!(names);
    let hint = myelin::names::did_you_mean(type_name, all.iter().copied())
        .map(|t| format!(" (did you mean {t}?)"))
        .unwrap_or_default();
    Err(format!(
        "unknown action type {type_name:?}{hint}: `action send_goal` knows {}",
        all.join(", ")
    )
    .into())
}

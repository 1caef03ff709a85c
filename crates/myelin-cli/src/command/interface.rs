//! `myelin interface list|show`: the types of the message crate, their
//! definitions and ROS 2 type hashes (as `ros2 interface`).

use crate::cli::InterfaceCommand;

type Res = Result<(), Box<dyn std::error::Error>>;

/// Run a `myelin interface` subcommand.
pub fn run(cmd: InterfaceCommand) -> Res {
    match cmd {
        InterfaceCommand::List => {
            let mut msgs: Vec<_> = myelin_msgs::definitions().iter().map(|(n, _)| *n).collect();
            msgs.sort_unstable();
            let mut srvs: Vec<_> = myelin_msgs::srv_definitions()
                .iter()
                .map(|(n, _)| *n)
                .collect();
            srvs.sort_unstable();
            let mut text = String::from("Messages:\n");
            for n in msgs {
                text.push_str(&format!("    {n}\n"));
            }
            text.push_str("Services:\n");
            for n in srvs {
                text.push_str(&format!("    {n}\n"));
            }
            // A reader that stops early (`| head`) is not an error.
            let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes());
            Ok(())
        }
        InterfaceCommand::Show { type_name } => show(&type_name),
    }
}

fn show(type_name: &str) -> Res {
    let (text, hash) = if type_name.contains("/srv/") {
        let text = myelin_msgs::srv_definitions()
            .iter()
            .find(|(n, _)| *n == type_name)
            .map(|(_, t)| *t);
        (text, myelin_msgs::ros_srv_hash_of(type_name))
    } else {
        (
            myelin_msgs::definition(type_name),
            myelin_msgs::ros_hash_of(type_name),
        )
    };
    let Some(text) = text else {
        let mut all: Vec<&str> = myelin_msgs::definitions().iter().map(|(n, _)| *n).collect();
        all.extend(myelin_msgs::srv_definitions().iter().map(|(n, _)| *n));
        let hint = myelin::names::did_you_mean(type_name, all.iter().copied())
            .map(|t| format!(" (did you mean {t}?)"))
            .unwrap_or_default();
        return Err(format!(
            "unknown type {type_name:?}{hint}: `myelin interface list` shows the known ones"
        )
        .into());
    };
    print!("{text}");
    if !text.ends_with('\n') {
        println!();
    }
    if let Some(h) = hash {
        println!("# type hash: {h}");
    }
    Ok(())
}

//! `myelin param list|get|set|dump|load` against a node with parameters in
//! this process (over shared memory), as `ros2 param` against a node.

use std::process::Output;

use myelin::{Context, Executor};

mod common;
use common::myelin;

fn param(args: &[&str], domain: u32) -> Output {
    myelin()
        .arg("param")
        .args(args)
        .args(["--domain", &domain.to_string()])
        .env("MYELIN_TRANSPORT", "shm")
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn list_get_set_dump_and_load_a_nodes_parameters() {
    let domain = 195;
    let ctx = Context::builder()
        .domain_id(domain)
        .handle_signals(false)
        .network(false)
        .build()
        .unwrap();
    let node = ctx.create_node("camera").unwrap();
    node.declare_parameter("fps", 30).unwrap();
    node.declare_parameter("lens.focal", 4.5).unwrap();
    node.declare_parameter("frame", "cam0").unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    let stop = exec.stop_handle();
    let spin = std::thread::spawn(move || exec.spin());

    let o = param(&["list", "/camera", "-t"], domain);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "  fps (type: integer)\n  frame (type: string)\n  lens.focal (type: double)\n"
    );
    let o = param(&["get", "/camera", "fps"], domain);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "Integer value is: 30\n",
        "{}",
        text(&o)
    );

    let o = param(&["set", "/camera", "fps", "15"], domain);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(node.get_parameter("fps").unwrap().as_i64(), Some(15));
    // A value of the wrong type is refused with the node's reason.
    let o = param(&["set", "/camera", "fps", "fast"], domain);
    assert!(!o.status.success());
    assert!(text(&o).contains("integer, not string"), "{}", text(&o));

    let o = param(&["dump", "/camera"], domain);
    let dumped = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        dumped.contains("/camera:\n  ros__parameters:\n"),
        "{dumped}"
    );
    assert!(
        dumped.contains("fps: 15") && dumped.contains("focal: 4.5"),
        "{dumped}"
    );

    // Load the dump back after changing a value: it comes back.
    node.set_parameter("fps", 60).unwrap();
    let file = std::env::temp_dir().join(format!("myelin_param_{}.yaml", std::process::id()));
    std::fs::write(&file, &dumped).unwrap();
    let o = param(&["load", "/camera", file.to_str().unwrap()], domain);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(node.get_parameter("fps").unwrap().as_i64(), Some(15));
    std::fs::remove_file(&file).unwrap();

    let o = param(&["get", "/nobody", "fps"], domain);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("serves no /nobody/get_parameters"),
        "{}",
        text(&o)
    );

    stop.stop();
    spin.join().unwrap().unwrap();
}

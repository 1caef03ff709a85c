//! `myelin action list|info|send_goal` end to end, against a myelin
//! action server in this test's process (another process than the CLI's:
//! they meet over shared memory), against a ROS 2 action server on
//! rmw_zenoh (the independent Python peer, `interop/rmw_zenoh_peer.py`)
//! through `myelin router`, and the errors a user can make.

use std::time::{Duration, Instant};

use myelin::action::{ActionServer, CancelResponse, GoalResponse};
use myelin::{Context, Executor};
use myelin_msgs::example_interfaces::{Fibonacci, FibonacciFeedback, FibonacciResult};

mod common;
use common::{Background, myelin, router, router_endpoint};

#[path = "../../myelin/tests/common/interop.rs"]
mod interop;

fn run(args: &[&str]) -> (bool, String, String) {
    let out = myelin().args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A Fibonacci server on `domain`, spinning until dropped.
struct Server {
    stop: myelin::StopHandle,
    spin: Option<std::thread::JoinHandle<()>>,
    _server: ActionServer<Fibonacci>,
    _ctx: Context,
}

impl Server {
    fn start(domain: u32) -> Server {
        let ctx = Context::builder()
            .domain_id(domain)
            .handle_signals(false)
            .shared_memory(true)
            .network(false)
            .build()
            .unwrap();
        let node = ctx.create_node("fib_server").unwrap();
        let server = node
            .create_action_server::<Fibonacci>(
                "fibonacci",
                |_, g| {
                    if g.order > 46 {
                        GoalResponse::Reject
                    } else {
                        GoalResponse::AcceptAndExecute
                    }
                },
                |_, _| CancelResponse::Accept,
                |h| {
                    std::thread::spawn(move || {
                        let mut s = vec![0, 1];
                        for i in 1..h.goal().order.max(1) as usize {
                            s.push(s[i] + s[i - 1]);
                            h.publish_feedback(FibonacciFeedback {
                                sequence: s.clone(),
                            })
                            .unwrap();
                        }
                        h.succeed(FibonacciResult { sequence: s }).unwrap();
                    });
                },
            )
            .unwrap();
        let mut exec = Executor::new();
        exec.add_node(&node).unwrap();
        let stop = exec.stop_handle();
        let spin = Some(std::thread::spawn(move || exec.spin().unwrap()));
        Server {
            stop,
            spin,
            _server: server,
            _ctx: ctx,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.stop();
        if let Some(s) = self.spin.take() {
            s.join().unwrap();
        }
    }
}

#[test]
fn list_info_and_send_goal_to_a_myelin_action_server() {
    let _server = Server::start(186);
    let deadline = Instant::now() + Duration::from_secs(60);
    let list = loop {
        let (_, out, _) = run(&["action", "list", "-t", "--domain", "186"]);
        if out.contains("/fibonacci") || Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(list, "/fibonacci [example_interfaces/action/Fibonacci]\n");
    let (ok, info, err) = run(&["action", "info", "fibonacci", "-t", "--domain", "186"]);
    assert!(ok, "{err}");
    assert_eq!(
        info,
        "Action: /fibonacci\nAction clients: 0\nAction servers: 1\n    \
         /fib_server [example_interfaces/action/Fibonacci]\n"
    );

    // node info lists the action, not its hidden topics and services.
    let (ok, node, err) = run(&["node", "info", "/fib_server", "--domain", "186"]);
    assert!(ok, "{err}");
    assert!(!node.contains("_action"), "{node}");
    assert!(
        node.contains("  Action Servers:\n    /fibonacci: example_interfaces/action/Fibonacci\n"),
        "{node}"
    );
    let (ok, out, err) = run(&[
        "action",
        "send_goal",
        "/fibonacci",
        "example_interfaces/action/Fibonacci",
        "{order: 4}",
        "--feedback",
        "--domain",
        "186",
    ]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("Sending goal:\n     order: 4\n"), "{out}");
    assert!(out.contains("Goal accepted with ID: "), "{out}");
    assert_eq!(out.matches("Feedback:\n").count(), 3, "{out}");
    assert!(
        out.ends_with(
            "Result:\n    sequence:\n    - 0\n    - 1\n    - 1\n    - 2\n    - 3\n\n\
             Goal finished with status: SUCCEEDED\n"
        ),
        "{out}"
    );
    let (ok, out, _) = run(&[
        "action",
        "send_goal",
        "fibonacci",
        "example_interfaces/action/Fibonacci",
        "{order: 47}",
        "--domain",
        "186",
    ]);
    assert!(ok);
    assert!(out.ends_with("Goal was rejected.\n"), "{out}");

    // The action's services and topics are hidden, as ROS 2 hides them.
    let (_, services, _) = run(&["service", "list", "--domain", "186"]);
    assert!(!services.contains("_action"), "{services}");
    let (_, services, _) = run(&[
        "service",
        "list",
        "--include-hidden-services",
        "--domain",
        "186",
    ]);
    for s in ["send_goal", "cancel_goal", "get_result"] {
        assert!(
            services.contains(&format!("/fibonacci/_action/{s}\n")),
            "{services}"
        );
    }
    let (_, topics, _) = run(&["topic", "list", "--domain", "186"]);
    assert!(!topics.contains("_action"), "{topics}");
    let (_, topics, _) = run(&[
        "topic",
        "list",
        "-t",
        "--include-hidden-topics",
        "--domain",
        "186",
    ]);
    assert!(
        topics.contains("/fibonacci/_action/status [action_msgs/msg/GoalStatusArray]\n"),
        "{topics}"
    );
}

/// What a user gets wrong is an error that says what to fix, and a
/// non-zero exit.
#[test]
fn action_send_goal_errors_say_what_to_fix() {
    let (ok, _, err) = run(&[
        "action",
        "send_goal",
        "/fibonacci",
        "example_interfaces/action/Fibonaci",
        "{order: 3}",
        "--domain",
        "187",
    ]);
    assert!(!ok);
    assert!(
        err.contains("did you mean example_interfaces/action/Fibonacci?"),
        "{err}"
    );
    let (ok, _, err) = run(&[
        "action",
        "send_goal",
        "/fibonacci",
        "example_interfaces/action/Fibonacci",
        "{ordr: 3}",
        "--domain",
        "187",
    ]);
    assert!(!ok);
    assert!(err.contains("did you mean `order`?"), "{err}");
    let (ok, _, err) = run(&[
        "action",
        "send_goal",
        "/fibonacci",
        "example_interfaces/action/Fibonacci",
        "{order: 3}",
        "--timeout",
        "0.2",
        "--domain",
        "187",
    ]);
    assert!(!ok);
    assert!(
        err.contains("no server of action /fibonacci (example_interfaces/action/Fibonacci)"),
        "{err}"
    );
    let (ok, _, err) = run(&[
        "action",
        "send_goal",
        "/fibonacci",
        "example_interfaces/action/Fibonacci",
        "{}",
        "--timeout",
        "1e300",
    ]);
    assert!(!ok);
    assert!(err.contains("invalid --timeout"), "{err}");
}

/// A ROS 2 action server (the peer) is listed with its type and node, and
/// `send_goal` follows its goal to the result, as `ros2 action` does.
#[test]
fn list_and_send_goal_to_a_ros_2_action_server_through_a_router() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let Some(py) = interop::python() else { return };
    let (router, cfg) = router();
    let endpoint = router_endpoint(&cfg);
    let mut server = std::process::Command::new(py)
        .arg(interop::peer_script())
        .args([
            "action-server",
            "--domain",
            "188",
            "--node",
            "fib",
            "--rate",
            "100",
        ])
        .args(["--connect", &endpoint])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(server.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    let server = Background(server);
    let net = |args: &[&str]| {
        let out = myelin()
            .args(args)
            .env("MYELIN_TRANSPORT", "zenoh")
            .env("MYELIN_ZENOH_CONFIG", &cfg)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let list = loop {
        let (_, out, _) = net(&["action", "list", "-t", "--domain", "188"]);
        if out.contains("/fibonacci") || Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(list, "/fibonacci [example_interfaces/action/Fibonacci]\n");
    let (ok, info, err) = net(&["action", "info", "/fibonacci", "--domain", "188"]);
    assert!(ok, "{err}");
    assert!(info.ends_with("Action servers: 1\n    /fib\n"), "{info}");
    let (ok, out, err) = net(&[
        "action",
        "send_goal",
        "fibonacci",
        "example_interfaces/action/Fibonacci",
        "{order: 3}",
        "-f",
        "--domain",
        "188",
    ]);
    assert!(ok, "{out}{err}");
    assert_eq!(out.matches("Feedback:\n").count(), 2, "{out}");
    assert!(
        out.ends_with(
            "Result:\n    sequence:\n    - 0\n    - 1\n    - 1\n    - 2\n\n\
             Goal finished with status: SUCCEEDED\n"
        ),
        "{out}"
    );
    drop(server);
    drop(router);
}

//! myelin next to ROS 2 nodes on rmw_zenoh, checked against an independent
//! peer: `interop/rmw_zenoh_peer.py`, written in Python (eclipse-zenoh)
//! from rmw_zenoh's design document, sharing no code with myelin. Both
//! sides reach a zenoh router on a free loopback port.
//!
//! The peer needs a Python with the `zenoh` module: `MYELIN_INTEROP_PYTHON`
//! names it (`.ci/run` creates a virtualenv with `eclipse-zenoh` and sets
//! it). Without one the tests print why and pass, except under CI
//! (`CI=true`), where a missing peer is a failure.
#![cfg(feature = "zenoh")]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use myelin::prelude::*;
use myelin_msgs::example_interfaces::{AddTwoInts, AddTwoIntsRequest, AddTwoIntsResponse};

mod common {
    pub mod interop;
    pub mod router;
}
use common::interop::{peer_script, python};
use common::router::{Router, router};

const LONG: Duration = Duration::from_secs(60);

/// The peer, its stdout as lines.
struct Peer {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Peer {
    fn start(python: &PathBuf, r: &Router, args: &[&str]) -> Peer {
        let mut child = Command::new(python)
            .arg(peer_script())
            .args(args)
            .args(["--connect", &r.endpoint])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the Python peer");
        let out = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                eprintln!("peer: {line}");
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Peer { child, lines }
    }

    /// The next line that starts with `prefix`.
    fn expect(&self, prefix: &str) -> String {
        loop {
            match self.lines.recv_timeout(LONG) {
                Ok(l) if l.starts_with(prefix) => return l,
                Ok(_) => {}
                Err(_) => panic!("the peer never printed {prefix:?}"),
            }
        }
    }

    /// Wait for the peer to exit; its exit status.
    fn wait(mut self) -> std::process::ExitStatus {
        drop(self.child.stdin.take());
        self.child.wait().unwrap()
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ctx(r: &Router, domain: u32) -> Context {
    Context::builder()
        .domain_id(domain)
        .handle_signals(false)
        .shared_memory(false)
        .zenoh_config(&r.config)
        .build()
        .unwrap()
}

/// A myelin `add_two_ints_server` spinning on its own thread until dropped.
struct Server {
    stop: myelin::StopHandle,
    spin: Option<std::thread::JoinHandle<Result<(), myelin::SpinError>>>,
    _ctx: Context,
}

impl Server {
    fn start(r: &Router, domain: u32) -> Server {
        let c = ctx(r, domain);
        let node = c.create_node("add_two_ints_server").unwrap();
        let srv = node
            .create_service_for::<AddTwoInts>("add_two_ints", |req| AddTwoIntsResponse {
                sum: req.a + req.b,
            })
            .unwrap();
        let mut exec = Executor::new();
        exec.add_node(&node).unwrap();
        let stop = exec.stop_handle();
        let spin = std::thread::spawn(move || {
            let _keep = srv;
            exec.spin()
        });
        Server {
            stop,
            spin: Some(spin),
            _ctx: c,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.stop();
        if let Some(s) = self.spin.take() {
            s.join().unwrap().unwrap();
        }
    }
}

/// A ROS 2 client on rmw_zenoh (the peer) finds a myelin server by its
/// liveliness token and calls it: the request arrives as the service's
/// CDR over a zenoh query, the reply carries the caller's sequence number
/// and gid back (the peer drops replies that do not).
#[test]
fn a_ros_2_client_calls_a_myelin_server() {
    let Some(py) = python() else { return };
    let r = router("interop_srv");
    let _server = Server::start(&r, 31);
    let peer = Peer::start(
        &py,
        &r,
        &[
            "client", "--domain", "31", "--a", "40", "--b", "2", "--calls", "3",
        ],
    );
    let server = peer.expect("server ");
    // rmw_zenoh's token grammar, as the peer parsed it.
    assert!(
        server.starts_with("server add_two_ints_server @ros2_lv/31/"),
        "{server}"
    );
    assert!(
        server.contains(
            "/SS/%/%/add_two_ints_server/%add_two_ints/example_interfaces::srv::dds_::AddTwoInts_/\
             RIHS01_e118de6bf5eeb66a2491b5bda11202e7b68f198d6f67922cf30364858239c81a/"
        ),
        "{server}"
    );
    for (n, sum) in [(1, 42), (2, 43), (3, 44)] {
        assert_eq!(peer.expect("sum "), format!("sum {sum} seq={n}"));
    }
    assert!(peer.wait().success());
}

/// A myelin client reaches a ROS 2 server on rmw_zenoh (the peer): it
/// waits for the server's token, sends each request with an attachment
/// whose sequence number counts up from 1 under one gid, and takes the
/// answer.
#[test]
fn a_myelin_client_calls_a_ros_2_server() {
    let Some(py) = python() else { return };
    let r = router("interop_cli");
    let peer = Peer::start(&py, &r, &["server", "--domain", "32"]);
    peer.expect("ready");
    let c = ctx(&r, 32);
    let node = c.create_node("add_two_ints_client").unwrap();
    let client = node
        .create_client_for::<AddTwoInts>("add_two_ints")
        .unwrap();
    assert!(
        client.wait_for_service(LONG),
        "the ROS 2 server was never seen"
    );
    let mut gids = Vec::new();
    for (n, b) in [(1, 3), (2, 4)] {
        let answer = client.call(AddTwoIntsRequest { a: 2, b }, LONG).unwrap();
        assert_eq!(answer.sum, 2 + b);
        let line = peer.expect("request ");
        let fields: Vec<&str> = line.split(' ').collect();
        assert_eq!(fields[1], format!("seq={n}"), "{line}");
        assert_eq!(fields[3..], ["a=2".to_string(), format!("b={b}")], "{line}");
        let gid = fields[2].strip_prefix("gid=").unwrap().to_string();
        assert_eq!(gid.len(), 32, "{line}");
        gids.push(gid);
    }
    assert_eq!(gids[0], gids[1], "one client, one gid");
    // call_async takes the same way.
    let answer =
        futures::executor::block_on(client.call_async(AddTwoIntsRequest { a: 5, b: 6 })).unwrap();
    assert_eq!(answer.sum, 11);
    peer.expect("request seq=3 ");
}

/// A ROS 2 server that takes a request and dies before answering: the
/// myelin caller learns the service is gone (zenoh closes the query when
/// the server's session goes), long before its own timeout, and does not
/// hang.
#[test]
fn a_ros_2_server_dying_mid_call_fails_the_call_not_hangs_it() {
    let Some(py) = python() else { return };
    let r = router("interop_die");
    let mut peer = Peer::start(&py, &r, &["server", "--domain", "33", "--hang"]);
    peer.expect("ready");
    let c = ctx(&r, 33);
    let node = c.create_node("caller").unwrap();
    let client = node
        .create_client_for::<AddTwoInts>("add_two_ints")
        .unwrap();
    assert!(client.wait_for_service(LONG));
    let call = std::thread::spawn(move || {
        // Far longer than the test takes: only the server's death ends it.
        client.call(AddTwoIntsRequest { a: 1, b: 1 }, Duration::from_secs(600))
    });
    peer.expect("request ");
    peer.child.kill().unwrap();
    let err = call.join().unwrap().unwrap_err();
    assert!(
        matches!(err, myelin::CallError::ServiceUnavailable(_)),
        "{err}"
    );
}

/// A ROS 2 client that sends bytes that are not an AddTwoInts request gets
/// an error reply (and the caller's next, valid call is answered): the
/// myelin server neither crashes nor stops serving.
#[test]
fn a_malformed_request_gets_an_error_reply_and_the_server_goes_on() {
    let Some(py) = python() else { return };
    let r = router("interop_bad");
    let _server = Server::start(&r, 34);
    let peer = Peer::start(
        &py,
        &r,
        &["client", "--domain", "34", "--garbage", "--calls", "2"],
    );
    let err = peer.expect("error reply ");
    assert!(err.contains("does not decode"), "{err}");
    assert_eq!(peer.expect("sum "), "sum 6 seq=2");
    assert!(peer.wait().success());
}

/// Transient local from ROS 2: a talker on rmw_zenoh (the peer, zenoh-ext's
/// advanced publisher with a cache, as rmw_zenoh declares one) publishes
/// three messages before myelin subscribes; a late myelin subscription
/// gets all three, in order, from its cache.
#[test]
fn a_late_myelin_subscription_gets_a_ros_2_talkers_transient_local_history() {
    let Some(py) = python() else { return };
    let r = router("interop_tl_in");
    let domain = 56;
    let talker = Peer::start(
        &py,
        &r,
        &[
            "talker",
            "--domain",
            &domain.to_string(),
            "--topic",
            "/latched",
            "--transient-local",
            "--count",
            "3",
        ],
    );
    talker.expect("published 3");
    let c = ctx(&r, domain);
    let node = c.create_node("tl_listener").unwrap();
    let s = node
        .create_polling_subscription::<myelin_msgs::std_msgs::String>(
            "/latched",
            QoS::keep_last(10).transient_local(),
            Default::default(),
        )
        .unwrap();
    for n in 0..3 {
        let m = s
            .wait_for_message(LONG)
            .expect("history from the ROS 2 talker");
        assert_eq!(m.data, format!("py talker {n}"));
    }
}

/// A ROS 2 talker's messages name it: `MessageInfo` carries the gid,
/// sequence numbers and send times of rmw_zenoh's attachment.
#[test]
fn a_ros_2_talkers_messages_carry_its_gid_sequence_numbers_and_send_times() {
    let Some(py) = python() else { return };
    let r = router("interop_info");
    let domain = 59;
    let c = ctx(&r, domain);
    let node = c.create_node("info_listener").unwrap();
    let s = node
        .create_polling_subscription::<myelin_msgs::std_msgs::String>(
            "/chatter_info",
            QoS::keep_last(10),
            Default::default(),
        )
        .unwrap();
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64;
    let talker = Peer::start(
        &py,
        &r,
        &[
            "talker",
            "--domain",
            &domain.to_string(),
            "--topic",
            "/chatter_info",
            "--rate",
            "50",
            "--print-gid",
        ],
    );
    let gid = talker.expect("gid ")["gid ".len()..].to_string();
    let deadline = std::time::Instant::now() + LONG;
    let mut got = Vec::new();
    while got.len() < 3 {
        assert!(std::time::Instant::now() < deadline, "got {got:?}");
        match s.take_with_info() {
            Some((m, info)) => got.push((m.data.clone(), info)),
            None => std::thread::sleep(Duration::from_millis(5)),
        }
    }
    for (data, info) in &got {
        assert_eq!(info.publisher_gid().to_string(), gid);
        assert!(!info.from_intra_process());
        // The peer counts from 1 and sends "py talker N" as number N + 1.
        let n: u64 = data.rsplit(' ').next().unwrap().parse().unwrap();
        assert_eq!(info.publication_sequence_number(), Some(n + 1), "{data}");
        let sent = info.source_timestamp().unwrap();
        assert!(sent >= before, "{info:?}");
        assert!(info.received_timestamp().unwrap() >= sent, "{info:?}");
    }
}

/// Transient local to ROS 2: a myelin publisher publishes three messages
/// before anyone listens; a ROS 2 listener on rmw_zenoh (the peer,
/// zenoh-ext's advanced subscriber with history) started afterwards
/// hears all three.
#[test]
fn a_late_ros_2_listener_gets_a_myelin_publishers_transient_local_history() {
    let Some(py) = python() else { return };
    let r = router("interop_tl_out");
    let domain = 57;
    let c = ctx(&r, domain);
    let node = c.create_node("tl_talker").unwrap();
    let p = node
        .create_publisher::<myelin_msgs::std_msgs::String>(
            "/latched",
            QoS::keep_last(10).transient_local(),
        )
        .unwrap();
    for n in 0..3 {
        p.publish(myelin_msgs::std_msgs::String {
            data: format!("myelin {n}"),
        })
        .unwrap();
    }
    let listener = Peer::start(
        &py,
        &r,
        &[
            "listener",
            "--domain",
            &domain.to_string(),
            "--topic",
            "/latched",
            "--transient-local",
            "--count",
            "3",
        ],
    );
    for n in 0..3 {
        assert_eq!(listener.expect("heard "), format!("heard myelin {n}"));
    }
    assert!(listener.wait().success());
}

/// `ros2 param get` on a myelin node: the peer calls the node's
/// `~/get_parameters` (rcl_interfaces/srv/GetParameters) over rmw_zenoh's
/// service protocol and decodes the CDR reply with its own reader.
#[test]
fn a_ros_2_tool_gets_a_myelin_nodes_parameters() {
    let Some(py) = python() else { return };
    let r = router("interop_params");
    let domain = 58;
    let c = ctx(&r, domain);
    let node = c.create_node("tuned").unwrap();
    node.declare_parameter("speed", 1.5).unwrap();
    node.declare_parameter("name", "robot").unwrap();
    node.declare_parameter("ids", vec![3i64, 4]).unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    let stop = exec.stop_handle();
    let spin = std::thread::spawn(move || exec.spin());
    let peer = Peer::start(
        &py,
        &r,
        &[
            "param-get",
            "--domain",
            &domain.to_string(),
            "--target",
            "/tuned",
            "--names",
            "speed,name,ids,missing",
        ],
    );
    assert_eq!(peer.expect("param speed"), "param speed 3 1.5");
    assert_eq!(peer.expect("param name"), "param name 4 robot");
    assert_eq!(peer.expect("param ids"), "param ids 7 [3, 4]");
    assert_eq!(peer.expect("param missing"), "param missing 0 None");
    assert!(peer.wait().success());
    stop.stop();
    spin.join().unwrap().unwrap();
}

/// A myelin Fibonacci action server (`fibonacci_action_server`) on its
/// own executor thread, one number per `step`, until dropped.
struct FibonacciServer {
    stop: myelin::StopHandle,
    spin: Option<std::thread::JoinHandle<Result<(), myelin::SpinError>>>,
    _ctx: Context,
}

impl FibonacciServer {
    fn start(r: &Router, domain: u32, step: Duration) -> FibonacciServer {
        use myelin::action::{CancelResponse, GoalResponse};
        use myelin_msgs::example_interfaces::{Fibonacci, FibonacciFeedback, FibonacciResult};
        let c = ctx(r, domain);
        let node = c.create_node("fibonacci_action_server").unwrap();
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
                move |h| {
                    std::thread::spawn(move || {
                        let mut s = vec![0, 1];
                        for i in 1..h.goal().order.max(1) as usize {
                            std::thread::sleep(step);
                            if h.is_canceling() {
                                h.canceled(FibonacciResult { sequence: s }).unwrap();
                                return;
                            }
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
        let spin = std::thread::spawn(move || {
            let _keep = server;
            exec.spin()
        });
        FibonacciServer {
            stop,
            spin: Some(spin),
            _ctx: c,
        }
    }
}

impl Drop for FibonacciServer {
    fn drop(&mut self) {
        self.stop.stop();
        if let Some(s) = self.spin.take() {
            s.join().unwrap().unwrap();
        }
    }
}

/// The lines of the peer up to and including the one starting with
/// `last`.
fn lines_until(peer: &Peer, last: &str) -> Vec<String> {
    let mut all = Vec::new();
    loop {
        match peer.lines.recv_timeout(LONG) {
            Ok(l) => {
                let done = l.starts_with(last);
                all.push(l);
                if done {
                    return all;
                }
            }
            Err(_) => panic!("the peer never printed {last:?}; it printed {all:?}"),
        }
    }
}

/// A ROS 2 action client (the peer, as rclcpp_action's client on
/// rmw_zenoh) finds a myelin action server by its three services' tokens,
/// sends a goal, hears every feedback and the status, and gets the
/// result; a goal the server refuses is rejected; a goal canceled midway
/// ends canceled with the sequence so far.
#[test]
fn a_ros_2_action_client_drives_a_myelin_action_server() {
    let Some(py) = python() else { return };
    let r = router("interop_action_srv");
    let _server = FibonacciServer::start(&r, 35, Duration::from_millis(1));
    let peer = Peer::start(
        &py,
        &r,
        &["action-client", "--domain", "35", "--order", "10"],
    );
    assert_eq!(
        peer.expect("server "),
        "server fibonacci_action_server",
        "the server's node, from its send_goal token"
    );
    assert!(peer.expect("accepted ").len() > 40);
    let lines = lines_until(&peer, "result ");
    let feedback: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("feedback "))
        .collect();
    assert_eq!(feedback.len(), 9, "{lines:?}");
    assert_eq!(feedback[8], "feedback 0,1,1,2,3,5,8,13,21,34,55");
    assert!(lines.contains(&"status 4".to_string()), "{lines:?}");
    assert_eq!(lines.last().unwrap(), "result 4 0,1,1,2,3,5,8,13,21,34,55");
    assert!(peer.wait().success());

    let peer = Peer::start(
        &py,
        &r,
        &["action-client", "--domain", "35", "--order", "47"],
    );
    peer.expect("server ");
    peer.expect("rejected");
    assert!(peer.wait().success());
    drop(_server);

    // Slow enough that the cancel comes while the goal runs.
    let _server = FibonacciServer::start(&r, 36, Duration::from_millis(50));
    let peer = Peer::start(
        &py,
        &r,
        &[
            "action-client",
            "--domain",
            "36",
            "--order",
            "40",
            "--cancel-after",
            "2",
        ],
    );
    peer.expect("accepted ");
    let lines = lines_until(&peer, "result ");
    assert!(lines.contains(&"cancel 0 1".to_string()), "{lines:?}");
    assert!(lines.contains(&"status 3".to_string()), "{lines:?}");
    let result = lines.last().unwrap();
    assert!(result.starts_with("result 5 0,1,1,2"), "{result}");
    assert!(peer.wait().success());
}

/// A myelin action client drives a ROS 2 action server (the peer): goal,
/// feedback, status, result, rejection and cancellation, all in
/// rmw_zenoh's format.
#[test]
fn a_myelin_action_client_drives_a_ros_2_action_server() {
    use myelin::action::{ActionError, CancelGoalResponse, GoalState, SendGoalOptions};
    use myelin_msgs::example_interfaces::{Fibonacci, FibonacciFeedback, FibonacciGoal};
    let Some(py) = python() else { return };
    let r = router("interop_action_cli");
    let peer = Peer::start(
        &py,
        &r,
        &["action-server", "--domain", "37", "--rate", "50"],
    );
    peer.expect("ready");
    let c = ctx(&r, 37);
    let node = c.create_node("fibonacci_action_client").unwrap();
    let client = node.create_action_client::<Fibonacci>("fibonacci").unwrap();
    assert!(
        client.wait_for_action_server(LONG),
        "the ROS 2 action server was never seen"
    );
    let heard = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let h = heard.clone();
    let goal = client
        .send_goal_with(
            FibonacciGoal { order: 10 },
            SendGoalOptions::new()
                .on_feedback(move |f: FibonacciFeedback| h.lock().unwrap().push(f.sequence)),
            LONG,
        )
        .unwrap();
    let line = peer.expect("accepted ");
    let hex: String = goal
        .goal_id()
        .uuid
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(line, format!("accepted {hex} order 10"));
    assert!(goal.stamp().sec > 0, "the peer stamps the goal");
    let done = goal.get_result(LONG).unwrap();
    assert_eq!(done.state, GoalState::Succeeded);
    assert_eq!(done.result.sequence, [0, 1, 1, 2, 3, 5, 8, 13, 21, 34, 55]);
    // Feedback travels on its own topic: wait for the last one rather
    // than assume it beat the result.
    let deadline = std::time::Instant::now() + LONG;
    while heard.lock().unwrap().len() < 9 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let heard = heard.lock().unwrap().clone();
    assert_eq!(heard.len(), 9, "{heard:?}");
    assert_eq!(heard[8], done.result.sequence);
    assert_eq!(
        goal.wait_for_state(GoalState::is_terminal, LONG),
        GoalState::Succeeded,
        "the status topic says so too"
    );

    match client.send_goal(FibonacciGoal { order: 47 }, LONG) {
        Err(ActionError::Rejected { .. }) => {}
        other => panic!("expected a rejection, got {other:?}"),
    }

    let (tx, rx) = std::sync::mpsc::channel();
    let slow = client
        .send_goal_with(
            FibonacciGoal { order: 40 },
            SendGoalOptions::new().on_feedback(move |_: FibonacciFeedback| {
                let _ = tx.send(());
            }),
            LONG,
        )
        .unwrap();
    rx.recv_timeout(LONG).unwrap();
    let answer = slow.cancel(LONG).unwrap();
    assert_eq!(answer.return_code, CancelGoalResponse::ERROR_NONE);
    assert_eq!(answer.goals_canceling.len(), 1);
    assert_eq!(answer.goals_canceling[0].goal_id, *slow.goal_id());
    let done = slow.get_result(LONG).unwrap();
    assert_eq!(done.state, GoalState::Canceled);
    assert!(done.result.sequence.len() < 41);
    assert!(done.result.sequence.starts_with(&[0, 1, 1]));
    assert!(peer.wait().success());
}

/// A ROS 2 tool asks a myelin node for the description of a type it
/// publishes (REP 2016) and recomputes the type's REP 2011 hash from the
/// answer: it is the hash the topic is keyed by, so the description is
/// the type's own. A type the node does not use is a failure that says so.
#[test]
fn a_ros_2_tool_gets_a_myelin_nodes_type_descriptions() {
    use myelin::Message;
    use myelin_msgs::geometry_msgs::PoseStamped;
    let Some(py) = python() else { return };
    let r = router("interop_typedesc");
    let c = ctx(&r, 38);
    let node = c.create_node("describer").unwrap();
    let _p = node
        .create_publisher::<PoseStamped>("pose", QoS::keep_last(1))
        .unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    let stop = exec.stop_handle();
    let spin = std::thread::spawn(move || exec.spin());
    let hash = PoseStamped::ROS_TYPE_HASH.unwrap();
    let peer = Peer::start(
        &py,
        &r,
        &[
            "type-description",
            "--domain",
            "38",
            "--target",
            "/describer",
            "--type-name",
            "geometry_msgs/msg/PoseStamped",
            "--type-hash",
            hash,
        ],
    );
    assert_eq!(
        peer.expect("described "),
        format!(
            "described geometry_msgs/msg/PoseStamped {hash} header,pose 5 msg,msg,msg,msg,msg,msg"
        )
    );
    assert!(peer.wait().success());
    let peer = Peer::start(
        &py,
        &r,
        &[
            "type-description",
            "--domain",
            "38",
            "--target",
            "/describer",
            "--type-name",
            "sensor_msgs/msg/Image",
        ],
    );
    assert!(peer.expect("failed ").contains("not used by this node"));
    assert!(peer.wait().success());
    stop.stop();
    spin.join().unwrap().unwrap();
}

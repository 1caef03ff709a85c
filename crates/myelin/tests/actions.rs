//! Actions: goals, feedback, status, results and cancellation, in one
//! process and across real processes over shared memory (the test binary
//! runs itself as the other process, `MYELIN_ACTION_ROLE`). ROS 2 peers
//! over zenoh are in `ros_interop.rs`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use myelin::action::{
    ActionError, ActionServer, ActionServerOptions, CancelGoalResponse, CancelResponse,
    GoalResponse, GoalState, SendGoalOptions, ServerGoalHandle,
};
use myelin::prelude::*;
use myelin_msgs::example_interfaces::{
    Fibonacci, FibonacciFeedback, FibonacciGoal, FibonacciResult,
};

const LONG: Duration = Duration::from_secs(30);
const ROLE: &str = "MYELIN_ACTION_ROLE";

fn ctx() -> Context {
    Context::builder()
        .handle_signals(false)
        .shared_memory(false)
        .build()
        .unwrap()
}

/// Spin `node` on a thread until dropped.
struct Spinning {
    stop: myelin::StopHandle,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Spinning {
    fn new(node: &Node) -> Self {
        let mut exec = Executor::new();
        exec.add_node(node).unwrap();
        let stop = exec.stop_handle();
        let thread = Some(std::thread::spawn(move || exec.spin().unwrap()));
        Spinning { stop, thread }
    }
}

impl Drop for Spinning {
    fn drop(&mut self) {
        self.stop.stop();
        self.thread.take().unwrap().join().unwrap();
    }
}

/// How the test's server runs a goal: each step waits for the test to
/// say go (so a test decides exactly when the goal moves), or runs free.
#[derive(Clone)]
struct Steps(Arc<Mutex<Option<mpsc::Receiver<()>>>>);

impl Steps {
    fn free() -> Steps {
        Steps(Arc::new(Mutex::new(None)))
    }

    fn gated() -> (Steps, mpsc::Sender<()>) {
        let (tx, rx) = mpsc::channel();
        (Steps(Arc::new(Mutex::new(Some(rx)))), tx)
    }

    fn wait(&self) {
        if let Some(rx) = &*self.0.lock().unwrap() {
            let _ = rx.recv_timeout(LONG);
        }
    }
}

/// ROS 2's Fibonacci server: feedback after each number, canceled when
/// asked, aborted for a negative order (rejected above 46: an `int32`
/// overflows).
fn execute(handle: ServerGoalHandle<Fibonacci>, steps: Steps) {
    let order = handle.goal().order;
    if order < 0 {
        handle.abort(FibonacciResult::default()).unwrap();
        return;
    }
    let mut sequence = vec![0, 1];
    for i in 1..order.max(1) as usize {
        steps.wait();
        if handle.is_canceling() {
            handle.canceled(FibonacciResult { sequence }).unwrap();
            return;
        }
        sequence.push(sequence[i] + sequence[i - 1]);
        handle
            .publish_feedback(FibonacciFeedback {
                sequence: sequence.clone(),
            })
            .unwrap();
    }
    handle.succeed(FibonacciResult { sequence }).unwrap();
}

fn fibonacci_server(node: &Node, steps: Steps) -> ActionServer<Fibonacci> {
    fibonacci_server_with(node, steps, ActionServerOptions::default())
}

fn fibonacci_server_with(
    node: &Node,
    steps: Steps,
    options: ActionServerOptions,
) -> ActionServer<Fibonacci> {
    node.create_action_server_with::<Fibonacci>(
        "fibonacci",
        options,
        |_id, goal| {
            if goal.order > 46 {
                GoalResponse::Reject
            } else {
                GoalResponse::AcceptAndExecute
            }
        },
        |_id, _goal| CancelResponse::Accept,
        move |handle| {
            let steps = steps.clone();
            std::thread::spawn(move || execute(handle, steps));
        },
    )
    .unwrap()
}

fn sequence_of(order: usize) -> Vec<i32> {
    let mut s = vec![0, 1];
    while s.len() < order + 1 {
        s.push(s[s.len() - 1] + s[s.len() - 2]);
    }
    s
}

#[test]
fn a_goal_runs_to_its_result_with_every_feedback_in_order() {
    let c = ctx();
    let node = c.create_node("fibonacci_server").unwrap();
    let _server = fibonacci_server(&node, Steps::free());
    let _spin = Spinning::new(&node);
    let client = node.create_action_client::<Fibonacci>("fibonacci").unwrap();
    assert_eq!(client.name(), "/fibonacci");
    assert!(client.wait_for_action_server(LONG));
    let heard = Arc::new(Mutex::new(Vec::new()));
    let h = heard.clone();
    let goal = client
        .send_goal_with(
            FibonacciGoal { order: 10 },
            SendGoalOptions::new()
                .on_feedback(move |f: FibonacciFeedback| h.lock().unwrap().push(f.sequence)),
            LONG,
        )
        .unwrap();
    assert!(!goal.goal_id().is_zero());
    assert!(goal.stamp().sec > 0, "the server stamps the goal");
    let done = goal.get_result(LONG).unwrap();
    assert_eq!(done.state, GoalState::Succeeded);
    assert_eq!(done.result.sequence, sequence_of(10));
    assert_eq!(goal.state(), GoalState::Succeeded);
    // Feedback is published before the result: all of it is here.
    let heard = heard.lock().unwrap();
    assert_eq!(heard.len(), 9);
    for (i, s) in heard.iter().enumerate() {
        assert_eq!(*s, sequence_of(i + 2));
    }
}

#[test]
fn a_rejected_goal_is_an_error_and_leaves_nothing_behind() {
    let c = ctx();
    let node = c.create_node("fibonacci_server").unwrap();
    let server = fibonacci_server(&node, Steps::free());
    let _spin = Spinning::new(&node);
    let client = node.create_action_client::<Fibonacci>("fibonacci").unwrap();
    match client.send_goal(FibonacciGoal { order: 47 }, LONG) {
        Err(ActionError::Rejected { action }) => assert_eq!(action, "/fibonacci"),
        other => panic!("expected a rejection, got {other:?}"),
    }
    assert!(server.goals().is_empty());
}

#[test]
fn the_status_topic_follows_the_goal_through_its_states() {
    let c = ctx();
    let node = c.create_node("fibonacci_server").unwrap();
    let (steps, go) = Steps::gated();
    let server = fibonacci_server(&node, steps);
    let _spin = Spinning::new(&node);
    let client = node.create_action_client::<Fibonacci>("fibonacci").unwrap();
    let goal = client.send_goal(FibonacciGoal { order: 3 }, LONG).unwrap();
    assert_eq!(
        goal.wait_for_state(|s| s == GoalState::Executing, LONG),
        GoalState::Executing
    );
    assert_eq!(server.goals().len(), 1);
    assert_eq!(server.goals()[0].1, GoalState::Executing);
    go.send(()).unwrap();
    go.send(()).unwrap();
    assert_eq!(
        goal.wait_for_state(GoalState::is_terminal, LONG),
        GoalState::Succeeded
    );
    // A late reader of the status topic (transient local) sees the end.
    let late = node
        .create_polling_subscription::<myelin::action::GoalStatusArray>(
            "fibonacci/_action/status",
            myelin::action::STATUS_QOS,
            Default::default(),
        )
        .unwrap();
    let last = late.wait_for_message(LONG).unwrap();
    assert_eq!(last.status_list.len(), 1);
    assert_eq!(last.status_list[0].goal_info.goal_id, *goal.goal_id());
    assert_eq!(
        last.status_list[0].status,
        myelin::action::GoalStatus::STATUS_SUCCEEDED
    );
}

#[test]
fn a_canceled_goal_ends_canceled_with_its_partial_result() {
    let c = ctx();
    let node = c.create_node("fibonacci_server").unwrap();
    let (steps, go) = Steps::gated();
    let _server = fibonacci_server(&node, steps);
    let _spin = Spinning::new(&node);
    let client = node.create_action_client::<Fibonacci>("fibonacci").unwrap();
    let (fed, feedback) = mpsc::channel();
    let goal = client
        .send_goal_with(
            FibonacciGoal { order: 20 },
            SendGoalOptions::new().on_feedback(move |f: FibonacciFeedback| {
                let _ = fed.send(f.sequence);
            }),
            LONG,
        )
        .unwrap();
    go.send(()).unwrap(); // one number
    assert_eq!(feedback.recv_timeout(LONG).unwrap(), [0, 1, 1]);
    let answer = goal.cancel(LONG).unwrap();
    assert_eq!(answer.return_code, CancelGoalResponse::ERROR_NONE);
    assert_eq!(answer.goals_canceling.len(), 1);
    assert_eq!(answer.goals_canceling[0].goal_id, *goal.goal_id());
    assert_eq!(
        goal.wait_for_state(|s| s == GoalState::Canceling, LONG),
        GoalState::Canceling
    );
    go.send(()).unwrap(); // the executor sees the cancel
    let done = goal.get_result(LONG).unwrap();
    assert_eq!(done.state, GoalState::Canceled);
    assert_eq!(done.result.sequence, vec![0, 1, 1]);
    // Canceling a goal that has ended says so.
    let again = goal.cancel(LONG).unwrap();
    assert_eq!(again.return_code, CancelGoalResponse::ERROR_GOAL_TERMINATED);
    assert!(again.goals_canceling.is_empty());
}

#[test]
fn cancel_requests_follow_rcl_actions_rules() {
    let c = ctx();
    let node = c.create_node("picky").unwrap();
    let refuse = Arc::new(AtomicUsize::new(1));
    let r = refuse.clone();
    let held: Arc<Mutex<Vec<ServerGoalHandle<Fibonacci>>>> = Arc::default();
    let h = held.clone();
    let server = node
        .create_action_server::<Fibonacci>(
            "fibonacci",
            |_, _| GoalResponse::AcceptAndExecute,
            move |_, _| {
                if r.load(Ordering::SeqCst) > 0 {
                    CancelResponse::Reject
                } else {
                    CancelResponse::Accept
                }
            },
            move |handle| h.lock().unwrap().push(handle),
        )
        .unwrap();
    let _spin = Spinning::new(&node);
    let client = node.create_action_client::<Fibonacci>("fibonacci").unwrap();
    let first = client.send_goal(FibonacciGoal { order: 1 }, LONG).unwrap();
    let second = client.send_goal(FibonacciGoal { order: 2 }, LONG).unwrap();
    let third = client.send_goal(FibonacciGoal { order: 3 }, LONG).unwrap();
    // The server refuses: rejected, nothing canceling.
    let a = first.cancel(LONG).unwrap();
    assert_eq!(a.return_code, CancelGoalResponse::ERROR_REJECTED);
    assert!(a.goals_canceling.is_empty());
    // An id the server never saw.
    let mut unknown = myelin::action::UUID::random();
    unknown.uuid[0] ^= 1;
    let raw = node
        .create_client_for::<myelin::action::CancelGoal>("fibonacci/_action/cancel_goal")
        .unwrap();
    let u = raw
        .call(
            myelin::action::CancelGoalRequest {
                goal_info: myelin::action::GoalInfo {
                    goal_id: unknown,
                    stamp: Default::default(),
                },
            },
            LONG,
        )
        .unwrap();
    assert_eq!(u.return_code, CancelGoalResponse::ERROR_UNKNOWN_GOAL_ID);
    // Every goal accepted at or before the second one's stamp.
    refuse.store(0, Ordering::SeqCst);
    let b = client.cancel_goals_before(second.stamp(), LONG).unwrap();
    assert_eq!(b.return_code, CancelGoalResponse::ERROR_NONE);
    let mut ids: Vec<_> = b
        .goals_canceling
        .iter()
        .map(|g| g.goal_id.clone())
        .collect();
    ids.sort_by_key(|u| u.uuid);
    let mut want = vec![first.goal_id().clone(), second.goal_id().clone()];
    want.sort_by_key(|u| u.uuid);
    if third.stamp() == second.stamp() {
        want.push(third.goal_id().clone()); // same clock tick
        want.sort_by_key(|u| u.uuid);
    }
    assert_eq!(ids, want);
    // All of them: the third now, the others again (already canceling).
    let all = client.cancel_all_goals(LONG).unwrap();
    assert_eq!(all.return_code, CancelGoalResponse::ERROR_NONE);
    assert_eq!(all.goals_canceling.len(), 3);
    assert!(
        server
            .goals()
            .iter()
            .all(|(_, s)| *s == GoalState::Canceling)
    );
    // Nothing left to cancel once they ended.
    for h in held.lock().unwrap().drain(..) {
        h.canceled(FibonacciResult::default()).unwrap();
    }
    let none = client.cancel_all_goals(LONG).unwrap();
    assert_eq!(none.return_code, CancelGoalResponse::ERROR_REJECTED);
    for g in [&first, &second, &third] {
        assert_eq!(g.get_result(LONG).unwrap().state, GoalState::Canceled);
    }
}

#[test]
fn moves_the_state_machine_does_not_allow_are_errors() {
    let c = ctx();
    let node = c.create_node("deferring").unwrap();
    let (tx, rx) = mpsc::channel();
    let _server = node
        .create_action_server::<Fibonacci>(
            "fibonacci",
            |_, _| GoalResponse::AcceptAndDefer,
            |_, _| CancelResponse::Accept,
            move |handle| tx.send(handle).unwrap(),
        )
        .unwrap();
    let _spin = Spinning::new(&node);
    let client = node.create_action_client::<Fibonacci>("fibonacci").unwrap();
    let goal = client.send_goal(FibonacciGoal { order: 5 }, LONG).unwrap();
    let handle = rx.recv_timeout(LONG).unwrap();
    assert_eq!(handle.state(), GoalState::Accepted);
    assert_eq!(
        goal.wait_for_state(|s| s == GoalState::Accepted, LONG),
        GoalState::Accepted
    );
    // Deferred: not executing, so it cannot succeed, nor be "canceled"
    // without a cancel request.
    for e in [
        handle.succeed(FibonacciResult::default()),
        handle.canceled(FibonacciResult::default()),
    ] {
        match e {
            Err(ActionError::InvalidTransition { state, .. }) => {
                assert_eq!(state, GoalState::Accepted)
            }
            other => panic!("expected an invalid transition, got {other:?}"),
        }
    }
    handle.execute().unwrap();
    assert!(handle.execute().is_err(), "executing twice");
    assert_eq!(
        goal.wait_for_state(|s| s == GoalState::Executing, LONG),
        GoalState::Executing
    );
    handle.abort(FibonacciResult { sequence: vec![7] }).unwrap();
    let e = handle.succeed(FibonacciResult::default()).unwrap_err();
    assert!(
        e.to_string().contains("cannot succeed while ABORTED"),
        "{e}"
    );
    let done = goal.get_result(LONG).unwrap();
    assert_eq!(
        (done.state, done.result.sequence),
        (GoalState::Aborted, vec![7])
    );
}

#[test]
fn a_dropped_goal_handle_cancels_its_goal() {
    let c = ctx();
    let node = c.create_node("forgetful").unwrap();
    let _server = node
        .create_action_server::<Fibonacci>(
            "fibonacci",
            |_, _| GoalResponse::AcceptAndExecute,
            |_, _| CancelResponse::Accept,
            drop,
        )
        .unwrap();
    let _spin = Spinning::new(&node);
    let client = node.create_action_client::<Fibonacci>("fibonacci").unwrap();
    let goal = client.send_goal(FibonacciGoal { order: 5 }, LONG).unwrap();
    let done = goal.get_result(LONG).unwrap();
    assert_eq!(done.state, GoalState::Canceled);
    assert!(done.result.sequence.is_empty());
}

#[test]
fn results_are_kept_until_they_expire_then_unknown() {
    let c = ctx();
    let node = c.create_node("fibonacci_server").unwrap();
    let server = fibonacci_server_with(
        &node,
        Steps::free(),
        ActionServerOptions {
            result_timeout: Duration::from_millis(50),
            ..Default::default()
        },
    );
    let _spin = Spinning::new(&node);
    let client = node.create_action_client::<Fibonacci>("fibonacci").unwrap();
    let goal = client.send_goal(FibonacciGoal { order: 4 }, LONG).unwrap();
    assert_eq!(goal.get_result(LONG).unwrap().state, GoalState::Succeeded);
    // The expiry timer forgets it (no wall-clock assertion: wait for it).
    let deadline = Instant::now() + LONG;
    while !server.goals().is_empty() {
        assert!(Instant::now() < deadline, "the result never expired");
        std::thread::sleep(Duration::from_millis(10));
    }
    let late = goal.get_result(LONG).unwrap();
    assert_eq!(late.state, GoalState::Unknown);
    assert!(late.result.sequence.is_empty());
}

#[test]
fn an_absurd_result_timeout_keeps_results_and_does_not_panic() {
    let c = ctx();
    let node = c.create_node("fibonacci_server").unwrap();
    let server = fibonacci_server_with(
        &node,
        Steps::free(),
        ActionServerOptions {
            result_timeout: Duration::MAX,
            ..Default::default()
        },
    );
    let _spin = Spinning::new(&node);
    let client = node.create_action_client::<Fibonacci>("fibonacci").unwrap();
    let goal = client.send_goal(FibonacciGoal { order: 2 }, LONG).unwrap();
    assert_eq!(goal.get_result(LONG).unwrap().state, GoalState::Succeeded);
    assert_eq!(server.goals().len(), 1);
    assert_eq!(goal.get_result(LONG).unwrap().state, GoalState::Succeeded);
}

#[test]
fn many_goals_at_once_each_get_their_own_feedback_and_result() {
    let c = ctx();
    let node = c.create_node("fibonacci_server").unwrap();
    let _server = fibonacci_server(&node, Steps::free());
    let _spin = Spinning::new(&node);
    let client = node.create_action_client::<Fibonacci>("fibonacci").unwrap();
    let threads: Vec<_> = (1..=8)
        .map(|order| {
            let client = client.clone();
            std::thread::spawn(move || {
                let seen = Arc::new(Mutex::new(Vec::<Vec<i32>>::new()));
                let s = seen.clone();
                let goal = client
                    .send_goal_with(
                        FibonacciGoal { order },
                        SendGoalOptions::new().on_feedback(move |f: FibonacciFeedback| {
                            s.lock().unwrap().push(f.sequence)
                        }),
                        LONG,
                    )
                    .unwrap();
                let done = goal.get_result(LONG).unwrap();
                let own = sequence_of(order as usize);
                assert_eq!(done.result.sequence, own);
                // Each feedback this goal's callback got is its own (a
                // step of its sequence), in order. Not every step need
                // arrive: the feedback topic is keep_last(10), as ROS 2's,
                // and 28 messages from eight publishing threads can pass
                // an inline callback that another thread is draining (CI
                // once lost a goal's last step that way).
                let seen = seen.lock().unwrap();
                for (k, f) in seen.iter().enumerate() {
                    assert!(own.starts_with(f), "goal {order} got {f:?}");
                    assert!(
                        k == 0 || f.len() > seen[k - 1].len(),
                        "goal {order}: {seen:?}"
                    );
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn no_server_is_a_timeout_not_a_hang() {
    let c = ctx();
    let node = c.create_node("lonely").unwrap();
    let client = node.create_action_client::<Fibonacci>("fibonacci").unwrap();
    assert!(!client.action_server_is_ready());
    assert!(!client.wait_for_action_server(Duration::from_millis(20)));
    match client.send_goal(FibonacciGoal { order: 1 }, Duration::from_millis(20)) {
        Err(ActionError::Call(myelin::CallError::NoServer { service, .. })) => {
            assert_eq!(service, "/fibonacci/_action/send_goal")
        }
        other => panic!("expected no server, got {other:?}"),
    }
}

/// The other process: a Fibonacci server or client over shared memory.
#[test]
fn child_role() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let domain: u32 = std::env::var("MYELIN_ACTION_DOMAIN")
        .unwrap()
        .parse()
        .unwrap();
    let c = Context::builder()
        .domain_id(domain)
        .handle_signals(false)
        .shared_memory(true)
        .build()
        .unwrap();
    match role.as_str() {
        "server" => {
            let node = c.create_node("fibonacci_server").unwrap();
            let _server = fibonacci_server(&node, Steps::free());
            let _spin = Spinning::new(&node);
            println!("ready");
            let mut line = String::new();
            let _ = std::io::stdin().read_line(&mut line);
        }
        "hold" => {
            // Accepts goals and never ends them (until killed).
            let node = c.create_node("holding_server").unwrap();
            let held = Arc::new(Mutex::new(Vec::new()));
            let h = held.clone();
            let _server = node
                .create_action_server::<Fibonacci>(
                    "fibonacci",
                    |_, _| GoalResponse::AcceptAndExecute,
                    |_, _| CancelResponse::Reject,
                    move |handle| h.lock().unwrap().push(handle),
                )
                .unwrap();
            let _spin = Spinning::new(&node);
            println!("ready");
            let mut line = String::new();
            let _ = std::io::stdin().read_line(&mut line);
        }
        "client" => {
            let node = c.create_node("fibonacci_client").unwrap();
            let client = node.create_action_client::<Fibonacci>("fibonacci").unwrap();
            assert!(client.wait_for_action_server(LONG));
            // The length of each feedback's sequence, as it comes.
            let heard = Arc::new(Mutex::new(Vec::new()));
            let h = heard.clone();
            let goal = client
                .send_goal_with(
                    // 10 feedback messages, published in a burst: the
                    // feedback topic keeps the last 10 (ROS 2's default
                    // depth), so none may be overwritten before it is read.
                    FibonacciGoal { order: 11 },
                    SendGoalOptions::new().on_feedback(move |f: FibonacciFeedback| {
                        h.lock().unwrap().push(f.sequence.len());
                    }),
                    LONG,
                )
                .unwrap();
            let done = goal.get_result(LONG).unwrap();
            // Feedback and the result travel on different channels (a
            // topic, a service), but feedback published before the result
            // is delivered before `get_result` returns: no waiting here.
            let heard = heard.lock().unwrap().clone();
            let missing: Vec<usize> = (3..=12).filter(|n| !heard.contains(n)).collect();
            println!(
                "result {} {:?} feedback {} missing {missing:?}",
                done.state,
                done.result.sequence,
                heard.len(),
            );
        }
        other => panic!("unknown role {other}"),
    }
}

#[cfg(feature = "shm")]
mod across_processes {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    fn spawn(role: &str, domain: u32) -> std::process::Child {
        Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "child_role", "--nocapture", "--test-threads=1"])
            .env(ROLE, role)
            .env("MYELIN_ACTION_DOMAIN", domain.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap()
    }

    fn lines(child: &mut std::process::Child) -> impl Iterator<Item = String> + use<> {
        BufReader::new(child.stdout.take().unwrap())
            .lines()
            .map_while(Result::ok)
    }

    /// A client process drives a server process: goal, every feedback,
    /// the result, over shared memory.
    #[test]
    fn a_client_in_one_process_drives_a_server_in_another() {
        let domain = 216;
        let mut server = spawn("server", domain);
        let mut out = lines(&mut server);
        assert!(out.any(|l| l.ends_with("ready")));
        let mut client = spawn("client", domain);
        let got: Vec<String> = lines(&mut client)
            .filter_map(|l| l.find("result ").map(|i| l[i..].to_string()))
            .collect();
        assert!(client.wait().unwrap().success());
        drop(server.stdin.take());
        assert!(server.wait().unwrap().success());
        let want = format!(
            "result SUCCEEDED {:?} feedback 10 missing []",
            sequence_of(11)
        );
        assert_eq!(got, [want]);
    }

    /// A server process that dies mid-goal fails the client's wait for
    /// the result with an error, not a hang.
    #[test]
    fn a_server_killed_mid_goal_fails_the_result_not_hangs_it() {
        let domain = 217;
        let c = Context::builder()
            .domain_id(domain)
            .handle_signals(false)
            .shared_memory(true)
            .build()
            .unwrap();
        let node = c.create_node("fibonacci_client").unwrap();
        let client = node.create_action_client::<Fibonacci>("fibonacci").unwrap();
        // A server process that accepts goals and never ends them.
        let mut server = spawn("hold", domain);
        let mut out = lines(&mut server);
        assert!(out.any(|l| l.ends_with("ready")));
        assert!(client.wait_for_action_server(LONG));
        let goal = client.send_goal(FibonacciGoal { order: 3 }, LONG).unwrap();
        let waiter = std::thread::spawn(move || goal.get_result(LONG));
        // The server is executing the goal (its status says so): kill it
        // while the client waits for the result.
        std::thread::sleep(Duration::from_millis(100));
        server.kill().unwrap();
        server.wait().unwrap();
        let started = Instant::now();
        let r = waiter.join().unwrap();
        assert!(r.is_err(), "got {r:?}");
        assert!(started.elapsed() < LONG, "waited out the whole timeout");
    }
}

//! ROS 2's `fibonacci_action_server` demo in myelin: serves
//! `example_interfaces/action/Fibonacci` on `fibonacci`, one number of
//! the sequence per period (1 s unless given, in milliseconds), with
//! feedback after each and cancellation between them. myelin clients in
//! any process use it, and so do ROS 2 clients on rmw_zenoh when a zenoh
//! router runs (`myelin router`):
//!
//! ```text
//! cargo run --release -p myelin --example fibonacci_action_server
//! cargo run --release -p myelin --example fibonacci_action_client -- 10
//! myelin action send_goal /fibonacci example_interfaces/action/Fibonacci "{order: 5}" -f
//! RMW_IMPLEMENTATION=rmw_zenoh_cpp ros2 action send_goal /fibonacci example_interfaces/action/Fibonacci "{order: 5}" -f
//! ```
//! Stop with Ctrl-C.

use std::time::Duration;

use myelin::action::{CancelResponse, GoalResponse, ServerGoalHandle};
use myelin::msgs::example_interfaces::{Fibonacci, FibonacciFeedback, FibonacciResult};
use myelin::prelude::*;

fn execute(goal: ServerGoalHandle<Fibonacci>, period: Duration) {
    println!("Executing goal");
    let mut sequence = vec![0, 1];
    for i in 1..goal.goal().order.max(1) as usize {
        if goal.is_canceling() {
            if let Err(e) = goal.canceled(FibonacciResult { sequence }) {
                eprintln!("{e}");
            }
            println!("Goal canceled");
            return;
        }
        sequence.push(sequence[i].wrapping_add(sequence[i - 1]));
        let feedback = FibonacciFeedback {
            sequence: sequence.clone(),
        };
        if let Err(e) = goal.publish_feedback(feedback) {
            eprintln!("{e}");
        }
        println!("Publish feedback");
        std::thread::sleep(period);
    }
    match goal.succeed(FibonacciResult { sequence }) {
        Ok(()) => println!("Goal succeeded"),
        Err(e) => eprintln!("{e}"),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let period = match std::env::args().nth(1) {
        Some(ms) => Duration::from_millis(
            ms.parse()
                .map_err(|e| format!("{ms:?} is not a period in milliseconds: {e}"))?,
        ),
        None => Duration::from_secs(1),
    };
    let ctx = Context::new();
    let node = ctx.create_node("fibonacci_action_server")?;
    let _server = node.create_action_server::<Fibonacci>(
        "fibonacci",
        |_id, goal| {
            println!("Received goal request with order {}", goal.order);
            // 46 numbers fill an int32; more would overflow.
            if (0..=46).contains(&goal.order) {
                GoalResponse::AcceptAndExecute
            } else {
                GoalResponse::Reject
            }
        },
        |_id, _goal| {
            println!("Received request to cancel goal");
            CancelResponse::Accept
        },
        move |goal| {
            // The executor keeps serving the action while the goal runs.
            std::thread::spawn(move || execute(goal, period));
        },
    )?;
    let mut exec = Executor::new();
    exec.add_node(&node)?;
    exec.spin()?;
    Ok(())
}

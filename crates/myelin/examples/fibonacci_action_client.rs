//! ROS 2's `fibonacci_action_client` demo in myelin: waits for a server of
//! `example_interfaces/action/Fibonacci` on `fibonacci` (myelin's
//! `fibonacci_action_server`, or ROS 2's on rmw_zenoh with a zenoh router
//! running), sends a goal of `order` numbers (10 unless given), prints
//! each feedback and the result.
//!
//! ```text
//! cargo run --release -p myelin --example fibonacci_action_client -- 10
//! ```

use std::time::Duration;

use myelin::action::{GoalState, SendGoalOptions};
use myelin::msgs::example_interfaces::{Fibonacci, FibonacciFeedback, FibonacciGoal};
use myelin::prelude::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let order = match std::env::args().nth(1) {
        Some(a) => a
            .parse()
            .map_err(|e| format!("{a:?} is not an integer: {e}"))?,
        None => 10,
    };
    let ctx = Context::new();
    let node = ctx.create_node("fibonacci_action_client")?;
    let client = node.create_action_client::<Fibonacci>("fibonacci")?;
    while !client.wait_for_action_server(Duration::from_secs(1)) {
        println!("Action server not available, waiting again...");
    }
    println!("Sending goal");
    let options = SendGoalOptions::new().on_feedback(|f: FibonacciFeedback| {
        println!("Next number in sequence received: {:?}", f.sequence);
    });
    let goal = client.send_goal_with(FibonacciGoal { order }, options, Duration::from_secs(10))?;
    println!("Goal accepted by server, waiting for result");
    let done = goal.get_result(Duration::from_secs(3600))?;
    match done.state {
        GoalState::Succeeded => println!("Result received: {:?}", done.result.sequence),
        GoalState::Aborted => println!("Goal was aborted"),
        GoalState::Canceled => println!("Goal was canceled"),
        other => println!("Goal ended {other}"),
    }
    Ok(())
}

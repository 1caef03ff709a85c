//! The listener of the two-terminal quick start (see `talker`): prints
//! every `std_msgs/msg/String` heard on `chatter`, from any process on
//! this host, and (with a zenoh router running) from ROS 2's own talker on
//! rmw_zenoh (`ros2 run demo_nodes_cpp talker`).
//!
//! ```text
//! cargo run --release -p myelin --example listener
//! ```
//! Stop with Ctrl-C.

use myelin::msgs::std_msgs;
use myelin::prelude::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let ctx = Context::new();
    let node = ctx.create_node("listener")?;
    let _sub = node.create_subscription("chatter", QoS::default(), |msg: &std_msgs::String| {
        println!("listener: I heard: [{}]", msg.data);
    })?;
    let mut exec = Executor::new();
    exec.add_node(&node)?;
    exec.spin()?;
    Ok(())
}

//! The talker of the two-terminal quick start: publishes a
//! `std_msgs/msg/String` on `chatter` twice a second, as ROS 2's
//! `demo_nodes_cpp talker` does. Start `listener` in another terminal
//! (before or after): they find each other through shared memory, no
//! daemon. With a zenoh router running (`myelin router`), ROS 2's own
//! listener on rmw_zenoh hears it too:
//!
//! ```text
//! cargo run --release -p myelin --example talker
//! cargo run --release -p myelin --example listener   # second terminal
//! RMW_IMPLEMENTATION=rmw_zenoh_cpp ros2 run demo_nodes_cpp listener
//! ```
//! Stop with Ctrl-C.

use std::time::Duration;

use myelin::msgs::std_msgs;
use myelin::prelude::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let ctx = Context::new();
    let node = ctx.create_node("talker")?;
    let publisher = node.create_publisher::<std_msgs::String>("chatter", QoS::default())?;
    let mut count = 0u64;
    let _timer = node.create_timer(Duration::from_millis(500), move || {
        count += 1;
        let msg = std_msgs::String {
            data: format!("Hello World: {count}"),
        };
        println!(
            "talker: publishing {:?} ({} subscription(s))",
            msg.data,
            publisher.subscription_count()
        );
        if let Err(e) = publisher.publish(msg) {
            eprintln!("talker: {e}");
        }
    })?;
    let mut exec = Executor::new();
    exec.add_node(&node)?;
    exec.spin()?;
    Ok(())
}

//! ROS 2's `add_two_ints_server` demo in myelin: serves
//! `example_interfaces/srv/AddTwoInts` on `add_two_ints`. myelin clients
//! in any process call it, and so do ROS 2 clients on rmw_zenoh when a
//! zenoh router runs (`myelin router`):
//!
//! ```text
//! cargo run --release -p myelin --example add_two_ints_server
//! cargo run --release -p myelin --example add_two_ints_client -- 2 3
//! RMW_IMPLEMENTATION=rmw_zenoh_cpp ros2 run demo_nodes_cpp add_two_ints_client
//! ```
//! Stop with Ctrl-C.

use myelin::msgs::example_interfaces::{AddTwoInts, AddTwoIntsResponse};
use myelin::prelude::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let ctx = Context::new();
    let node = ctx.create_node("add_two_ints_server")?;
    let _service = node.create_service_for::<AddTwoInts>("add_two_ints", |req| {
        println!("Incoming request\na: {} b: {}", req.a, req.b);
        AddTwoIntsResponse {
            sum: req.a.wrapping_add(req.b),
        }
    })?;
    let mut exec = Executor::new();
    exec.add_node(&node)?;
    exec.spin()?;
    Ok(())
}

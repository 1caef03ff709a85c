//! ROS 2's `add_two_ints_client` demo in myelin: waits for a server of
//! `example_interfaces/srv/AddTwoInts` on `add_two_ints` (myelin's
//! `add_two_ints_server`, or ROS 2's on rmw_zenoh with a zenoh router
//! running), sends `a` and `b` (2 and 3 unless given) and prints the sum.
//!
//! ```text
//! cargo run --release -p myelin --example add_two_ints_client -- 40 2
//! ```

use std::time::Duration;

use myelin::msgs::example_interfaces::{AddTwoInts, AddTwoIntsRequest};
use myelin::prelude::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut number = |default: i64| -> Result<i64, Box<dyn std::error::Error>> {
        Ok(match args.next() {
            Some(a) => a
                .parse()
                .map_err(|e| format!("{a:?} is not an integer: {e}"))?,
            None => default,
        })
    };
    let (a, b) = (number(2)?, number(3)?);
    let ctx = Context::new();
    let node = ctx.create_node("add_two_ints_client")?;
    let client = node.create_client_for::<AddTwoInts>("add_two_ints")?;
    while !client.wait_for_service(Duration::from_secs(1)) {
        println!("service not available, waiting again...");
    }
    let answer = client.call(AddTwoIntsRequest { a, b }, Duration::from_secs(10))?;
    println!("Result of add_two_ints: {}", answer.sum);
    Ok(())
}

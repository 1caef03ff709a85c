//! The Rust side of the Python callback-throughput benchmark
//! (`python/bench/throughput.py`, row `myelin-rust`): a subscription to
//! `std_msgs/msg/String` on `flood` (reliable keep-all, as the Python
//! subscriber's) whose callback counts, spun by one executor. Prints
//! `ready`, then for each line read on stdin the count so far.
//!
//! ```text
//! cargo run --release -p myelin --example count_callbacks -- DOMAIN
//! ```

use std::io::BufRead;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use myelin::msgs::std_msgs;
use myelin::prelude::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let domain: u32 = std::env::args()
        .nth(1)
        .ok_or("usage: count_callbacks DOMAIN")?
        .parse()?;
    let ctx = Context::builder()
        .domain_id(domain)
        .network(false)
        .build()?;
    let node = ctx.create_node("count")?;
    let n = Arc::new(AtomicU64::new(0));
    let counter = n.clone();
    let _sub =
        node.create_subscription("flood", QoS::keep_all(), move |_m: &std_msgs::String| {
            counter.fetch_add(1, Ordering::Relaxed);
        })?;
    let stop = ctx.clone();
    std::thread::spawn(move || {
        println!("ready");
        for line in std::io::stdin().lock().lines() {
            if line.is_err() {
                break;
            }
            println!("{}", n.load(Ordering::Relaxed));
        }
        stop.shutdown();
    });
    let mut exec = Executor::new();
    exec.add_node(&node)?;
    exec.spin()?;
    Ok(())
}

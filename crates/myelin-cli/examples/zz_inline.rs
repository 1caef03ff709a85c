//! scratch: inline subscription, 200 Hz publisher thread
use myelin::prelude::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let shm = std::env::args().nth(1).is_some();
    let ctx = Context::builder()
        .handle_signals(false)
        .shared_memory(shm)
        .network(false)
        .build()?;
    let node = ctx.create_node("zz")?;
    let publisher = node.create_publisher::<u64>("zz", QoS::keep_last(1))?;
    let got = Arc::new(AtomicU64::new(0));
    let g = got.clone();
    let _sub = node.create_subscription_with(
        "zz",
        QoS::keep_last(1),
        SubscriptionOptions::inline(),
        move |m: u64| {
            g.fetch_add(m, Ordering::Relaxed);
        },
    )?;
    for i in 0..200u64 {
        std::thread::sleep(Duration::from_millis(5));
        publisher.publish(i)?;
    }
    println!("{}", got.load(Ordering::Relaxed));
    Ok(())
}

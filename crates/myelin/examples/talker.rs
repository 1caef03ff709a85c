//! The talker of the two-terminal quick start: publishes a `String` on
//! `chatter` twice a second. Start `listener` in another terminal (before
//! or after): they find each other through shared memory, no daemon.
//!
//! ```text
//! cargo run --release -p myelin --example talker
//! cargo run --release -p myelin --example listener   # second terminal
//! ```
//! Stop with Ctrl-C.

use std::time::Duration;

use myelin::prelude::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let ctx = Context::new();
    let node = ctx.create_node("talker")?;
    let publisher = node.create_publisher::<String>("chatter", QoS::default())?;
    let mut count = 0u64;
    let _timer = node.create_timer(Duration::from_millis(500), move || {
        count += 1;
        let msg = format!("hello world {count}");
        println!(
            "talker: publishing {msg:?} ({} subscription(s))",
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

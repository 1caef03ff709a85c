//! A talker and a listener in one process, each node on its own executor
//! thread (the intra-process path). Run:
//!
//! ```text
//! cargo run --release -p myelin --example talker_listener
//! ```
//! Stop with Ctrl-C (both executors' `spin` return cleanly).

use std::time::Duration;

use myelin::prelude::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let ctx = Context::new();

    let talker = ctx.create_node("talker")?;
    let publisher = talker.create_publisher::<String>("chatter", QoS::default())?;
    let mut count = 0u64;
    let _timer = talker.create_timer(Duration::from_millis(500), move || {
        count += 1;
        let msg = format!("hello world {count}");
        println!("talker:   publishing {msg:?}");
        if let Err(e) = publisher.publish(msg) {
            eprintln!("talker: {e}");
        }
    })?;

    let listener = ctx.create_node("listener")?;
    let _sub = listener.create_subscription("chatter", QoS::default(), |msg: &String| {
        println!("listener: heard {msg:?}");
    })?;

    let mut talker_exec = Executor::new();
    talker_exec.add_node(&talker)?;
    let talker_thread = std::thread::spawn(move || talker_exec.spin());

    let mut listener_exec = Executor::new();
    listener_exec.add_node(&listener)?;
    listener_exec.spin()?;
    talker_thread.join().expect("talker thread panicked")?;
    println!("shut down cleanly");
    Ok(())
}

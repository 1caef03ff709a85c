//! The listener of the two-terminal quick start (see `talker`): prints
//! every `String` heard on `chatter`, from any process on this host.
//!
//! ```text
//! cargo run --release -p myelin --example listener
//! ```
//! Stop with Ctrl-C.

use myelin::prelude::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let ctx = Context::new();
    let node = ctx.create_node("listener")?;
    let _sub = node.create_subscription("chatter", QoS::default(), |msg: &String| {
        println!("listener: heard {msg:?}");
    })?;
    let mut exec = Executor::new();
    exec.add_node(&node)?;
    exec.spin()?;
    Ok(())
}

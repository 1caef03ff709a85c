//! ROS 2's parameters tutorial node (`minimal_param_node`) in myelin:
//! declares `my_parameter` (a string, "world") and says hello to it every
//! second, so a change made from outside shows at the next tick. Set it
//! as ROS 2 users do, from the command line or a parameter file at start,
//! or from another terminal while it runs (`myelin param` here, `ros2
//! param` from ROS 2 on rmw_zenoh with a zenoh router running):
//!
//! ```text
//! cargo run --release -p myelin --example parameters
//! cargo run --release -p myelin --example parameters -- --ros-args -p my_parameter:=earth
//! myelin param list /minimal_param_node
//! myelin param set /minimal_param_node my_parameter mars
//! myelin param dump /minimal_param_node > params.yaml
//! RMW_IMPLEMENTATION=rmw_zenoh_cpp ros2 param set /minimal_param_node my_parameter venus
//! ```
//! Stop with Ctrl-C.

use std::time::Duration;

use myelin::prelude::*;
use myelin::rcl_interfaces::ParameterDescriptor;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Node log lines on the console, as rclcpp prints them (Context::new
    // does this; a builder leaves logging to the program).
    myelin::init_logging();
    // `--ros-args -p ... --params-file ...` as ROS 2 nodes take them.
    let ctx = Context::builder().ros_args(std::env::args()).build()?;
    let node = ctx.create_node("minimal_param_node")?;
    node.declare_parameter_with(
        "my_parameter",
        "world",
        ParameterDescriptor {
            description: "Who to say hello to".into(),
            ..Default::default()
        },
    )?;
    // Refuse an empty name, as a real node validates its parameters.
    let _check = node.add_on_set_parameters_callback(|changes| {
        for (name, value) in changes {
            if name == "my_parameter" && value.as_str().is_some_and(str::is_empty) {
                return Err("my_parameter must not be empty".into());
            }
        }
        Ok(())
    });
    let logger = node.get_logger();
    // The timer reads the parameter through a second handle of the node.
    let reader = node.clone();
    let _timer = node.create_timer(Duration::from_secs(1), move || {
        match reader.get_parameter("my_parameter") {
            Ok(v) => logger.info(format!("Hello {}!", v.as_str().unwrap_or("?"))),
            Err(e) => logger.error(e),
        }
    })?;
    let mut exec = Executor::new();
    exec.add_node(&node)?;
    exec.spin()?;
    Ok(())
}

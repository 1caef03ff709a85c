//! A camera driver's shape: a 1440x1080 RGB `sensor_msgs/msg/Image`
//! (4.6 MB) on `image` at 30 Hz (or the rate given), each frame's
//! `header.frame_id` its sequence number and its pixels a fixed pattern
//! (byte `i` is `i % 256`), so a subscriber can check every byte. Over
//! shared memory a frame is written once, into the chunk every subscriber
//! on the host reads in place (Rust and Python alike).
//!
//! ```text
//! cargo run --release -p myelin --example camera          # 30 Hz
//! cargo run --release -p myelin --example camera -- 10    # 10 Hz
//! myelin topic hz /image                                  # another terminal
//! ```
//! Stop with Ctrl-C.

use std::time::Duration;

use myelin::msgs::sensor_msgs::Image;
use myelin::prelude::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let hz: f64 = match std::env::args().nth(1) {
        Some(a) => a
            .parse()
            .ok()
            .filter(|h: &f64| h.is_finite() && *h > 0.0 && *h <= 1000.0)
            .ok_or_else(|| format!("{a:?}: give a rate in Hz, above 0 and at most 1000"))?,
        None => 30.0,
    };
    let (height, width) = (1080u32, 1440u32);
    let pattern: Vec<u8> = (0..(height * width * 3) as usize)
        .map(|i| i as u8)
        .collect();
    let ctx = Context::new();
    let node = ctx.create_node("camera")?;
    let publisher = node.create_publisher::<Image>("image", QoS::keep_last(2))?;
    let mut seq = 0u64;
    let _timer = node.create_timer(Duration::from_secs_f64(1.0 / hz), move || {
        seq += 1;
        let mut frame = Image {
            height,
            width,
            encoding: "rgb8".into(),
            step: width * 3,
            data: pattern.clone(),
            ..Default::default()
        };
        frame.header.frame_id = seq.to_string();
        frame.header.stamp = wall_clock_stamp();
        if let Err(e) = publisher.publish(frame) {
            eprintln!("camera: frame {seq}: {e}");
        }
    })?;
    eprintln!("camera: publishing 1440x1080 rgb8 on /image at {hz} Hz; Ctrl-C to stop");
    let mut exec = Executor::new();
    exec.add_node(&node)?;
    exec.spin()?;
    Ok(())
}

/// The wall clock as a message stamp.
fn wall_clock_stamp() -> myelin::time::Time {
    let ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64);
    myelin::time::Time::from_nanos(ns)
}

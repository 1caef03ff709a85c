//! A slow reliable keep_all reader sets a fast writer's pace, and nothing
//! is lost: the writer publishes as fast as it can to a reader in another
//! process that takes messages at a fixed rate; the writer's achieved
//! rate follows the reader's, every publish returns Ok, and the reader
//! receives every message. Prints one CSV line per reader rate.
//!
//! ```text
//! cargo run --release -p myelin --example keep_all_pacing
//! cargo run --release -p myelin --example keep_all_pacing -- nowait
//! ```
//!
//! `nowait` sets `max_blocking_time` to zero (a full reader refuses at
//! once, as before blocking existed): the writer runs free and most
//! messages are refused.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use myelin::prelude::*;

const DOMAIN: u32 = 77;
const SECONDS: f64 = 2.0;

fn ctx() -> Context {
    Context::builder()
        .domain_id(DOMAIN)
        .handle_signals(false)
        .shared_memory(true)
        .network(false)
        .build()
        .expect("a shared-memory context")
}

/// The reader: take one message every `1 / rate` seconds until `count`
/// arrived, then print how many and how many were lost.
fn reader(rate: f64, count: u64) {
    let c = ctx();
    let node = c.create_node("slow_reader").unwrap();
    let sub = node
        .create_polling_subscription::<u64>(
            "/paced",
            QoS::keep_all().max_samples(16),
            Default::default(),
        )
        .unwrap();
    println!("ready");
    std::io::stdout().flush().unwrap();
    let period = Duration::from_secs_f64(1.0 / rate);
    let mut next = Instant::now();
    let mut got = 0u64;
    while got < count {
        if sub.wait_for_message(Duration::from_secs(10)).is_err() {
            break;
        }
        got += 1;
        next += period;
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    println!("received {got} lost {}", sub.lost());
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() == 4 && args[1] == "reader" {
        reader(args[2].parse().unwrap(), args[3].parse().unwrap());
        return;
    }
    let wait = if args.get(1).is_some_and(|a| a == "nowait") {
        Duration::ZERO
    } else {
        Duration::from_secs(1)
    };
    let c = ctx();
    let node = c.create_node("fast_writer").unwrap();
    let p = node
        .create_publisher::<u64>("/paced", QoS::keep_all().max_blocking_time(wait))
        .unwrap();
    println!("reader_hz,writer_hz,published_ok,refused,received,lost");
    for rate in [250.0, 500.0, 1000.0, 2000.0, 4000.0, 8000.0] {
        let count = (rate * SECONDS) as u64;
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["reader", &rate.to_string(), &count.to_string()])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert!(line.contains("ready"), "reader: {line}");
        while p.subscription_count() == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        let (mut ok, mut refused) = (0u64, 0u64);
        let start = Instant::now();
        for seq in 0..count {
            match p.publish(seq) {
                Ok(()) => ok += 1,
                Err(_) => refused += 1,
            }
        }
        let writer_hz = count as f64 / start.elapsed().as_secs_f64();
        line.clear();
        out.read_line(&mut line).unwrap();
        child.wait().unwrap();
        let f: Vec<&str> = line.split_whitespace().collect();
        println!(
            "{rate},{writer_hz:.0},{ok},{refused},{},{}",
            f.get(1).unwrap_or(&"?"),
            f.get(3).unwrap_or(&"?")
        );
        // Let the reader's process leave the graph before the next one.
        while p.subscription_count() > 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

//! An idle multi-threaded executor sleeps: its own test binary, so the
//! process's CPU time is this test's alone.

use std::time::Duration;

use myelin::MultiThreadedExecutor;
use myelin::prelude::*;

fn process_cpu() -> Duration {
    // SAFETY: getrusage writes a plain C struct that we zero-initialise; the
    // pointer is valid for the call.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(libc::RUSAGE_SELF, &mut ru), 0);
        ru
    };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

#[test]
fn an_idle_multi_threaded_executor_with_four_threads_sleeps() {
    let ctx = Context::builder()
        .handle_signals(false)
        .shared_memory(false)
        .build()
        .unwrap();
    let node = ctx.create_node("idle").unwrap();
    let _subs: Vec<_> = (0..50)
        .map(|i| {
            node.create_subscription(&format!("t{i}"), QoS::default(), |_m: u8| {})
                .unwrap()
        })
        .collect();
    let mut exec = MultiThreadedExecutor::new(4);
    exec.add_node(&node).unwrap();
    let stop = exec.stop_handle();
    let h = std::thread::spawn(move || exec.spin());
    std::thread::sleep(Duration::from_millis(100)); // let the workers park
    let before = process_cpu();
    std::thread::sleep(Duration::from_secs(1));
    let used = process_cpu() - before;
    stop.stop();
    h.join().unwrap().unwrap();
    assert!(
        used < Duration::from_millis(20),
        "4 idle workers used {used:?} in 1 s"
    );
}

//! A `SCHED_FIFO` thread (an executor given real-time priority) waits in
//! a ring for a step of a `SCHED_OTHER` thread preempted on the same CPU
//! (a publisher that claimed a slot and has not written it). A yield
//! gives the CPU only to threads of the waiter's class and priority, so a
//! waiter that only yields spins until the kernel's real-time throttling
//! lends the CPU out (950 ms of every second by default; for ever where
//! throttling is off, as on many real-time robots). The waiter sleeps
//! after a few yields: it spends next to no CPU while the other thread
//! finishes its step.
//!
//! Needs permission for `SCHED_FIFO` (root, or `CAP_SYS_NICE`) and the
//! throttling on (with it off, a broken waiter would hold the CPU for
//! ever): skips otherwise, saying why. A file of its own: the two threads
//! share CPU 0 and nothing else of the tests runs beside them.
#![cfg(all(not(loom), target_os = "linux"))]

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use myelin_sync::Ring;

fn pin_to_cpu0() {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET and
    // sched_setaffinity(0, ...) act on this thread only.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set),
            0,
            "pinning to CPU 0"
        );
    }
}

/// CPU time this thread has used.
fn thread_cpu() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

#[test]
fn a_real_time_waiter_lets_a_preempted_writer_finish() {
    let throttle =
        std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us").unwrap_or_default();
    if throttle.trim() == "-1" || throttle.is_empty() {
        eprintln!(
            "skipped: real-time throttling is off (or unknown): a broken waiter would hold CPU 0 for ever"
        );
        return;
    }
    let ring: &'static Ring<u64> = Box::leak(Box::new(Ring::new(4)));
    let claimed: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
    let writer = std::thread::spawn(move || {
        pin_to_cpu0();
        let slot = ring.force_claim();
        claimed.store(true, Ordering::SeqCst);
        // The step the waiter waits for takes this thread 50 ms of CPU:
        // the waiter, woken meanwhile, preempts it (FIFO beats OTHER).
        let mut spent = Duration::ZERO;
        let start = thread_cpu();
        while spent < Duration::from_millis(50) {
            std::hint::spin_loop();
            spent = thread_cpu() - start;
        }
        slot.write(7);
    });
    let waiter = std::thread::spawn(move || {
        pin_to_cpu0();
        let param = libc::sched_param { sched_priority: 10 };
        // SAFETY: sets this thread's policy; `param` is valid.
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
            return None;
        }
        while !claimed.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_micros(100));
        }
        let before = thread_cpu();
        let started = Instant::now();
        let value = loop {
            if let Some(v) = ring.pop() {
                break v;
            }
        };
        Some((value, thread_cpu() - before, started.elapsed()))
    });
    let seen = waiter.join().unwrap();
    writer.join().unwrap();
    let Some((value, cpu, wall)) = seen else {
        eprintln!("skipped: SCHED_FIFO refused (needs root or CAP_SYS_NICE)");
        return;
    };
    assert_eq!(value, 7);
    // A waiter that only yields spends the throttling budget spinning
    // (~950 ms); one that sleeps, a few wake-ups.
    assert!(
        cpu < Duration::from_millis(300),
        "the real-time waiter spun {cpu:?} of CPU in {wall:?} waiting for a preempted writer"
    );
}

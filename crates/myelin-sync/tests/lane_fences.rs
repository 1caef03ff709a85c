//! `LaneCell` under threads with full fences instead of `membarrier`
//! (`MYELIN_MEMBARRIER=0`, an old kernel, a seccomp filter): see
//! `common/lane_stress.rs`.
#![cfg(not(loom))]

#[path = "common/lane_stress.rs"]
mod lane_stress;

#[test]
fn readers_on_six_threads_with_fences() {
    // SAFETY: the only test of this process, and no other thread runs
    // yet: nothing reads the environment concurrently.
    unsafe { std::env::set_var("MYELIN_MEMBARRIER", "0") };
    assert!(!myelin_sync::uses_membarrier());
    lane_stress::readers_never_see_a_dropped_value(6);
}

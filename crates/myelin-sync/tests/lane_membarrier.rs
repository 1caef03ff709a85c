//! `LaneCell` under threads with `membarrier` (the default where the
//! kernel grants it): see `common/lane_stress.rs`.
#![cfg(not(loom))]

#[path = "common/lane_stress.rs"]
mod lane_stress;

#[test]
fn readers_on_six_threads_with_membarrier() {
    // Four read through lanes, two clone.
    lane_stress::readers_never_see_a_dropped_value(6);
}

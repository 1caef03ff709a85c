//! One module per subcommand.
pub mod action;
pub mod bag;
pub mod bag_play;
pub mod bench;
pub mod bench_bag;
pub mod bench_icount;
pub mod bench_scale;
pub mod doctor;
pub mod interface;
pub mod param;
pub mod perf;
pub mod router;
pub mod service;
pub mod topic;

/// Bytes for a person, in binary units as `ros2 bag info` prints them:
/// `512 B`, `4.4 MiB`, `1.2 GiB`.
pub(crate) fn human_size(b: u64) -> String {
    const KIB: f64 = 1024.0;
    let b = b as f64;
    if b >= KIB * KIB * KIB {
        format!("{:.1} GiB", b / (KIB * KIB * KIB))
    } else if b >= KIB * KIB {
        format!("{:.1} MiB", b / (KIB * KIB))
    } else if b >= KIB {
        format!("{:.1} KiB", b / KIB)
    } else {
        format!("{b:.0} B")
    }
}

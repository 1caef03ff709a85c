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

//! `myelin doctor`: report and repair this host's myelin state.

use crate::cli::DoctorArgs;

/// Run `myelin doctor`.
pub fn run(args: DoctorArgs) -> Result<(), Box<dyn std::error::Error>> {
    if args.domain > myelin::MAX_DOMAIN_ID {
        return Err(format!(
            "invalid --domain {}: ROS 2 domain ids are 0 to 232",
            args.domain
        )
        .into());
    }
    let dir = myelin_shm::segment_dir();
    println!("shared memory: {}", dir.display());
    if args.clean {
        let removed = myelin_shm::cleanup_stale(args.domain)?;
        if removed.is_empty() {
            println!("domain {}: no stale segments", args.domain);
        }
        // Wake-up tables belong to processes, not domains.
        let host = myelin_shm::cleanup_stale_host()?;
        for p in removed.iter().chain(&host) {
            println!("removed {} (owner process is gone)", p.display());
        }
    } else {
        println!("run with --clean to remove segments of dead processes");
    }
    Ok(())
}

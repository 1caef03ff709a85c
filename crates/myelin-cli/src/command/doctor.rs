//! `myelin doctor`: report and repair this host's myelin state.

use crate::cli::DoctorArgs;

/// Run `myelin doctor`.
pub fn run(args: DoctorArgs) -> Result<(), Box<dyn std::error::Error>> {
    if let Some(d) = args.domain
        && d > myelin::MAX_DOMAIN_ID
    {
        return Err(format!("invalid --domain {d}: ROS 2 domain ids are 0 to 232").into());
    }
    let dir = myelin_shm::segment_dir();
    println!("shared memory: {}", dir.display());
    report(&myelin_shm::survey(), args.clean);
    if args.clean {
        let domains = match args.domain {
            Some(d) => d..=d,
            None => 0..=myelin::MAX_DOMAIN_ID,
        };
        let mut removed = Vec::new();
        let mut graphs = Vec::new();
        for d in domains.clone() {
            removed.extend(myelin_shm::cleanup_stale(d)?);
            // A domain's graph file goes with its last process; one left
            // by killed processes goes here (never one in use).
            graphs.extend(myelin_shm::endpoint::remove_unused_graphs(d)?);
        }
        for p in &graphs {
            println!("removed {} (no process uses the domain)", p.display());
        }
        if removed.is_empty() {
            match args.domain {
                Some(d) => println!("domain {d}: no stale segments"),
                None => println!("no stale segments in any domain"),
            }
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

/// Print what the segment directory holds for this user: counts and bytes
/// by state, then every file that needs a person's attention.
fn report(found: &[myelin_shm::SurveyEntry], cleaning: bool) {
    use myelin_shm::SegmentState as S;
    let count = |f: fn(&S) -> bool| found.iter().filter(|e| f(&e.state)).count();
    let bytes: u64 = found.iter().map(|e| e.bytes).sum();
    println!(
        "this user's segments: {} ({:.1} MB): {} of live processes, {} shared, {} stale, {} corrupt, {} foreign",
        found.len(),
        bytes as f64 / 1e6,
        count(|s| matches!(s, S::Live { .. })),
        count(|s| matches!(s, S::Shared)),
        count(|s| matches!(s, S::Stale { .. })),
        count(|s| matches!(s, S::Corrupt(_))),
        count(|s| matches!(s, S::Foreign(_))),
    );
    for e in found {
        let path = e.path.display();
        match &e.state {
            S::Stale { pid } if !cleaning => {
                println!("  stale   {path}: process {pid} is gone (--clean removes it)")
            }
            S::Corrupt(why) => println!(
                "  corrupt {path}: {why} (remove it by hand if no myelin process is starting)"
            ),
            S::Foreign(why) => println!(
                "  foreign {path}: {why}; myelin never uses or removes it: check who made it, then remove it as its owner or root"
            ),
            _ => {}
        }
    }
}

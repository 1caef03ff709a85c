//! `myelin doctor`: report and repair this host's myelin state.

use crate::cli::DoctorArgs;

/// Run `myelin doctor`.
pub fn run(args: DoctorArgs) -> Result<(), Box<dyn std::error::Error>> {
    if let Some(d) = args.domain
        && d > myelin::MAX_DOMAIN_ID
    {
        return Err(format!("invalid --domain {d}: ROS 2 domain ids are 0 to 232").into());
    }
    transports();
    wakeups();
    let dir = myelin_shm::segment_dir();
    match myelin_shm::segment_space() {
        Some((free, total)) => println!(
            "shared memory: {}: {} free of {}{}",
            dir.display(),
            super::human_size(free),
            super::human_size(total),
            if free < total / 10 {
                " (nearly full: a publisher whose pool cannot grow gets a NoSpace error)"
            } else {
                ""
            }
        ),
        None => println!("shared memory: {} (cannot be read)", dir.display()),
    }
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

/// Which transports a program started here would use, and whether the
/// zenoh side has the router it needs.
fn transports() {
    let env = std::env::var("MYELIN_TRANSPORT").ok();
    match &env {
        Some(v) => match myelin::transport::check_transport_env(v) {
            Ok(()) => println!("MYELIN_TRANSPORT={v}"),
            Err(e) => println!("{e}: programs started with it fail"),
        },
        None => println!("MYELIN_TRANSPORT unset: every transport built in"),
    }
    let on = |b: bool| if b { "on" } else { "off" };
    println!(
        "transports: in-process on, shared memory {}, zenoh {}",
        on(myelin::transport::shared_memory_enabled()),
        on(myelin::transport::network_enabled())
    );
    if !myelin::transport::network_enabled() {
        return;
    }
    if let Some(file) = std::env::var_os("MYELIN_ZENOH_CONFIG") {
        let path = std::path::Path::new(&file);
        match myelin_zenoh::config::from_file(path) {
            Ok(_) => println!(
                "zenoh: configuration {} (read, taken as written)",
                path.display()
            ),
            Err(e) => println!("{e}: programs started with it fail"),
        }
        return;
    }
    let router = myelin_zenoh::config::DEFAULT_ROUTER;
    if myelin_zenoh::config::default_router_listening(std::time::Duration::from_millis(200)) {
        println!(
            "zenoh: a router listens at {router}: other hosts and ROS 2 nodes (rmw_zenoh) are reachable through it"
        );
    } else {
        println!(
            "zenoh: nothing listens at {router}: processes on this host still meet over shared memory; start `myelin router` (or rmw_zenohd) to reach other hosts and ROS 2 nodes"
        );
    }
}

/// How fast this host can wake a thread a message is for: the idle states
/// its CPUs may sleep in, the wake-up latency request in force, and
/// whether this process could run a callback thread under SCHED_FIFO.
fn wakeups() {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
    };
    let states: Vec<String> = (0..16)
        .map_while(|i| {
            let dir = format!("/sys/devices/system/cpu/cpu0/cpuidle/state{i}");
            let name = read(&format!("{dir}/name"))?;
            let exit = read(&format!("{dir}/latency")).unwrap_or_else(|| "?".into());
            let off = read(&format!("{dir}/disable")).is_some_and(|d| d == "1");
            Some(format!(
                "{name} ({exit} us{})",
                if off { ", disabled" } else { "" }
            ))
        })
        .collect();
    let driver =
        read("/sys/devices/system/cpu/cpuidle/current_driver").unwrap_or_else(|| "none".into());
    println!(
        "idle CPUs: cpuidle driver {driver}{}{}",
        if states.is_empty() {
            String::new()
        } else {
            format!(", states {}", states.join(", "))
        },
        if driver == "haltpoll" {
            " (a virtual machine: a halted vCPU takes tens of microseconds to wake, whatever its state says)"
        } else {
            ""
        }
    );
    match myelin::CpuWakeupLatency::in_force() {
        Ok(d) if d >= myelin::sched::MAX_CPU_WAKEUP_LATENCY => println!(
            "wake-up latency: no request in force (idle CPUs sleep as deep as they like; CpuWakeupLatency or `myelin bench --cpu-wakeup-latency 0` keep them awake)"
        ),
        Ok(d) => println!(
            "wake-up latency: a request of {} us is in force (idle CPUs wake within it)",
            d.as_micros()
        ),
        Err(_) => println!(
            "wake-up latency: {} is not readable by this user (root's)",
            myelin::sched::CPU_DMA_LATENCY
        ),
    }
    if myelin::sched::uses_membarrier() {
        println!(
            "graph changes: membarrier (a publish takes no locked instruction; each subscription or publisher made or dropped interrupts every CPU running this process once; MYELIN_MEMBARRIER=0 trades that for a fence per publish)"
        );
    } else {
        println!(
            "graph changes: full fences (membarrier unavailable or MYELIN_MEMBARRIER=0: one fence per publish)"
        );
    }
    // A real attempt on a thread of its own, which ends with it, at a
    // control loop's priority (an rtprio limit may grant less).
    let fifo = std::thread::spawn(|| myelin::ThreadPolicy::new().fifo(80).apply().map(drop))
        .join()
        .unwrap_or_else(|_| {
            Err(myelin::SchedError::Os {
                call: "probe thread",
                why: "panicked".into(),
            })
        });
    match fifo {
        Ok(()) => println!(
            "real-time: SCHED_FIFO is granted to this user (priority 80 tried; ThreadPolicy::fifo)"
        ),
        Err(e) => {
            let mut limit = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: getrlimit(2) writes one rlimit, which `limit` is.
            let rc = unsafe { libc::getrlimit(libc::RLIMIT_RTPRIO, &mut limit) };
            if rc == 0 && limit.rlim_cur > 0 {
                println!(
                    "real-time: {e} (this user's rtprio limit is {}: priorities up to it work)",
                    limit.rlim_cur
                );
            } else {
                println!("real-time: {e}");
            }
        }
    }
}

//! A multi-host test bed on one machine: "hosts" are Linux network
//! namespaces joined by veth pairs to a switch namespace (a bridge), each
//! with its own `/dev/shm` (a tmpfs bind-mounted over `/dev/shm` in every
//! process it runs, so shared memory stays inside the host) and an address
//! from 198.18.0.0/15 (RFC 2544's benchmarking range). Faults are made on a
//! host's link: down and up, random loss (nftables `numgen`, both
//! directions; this machine's kernel has no `netem`), a partition (all
//! packets dropped) and a rate limit (`tbf`); delay, which needs `netem`
//! too, by a TCP relay in a host that holds every byte
//! ([`TestBed::delay_relay`]; a router connects through it).
//!
//! It needs root, `ip` (iproute2), `nft` (nftables) and `mount`; without
//! them [`TestBed::new`] returns [`TestBedError::Unavailable`] with the
//! reason, for a test to print and skip. Nothing leaves the namespaces:
//! the switch is a bridge in a namespace of its own, with no route out.
//! Dropping the bed kills what runs in its hosts and removes the
//! namespaces and mounts; a bed left behind by a killed test (its pid is
//! in the names) is removed by the next [`TestBed::new`].
//!
//! ```no_run
//! use myelin_bench::testbed::TestBed;
//!
//! let bed = match TestBed::new(2) {
//!     Ok(bed) => bed,
//!     Err(e) => { println!("skipped: {e}"); return; }
//! };
//! // A router per host, meshed.
//! let a = bed.host(0).addr;
//! let b = bed.host(1).addr;
//! let _ra = bed.command(0, "myelin").args(["router", "--listen", "tcp/0.0.0.0:7447"]).spawn();
//! let _rb = bed
//!     .command(1, "myelin")
//!     .args(["router", "--listen", "tcp/0.0.0.0:7447", "--connect", &format!("tcp/{a}:7447")])
//!     .spawn();
//! bed.set_loss(1, 5.0).unwrap(); // 5% of packets in and out of host 1
//! # let _ = b;
//! ```

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// Setting up or changing the test bed failed.
#[derive(Debug, thiserror::Error)]
pub enum TestBedError {
    /// The machine cannot host it (not root, a tool missing, no network
    /// namespaces): a test prints this and skips.
    #[error("the multi-host test bed is unavailable: {0}")]
    Unavailable(String),
    /// A command that builds or changes the bed failed.
    #[error("test bed: `{command}` failed: {why}")]
    Command {
        /// The command line.
        command: String,
        /// Its error output.
        why: String,
    },
}

/// Set (to anything) where the test bed must come up: a test that cannot
/// build it then fails instead of skipping. CI sets it where it has
/// checked that it is root and can make a network namespace, so a bed
/// that breaks there is a failure rather than a quiet skip.
pub const REQUIRE_ENV: &str = "MYELIN_REQUIRE_TESTBED";

/// Whether [`REQUIRE_ENV`] is set.
///
/// ```
/// // Unset in a plain `cargo test`: tests skip where no bed can be made.
/// let _ = myelin_bench::testbed::required();
/// ```
pub fn required() -> bool {
    std::env::var_os(REQUIRE_ENV).is_some_and(|v| !v.is_empty())
}

/// One host of a [`TestBed`].
#[derive(Debug, Clone)]
pub struct Host {
    /// Its network namespace.
    pub netns: String,
    /// Its address on the switch.
    pub addr: Ipv4Addr,
    /// The tmpfs that is its `/dev/shm`.
    pub shm: PathBuf,
}

/// Hosts in network namespaces on one switch (see the module docs).
#[derive(Debug)]
pub struct TestBed {
    tag: String,
    switch: String,
    hosts: Vec<Host>,
    root: PathBuf,
}

/// The prefix of every namespace a bed creates: `mtb<pid>x<n>`.
const PREFIX: &str = "mtb";

fn run(cmd: &mut Command) -> Result<String, TestBedError> {
    let line = format!("{cmd:?}").replace('"', "");
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| TestBedError::Command {
            command: line.clone(),
            why: e.to_string(),
        })?;
    if !out.status.success() {
        return Err(TestBedError::Command {
            command: line,
            why: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn ip(args: &[&str]) -> Result<String, TestBedError> {
    run(Command::new("ip").args(args))
}

fn in_ns(ns: &str, program: &str, args: &[&str]) -> Result<String, TestBedError> {
    run(Command::new("ip")
        .args(["netns", "exec", ns, program])
        .args(args))
}

/// Why this machine cannot host a bed, if it cannot.
fn unavailable() -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("needs root (network namespaces, mounts)".into());
    }
    for (tool, package) in [("ip", "iproute2"), ("nft", "nftables"), ("mount", "mount")] {
        let found = Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
        if !found {
            return Some(format!("`{tool}` not found (install {package})"));
        }
    }
    None
}

/// Remove beds whose creating process is gone (a killed test).
fn sweep_stale() {
    let Ok(list) = ip(&["netns", "list"]) else {
        return;
    };
    for name in list.lines().filter_map(|l| l.split_whitespace().next()) {
        let Some(rest) = name.strip_prefix(PREFIX) else {
            continue;
        };
        let Some(pid) = rest.split('x').next().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        if std::path::Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        kill_all_in(name);
        let _ = ip(&["netns", "del", name]);
    }
    if let Ok(entries) = std::fs::read_dir(bed_root()) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            let alive = name
                .strip_prefix(PREFIX)
                .and_then(|r| r.split('x').next())
                .and_then(|p| p.parse::<i32>().ok())
                .is_some_and(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists());
            if !alive {
                unmount_tree(&e.path());
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
}

fn bed_root() -> PathBuf {
    PathBuf::from("/run/myelin-testbed")
}

fn unmount_tree(dir: &Path) {
    if let Ok(hosts) = std::fs::read_dir(dir) {
        for h in hosts.flatten() {
            let _ = Command::new("umount")
                .arg("-l")
                .arg(h.path())
                .stderr(Stdio::null())
                .status();
        }
    }
}

fn kill_all_in(ns: &str) {
    if let Ok(pids) = ip(&["netns", "pids", ns]) {
        for pid in pids
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok())
        {
            // SAFETY: kill(2) with a pid read from `ip netns pids`: a
            // process of this bed's namespace.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

impl TestBed {
    /// `n` hosts (1 to 16) at 198.18.0.1, .2, ... on one switch.
    pub fn new(n: usize) -> Result<TestBed, TestBedError> {
        if let Some(why) = unavailable() {
            return Err(TestBedError::Unavailable(why));
        }
        if !(1..=16).contains(&n) {
            return Err(TestBedError::Unavailable(format!(
                "{n} hosts: a bed has 1 to 16"
            )));
        }
        sweep_stale();
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let tag = format!(
            "{PREFIX}{}x{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let root = bed_root().join(&tag);
        let switch = format!("{tag}s");
        let mut bed = TestBed {
            tag: tag.clone(),
            switch: switch.clone(),
            hosts: Vec::new(),
            root: root.clone(),
        };
        // A failure midway leaves `bed` to its Drop, which cleans up.
        ip(&["netns", "add", &switch]).map_err(|e| match e {
            TestBedError::Command { why, .. } => {
                TestBedError::Unavailable(format!("cannot create a network namespace: {why}"))
            }
            e => e,
        })?;
        in_ns(&switch, "ip", &["link", "add", "br0", "type", "bridge"])?;
        in_ns(&switch, "ip", &["link", "set", "br0", "up"])?;
        for i in 0..n {
            let ns = format!("{tag}h{i}");
            ip(&["netns", "add", &ns])?;
            let port = format!("p{i}");
            ip(&[
                "link", "add", "eth0", "netns", &ns, "type", "veth", "peer", "name", &port,
                "netns", &switch,
            ])?;
            in_ns(&switch, "ip", &["link", "set", &port, "master", "br0"])?;
            in_ns(&switch, "ip", &["link", "set", &port, "up"])?;
            let addr = Ipv4Addr::new(198, 18, 0, 1 + i as u8);
            in_ns(
                &ns,
                "ip",
                &["addr", "add", &format!("{addr}/24"), "dev", "eth0"],
            )?;
            in_ns(&ns, "ip", &["link", "set", "eth0", "up"])?;
            in_ns(&ns, "ip", &["link", "set", "lo", "up"])?;
            // The loss and partition rules' table (empty until asked).
            in_ns(
                &ns,
                "nft",
                &["add table inet myelin_tb; \
                     add chain inet myelin_tb in { type filter hook input priority 0; }; \
                     add chain inet myelin_tb out { type filter hook output priority 0; }"],
            )?;
            let shm = root.join(format!("h{i}"));
            std::fs::create_dir_all(&shm).map_err(|e| TestBedError::Command {
                command: format!("mkdir {}", shm.display()),
                why: e.to_string(),
            })?;
            run(Command::new("mount")
                .args(["-t", "tmpfs", "-o", "size=2g,mode=1777", "myelin-testbed"])
                .arg(&shm))?;
            bed.hosts.push(Host {
                netns: ns,
                addr,
                shm,
            });
        }
        Ok(bed)
    }

    /// Host `i`.
    pub fn host(&self, i: usize) -> &Host {
        &self.hosts[i]
    }

    /// How many hosts.
    pub fn len(&self) -> usize {
        self.hosts.len()
    }

    /// Whether the bed has no host (never: [`new`](Self::new) makes 1 to 16).
    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty()
    }

    /// A command that runs `program` on host `i`: in its network namespace,
    /// with its tmpfs over `/dev/shm`. Set arguments, environment and
    /// pipes as usual; `ip netns exec` gives the process a mount namespace
    /// of its own, so the bind mount stays with it.
    pub fn command(&self, i: usize, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let h = &self.hosts[i];
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &h.netns, "sh", "-c"])
            .arg("mount --bind \"$0\" /dev/shm && exec \"$@\"")
            .arg(&h.shm)
            .arg(program);
        c
    }

    fn nft(&self, i: usize, script: &str) -> Result<(), TestBedError> {
        in_ns(&self.hosts[i].netns, "nft", &[script]).map(|_| ())
    }

    /// Drop `percent` (0 to 100) of host `i`'s packets on its link, each
    /// direction at random (0: no loss). Loopback inside the host is
    /// untouched.
    pub fn set_loss(&self, i: usize, percent: f64) -> Result<(), TestBedError> {
        self.nft(
            i,
            "flush chain inet myelin_tb in; flush chain inet myelin_tb out",
        )?;
        let per_mille = (percent.clamp(0.0, 100.0) * 10.0).round() as u32;
        if per_mille == 0 {
            return Ok(());
        }
        if per_mille >= 1000 {
            return self.nft(
                i,
                "add rule inet myelin_tb in iifname eth0 drop; \
                 add rule inet myelin_tb out oifname eth0 drop",
            );
        }
        self.nft(
            i,
            &format!(
                "add rule inet myelin_tb in iifname eth0 numgen random mod 1000 < {per_mille} drop; \
                 add rule inet myelin_tb out oifname eth0 numgen random mod 1000 < {per_mille} drop"
            ),
        )
    }

    /// Cut host `i` off (every packet of its link dropped; connections stay
    /// open on both sides, as when a cable or a radio link fails) or
    /// reconnect it.
    pub fn partition(&self, i: usize, cut: bool) -> Result<(), TestBedError> {
        self.set_loss(i, if cut { 100.0 } else { 0.0 })
    }

    /// Take host `i`'s link down or up (the interface itself: the kernel
    /// sees the carrier go).
    pub fn link(&self, i: usize, up: bool) -> Result<(), TestBedError> {
        let state = if up { "up" } else { "down" };
        in_ns(&self.hosts[i].netns, "ip", &["link", "set", "eth0", state]).map(|_| ())
    }

    /// Limit host `i`'s sending rate to `bits_per_second` (a token bucket:
    /// what a 1 Gbit/s Ethernet port allows); `None` lifts the limit.
    ///
    /// The bucket holds 2 ms of the rate (at least 16 KB: the kernel's
    /// timer tick must be covered), so the line never bursts far above its
    /// rate, and the queue before it 10 ms (a NIC's 1000-packet queue at
    /// 1 Gbit/s): a sender that outruns the link is held back by TCP
    /// within milliseconds, as on a real port.
    pub fn limit_rate(&self, i: usize, bits_per_second: Option<u64>) -> Result<(), TestBedError> {
        let ns = &self.hosts[i].netns;
        let _ = in_ns(ns, "tc", &["qdisc", "del", "dev", "eth0", "root"]);
        if let Some(bps) = bits_per_second {
            let rate = format!("{bps}bit");
            let burst = format!("{}b", (bps / 8 / 500).max(16_000));
            in_ns(
                ns,
                "tc",
                &[
                    "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", &rate, "burst", &burst,
                    "latency", "10ms",
                ],
            )?;
        }
        Ok(())
    }

    /// The `myelin router` arguments of host `i` in the README's robot and
    /// base-station arrangement: host 1 is the base station (listens on
    /// every interface); every other host listens on its loopback and
    /// connects to host 1's router.
    pub fn router_args(&self, i: usize) -> Vec<String> {
        if i == 1 {
            vec![
                "router".into(),
                "--listen".into(),
                "tcp/0.0.0.0:7447".into(),
            ]
        } else {
            vec![
                "router".into(),
                "--listen".into(),
                "tcp/127.0.0.1:7447".into(),
                "--connect".into(),
                format!("tcp/{}:7447", self.host(1).addr),
            ]
        }
    }

    /// The processes running on host `i`.
    pub fn pids(&self, i: usize) -> Vec<u32> {
        ip(&["netns", "pids", &self.hosts[i].netns])
            .map(|s| {
                s.split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// A link delay without `netem` (this machine's kernel has none): a
    /// TCP relay in host `i` that listens on `127.0.0.1:port` there and
    /// forwards each connection to `to`, holding every byte `delay` in
    /// each direction (a router connecting to `tcp/127.0.0.1:port` instead
    /// of `to` has its traffic to `to` delayed; zenoh's links are TCP, so
    /// its keep-alives, leases and retransmissions all see the delay).
    /// Stops, closing its connections, when dropped.
    pub fn delay_relay(
        &self,
        i: usize,
        port: u16,
        to: std::net::SocketAddrV4,
        delay: std::time::Duration,
    ) -> Result<DelayRelay, TestBedError> {
        DelayRelay::start(&self.hosts[i].netns, port, to, delay)
    }

    /// The bed's name (its namespaces start with it).
    pub fn tag(&self) -> &str {
        &self.tag
    }
}

impl Drop for TestBed {
    fn drop(&mut self) {
        for h in &self.hosts {
            kill_all_in(&h.netns);
        }
        for h in &self.hosts {
            let _ = ip(&["netns", "del", &h.netns]);
            let _ = Command::new("umount")
                .arg("-l")
                .arg(&h.shm)
                .stderr(Stdio::null())
                .status();
        }
        kill_all_in(&self.switch);
        let _ = ip(&["netns", "del", &self.switch]);
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// A TCP relay that delays every byte (see [`TestBed::delay_relay`]).
pub struct DelayRelay {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// The accepting thread, joined on drop.
    accepting: Option<std::thread::JoinHandle<()>>,
    /// Both ends of every relayed connection, shut down on drop.
    conns: std::sync::Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>,
    port: u16,
    netns: String,
}

impl DelayRelay {
    fn start(
        netns: &str,
        port: u16,
        to: std::net::SocketAddrV4,
        delay: std::time::Duration,
    ) -> Result<DelayRelay, TestBedError> {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let ns = netns.to_string();
        let stop2 = stop.clone();
        let conns = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let conns2 = conns.clone();
        let accepting = std::thread::spawn(move || {
            let listener = enter_netns(&ns).and_then(|()| {
                std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, port))
                    .map_err(|e| format!("listening on 127.0.0.1:{port}: {e}"))
            });
            let listener = match listener {
                Ok(l) => {
                    let _ = ready_tx.send(Ok(()));
                    l
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            for inbound in listener.incoming() {
                if stop2.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(inbound) = inbound else { continue };
                // This thread is in the host's namespace: so is the
                // outbound connection (and the threads made below, which
                // inherit it).
                let Ok(outbound) = std::net::TcpStream::connect(to) else {
                    continue;
                };
                let mut kept = conns2.lock().unwrap_or_else(|e| e.into_inner());
                // Connections that ended are let go (zenoh reconnects).
                kept.retain(|c: &std::net::TcpStream| c.peer_addr().is_ok());
                kept.extend(inbound.try_clone().ok());
                kept.extend(outbound.try_clone().ok());
                // Dropped meanwhile (its drain came before this push).
                if stop2.load(Ordering::Relaxed) {
                    for c in kept.drain(..) {
                        let _ = c.shutdown(std::net::Shutdown::Both);
                    }
                    return;
                }
                drop(kept);
                for (from, into) in [
                    (inbound.try_clone(), outbound.try_clone()),
                    (outbound.try_clone(), inbound.try_clone()),
                ] {
                    if let (Ok(from), Ok(into)) = (from, into) {
                        delay_line(from, into, delay, stop2.clone());
                    }
                }
            }
        });
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(DelayRelay {
                stop,
                accepting: Some(accepting),
                conns,
                port,
                netns: netns.to_string(),
            }),
            Ok(Err(why)) => Err(TestBedError::Command {
                command: format!("delay relay in {netns}"),
                why,
            }),
            Err(_) => Err(TestBedError::Command {
                command: format!("delay relay in {netns}"),
                why: "its thread died".into(),
            }),
        }
    }
}

impl Drop for DelayRelay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for c in self
            .conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
        // Wake the accepting thread: a connection from inside the host.
        let port = self.port;
        let ns = self.netns.clone();
        let woken = std::thread::spawn(move || {
            enter_netns(&ns).is_ok()
                && std::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_ok()
        })
        .join()
        .unwrap_or(false);
        // Joined only when woken (else it would wait for ever; it ends
        // with the namespace).
        if let Some(t) = self.accepting.take().filter(|_| woken) {
            let _ = t.join();
        }
    }
}

/// Move the calling thread into network namespace `netns` (sockets it
/// makes from now on are there).
fn enter_netns(netns: &str) -> Result<(), String> {
    use std::os::fd::AsRawFd;
    let path = format!("/var/run/netns/{netns}");
    let f = std::fs::File::open(&path).map_err(|e| format!("{path}: {e}"))?;
    // SAFETY: setns(2) with an open namespace file descriptor and its
    // type; it changes only the calling thread's network namespace.
    let r = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    if r != 0 {
        return Err(format!("setns {path}: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Copy `from` to `into`, each chunk held until `delay` after it was read
/// (a reader thread timestamps, a writer thread waits and writes, so the
/// delay does not throttle the rate; at most 64 chunks of 64 KiB wait,
/// then the reader waits too, as a full link's sender would). Ends at EOF
/// or an error on either side, or when `stop` is set, shutting down both.
fn delay_line(
    mut from: std::net::TcpStream,
    mut into: std::net::TcpStream,
    delay: std::time::Duration,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) {
    use std::io::{Read, Write};
    let (tx, rx) = std::sync::mpsc::sync_channel::<(std::time::Instant, Vec<u8>)>(64);
    let shut_from = from.try_clone();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 << 10];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if tx
                        .send((std::time::Instant::now() + delay, buf[..n].to_vec()))
                        .is_err()
                    {
                        break;
                    }
                }
            }
        }
    });
    std::thread::spawn(move || {
        for (due, bytes) in rx {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            std::thread::sleep(due.saturating_duration_since(std::time::Instant::now()));
            if into.write_all(&bytes).is_err() {
                break;
            }
        }
        let _ = into.shutdown(std::net::Shutdown::Both);
        if let Ok(f) = shut_from {
            let _ = f.shutdown(std::net::Shutdown::Both);
        }
    });
}

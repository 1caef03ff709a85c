//! The two sides of a conformance case and how they talk.
//!
//! A case is a pair of functions: `test` (this side: the test's thread)
//! and `peer` (the other side, in one or more roles). Where the peer runs
//! is what the transport is about:
//!
//! * `intra`: on a thread of this process, with the test's own
//!   [`Context`] (one context, as one ROS 2 process);
//! * `shm` and `zenoh`: in a real child process: this test binary run
//!   again on the same test (`--exact <transport>::<case>`) with
//!   [`ROLE`] set, so the test function runs the peer instead.
//!
//! The sides coordinate with lines of text: the peer [`Side::say`]s a line
//! (on stdout, or a channel for a thread) that the test
//! [`Peer::expect`]s, and the test [`Peer::say`]s lines back (on the
//! child's stdin). Every wait has a watchdog ([`LONG`]); nothing asserts
//! how long anything took.

use std::any::Any;
use std::io::{BufRead, BufReader, Write};
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use myelin::prelude::*;
use myelin::{SpinError, StopHandle};

/// The watchdog for every wait: generous, so only a hang trips it.
pub const LONG: Duration = Duration::from_secs(60);

/// Set in a child process: the peer role to play.
const ROLE: &str = "MYELIN_CONFORMANCE_ROLE";
/// Set in a child process: the test's domain.
const DOMAIN: &str = "MYELIN_CONFORMANCE_DOMAIN";
/// Set in a child process of a `zenoh` case: the session configuration.
const ZENOH_CONFIG: &str = "MYELIN_CONFORMANCE_ZENOH_CONFIG";
/// Set in a child process whose context also uses shared memory.
const ALSO_SHM: &str = "MYELIN_CONFORMANCE_ALSO_SHM";
/// What starts a peer's line on its stdout (libtest prints there too).
const MARK: &str = "conformance> ";

/// Where the other side of a case lives and how messages reach it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// Both sides in one process and one context.
    Intra,
    /// Two processes on this host, shared memory only.
    Shm,
    /// Two processes through a zenoh router on loopback, no shared memory.
    Zenoh,
}

impl Transport {
    /// The test module the cases of this transport live in.
    fn module(self) -> &'static str {
        match self {
            Transport::Intra => "intra",
            Transport::Shm => "shm",
            Transport::Zenoh => "zenoh",
        }
    }

    /// Case `i` runs on domain `first_domain() + i`. Other test files use
    /// 140-182 and 226-232, the benchmarks 200-229; intra contexts have no
    /// transport, so their domain is never seen outside the process.
    fn first_domain(self) -> u32 {
        match self {
            Transport::Intra => 0,
            Transport::Shm => 100,
            Transport::Zenoh => 60,
        }
    }
}

/// Run one case on one transport: the test side, or (in a child process)
/// the peer side.
pub fn run(transport: Transport, case: &'static str, index: u32, test: fn(&Test), peer: fn(&Side)) {
    assert!(
        index < 40,
        "domains are reserved for 40 cases per transport"
    );
    let domain = transport.first_domain() + index;
    if let Ok(role) = std::env::var(ROLE) {
        // Over zenoh, warnings on stderr (the parent's): a gossip link
        // that could not be made is one ("Unable to connect to any
        // locator of scouted peer").
        if transport == Transport::Zenoh {
            myelin::init_logging();
        }
        let side = Side::in_child(transport, role, domain);
        peer(&side);
        return;
    }
    let router = (transport == Transport::Zenoh).then(|| Router::start(case));
    let intra =
        (transport == Transport::Intra).then(|| build_context(transport, domain, None, false));
    let t = Test {
        transport,
        case,
        domain,
        peer,
        intra,
        router,
    };
    test(&t);
}

fn build_context(
    transport: Transport,
    domain: u32,
    zenoh: Option<&Path>,
    also_shm: bool,
) -> Context {
    let b = Context::builder().domain_id(domain).handle_signals(false);
    let b = match transport {
        Transport::Intra => b.shared_memory(false).network(false),
        Transport::Shm => b.shared_memory(true).network(false),
        Transport::Zenoh => b
            .shared_memory(also_shm)
            .network(true)
            .zenoh_config(zenoh.expect("a zenoh case has a router")),
    };
    b.build().expect("the context of a conformance case")
}

/// The test's side of a case.
pub struct Test {
    transport: Transport,
    case: &'static str,
    domain: u32,
    peer: fn(&Side),
    /// `intra`: the one context both sides share.
    intra: Option<Context>,
    /// `zenoh`: the router both processes connect to.
    router: Option<Router>,
}

impl Test {
    /// The case's domain.
    pub fn domain(&self) -> u32 {
        self.domain
    }

    /// Whether the two sides talk over zenoh (a network: no back-pressure
    /// reaches a publisher in the other process).
    pub fn over_zenoh(&self) -> bool {
        self.transport == Transport::Zenoh
    }

    /// A context on the transport under test (`intra`: the shared one).
    pub fn context(&self) -> Context {
        self.make_context(false)
    }

    /// [`context`](Self::context), with shared memory on as well where the
    /// transport is zenoh: two processes then have both transports between
    /// them.
    pub fn context_also_on_shared_memory(&self) -> Context {
        self.make_context(true)
    }

    fn make_context(&self, also_shm: bool) -> Context {
        match &self.intra {
            Some(c) => c.clone(),
            None => build_context(
                self.transport,
                self.domain,
                self.router.as_ref().map(|r| r.config.as_path()),
                also_shm,
            ),
        }
    }

    /// Start the other side in `role`.
    pub fn peer(&self, role: &str) -> Peer {
        self.start_peer(role, false)
    }

    /// [`peer`](Self::peer), its context with shared memory on as well
    /// (see [`context_also_on_shared_memory`](Self::context_also_on_shared_memory)).
    pub fn peer_also_on_shared_memory(&self, role: &str) -> Peer {
        self.start_peer(role, true)
    }

    fn start_peer(&self, role: &str, also_shm: bool) -> Peer {
        match &self.intra {
            Some(ctx) => Peer::thread(role, ctx.clone(), self.peer),
            None => Peer::process(self, role, also_shm),
        }
    }

    /// Wait until `n` messages a peer published have reached `sub` (kept
    /// in its buffer or overwritten there), without taking any: the reader
    /// of a history case must not read before the writer is done.
    ///
    /// In one process and over shared memory a message has reached the
    /// subscription when `publish` returns (over shared memory it waits in
    /// the subscription's inbox, and `lost()` / `buffered()` count it once
    /// the reader looks); over zenoh it may still be in flight.
    pub fn wait_reached<T: myelin::Message>(&self, sub: &Subscription<T>, n: u64) {
        if self.transport == Transport::Shm {
            return;
        }
        wait_until(&format!("{n} messages to reach {}", sub.topic()), || {
            sub.lost() + sub.buffered() as u64 >= n
        });
    }
}

/// Poll `done` until it holds; panics naming `what` after [`LONG`].
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + LONG;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The payload a killed in-process peer unwinds with.
struct Killed;

/// What the test sends an in-process peer.
enum ToPeer {
    Line(String),
    Kill,
}

/// The other side of a case, as the test sees it. Dropping it kills it.
pub struct Peer {
    role: String,
    to: PeerInput,
    from: Receiver<String>,
    /// `intra`: the peer's thread (its panic, if any, comes back here).
    thread: Option<JoinHandle<Result<(), Box<dyn Any + Send>>>>,
    /// `shm` and `zenoh`: the child process.
    child: Option<Child>,
}

enum PeerInput {
    Channel(Sender<ToPeer>),
    Stdin(ChildStdin),
}

impl Peer {
    fn thread(role: &str, ctx: Context, peer: fn(&Side)) -> Peer {
        let (to_peer, from_test) = channel();
        let (to_test, from_peer) = channel();
        let side = Side {
            role: role.to_string(),
            transport: Transport::Intra,
            from_test: SideInput::Channel(from_test),
            speaker: Speaker(Some(to_test)),
            context: SideContext::Shared(ctx),
        };
        let thread = std::thread::Builder::new()
            .name(format!("peer {role}"))
            .spawn(
                move || match catch_unwind(AssertUnwindSafe(|| peer(&side))) {
                    Err(p) if !p.is::<Killed>() => Err(p),
                    _ => Ok(()),
                },
            )
            .expect("a peer thread");
        Peer {
            role: role.to_string(),
            to: PeerInput::Channel(to_peer),
            from: from_peer,
            thread: Some(thread),
            child: None,
        }
    }

    fn process(t: &Test, role: &str, also_shm: bool) -> Peer {
        let test_name = format!("{}::{}", t.transport.module(), t.case);
        let mut cmd = Command::new(std::env::current_exe().expect("the test binary"));
        cmd.args([
            "--exact",
            &test_name,
            "--nocapture",
            "--test-threads=1",
            "--include-ignored",
        ])
        .env(ROLE, role)
        .env(DOMAIN, t.domain.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
        if let Some(r) = &t.router {
            cmd.env(ZENOH_CONFIG, &r.config);
            if std::env::var_os("MYELIN_LOG").is_none() {
                cmd.env("MYELIN_LOG", "warn,zenoh=error,zenoh::net::runtime=warn");
            }
        }
        if also_shm {
            cmd.env(ALSO_SHM, "1");
        }
        let mut child = cmd.spawn().expect("the peer process");
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let (to_test, from_peer) = channel();
        // A reader thread, so that waiting for a line has a watchdog.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                // libtest may have printed "test x ... " on the same line.
                if let Some(at) = line.find(MARK)
                    && to_test.send(line[at + MARK.len()..].to_string()).is_err()
                {
                    break;
                }
            }
        });
        Peer {
            role: role.to_string(),
            to: PeerInput::Stdin(stdin),
            from: from_peer,
            thread: None,
            child: Some(child),
        }
    }

    /// Wait for the peer's next line starting with `prefix`; returns the
    /// rest of it (trimmed). Lines before it are skipped.
    pub fn expect(&mut self, prefix: &str) -> String {
        let deadline = Instant::now() + LONG;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.from.recv_timeout(left) {
                Ok(line) if line.starts_with(prefix) => {
                    return line[prefix.len()..].trim().to_string();
                }
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => {
                    panic!(
                        "peer {:?} did not say {prefix:?} within {LONG:?}",
                        self.role
                    )
                }
                Err(RecvTimeoutError::Disconnected) => {
                    self.surface_panic();
                    panic!("peer {:?} ended before saying {prefix:?}", self.role)
                }
            }
        }
    }

    /// Send the peer a line.
    pub fn say(&mut self, line: &str) {
        match &mut self.to {
            PeerInput::Channel(tx) => {
                let _ = tx.send(ToPeer::Line(line.to_string()));
            }
            PeerInput::Stdin(stdin) => {
                writeln!(stdin, "{line}")
                    .and_then(|()| stdin.flush())
                    .unwrap_or_else(|e| panic!("telling peer {:?} {line:?}: {e}", self.role));
            }
        }
    }

    /// Tell the peer to exit, and wait until it has, successfully.
    pub fn finish(mut self) {
        self.say("exit");
        if let Some(mut child) = self.child.take() {
            let status = wait_child(&mut child, &self.role);
            assert!(status.success(), "peer {:?} failed: {status}", self.role);
        } else {
            self.join_thread();
        }
    }

    /// Whether the peer is a process of its own (else a thread of this
    /// one: `intra`).
    pub fn is_process(&self) -> bool {
        self.child.is_some()
    }

    /// Stop (`SIGSTOP`: as a debugger's breakpoint or a hung host would)
    /// or continue (`SIGCONT`) the peer's process; its threads, and the
    /// sends they make, stop with it.
    pub fn pause(&mut self, stopped: bool) {
        let child = self.child.as_ref().expect("only a process can be stopped");
        let signal = if stopped {
            libc::SIGSTOP
        } else {
            libc::SIGCONT
        };
        let pid = i32::try_from(child.id()).expect("a pid");
        // SAFETY: kill(2) on our own child's pid (not yet reaped: `child`
        // is still held), with a valid signal number.
        let r = unsafe { libc::kill(pid, signal) };
        assert_eq!(r, 0, "signal {signal} to peer {:?}", self.role);
    }

    /// End the peer abruptly: SIGKILL for a process (`kill -9`); an
    /// in-process peer unwinds at its next wait for the test, dropping
    /// everything it created, and a callback it is running never returns.
    pub fn kill(mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().expect("SIGKILL");
            child.wait().expect("reaping the killed peer");
        } else {
            if let PeerInput::Channel(tx) = &self.to {
                let _ = tx.send(ToPeer::Kill);
            }
            self.join_thread();
        }
    }

    fn join_thread(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        wait_until(&format!("peer {:?} to end", self.role), || {
            thread.is_finished()
        });
        if let Err(p) = thread.join().expect("the peer thread catches panics") {
            resume_unwind(p);
        }
    }

    /// An in-process peer that ended early: re-raise its panic here.
    fn surface_panic(&mut self) {
        if let Some(thread) = self.thread.take_if(|t| t.is_finished())
            && let Ok(Err(p)) = thread.join()
        {
            resume_unwind(p);
        }
    }
}

fn wait_child(child: &mut Child, role: &str) -> std::process::ExitStatus {
    let deadline = Instant::now() + LONG;
    loop {
        if let Some(status) = child.try_wait().expect("peer status") {
            return status;
        }
        assert!(Instant::now() < deadline, "peer {role:?} did not exit");
        std::thread::sleep(Duration::from_millis(5));
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let PeerInput::Channel(tx) = &self.to {
            let _ = tx.send(ToPeer::Kill);
        }
    }
}

/// Says lines to the test; cheap to clone into callbacks.
#[derive(Clone)]
pub struct Speaker(Option<Sender<String>>);

impl Speaker {
    /// Send the test a line.
    pub fn say(&self, line: impl std::fmt::Display) {
        match &self.0 {
            Some(tx) => {
                let _ = tx.send(line.to_string());
            }
            None => {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{MARK}{line}");
                let _ = out.flush();
            }
        }
    }
}

enum SideInput {
    Channel(Receiver<ToPeer>),
    Stdin(Receiver<String>),
}

enum SideContext {
    Shared(Context),
    Own {
        domain: u32,
        zenoh: Option<PathBuf>,
        also_shm: bool,
    },
}

/// The peer's side of a case.
pub struct Side {
    role: String,
    transport: Transport,
    from_test: SideInput,
    speaker: Speaker,
    context: SideContext,
}

impl Side {
    fn in_child(transport: Transport, role: String, domain: u32) -> Side {
        let expected: u32 = std::env::var(DOMAIN)
            .ok()
            .and_then(|d| d.parse().ok())
            .expect("the test names the domain");
        assert_eq!(expected, domain, "the child runs the test's case");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    return;
                }
            }
            // The test is gone without saying goodbye: so are we.
            std::process::exit(0);
        });
        Side {
            role,
            transport,
            from_test: SideInput::Stdin(rx),
            speaker: Speaker(None),
            context: SideContext::Own {
                domain,
                zenoh: std::env::var_os(ZENOH_CONFIG).map(PathBuf::from),
                also_shm: std::env::var_os(ALSO_SHM).is_some(),
            },
        }
    }

    /// The context of this side: the test's own for `intra`, else a new
    /// one on the transport under test.
    pub fn context(&self) -> Context {
        match &self.context {
            SideContext::Shared(c) => c.clone(),
            SideContext::Own {
                domain,
                zenoh,
                also_shm,
            } => build_context(self.transport, *domain, zenoh.as_deref(), *also_shm),
        }
    }

    /// Send the test a line.
    pub fn say(&self, line: impl std::fmt::Display) {
        self.speaker.say(line);
    }

    /// A handle to say lines from callbacks.
    pub fn speaker(&self) -> Speaker {
        self.speaker.clone()
    }

    /// Wait for the test's next line starting with `prefix`; returns the
    /// rest (trimmed). A killed in-process peer unwinds from here.
    pub fn expect(&self, prefix: &str) -> String {
        self.expect_within(prefix, LONG)
    }

    fn expect_within(&self, prefix: &str, watchdog: Duration) -> String {
        let deadline = Instant::now() + watchdog;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = match &self.from_test {
                SideInput::Stdin(rx) => rx.recv_timeout(left).ok(),
                SideInput::Channel(rx) => match rx.recv_timeout(left) {
                    Ok(ToPeer::Line(l)) => Some(l),
                    Ok(ToPeer::Kill) | Err(RecvTimeoutError::Disconnected) => {
                        resume_unwind(Box::new(Killed))
                    }
                    Err(RecvTimeoutError::Timeout) => None,
                },
            };
            match line {
                Some(l) if l.starts_with(prefix) => return l[prefix.len()..].trim().to_string(),
                Some(_) => {}
                None => panic!("peer {:?}: the test did not say {prefix:?}", self.role),
            }
        }
    }

    /// Serve until the test says `exit`, kills this peer, or goes away
    /// (no watchdog here: the test's own watchdogs end the case).
    pub fn until_told_to_exit(&self) {
        self.expect_within("exit", Duration::from_secs(24 * 3600));
    }
}

/// Block this thread for good: a callback of a peer that is about to be
/// killed mid-work.
pub fn hold() -> ! {
    loop {
        std::thread::park();
    }
}

/// An executor spinning a node on its own thread until dropped.
pub struct Spinning {
    stop: StopHandle,
    thread: Option<JoinHandle<Result<(), SpinError>>>,
}

impl Spinning {
    /// Spin `node` on a new thread.
    pub fn new(node: &Node) -> Spinning {
        let mut exec = Executor::new();
        exec.add_node(node).expect("a node for the executor");
        let stop = exec.stop_handle();
        Spinning {
            stop,
            thread: Some(std::thread::spawn(move || exec.spin())),
        }
    }
}

impl Drop for Spinning {
    fn drop(&mut self) {
        self.stop.stop();
        // A killed in-process peer leaves its executor to whatever callback
        // it is blocked in.
        if std::thread::panicking() {
            return;
        }
        if let Some(t) = self.thread.take() {
            t.join().expect("the executor thread").expect("spin");
        }
    }
}

/// A zenoh router on a free loopback port, and a session configuration
/// file pointing at it (peer mode, multicast scouting off, loopback only).
struct Router {
    _session: myelin_zenoh::zenoh::Session,
    config: PathBuf,
    dir: PathBuf,
}

impl Router {
    fn start(case: &str) -> Router {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let endpoint = format!("tcp/127.0.0.1:{port}");
        let cfg = myelin_zenoh::config::router_config(None, std::slice::from_ref(&endpoint), &[])
            .expect("the router configuration");
        let session = myelin_zenoh::config::open(cfg).expect("the router");
        let dir =
            std::env::temp_dir().join(format!("myelin_conformance_{case}_{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let config = dir.join("session.json5");
        std::fs::write(
            &config,
            format!(
                r#"{{
  mode: "peer",
  connect: {{ endpoints: ["{endpoint}"] }},
  listen: {{ endpoints: ["tcp/127.0.0.1:0"] }},
  scouting: {{ multicast: {{ enabled: false }}, gossip: {{ enabled: true }} }},
}}"#
            ),
        )
        .expect("the session configuration");
        Router {
            _session: session,
            config,
            dir,
        }
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

//! Shared-memory discovery with many processes: many started at once all
//! match, a late joiner finds every one, processes killed with `kill -9`
//! are noticed (their matches dropped, their segments removed), and the
//! domain is back to empty once all have exited. Real child processes:
//! the test binary runs itself as each member (`MYELIN_DISCOVERY_ROLE`).

#![cfg(feature = "shm")]

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use myelin::prelude::*;

const ROLE: &str = "MYELIN_DISCOVERY_ROLE";
const LONG: Duration = Duration::from_secs(60);

fn ctx(domain: u32) -> Context {
    Context::builder()
        .domain_id(domain)
        .handle_signals(false)
        .shared_memory(true)
        .network(false)
        .build()
        .unwrap()
}

fn topic(i: usize) -> String {
    format!("/ring/p{i}")
}

fn tl() -> QoS {
    QoS::keep_last(1).transient_local()
}

/// A role's `domain,count` from its variable (`None`: not this role).
fn domain_and_count(var: &str) -> Option<(u32, u32)> {
    let spec = std::env::var(var).ok()?;
    let mut it = spec.split(',').map(|v| v.parse::<u32>().unwrap());
    Some((it.next().unwrap(), it.next().unwrap()))
}

/// A publisher that sends `n` messages to a subscription in the parent
/// and exits at once, normally.
#[test]
fn publish_and_exit_role() {
    let Some((domain, n)) = domain_and_count("MYELIN_DISCOVERY_PUBLISH_AND_EXIT") else {
        return;
    };
    let c = ctx(domain);
    let node = c.create_node("short_lived").unwrap();
    let p = node
        .create_publisher::<u64>("/short", QoS::keep_all())
        .unwrap();
    wait_until("the parent's subscription", || p.subscription_count() == 1);
    for i in 0..n {
        p.publish(u64::from(i)).unwrap();
    }
}

/// A member of a ring: publishes its number on its own topic (transient
/// local), subscribes to the previous member's; says `matched` once its
/// subscription has its publisher, then `heard <n>` for what it got;
/// exits when stdin closes.
#[test]
fn member_role() {
    let Ok(spec) = std::env::var(ROLE) else {
        return;
    };
    let mut it = spec.split(',').map(|v| v.parse::<usize>().unwrap());
    let (domain, index, n) = (
        it.next().unwrap() as u32,
        it.next().unwrap(),
        it.next().unwrap(),
    );
    let c = ctx(domain);
    let node = c.create_node(&format!("member_{index}")).unwrap();
    let p = node.create_publisher::<u64>(&topic(index), tl()).unwrap();
    p.publish(index as u64).unwrap();
    let s = node
        .create_polling_subscription::<u64>(&topic((index + n - 1) % n), tl(), Default::default())
        .unwrap();
    // Seen once in CI (not reproduced here in 100+ runs): say what the
    // member knew, should it happen again.
    let m = s.wait_for_message(LONG).unwrap_or_else(|e| {
        panic!(
            "member {index}: the neighbour's message: {e}; the subscription has {} matched publisher(s); the domain's files list {:?} on its topic",
            s.matched_count(),
            c.discover(Duration::ZERO)
                .iter()
                .filter(|d| d.topic == topic((index + n - 1) % n))
                .map(|d| (d.is_publisher, d.pid))
                .collect::<Vec<_>>()
        )
    });
    while s.matched_count() == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    println!("matched");
    println!("heard {}", *m);
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
}

struct Member {
    child: Child,
    out: BufReader<ChildStdout>,
}

impl Member {
    fn spawn(domain: u32, index: usize, n: usize) -> Member {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "member_role", "--nocapture", "--test-threads=1"])
            .env(ROLE, format!("{domain},{index},{n}"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        Member { child, out }
    }

    fn expect(&mut self, word: &str) -> String {
        let mut line = String::new();
        loop {
            line.clear();
            let n = self.out.read_line(&mut line).unwrap();
            assert!(n > 0, "member exited before {word:?}");
            // The test harness prints "test member_role ... " without a
            // newline before the member's first line.
            if let Some(at) = line.find(word) {
                return line[at..].trim().to_string();
            }
        }
    }

    fn kill9(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    fn exit(mut self) {
        drop(self.child.stdin.take());
        assert!(self.child.wait().unwrap().success());
    }
}

/// This user's segment files of `domain` (and the host's wake tables are
/// not counted: other tests' processes come and go).
fn domain_files(domain: u32) -> Vec<String> {
    // SAFETY: getuid(2) has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    let prefix = format!("myelin_{uid}_{domain}_");
    let dir = std::env::var_os("MYELIN_SHM_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "/dev/shm".into());
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| n.starts_with(&prefix))
        .collect();
    v.sort();
    v
}

fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + LONG;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// 24 processes start at the same moment, each announcing its endpoints
/// while the others do: every one matches its neighbour and hears it, a
/// late joiner subscribing to every topic gets each member's history, and
/// once all exit the domain leaves no file behind.
#[test]
fn many_processes_started_at_once_all_match_and_a_late_joiner_finds_them() {
    let domain = 170;
    let n = 24;
    let mut members: Vec<Member> = (0..n).map(|i| Member::spawn(domain, i, n)).collect();
    for (i, m) in members.iter_mut().enumerate() {
        m.expect("matched");
        assert_eq!(
            m.expect("heard"),
            format!("heard {}", (i + n - 1) % n),
            "member {i}"
        );
    }
    let c = ctx(domain);
    let node = c.create_node("late_joiner").unwrap();
    let subs: Vec<_> = (0..n)
        .map(|i| {
            node.create_polling_subscription::<u64>(&topic(i), tl(), Default::default())
                .unwrap()
        })
        .collect();
    for (i, s) in subs.iter().enumerate() {
        assert_eq!(*s.wait_for_message(LONG).unwrap(), i as u64);
    }
    drop(subs);
    drop(node);
    c.shutdown();
    drop(c);
    for m in members {
        m.exit();
    }
    wait_until("the domain's files to go", || {
        domain_files(domain).is_empty()
    });
}

/// A publisher process that exits right after publishing (a `myelin bag
/// play`, a one-shot tool): the messages queued for a subscription that
/// has not read them yet are still delivered, every one (the exiting
/// process leaves the pools its readers still need, and the reader maps
/// them when it hears of the exit); then the pools go too.
#[test]
fn messages_queued_by_a_publisher_that_exited_are_still_delivered() {
    let domain = 173;
    let c = ctx(domain);
    let node = c.create_node("reader").unwrap();
    let s = node
        .create_polling_subscription::<u64>("/short", QoS::keep_all(), Default::default())
        .unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "publish_and_exit_role",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("MYELIN_DISCOVERY_PUBLISH_AND_EXIT", format!("{domain},50"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Nothing was read while the publisher lived.
    for i in 0..50u64 {
        assert_eq!(*s.wait_for_message(LONG).unwrap(), i);
    }
    assert_eq!(s.lost(), 0);
    drop(s);
    drop(node);
    wait_for_files_but(domain, "_graph", std::process::id());
}

/// Wait until the domain's files are only those whose name ends with
/// `suffix` or belong to process `pid`; the panic lists the others.
fn wait_for_files_but(domain: u32, suffix: &str, pid: u32) {
    let others = || {
        domain_files(domain)
            .into_iter()
            .filter(|f| !f.ends_with(suffix) && !f.contains(&format!("_{pid}_")))
            .collect::<Vec<_>>()
    };
    let deadline = Instant::now() + LONG;
    loop {
        let left = others();
        if left.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "these files stayed: {left:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A subscription in its own process on `/short` (keep all): says
/// `ready`, then `read <n>` once it has read `n` messages in order, and
/// waits for stdin to close.
#[test]
fn read_role() {
    let Some((domain, n)) = domain_and_count("MYELIN_DISCOVERY_READER") else {
        return;
    };
    let c = ctx(domain);
    let node = c.create_node("reader").unwrap();
    let s = node
        .create_polling_subscription::<u64>("/short", QoS::keep_all(), Default::default())
        .unwrap();
    println!("ready");
    for i in 0..u64::from(n) {
        assert_eq!(*s.wait_for_message(LONG).unwrap(), i);
    }
    println!("read {n}");
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
}

/// The same, when the reader's discovery never saw the publisher: the
/// reader is stopped (SIGSTOP) from before the publisher starts until
/// after it exited, as a loaded machine may delay a discovery thread. The
/// reader still gets every message, and still removes the pool the
/// publisher left for it. Before, the pool stayed for good: only
/// processes that discovery had seen were watched for their exit.
#[test]
fn a_publisher_that_exited_before_it_was_discovered_leaves_no_pool() {
    let domain = 175;
    let n = 50;
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "read_role", "--nocapture", "--test-threads=1"])
        .env("MYELIN_DISCOVERY_READER", format!("{domain},{n}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    let mut reader = Member { child, out };
    reader.expect("ready");
    let pid = reader.child.id();
    // SAFETY: kill(2) with a valid signal number; `pid` is our child,
    // not reaped yet, so it names that process.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGSTOP) }, 0);
    wait_until("the reader to stop", || {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('T'))
        })
    });
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "publish_and_exit_role",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("MYELIN_DISCOVERY_PUBLISH_AND_EXIT", format!("{domain},{n}"))
        .output()
        .unwrap();
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGCONT) }, 0);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(reader.expect("read"), format!("read {n}"));
    wait_for_files_but(domain, "_graph", pid);
    reader.exit();
}

/// Members killed with `kill -9` never clean up: the processes that
/// talked to them notice at once (no periodic scan), drop the matches,
/// and remove the dead members' segments; the survivors keep talking.
#[test]
fn killed_processes_are_noticed_and_their_segments_removed() {
    let domain = 171;
    let n = 8;
    let mut members: Vec<Member> = (0..n).map(|i| Member::spawn(domain, i, n)).collect();
    for m in &mut members {
        m.expect("matched");
    }
    let c = ctx(domain);
    let node = c.create_node("watcher").unwrap();
    let subs: Vec<_> = (0..n)
        .map(|i| {
            node.create_polling_subscription::<u64>(&topic(i), tl(), Default::default())
                .unwrap()
        })
        .collect();
    for s in &subs {
        s.wait_for_message(LONG).unwrap();
        wait_until("a match", || s.matched_count() == 1);
    }
    let killed: Vec<u32> = (0..n).step_by(2).map(|i| members[i].child.id()).collect();
    for i in (0..n).step_by(2) {
        members[i].kill9();
    }
    for (i, s) in subs.iter().enumerate() {
        let want = if i % 2 == 0 { 0 } else { 1 };
        wait_until(&format!("member {i}'s match to be {want}"), || {
            s.matched_count() == want
        });
    }
    wait_until("the killed members' segments to go", || {
        domain_files(domain)
            .iter()
            .all(|f| !killed.iter().any(|pid| f.contains(&format!("_{pid}_"))))
    });
    // A late joiner sees only the living.
    let late = ctx(domain);
    let late_node = late.create_node("late").unwrap();
    for i in (1..n).step_by(2) {
        let s = late_node
            .create_polling_subscription::<u64>(&topic(i), tl(), Default::default())
            .unwrap();
        assert_eq!(*s.wait_for_message(LONG).unwrap(), i as u64);
    }
    for (i, m) in members.into_iter().enumerate() {
        if i % 2 == 1 {
            m.exit();
        }
    }
}

/// One endpoint in its own process: `pub` publishes its number on `topic`
/// (transient local), `sub` subscribes to it; says `ready` once matched to
/// one peer and waits for stdin to close.
#[test]
fn endpoint_role() {
    let Ok(spec) = std::env::var("MYELIN_DISCOVERY_ENDPOINT") else {
        return;
    };
    let v: Vec<&str> = spec.split(',').collect();
    let (domain, kind, topic) = (v[0].parse::<u32>().unwrap(), v[1], v[2]);
    let c = ctx(domain);
    let node = c.create_node("endpoint").unwrap();
    let mut keep = Vec::new();
    if kind == "pub" {
        let p = node.create_publisher::<u64>(topic, tl()).unwrap();
        p.publish(7).unwrap();
        keep.push(Box::new(p) as Box<dyn std::any::Any>);
    } else {
        let s = node
            .create_polling_subscription::<u64>(topic, tl(), Default::default())
            .unwrap();
        s.wait_for_message(LONG).unwrap();
        keep.push(Box::new(s));
    }
    println!("ready");
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
}

fn spawn_endpoint(domain: u32, kind: &str, topic: &str) -> Member {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "endpoint_role",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(
            "MYELIN_DISCOVERY_ENDPOINT",
            format!("{domain},{kind},{topic}"),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    let mut m = Member { child, out };
    m.expect("ready");
    m
}

/// A publisher killed and left a zombie (its parent has not reaped it
/// yet, so `kill(pid, 0)` still says it exists) while another subscriber
/// process removes its segments: a subscription here drops the match
/// whichever it hears first, the exit or the removal. Before, hearing the
/// removal first left the dead publisher counted as matched for good.
#[test]
fn a_killed_publisher_not_reaped_yet_is_unmatched() {
    let domain = 174;
    let c = ctx(domain);
    let node = c.create_node("watcher").unwrap();
    for round in 0..6 {
        let topic = format!("/zombie/r{round}");
        let s = node
            .create_polling_subscription::<u64>(&topic, tl(), Default::default())
            .unwrap();
        let mut publisher = spawn_endpoint(domain, "pub", &topic);
        let other = spawn_endpoint(domain, "sub", &topic);
        s.wait_for_message(LONG).unwrap();
        wait_until("the match", || s.matched_count() == 1);
        // SIGKILL without reaping: a zombie until the wait below.
        publisher.child.kill().unwrap();
        wait_until(
            &format!("round {round}: the dead publisher's match to go"),
            || s.matched_count() == 0,
        );
        publisher.child.wait().unwrap();
        other.exit();
    }
}

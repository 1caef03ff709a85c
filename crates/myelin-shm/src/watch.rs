//! Knowing at once when another process exits, at no cost while none
//! does: a pidfd per watched process, all in one epoll set that one thread
//! of this process sleeps on. Discovery watches the processes whose
//! endpoints could match its own, so a `kill -9` peer is noticed in
//! microseconds without anyone polling process ids.
//!
//! Where pidfds are not available (Linux before 5.3, a seccomp filter),
//! [`watch`] says [`Watch::Unsupported`] and the caller checks
//! [`process_alive`](crate::process_alive) now and then instead.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use rustix::event::epoll;
use rustix::io::Errno;
use rustix::process::{Pid, PidfdFlags, pidfd_open};

/// Told when a watched process exits (on the watch thread: keep it short).
pub trait Exited: Send + Sync {
    /// Process `pid` exited.
    fn exited(&self, pid: u32);
}

/// What [`watch`] did.
#[derive(Debug)]
pub enum Watch {
    /// `who` hears when the process exits.
    Watching,
    /// The process does not exist (any more).
    Gone,
    /// This system cannot watch processes this way.
    Unsupported(std::io::Error),
}

struct Watched {
    /// The pidfd (registered in the epoll set, data = pid).
    fd: OwnedFd,
    who: Vec<Weak<dyn Exited>>,
}

struct Watcher {
    epoll: OwnedFd,
    watched: Mutex<HashMap<u32, Watched>>,
}

fn watcher() -> Result<&'static Arc<Watcher>, std::io::Error> {
    static WATCHER: OnceLock<Result<Arc<Watcher>, String>> = OnceLock::new();
    WATCHER
        .get_or_init(|| {
            let epoll = epoll::create(epoll::CreateFlags::CLOEXEC).map_err(|e| e.to_string())?;
            let w = Arc::new(Watcher {
                epoll,
                watched: Mutex::new(HashMap::new()),
            });
            let run = w.clone();
            std::thread::Builder::new()
                .name("myelin-exits".into())
                .spawn(move || run.run())
                .map_err(|e| e.to_string())?;
            Ok(w)
        })
        .as_ref()
        .map_err(|e| std::io::Error::other(e.clone()))
}

impl Watcher {
    fn run(&self) {
        let mut events: Vec<epoll::Event> = Vec::with_capacity(64);
        loop {
            events.clear();
            match epoll::wait(
                &self.epoll,
                rustix::buffer::spare_capacity(&mut events),
                None,
            ) {
                Ok(_) => {}
                Err(Errno::INTR) => continue,
                Err(e) => {
                    tracing_free_warn(&format!("process watch stopped: {e}"));
                    return;
                }
            }
            for ev in &events {
                let pid = ev.data.u64() as u32;
                let gone = {
                    let mut m = self.watched.lock().unwrap_or_else(|e| e.into_inner());
                    m.remove(&pid)
                };
                if let Some(w) = gone {
                    let _ = epoll::delete(&self.epoll, &w.fd);
                    for who in w.who.iter().filter_map(Weak::upgrade) {
                        who.exited(pid);
                    }
                }
            }
        }
    }
}

/// This crate has no logger; the watch thread's one failure goes to stderr.
fn tracing_free_warn(msg: &str) {
    eprintln!("myelin: {msg}");
}

/// Tell `who` when process `pid` exits (once; watching a process twice for
/// the same `who` is one watch).
pub fn watch(pid: u32, who: &Weak<dyn Exited>) -> Watch {
    let w = match watcher() {
        Ok(w) => w,
        Err(e) => return Watch::Unsupported(e),
    };
    let mut m = w.watched.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(entry) = m.get_mut(&pid) {
        entry.who.retain(|x| x.strong_count() > 0);
        if !entry.who.iter().any(|x| Weak::ptr_eq(x, who)) {
            entry.who.push(who.clone());
        }
        return Watch::Watching;
    }
    let Some(p) = Pid::from_raw(pid as i32) else {
        return Watch::Gone;
    };
    match pidfd_open(p, PidfdFlags::empty()) {
        Ok(fd) => {
            if let Err(e) = epoll::add(
                &w.epoll,
                &fd,
                epoll::EventData::new_u64(u64::from(pid)),
                epoll::EventFlags::IN,
            ) {
                return Watch::Unsupported(e.into());
            }
            m.insert(
                pid,
                Watched {
                    fd,
                    who: vec![who.clone()],
                },
            );
            Watch::Watching
        }
        Err(Errno::SRCH) => Watch::Gone,
        Err(e) => Watch::Unsupported(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    struct Tell(Mutex<mpsc::Sender<u32>>);

    impl Exited for Tell {
        fn exited(&self, pid: u32) {
            let _ = self.0.lock().unwrap().send(pid);
        }
    }

    #[test]
    fn an_exiting_child_is_reported_once_and_a_missing_pid_is_gone() {
        let (tx, rx) = mpsc::channel();
        let tell: Arc<dyn Exited> = Arc::new(Tell(Mutex::new(tx)));
        let weak = Arc::downgrade(&tell);
        let mut child = std::process::Command::new("sleep")
            .arg("0.2")
            .spawn()
            .unwrap();
        let pid = child.id();
        assert!(matches!(watch(pid, &weak), Watch::Watching));
        assert!(matches!(watch(pid, &weak), Watch::Watching));
        let _ = child.wait();
        assert_eq!(rx.recv_timeout(std::time::Duration::from_secs(60)), Ok(pid));
        assert!(
            rx.recv_timeout(std::time::Duration::from_millis(200))
                .is_err()
        );
        // pid_max is at most 2^22: this one cannot exist.
        assert!(matches!(watch(1 << 30, &weak), Watch::Gone));
    }
}

//! Automatic liveliness with a lease, for subscriptions in other
//! processes and on other hosts.
//!
//! DDS's automatic liveliness is asserted by the middleware, not the
//! application: a publisher is alive while its process runs and reaches
//! its subscribers, whether or not it publishes or its node is spun. In
//! one process that is simply "while it exists". Across processes, a
//! subscription can only tell from assertions arriving within the lease:
//! a process that is stopped (`SIGSTOP`, a debugger, a hung host) or cut
//! off (a partition) stops them. So each process with such publishers
//! runs one thread that asserts for every one of them, four times per
//! lease, through the same path as
//! [`Publisher::assert_liveliness`](crate::Publisher::assert_liveliness).
//! A publish asserts too; a link skips an assertion made soon after one
//! (zenoh's sends at most eight per lease), so a publisher that publishes
//! often adds nothing.
//!
//! The thread starts with the first such publisher and ends after the
//! last is dropped. Publishers without a lease (the default) never start
//! it: they are alive while their process is (shared memory watches the
//! process; zenoh the session's token and its lease).

use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::Duration;

/// A publisher the asserting thread keeps alive for.
pub(crate) trait AssertsAutomatically: Send + Sync {
    /// Assert its liveliness to the subscriptions in other processes;
    /// `false` once it should no longer be asserted (its context shut
    /// down).
    fn assert_automatically(&self) -> bool;
}

#[derive(Default)]
struct State {
    /// The publishers, each with its lease.
    publishers: Vec<(Weak<dyn AssertsAutomatically>, Duration)>,
    /// Whether the thread runs.
    running: bool,
}

#[derive(Default)]
struct Asserter {
    state: Mutex<State>,
    /// Woken when a publisher is added (its lease may be shorter).
    added: Condvar,
}

fn asserter() -> &'static Arc<Asserter> {
    static ASSERTER: OnceLock<Arc<Asserter>> = OnceLock::new();
    ASSERTER.get_or_init(Arc::default)
}

/// The shortest wait between two rounds: an absurdly short lease costs at
/// most a thousand rounds a second.
const MIN_PERIOD: Duration = Duration::from_millis(1);

/// Assert `p`'s liveliness four times per `lease` from now on, until it is
/// dropped.
pub(crate) fn register(p: Weak<dyn AssertsAutomatically>, lease: Duration) {
    let a = asserter();
    let mut st = a.state.lock().unwrap_or_else(|e| e.into_inner());
    st.publishers.push((p, lease));
    if st.running {
        a.added.notify_one();
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("myelin-liveliness".into())
        .spawn({
            let a = a.clone();
            move || run(&a)
        });
    match spawned {
        Ok(_) => st.running = true,
        // Without the thread, an idle publisher's subscriptions elsewhere
        // see it not alive after its lease: a false alarm, never a false
        // "alive". Said, not fatal.
        Err(e) => tracing::warn!("no thread for automatic liveliness assertions: {e}"),
    }
}

fn run(a: &Asserter) {
    let mut st = a.state.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        st.publishers.retain(|(p, _)| p.strong_count() > 0);
        let Some(lease) = st.publishers.iter().map(|(_, l)| *l).min() else {
            // The last one went: a later publisher starts a new thread.
            st.running = false;
            return;
        };
        let live: Vec<Weak<dyn AssertsAutomatically>> =
            st.publishers.iter().map(|(p, _)| p.clone()).collect();
        // Asserting sends (zenoh): never with the list locked.
        drop(st);
        for p in live {
            if let Some(p) = p.upgrade()
                && !p.assert_automatically()
            {
                let mut st = a.state.lock().unwrap_or_else(|e| e.into_inner());
                st.publishers
                    .retain(|(q, _)| !std::ptr::addr_eq(q.as_ptr(), Arc::as_ptr(&p)));
            }
        }
        st = a.state.lock().unwrap_or_else(|e| e.into_inner());
        let period = (lease / 4).max(MIN_PERIOD);
        st = a
            .added
            .wait_timeout(st, period)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}

//! What a context knows of its domain's other endpoints, kept up to date
//! by the changes other processes announce, so that the work follows the
//! changes and not the population:
//!
//! * **The change log** (`myelin_shm::changes`): a process that adds,
//!   changes or removes an endpoint appends an entry to the domain's log
//!   and bumps the domain's counter. Each context reads only the entries
//!   since its cursor; a reader that lost entries (it fell a whole ring
//!   behind, or found one it cannot trust) rebuilds its view from the
//!   directory listing, which is always right.
//! * **Topic buckets**: an entry and a segment's name carry a 16-bit
//!   bucket of the endpoint's topic. Endpoints in buckets where this
//!   context has no endpoint are remembered by name only, never opened;
//!   a context opens them when it first makes an endpoint of that bucket.
//! * **Targeted rescans**: an entry makes only the links on its topic (or
//!   the one link it names) look again.
//! * **Exits**: the processes whose endpoints could match ours are watched
//!   with pidfds (`myelin_shm::watch`): an exit, `kill -9` included, is
//!   heard at once; whoever removes the dead process's segments announces
//!   their removal for everyone. Nothing scans periodically; a context
//!   wakes once a second only to check its own inboxes (another process
//!   may have damaged one).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use myelin_shm::changes::{Change, EndpointKey, LogEntry, LogRead, group_of, topic_bucket};
use myelin_shm::endpoint::{Found, GraphEvent, list_keys, open_found};

/// A link the discovery thread keeps up to date.
pub(super) trait Discovered: Send + Sync {
    /// Look again at the endpoints of this link's topic in other contexts
    /// (`found`: all of them that this context knows; `exited`: processes
    /// whose exit this pass heard of, dead even if their segments are
    /// already gone from `found` and `kill(pid, 0)` still finds them, as
    /// it does a zombie its parent has not reaped).
    fn rescan(self: Arc<Self>, found: &[Found], exited: &[u32]);

    /// Check what this link itself put in shared memory (an inbox another
    /// process may have damaged); called about once a second.
    fn check_own(&self) {}

    /// The processes this link met as writers since the last call (a
    /// subscription's publishers, connected to its inbox), so that
    /// discovery watches them even if it never saw their endpoints.
    fn take_writers(&self) -> Vec<u32> {
        Vec::new()
    }
}

/// How long a claimed but unwritten log entry is waited for before the
/// reader gives up on it (its writer died between claim and write) and
/// rebuilds its view from the directory.
const INCOMPLETE_PATIENCE: Duration = Duration::from_secs(1);

/// One of this context's own endpoints.
struct Local {
    topic: String,
    link: Weak<dyn Discovered>,
}

/// An endpoint of another context.
enum Known {
    /// Known by name only (its bucket is none of ours), or not readable
    /// yet (half created): opened when it matters.
    Unopened,
    /// Opened and read.
    Open(Box<Found>),
    /// Not this user's, or not one to trust: never opened again.
    Refused,
}

/// A context's view of its domain.
pub(super) struct View {
    domain: u32,
    /// The next log entry to read.
    cursor: u64,
    /// The log entry waited for, since when.
    incomplete: Option<(u64, Instant)>,
    known: HashMap<EndpointKey, Known>,
    by_bucket: HashMap<Option<u16>, HashSet<EndpointKey>>,
    locals: HashMap<u64, Local>,
    /// Buckets of our own topics, with how many of our endpoints are in
    /// each.
    interest: HashMap<u16, usize>,
    /// The same for groups of buckets (what this context is woken for).
    groups: HashMap<usize, usize>,
    /// Groups no endpoint of ours is in any more (to stop listening to).
    unlisten: Vec<usize>,
    /// Processes watched for their exit, with the topics on which links
    /// of ours look at their endpoints (to look at again when one exits,
    /// even if its endpoints were forgotten first).
    watched: HashMap<u32, HashSet<String>>,
    /// Endpoints in our buckets that could not be opened when they became
    /// known (half created, or a passing failure): tried again once a
    /// second, so a failed open is never the end of a match.
    retry: HashSet<EndpointKey>,
    /// Our links that must look again.
    pending_locals: HashSet<u64>,
    /// Topics whose links must look again.
    pending_topics: HashSet<String>,
    /// Files skipped, for the caller to report.
    pub(super) skipped: Vec<myelin_shm::ShmError>,
}

/// What a pass found to do, outside the view's lock.
#[derive(Default)]
pub(super) struct Work {
    /// Links to rescan, each with the endpoints on its topic.
    pub(super) rescans: Vec<(Arc<dyn Discovered>, Vec<Found>)>,
    /// Processes to start watching.
    pub(super) watch: Vec<u32>,
    /// Groups of topic buckets to stop being woken for.
    pub(super) unlisten: Vec<usize>,
}

impl View {
    /// The view of `domain` from the directory as it is now, reading the
    /// log from its head on.
    pub(super) fn new(domain: u32, graph: &GraphEvent) -> View {
        let mut v = View {
            domain,
            cursor: 0,
            incomplete: None,
            known: HashMap::new(),
            by_bucket: HashMap::new(),
            locals: HashMap::new(),
            interest: HashMap::new(),
            groups: HashMap::new(),
            unlisten: Vec::new(),
            watched: HashMap::new(),
            retry: HashSet::new(),
            pending_locals: HashSet::new(),
            pending_topics: HashSet::new(),
            skipped: Vec::new(),
        };
        v.rebuild(graph.log_head());
        v
    }

    fn is_local(&self, key: &EndpointKey) -> bool {
        key.pid == std::process::id() && self.locals.contains_key(&key.id)
    }

    fn interesting(&self, bucket: Option<u16>) -> bool {
        bucket.is_none_or(|b| self.interest.contains_key(&b))
    }

    /// Open `key` if it is of interest and not open yet; the topic of an
    /// endpoint that became known is marked for a rescan.
    fn open(&mut self, key: EndpointKey) {
        if !self.interesting(key.bucket) {
            return;
        }
        if !matches!(self.known.get(&key), Some(Known::Unopened)) {
            return;
        }
        self.retry.remove(&key);
        match open_found(self.domain, &key) {
            Ok(found) => {
                self.pending_topics.insert(found.info.topic.clone());
                self.known.insert(key, Known::Open(Box::new(found)));
            }
            // Another user's, or another myelin version's: refused for
            // good (reported once), not tried again on every pass.
            Err(
                e @ (myelin_shm::ShmError::Foreign { .. }
                | myelin_shm::ShmError::OtherVersion { .. }),
            ) => {
                self.skipped.push(e);
                self.known.insert(key, Known::Refused);
            }
            // Gone already, or half created (its `Added` entry comes when
            // it is complete), or a passing failure: stays unopened, and is
            // tried again.
            Err(e) => {
                self.skipped.push(e);
                self.retry.insert(key);
            }
        }
    }

    fn add(&mut self, key: EndpointKey) {
        if self.is_local(&key) {
            return;
        }
        if let std::collections::hash_map::Entry::Vacant(e) = self.known.entry(key) {
            e.insert(Known::Unopened);
            self.by_bucket.entry(key.bucket).or_default().insert(key);
        }
        self.open(key);
    }

    fn remove(&mut self, key: &EndpointKey) {
        self.retry.remove(key);
        if let Some(k) = self.known.remove(key) {
            if let Some(set) = self.by_bucket.get_mut(&key.bucket) {
                set.remove(key);
                if set.is_empty() {
                    self.by_bucket.remove(&key.bucket);
                }
            }
            if let Known::Open(f) = k {
                self.pending_topics.insert(f.info.topic);
            }
        }
    }

    fn apply(&mut self, e: &LogEntry) {
        match e.change {
            Change::Added => self.add(e.key),
            Change::Removed => self.remove(&e.key),
            Change::Changed if self.is_local(&e.key) => {
                self.pending_locals.insert(e.key.id);
            }
            Change::Changed => match self.known.get(&e.key) {
                Some(Known::Open(f)) => {
                    self.pending_topics.insert(f.info.topic.clone());
                }
                Some(_) => self.open(e.key),
                None => self.add(e.key),
            },
        }
        if e.change == Change::Added && self.is_local(&e.key) {
            self.pending_locals.insert(e.key.id);
        }
    }

    /// Rebuild from the directory (at the start, and when log entries were
    /// lost), then read the log from `head` on.
    fn rebuild(&mut self, head: u64) {
        let listed: HashMap<EndpointKey, ()> = list_keys(self.domain)
            .into_iter()
            .map(|(k, _)| (k, ()))
            .collect();
        let gone: Vec<EndpointKey> = self
            .known
            .keys()
            .filter(|k| !listed.contains_key(k))
            .copied()
            .collect();
        for k in gone {
            self.remove(&k);
        }
        for k in listed.into_keys() {
            self.add(k);
        }
        self.cursor = head;
        self.incomplete = None;
    }

    /// Read what other processes announced since the last look.
    pub(super) fn catch_up(&mut self, graph: &GraphEvent) {
        let mut entries = Vec::new();
        match graph.read_log(self.cursor, &mut entries) {
            LogRead::UpTo(head) => {
                entries.iter().for_each(|e| self.apply(e));
                self.cursor = head;
                self.incomplete = None;
            }
            LogRead::Incomplete(at) => {
                entries.iter().for_each(|e| self.apply(e));
                self.cursor = at;
                match self.incomplete {
                    Some((s, since)) if s == at && since.elapsed() > INCOMPLETE_PATIENCE => {
                        self.rebuild(graph.log_head());
                    }
                    Some((s, _)) if s == at => {}
                    _ => self.incomplete = Some((at, Instant::now())),
                }
            }
            LogRead::Lost(head) => self.rebuild(head),
        }
    }

    /// Whether a log entry is awaited (the next look should come soon).
    pub(super) fn waiting_for_entry(&self) -> bool {
        self.incomplete.is_some()
    }

    /// One of this context's endpoints, on `topic`, starts to be kept up
    /// to date: the endpoints of its topic's bucket are opened. Returns
    /// the bucket group to start being woken for, if this is its first.
    pub(super) fn register(
        &mut self,
        id: u64,
        topic: &str,
        link: Weak<dyn Discovered>,
    ) -> Option<usize> {
        let bucket = topic_bucket(topic);
        *self.interest.entry(bucket).or_default() += 1;
        let group = group_of(bucket);
        let n = self.groups.entry(group).or_default();
        *n += 1;
        let first = (*n == 1).then_some(group);
        self.locals.insert(
            id,
            Local {
                topic: topic.to_string(),
                link,
            },
        );
        let keys: Vec<EndpointKey> = self
            .by_bucket
            .get(&Some(bucket))
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        for k in keys {
            self.open(k);
        }
        self.pending_locals.insert(id);
        first
    }

    /// Forget our links that were dropped.
    fn drop_gone_locals(&mut self) {
        let gone: Vec<u64> = self
            .locals
            .iter()
            .filter(|(_, l)| l.link.strong_count() == 0)
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            if let Some(l) = self.locals.remove(&id) {
                let b = topic_bucket(&l.topic);
                if let Some(n) = self.interest.get_mut(&b) {
                    *n -= 1;
                    if *n == 0 {
                        self.interest.remove(&b);
                    }
                }
                let g = group_of(b);
                if let Some(n) = self.groups.get_mut(&g) {
                    *n -= 1;
                    if *n == 0 {
                        self.groups.remove(&g);
                        self.unlisten.push(g);
                    }
                }
            }
        }
    }

    /// Try again to open the endpoints that could not be opened (once a
    /// second); forget those whose file is gone.
    pub(super) fn retry_unopened(&mut self) {
        for key in std::mem::take(&mut self.retry) {
            let gone = key
                .segment_name(self.domain)
                .is_ok_and(|n| std::fs::symlink_metadata(n.path()).is_err());
            if gone {
                self.remove(&key);
            } else {
                self.open(key);
            }
        }
    }

    /// Process `pid` exited: its endpoints are marked dead and their
    /// topics looked at again.
    pub(super) fn mark_dead(&mut self, pid: u32) {
        // The topics come from the watch, not only from the endpoints
        // still known: another process may have removed the dead one's
        // segments, and this view forgotten them, before the exit was
        // heard here.
        if let Some(topics) = self.watched.remove(&pid) {
            self.pending_topics.extend(topics);
        }
        for k in self.known.values_mut() {
            if let Known::Open(f) = k
                && f.info.pid == pid
                && f.alive
            {
                f.alive = false;
                self.pending_topics.insert(f.info.topic.clone());
            }
        }
    }

    /// Forget the endpoints of the exited process `pid` whose segments are
    /// gone (it removed them at its exit, or a survivor did).
    pub(super) fn forget_removed(&mut self, pid: u32) {
        let gone: Vec<EndpointKey> = self
            .known
            .keys()
            .filter(|k| k.pid == pid)
            .filter(|k| {
                k.segment_name(self.domain)
                    .is_ok_and(|n| std::fs::symlink_metadata(n.path()).is_err())
            })
            .copied()
            .collect();
        for k in gone {
            self.remove(&k);
        }
    }

    /// The processes watched for their exit (for a system without pidfds,
    /// whose liveness is polled instead).
    pub(super) fn watched(&self) -> Vec<u32> {
        self.watched.keys().copied().collect()
    }

    /// Every endpoint of other contexts on `topic` that this view has
    /// opened (its bucket opened first, if it was not).
    pub(super) fn on_topic(&mut self, topic: &str) -> Vec<Found> {
        let bucket = Some(topic_bucket(topic));
        let keys: Vec<EndpointKey> = self
            .by_bucket
            .get(&bucket)
            .into_iter()
            .flatten()
            .chain(self.by_bucket.get(&None).into_iter().flatten())
            .copied()
            .collect();
        // Opened even where this context has no endpoint yet: a type
        // check before creating one needs them.
        let mut found = Vec::new();
        for k in keys {
            if let Some(Known::Unopened) = self.known.get(&k)
                && let Ok(f) = open_found(self.domain, &k)
            {
                self.known.insert(k, Known::Open(Box::new(f)));
            }
            if let Some(Known::Open(f)) = self.known.get(&k)
                && f.info.topic == topic
            {
                found.push((**f).clone());
            }
        }
        found
    }

    /// What the changes so far ask for: the links to rescan (each with the
    /// endpoints on its topic) and the processes to start watching.
    pub(super) fn take_work(&mut self) -> Work {
        self.drop_gone_locals();
        let mut ids: HashSet<u64> = std::mem::take(&mut self.pending_locals);
        let topics = std::mem::take(&mut self.pending_topics);
        if !topics.is_empty() {
            ids.extend(
                self.locals
                    .iter()
                    .filter(|(_, l)| topics.contains(&l.topic))
                    .map(|(id, _)| *id),
            );
        }
        let mut work = Work {
            unlisten: std::mem::take(&mut self.unlisten),
            ..Work::default()
        };
        let mut by_topic: HashMap<String, Vec<Found>> = HashMap::new();
        for id in ids {
            let Some(local) = self.locals.get(&id) else {
                continue;
            };
            let Some(link) = local.link.upgrade() else {
                continue;
            };
            let topic = local.topic.clone();
            let found = match by_topic.get(&topic) {
                Some(f) => f.clone(),
                None => {
                    let f = self.on_topic(&topic);
                    by_topic.insert(topic, f.clone());
                    f
                }
            };
            work.rescans.push((link, found));
        }
        // Watch the processes of every endpoint a link of ours looks at.
        for (topic, found) in &by_topic {
            for f in found.iter().filter(|f| f.alive) {
                let topics = self.watched.entry(f.info.pid).or_insert_with(|| {
                    work.watch.push(f.info.pid);
                    HashSet::new()
                });
                if !topics.contains(topic) {
                    topics.insert(topic.clone());
                }
            }
        }
        work
    }

    /// Every live link of this context (for their own checks), with its
    /// topic.
    pub(super) fn links(&self) -> Vec<(String, Arc<dyn Discovered>)> {
        self.locals
            .values()
            .filter_map(|l| Some((l.topic.clone(), l.link.upgrade()?)))
            .collect()
    }

    /// Watch process `pid` for its exit on behalf of a link of `topic`
    /// that met it; true when it was not watched yet (the caller starts
    /// the watch).
    pub(super) fn watch_writer(&mut self, pid: u32, topic: &str) -> bool {
        let mut new = false;
        let topics = self.watched.entry(pid).or_insert_with(|| {
            new = true;
            HashSet::new()
        });
        if !topics.contains(topic) {
            topics.insert(topic.to_string());
        }
        new
    }
}

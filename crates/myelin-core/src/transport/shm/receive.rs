//! The subscription's side of the shared-memory transport: its inbox, into
//! which publishers in other processes push descriptors, and the readers
//! that turn a descriptor into bytes read in place.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use myelin_shm::changes::{Change, EndpointKey};
use myelin_shm::endpoint::{EndpointInfo, EndpointKind, Found};
use myelin_shm::inbox::{ConnState, Desc, Inbox, MAX_CONNECTIONS};
use myelin_shm::pool::PoolReader;
use myelin_shm::process_alive;
use myelin_shm::{NeededAtExit, SegmentName};
use myelin_sync::LeaseSlab;

use super::qos::decode_qos;
use super::{Discovered, Domain, LEAVE_WAIT, lock_within};
use crate::message_info::Origin;
use crate::qos::{Durability, QoS, QosPolicy};
use crate::transport::{Arrived, EndpointSpec, Held, SubLink, SubOwner, TransportError, TypeInfo};
use crate::wire::SharedBytes;

/// The inbox and what the reader needs to hand chunks back.
struct InboxShared {
    inbox: Inbox,
    give_back: Mutex<()>,
}

/// A publisher's pool, mapped, with the inbox its chunks go back
/// through: what a chunk read in place needs alive, in one reference
/// count (one locked increment and decrement per message, not two).
struct MappedPool {
    pool: PoolReader,
    inbox: Arc<InboxShared>,
    /// A lease slot per chunk (chunk index modulo the slab's length, a
    /// power of two): a chunk read in place is held in its slot, not in an
    /// `Arc` of its own (no allocation per message). A slot still taken (a
    /// pool larger than the slab, or a publisher that sent one chunk twice)
    /// falls back to the `Arc`.
    leases: LeaseSlab<ReaderLease>,
}

/// Lease slots per mapped pool, at most: covers a pool of small messages
/// (64 chunks) at ~3 KiB per pool.
const LEASE_SLOTS: u32 = 64;

impl MappedPool {
    fn new(pool: PoolReader, inbox: Arc<InboxShared>) -> MappedPool {
        let slots = pool.count().next_power_of_two().min(LEASE_SLOTS);
        MappedPool {
            pool,
            inbox,
            leases: LeaseSlab::new(slots as usize),
        }
    }
}

/// A chunk read in place by this process; dropping it gives it back. Its
/// `mapped` keeps the pool, and the lease slab it may sit in, alive.
struct ReaderLease {
    mapped: Arc<MappedPool>,
    conn: usize,
    generation: u32,
    key: u32,
}

impl Drop for ReaderLease {
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn drop(&mut self) {
        let inbox = &self.mapped.inbox;
        let _g = inbox.give_back.lock().unwrap_or_else(|e| e.into_inner());
        let _ = inbox.inbox.give_back(self.conn, self.generation, self.key);
    }
}

#[derive(Default)]
struct ReaderConn {
    claim: Option<(u32, u64, u32)>,
    pools: Vec<Option<Arc<MappedPool>>>,
    lost_seen: u64,
}

/// `SubShm::live_claims` before the first look at the blocks.
const NEVER_LOOKED: u64 = u64::MAX;

/// The reading side of every connection block of the inbox.
struct Readers {
    /// One per block.
    conns: Vec<ReaderConn>,
    /// The blocks a pass reads: those claimed when every block was last
    /// looked at (at the claim count in `SubShm::live_claims`), and those
    /// this reader had claimed then.
    live: Vec<usize>,
}

/// The shared-memory side of a subscription.
pub(super) struct SubShm {
    dom: Domain,
    /// This subscription in the domain's change log.
    key: EndpointKey,
    topic: String,
    qos: QoS,
    ty: TypeInfo,
    inbox: Arc<InboxShared>,
    readers: Mutex<Readers>,
    refused: Mutex<HashSet<String>>,
    owner: OnceLock<Weak<dyn SubOwner>>,
    /// Times the inbox header was found damaged and rewritten: the first
    /// is a warning, later ones (a process that keeps scribbling) debug
    /// lines, so the log is not flooded every discovery pass.
    repairs: std::sync::atomic::AtomicU64,
    /// Processes met as writers in the inbox since discovery last asked
    /// ([`Discovered::take_writers`]): a publisher may connect, publish and
    /// exit before this context's discovery ever saw its endpoint, and
    /// then only this tells discovery to watch it (and so to remove the
    /// pool it left behind for this reader).
    writers: Mutex<Vec<u32>>,
    /// `Readers::live` as a bit per block, for [`SubLink::has_data`] (asked
    /// on every poll, without the readers' lock): written under the lock
    /// at each full look, then `live_claims`.
    live_bits: Box<[AtomicU64]>,
    /// The inbox's claim count when every block was last looked at
    /// (`NEVER_LOOKED` before the first and after a block was freed: look
    /// at every block on the next pass). Written under the readers' lock.
    live_claims: AtomicU64,
    /// The thread inside a pass over the inbox ([`this_thread`]; 0: none),
    /// which runs inline callbacks under `readers`: an exit rule run by
    /// that thread (a callback called `exit`) must not wait for itself.
    pass_thread: std::sync::atomic::AtomicUsize,
}

impl SubShm {
    pub(super) fn new(
        dom: Domain,
        spec: &EndpointSpec<'_>,
        info: EndpointInfo,
    ) -> Result<SubShm, TransportError> {
        debug_assert_eq!(info.kind, EndpointKind::Subscription);
        let cap = spec.qos.effective_depth().clamp(1, 4096) as u32;
        let conns = spec
            .max_publishers
            .unwrap_or(myelin_shm::inbox::DEFAULT_CONNECTIONS);
        let inbox = Inbox::create_for(dom.id, &info, cap, 2 * cap + 64, conns)
            .map_err(|e| TransportError::new("creating the subscription's inbox", e))?;
        inbox.set_wants_history(spec.qos.durability == Durability::TransientLocal);
        let conns = inbox.connections();
        Ok(SubShm {
            dom,
            key: info.key(),
            topic: spec.topic.to_string(),
            qos: *spec.qos,
            ty: spec.ty,
            inbox: Arc::new(InboxShared {
                inbox,
                give_back: Mutex::new(()),
            }),
            readers: Mutex::new(Readers {
                conns: (0..conns).map(|_| ReaderConn::default()).collect(),
                live: Vec::new(),
            }),
            refused: Mutex::new(HashSet::new()),
            owner: OnceLock::new(),
            repairs: std::sync::atomic::AtomicU64::new(0),
            writers: Mutex::new(Vec::new()),
            live_bits: (0..conns.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            live_claims: AtomicU64::new(NEVER_LOOKED),
            pass_thread: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    fn owner(&self) -> Option<Arc<dyn SubOwner>> {
        self.owner.get().and_then(Weak::upgrade)
    }

    /// Move every waiting message into the subscription; count what was
    /// lost on the way (overwritten by the publisher, or corrupt).
    /// `check_dead` connections (publisher process gone, or in
    /// `exited`: known to have exited, though a zombie still looks alive)
    /// are drained and freed.
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn pump_inner(&self, owner: &dyn SubOwner, check_dead: bool, exited: &[u32]) {
        let readers = self.readers.lock().unwrap_or_else(|e| e.into_inner());
        self.pump_locked(owner, readers, check_dead, exited, false);
    }

    /// [`pump_inner`](Self::pump_inner) with the readers' lock taken.
    /// `take`: the caller takes a message now from an empty buffer, and a
    /// pass that finds exactly one hands it back instead of delivering it
    /// ([`SubLink::pump_take`]).
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn pump_locked(
        &self,
        owner: &dyn SubOwner,
        mut readers: std::sync::MutexGuard<'_, Readers>,
        check_dead: bool,
        exited: &[u32],
        take: bool,
    ) -> Option<Held> {
        // Inline callbacks run below, in this thread, under the lock.
        let pass = PassMark::enter(&self.pass_thread);
        let mut lost = 0;
        let mut counted = false;
        let mut freed = false;
        let inbox = &self.inbox.inbox;
        let Readers { conns, live } = &mut *readers;
        // Every block only when a publisher claimed one since the last
        // look (or dead publishers are being checked): a pass otherwise
        // reads the blocks in use, not all of them.
        let claims = inbox.claims();
        // SYNC: Relaxed: only passes write it, under the readers' lock.
        let looked_at = self.live_claims.load(Ordering::Relaxed);
        if check_dead || looked_at == NEVER_LOOKED || looked_at != claims {
            self.look(conns, live, claims);
        }
        // The first message of the pass, held back for a taking reader
        // while it is the only one; a second sends it into the buffer
        // ahead of itself, and the pass goes on as for any reader.
        let mut held: Option<Held> = None;
        let mut may_hold = take;
        for &i in live.iter() {
            let r = &mut conns[i];
            let st = inbox.state(i);
            let (pid, pub_id, generation, mut closed) = match st {
                ConnState::Active {
                    pid,
                    pub_id,
                    generation,
                } => (pid, pub_id, generation, false),
                ConnState::Closed {
                    pid,
                    pub_id,
                    generation,
                } => (pid, pub_id, generation, true),
                _ => {
                    // Forget a connection that went away (a free block
                    // this reader never claimed has nothing to forget).
                    if r.claim.is_some() {
                        *r = ReaderConn::default();
                    }
                    continue;
                }
            };
            if check_dead && !closed && (exited.contains(&pid) || !process_alive(pid)) {
                closed = true;
                // Its files go soon: map every pool the messages still in
                // this inbox may point into, while they are there.
                self.map_pools(r, pid, pub_id);
            }
            if r.claim != Some((pid, pub_id, generation)) {
                *r = ReaderConn {
                    claim: Some((pid, pub_id, generation)),
                    ..ReaderConn::default()
                };
                // A publisher this reader has not seen: count it matched
                // before its first message is handed over (discovery's own
                // pass may come later), and have discovery watch it.
                let mut writers = self.writers.lock().unwrap_or_else(|e| e.into_inner());
                if !writers.contains(&pid) {
                    writers.push(pid);
                }
                drop(writers);
                if !counted {
                    owner.links_changed();
                    counted = true;
                }
            }
            // The publisher's gid is made of its pid and the serial its
            // endpoint id carries (see `endpoint_id`).
            let serial = (pub_id & 0xff_ffff) as u32;
            let mut drained = true;
            // Whether descriptors waited behind the last one taken (when
            // it is held, the only one, it is handed back without asking
            // the ring again).
            let mut more = true;
            loop {
                if let Some(h) = held.take() {
                    if !more {
                        held = Some(h);
                        break;
                    }
                    owner.deliver(Arrived::Kept(h.bytes), true, h.lifetime, h.origin);
                    may_hold = false;
                }
                // A full keep_all subscription leaves the rest in the inbox:
                // the publisher then refuses more (an error it reports, never
                // a silent drop), and the reader comes back when it has room.
                if !owner.has_room() {
                    drained = !inbox.has_data(i);
                    break;
                }
                let (d, stamp) = match inbox.pop_next(i) {
                    Ok(Some(p)) => {
                        more = p.more;
                        (p.desc, p.stamp)
                    }
                    Ok(None) => break,
                    Err(e) => {
                        tracing::warn!("{e}");
                        lost += 1;
                        continue;
                    }
                };
                match self.read(r, i, pid, pub_id, generation, d) {
                    Ok(bytes) => {
                        let origin = Origin::island(pid, serial, stamp.sent_ns);
                        let lifetime = lifetime(stamp.expires);
                        if may_hold {
                            held = Some(Held {
                                bytes,
                                lifetime,
                                origin,
                            });
                            continue;
                        }
                        owner.deliver(Arrived::Kept(bytes), true, lifetime, origin)
                    }
                    Err(e) => {
                        tracing::warn!("dropped a message from process {pid}: {e}");
                        lost += 1;
                    }
                }
            }
            match inbox.lost_since(i, &mut r.lost_seen) {
                Ok(n) => lost += n,
                Err(e) => tracing::warn!("{e}"),
            }
            // A closed connection is freed once it is drained (its last
            // messages may still wait for room).
            if closed && drained {
                // Its publisher left these messages' pools to the readers
                // behind: this one is done with them.
                if inbox.take_owed(i) {
                    myelin_shm::pool::release_handed_off(self.dom.id, pid, pub_id);
                }
                inbox.free(i, st);
                *r = ReaderConn::default();
                freed = true;
            }
        }
        if freed {
            self.live_claims.store(NEVER_LOOKED, Ordering::Relaxed);
        }
        drop(pass);
        drop(readers);
        if freed {
            // A publisher shut out while every block was taken tries
            // again when it hears of this inbox.
            self.dom.announce(Change::Changed, &self.key);
        }
        if lost > 0 {
            owner.count_lost(lost);
        }
        held
    }

    /// Look at every connection block: `live` becomes the blocks claimed
    /// now or by this reader before, mirrored in `live_bits`, as of the
    /// inbox's claim count `claims` (read before the look). Called under
    /// the readers' lock.
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn look(&self, conns: &[ReaderConn], live: &mut Vec<usize>, claims: u64) {
        let inbox = &self.inbox.inbox;
        live.clear();
        live.extend(
            (0..conns.len()).filter(|&i| {
                conns[i].claim.is_some() || !matches!(inbox.state(i), ConnState::Free)
            }),
        );
        for (w, bits) in self.live_bits.iter().enumerate() {
            let word = live
                .iter()
                .filter(|&&i| i / 64 == w)
                .fold(0u64, |b, &i| b | 1 << (i % 64));
            bits.store(word, Ordering::Relaxed);
        }
        // SYNC: Release after the bits: `has_data` that reads this
        // count (Acquire) reads these bits or later ones.
        self.live_claims.store(claims, Ordering::Release);
    }

    /// Map every pool of publisher `pub_id` of process `pid` not mapped
    /// yet (pools are numbered from 0 and never removed while their
    /// publisher lives, so the first missing one ends the list).
    fn map_pools(&self, r: &mut ReaderConn, pid: u32, pub_id: u64) {
        for p in 0..=u8::MAX as usize {
            if r.pools.get(p).is_some_and(Option::is_some) {
                continue;
            }
            let Ok(name) = SegmentName::new(self.dom.id, &format!("k_{pid}_{pub_id}_{p}")) else {
                return;
            };
            let Ok(pool) = PoolReader::open(&name, self.ty.hash.0) else {
                return;
            };
            if r.pools.len() <= p {
                r.pools.resize(p + 1, None);
            }
            r.pools[p] = Some(Arc::new(MappedPool::new(pool, self.inbox.clone())));
        }
    }

    /// The bytes a descriptor points at, read in place.
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn read(
        &self,
        r: &mut ReaderConn,
        conn: usize,
        pid: u32,
        pub_id: u64,
        generation: u32,
        d: Desc,
    ) -> Result<SharedBytes, TransportError> {
        let p = d.pool as usize;
        if r.pools.len() <= p {
            r.pools.resize(p + 1, None);
        }
        if r.pools[p].is_none() {
            let name = SegmentName::new(self.dom.id, &format!("k_{pid}_{pub_id}_{p}"))
                .map_err(|e| TransportError::new("naming the publisher's pool", e))?;
            let pool = PoolReader::open(&name, self.ty.hash.0)
                .map_err(|e| TransportError::new("opening the publisher's pool", e))?;
            r.pools[p] = Some(Arc::new(MappedPool::new(pool, self.inbox.clone())));
        }
        let mapped = r.pools[p].as_ref().expect("opened above");
        let ptr = mapped
            .pool
            .chunk(d.chunk, d.len)
            .map_err(|e| TransportError::new("reading a chunk", e))?;
        let lease = ReaderLease {
            mapped: mapped.clone(),
            conn,
            generation,
            key: d.key(),
        };
        // The slab's length is a power of two.
        let slot = d.chunk as usize & (mapped.leases.len().wrapping_sub(1));
        // SAFETY: claims on this slab are serialised: it belongs to this
        // reader's connection `r`, borrowed mutably (under the readers'
        // lock).
        match unsafe { mapped.leases.claim(slot, lease) } {
            // SAFETY: `ptr..ptr+len` is inside the pool mapping (checked by
            // `PoolReader::chunk`), which the lease's value keeps mapped;
            // the publisher does not rewrite the chunk until this process
            // gives it back, which the value does when the last lease (held
            // by the bytes and their clones) drops.
            Ok(lease) => Ok(unsafe { SharedBytes::from_lease(ptr, d.len as usize, lease) }),
            Err(lease) => {
                // SAFETY: as above, the `Arc` holding the value.
                Ok(unsafe { SharedBytes::from_raw(ptr, d.len as usize, Arc::new(lease)) })
            }
        }
    }

    /// Report remote publishers whose QoS this subscription cannot match
    /// (once each).
    fn check_publishers(&self, found: &[Found], owner: &dyn SubOwner, exited: &[u32]) {
        for f in found {
            if !f.alive || f.info.kind != EndpointKind::Publisher || f.info.topic != self.topic {
                continue;
            }
            if !self.ty.any
                && !super::qos::is_any_info(&f.info)
                && (f.info.type_name != self.ty.name || f.info.type_hash != self.ty.hash.0)
            {
                // Same topic, another type: never matched; said once.
                if self
                    .refused
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(f.name.file_name().to_string())
                {
                    crate::transport::warn_incompatible_type(
                        &self.topic,
                        (self.ty.name, &self.ty.hash.to_string()),
                        (&f.info.type_name, &format!("{:016x}", f.info.type_hash)),
                        &format!("a publisher in process {}", f.info.pid),
                    );
                    owner.incompatible_type();
                }
                continue;
            }
            if let Err(why) = decode_qos(&f.info.qos).compatible_with(&self.qos) {
                if self
                    .refused
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(f.name.file_name().to_string())
                {
                    owner.incompatible_qos(why.policy);
                }
                continue;
            }
            if self.full_for(f, exited)
                && self
                    .refused
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(f.name.file_name().to_string())
            {
                tracing::error!(
                    "topic {:?}: a publisher in process {} cannot connect: all {} connection blocks of this subscription's shared-memory inbox are taken; raise SubscriptionOptions::max_publishers (at most {MAX_CONNECTIONS})",
                    self.topic,
                    f.info.pid,
                    self.inbox.inbox.connections()
                );
                owner.incompatible_qos(QosPolicy::ResourceLimits);
            }
        }
    }

    /// Whether the publisher `f` is shut out: not connected, and every
    /// connection block held by another live publisher (none free, none
    /// being claimed: a claim in progress may be its own; none closed or
    /// held by a process that died (in `exited` or gone): those are freed
    /// once drained, and it may take their place).
    fn full_for(&self, f: &Found, exited: &[u32]) -> bool {
        let inbox = &self.inbox.inbox;
        (0..inbox.connections()).all(|i| match inbox.state(i) {
            ConnState::Active { pid, pub_id, .. } => {
                (pid, pub_id) != (f.info.pid, f.info.id)
                    && !exited.contains(&pid)
                    && process_alive(pid)
            }
            _ => false,
        })
    }
}

impl SubShm {
    /// Rewrite the inbox header if another process of this user damaged
    /// it (publishers would skip it and this subscription would go
    /// silent), and tell the domain so they connect again.
    fn repair(&self) {
        if !self.inbox.inbox.repair() {
            return;
        }
        // SYNC: Relaxed: a counter for the log only.
        let n = self
            .repairs
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = self.inbox.inbox.path();
        if n == 0 {
            tracing::warn!(
                "shared memory {path}: the inbox header was damaged; rewritten (publishers reconnect)"
            );
        } else {
            tracing::debug!(
                "shared memory {path}: the inbox header was damaged again ({} times); rewritten",
                n + 1
            );
        }
        self.dom.announce(Change::Changed, &self.key);
    }
}

impl Discovered for SubShm {
    fn rescan(self: Arc<Self>, found: &[Found], exited: &[u32]) {
        let Some(owner) = self.owner() else { return };
        self.repair();
        // Drain and free the connections of publishers that died.
        let exited: Vec<u32> = found
            .iter()
            .filter(|f| !f.alive)
            .map(|f| f.info.pid)
            .chain(exited.iter().copied())
            .collect();
        self.pump_inner(&*owner, true, &exited);
        // Announced publishers with incompatible QoS raise the event here
        // (after the dead ones' blocks were freed: a publisher restarted
        // in their place is not shut out).
        self.check_publishers(found, &*owner, &exited);
        // Matched = connected: once counted, messages flow.
        owner.links_changed();
    }

    fn check_own(&self) {
        self.repair();
    }

    fn take_writers(&self) -> Vec<u32> {
        std::mem::take(&mut *self.writers.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl SubLink for SubShm {
    fn start(&self, owner: Weak<dyn SubOwner>) -> Result<(), TransportError> {
        let _ = self.owner.set(owner);
        // Now complete: publishers in other processes may connect.
        self.dom.announce(Change::Added, &self.key);
        Ok(())
    }

    fn connected(&self) -> usize {
        (0..self.inbox.inbox.connections())
            .filter(|i| matches!(self.inbox.inbox.state(*i), ConnState::Active { .. }))
            .count()
    }

    fn liveliness(&self) -> (usize, usize) {
        let inbox = &self.inbox.inbox;
        if self.qos.liveliness.lease.is_none() {
            // Without a lease of its own the subscription has no checker
            // to notice a lapse: every connected publisher counts alive
            // (as over zenoh).
            return (self.connected(), 0);
        }
        let now = myelin_shm::monotonic_ns();
        (0..inbox.connections())
            .filter(|i| matches!(inbox.state(*i), ConnState::Active { .. }))
            .fold((0, 0), |(a, n), i| {
                if inbox.alive(i, now) {
                    (a + 1, n)
                } else {
                    (a, n + 1)
                }
            })
    }

    fn pumped(&self) -> bool {
        true
    }

    fn set_wake(&self, word: Option<u32>) {
        self.inbox.inbox.set_wake_slot(word.unwrap_or(u32::MAX));
    }

    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn pump(&self, owner: &dyn SubOwner) {
        self.pump_inner(owner, false, &[]);
    }

    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn pump_take(&self, owner: &dyn SubOwner) -> Option<Held> {
        let readers = self.readers.lock().unwrap_or_else(|e| e.into_inner());
        self.pump_locked(owner, readers, false, &[], true)
    }

    fn settle(&self, owner: &dyn SubOwner, patience: std::time::Duration) {
        if self.pass_thread.load(Ordering::Relaxed) == this_thread() {
            return; // called from a callback of this link's own pass
        }
        let deadline = crate::clock::deadline_after(patience);
        loop {
            match self.readers.try_lock() {
                Ok(g) => return drop(self.pump_locked(owner, g, false, &[], false)),
                Err(std::sync::TryLockError::Poisoned(p)) => {
                    return drop(self.pump_locked(owner, p.into_inner(), false, &[], false));
                }
                Err(std::sync::TryLockError::WouldBlock) => {
                    if std::time::Instant::now() >= deadline {
                        return;
                    }
                    std::thread::sleep(std::time::Duration::from_micros(50));
                }
            }
        }
    }

    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn has_data(&self) -> bool {
        let inbox = &self.inbox.inbox;
        // SYNC: Acquire pairs with the Release store after the bits in
        // `pump_locked`.
        let seen = self.live_claims.load(Ordering::Acquire);
        let claims = inbox.claims();
        if seen == NEVER_LOOKED || claims != seen {
            // A block may have been claimed since the last look: ask all.
            if (0..inbox.connections()).any(|i| inbox.has_data(i)) {
                return true; // the pump's pass looks again
            }
            // A publisher connected and sent nothing yet: no pass would
            // look again until it does, and every poll would ask all the
            // blocks. Look now, unless a pass is under way (it will).
            if let Ok(mut readers) = self.readers.try_lock() {
                let Readers { conns, live } = &mut *readers;
                self.look(conns, live, claims);
            }
            return false;
        }
        // Only the blocks in use (a freed one still listed answers no).
        self.live_bits.iter().enumerate().any(|(w, bits)| {
            let mut b = bits.load(Ordering::Relaxed);
            while b != 0 {
                if inbox.has_data(w * 64 + b.trailing_zeros() as usize) {
                    return true;
                }
                b &= b - 1;
            }
            false
        })
    }
}

impl SubShm {
    /// At this process's exit, this subscription gives back what leaving
    /// publishers handed to it, as when it is dropped (a subscription a
    /// background thread still holds when `main` returns is never
    /// dropped); then its inbox file goes.
    pub(super) fn own_exit_rule(self: &Arc<Self>) {
        let rule = Arc::new(SubExitRule(Arc::downgrade(self)));
        myelin_shm::remove_at_exit_unless_needed(
            std::path::Path::new(&self.inbox.inbox.path()),
            rule,
        );
    }

    /// The subscription leaves: the pools handed to it by publishers that
    /// left are released (it maps no more of them; messages it holds keep
    /// their mappings), and publishers leaving from now on keep its share
    /// themselves.
    fn leave(&self, at_exit: bool) {
        // A pass on another thread may be releasing a hand-off right now
        // (it takes the flag under this lock, then removes files): at exit
        // that thread is cut short when this one returns, so let it finish
        // first (a file was left half released).
        // This thread may be the pass itself: `exit` called by an inline
        // callback the pass runs. Waiting for it would wait out the bound
        // for nothing (the pass resumes only after us); its state is as
        // consistent as between two messages.
        // SYNC: Relaxed: only this thread's own store can make it equal
        // (another live thread's number is never ours; a pass clears its
        // number even when it unwinds).
        if self.pass_thread.load(Ordering::Relaxed) == this_thread() {
            return self.give_back();
        }
        let pass = lock_within(&self.readers, &mut crate::clock::Pacer::new(LEAVE_WAIT));
        if pass.is_none() {
            let why = format!(
                "shared memory: a leaving subscription of {:?} gave up waiting {LEAVE_WAIT:?} \
                 for another thread's pass over its inbox; pools handed to it may stay until \
                 the dead-process sweep",
                self.topic
            );
            if at_exit {
                // Not `tracing` in an exit rule: its formatter keeps a
                // thread-local buffer that `exit` may have destroyed
                // already, and a panic here (an `atexit` handler) aborts.
                use std::io::Write;
                let _ = writeln!(std::io::stderr(), "WARN {why}");
            } else {
                tracing::warn!("{why}");
            }
        }
        self.give_back();
    }

    /// [`leave`](Self::leave) once no other thread's pass is releasing a
    /// hand-off.
    fn give_back(&self) {
        let inbox = &self.inbox.inbox;
        inbox.leave();
        for i in 0..inbox.connections() {
            if let ConnState::Active { pid, pub_id, .. } | ConnState::Closed { pid, pub_id, .. } =
                inbox.state(i)
                && inbox.take_owed(i)
            {
                myelin_shm::pool::release_handed_off(self.dom.id, pid, pub_id);
            }
        }
    }
}

/// This thread, as a number no other live thread has: the address of a
/// thread-local (no destructor: `exit` destroys a thread's locals that
/// have one before it runs the exit rules that ask this).
fn this_thread() -> usize {
    thread_local! {
        static MARK: u8 = const { 0 };
    }
    MARK.with(|m| m as *const u8 as usize)
}

/// A subscription's [`SubShm::pass_thread`] set to this thread until
/// dropped (also when the pass unwinds: thread numbers are reused once a
/// thread is gone, so a stale one could match another thread later).
struct PassMark<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> PassMark<'a> {
    fn enter(mark: &'a std::sync::atomic::AtomicUsize) -> PassMark<'a> {
        // SYNC: Relaxed: read only by this thread (see `SubShm::leave`).
        mark.store(this_thread(), Ordering::Relaxed);
        PassMark(mark)
    }
}

impl Drop for PassMark<'_> {
    fn drop(&mut self) {
        self.0.store(0, Ordering::Relaxed);
    }
}

/// A subscription's inbox at exit.
struct SubExitRule(Weak<SubShm>);

impl NeededAtExit for SubExitRule {
    /// Never: the inbox goes at exit, after giving back its shares (a
    /// dropped subscription gave them back already).
    fn needed(&self) -> bool {
        if let Some(sub) = self.0.upgrade() {
            sub.leave(true);
        }
        false
    }
}

impl Drop for SubShm {
    fn drop(&mut self) {
        // The inbox itself may live on while its last messages are in
        // use; its name goes now, so no publisher connects any more.
        self.inbox.inbox.unlink();
        self.leave(false);
        self.dom.announce(Change::Removed, &self.key);
    }
}

/// How much longer a message stamped to expire at `expires` (the host's
/// monotonic clock; 0: never) may be delivered.
fn lifetime(expires: u64) -> Option<Duration> {
    // Only a message that expires costs a clock read.
    (expires != 0)
        .then(|| crate::clock::left_ns(myelin_shm::monotonic_ns(), expires))
        .flatten()
}

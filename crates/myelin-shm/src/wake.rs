//! A process's wake-up table: futex events in shared memory, one per
//! executor (or blocked waiter), that other processes notify.
//!
//! One segment per process, `myelin_<uid>_h_w_<pid>_<tag>` (the tag random, see [`WakeTable::tag`]), of [`WAKE_SLOTS`]
//! cache-line sized slots: `[epoch, waiters]` (a [`SharedEvent`]), a
//! `pending` word, and a bitmap of [`WAKE_LANES`] ready lanes. A waiter
//! (an executor) gives each inbox it drains a lane; a remote publisher sets
//! that inbox's lane bit, then `pending`, then notifies. So one wait serves
//! the whole executor, and the wake-up says which inboxes have data: the
//! executor drains those, not all of them (an executor with 100 inboxes and
//! one busy topic does work for one). More than [`WAKE_LANES`] inboxes on
//! one executor share lanes (a shared lane drains a few empty inboxes).
//!
//! The word an inbox publishes for its publishers ([`wake_word`]) carries
//! the slot (low 16 bits) and the lane (high 16 bits); it comes from
//! another process, so [`WakeTable::signal`] validates it.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use myelin_sync::SharedEvent;

use crate::ShmError;
use crate::segment::{HEADER_SIZE, KIND_WAKE, Segment, SegmentName};

/// Slots per process.
pub const WAKE_SLOTS: u32 = 256;
/// Ready lanes per slot (the bitmap in the slot's last 48 bytes).
pub const WAKE_LANES: u32 = 384;
const SLOT: usize = 64;
/// Offset of the pending word and of the lane bitmap within a slot.
const OFF_PENDING: usize = 8;
const OFF_LANES: usize = 16;
const LANE_WORDS: usize = WAKE_LANES as usize / 64;

/// The word publishers are told to signal: `slot` of the waiter's table,
/// `lane` within it (taken modulo [`WAKE_LANES`]).
pub fn wake_word(slot: u32, lane: u32) -> u32 {
    (slot & 0xffff) | ((lane % WAKE_LANES) << 16)
}

/// The lanes a wake-up marked ready (see [`WakeSlot::take_lanes`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lanes([u64; LANE_WORDS]);

impl Lanes {
    /// Every lane marked (a waiter that could not be signalled looks at
    /// all its inboxes).
    pub fn all() -> Lanes {
        Lanes([u64::MAX; LANE_WORDS])
    }

    /// Whether no lane is marked.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|w| *w == 0)
    }

    /// The marked lanes, in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().enumerate().flat_map(|(i, w)| {
            let mut w = *w;
            std::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let b = w.trailing_zeros();
                w &= w - 1;
                Some(i as u32 * 64 + b)
            })
        })
    }
}

/// A table's name: its process and an unguessable tag, so another local
/// user cannot plant a file at the name of a process about to start (its
/// pid is easy to guess) and deny it shared memory.
fn name_for(pid: u32, tag: u64) -> Result<SegmentName, ShmError> {
    SegmentName::host(&format!("w_{pid}_{tag:016x}"))
}

/// A fresh random tag (SipHash keyed from the OS's randomness).
fn random_tag() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::process::id()).max(1)
}

/// This process's wake-up table (or another process's, opened to notify).
pub struct WakeTable {
    seg: Segment,
    used: Mutex<Vec<bool>>,
    pid: u32,
    tag: u64,
}

impl WakeTable {
    /// Create this process's table (replacing a stale one of a dead process
    /// that had the same pid).
    pub fn create() -> Result<Arc<WakeTable>, ShmError> {
        let pid = std::process::id();
        let tag = random_tag();
        let seg = Segment::create_fresh(
            &name_for(pid, tag)?,
            HEADER_SIZE + WAKE_SLOTS as usize * SLOT,
        )?;
        seg.publish_header(KIND_WAKE, pid);
        Ok(Arc::new(WakeTable {
            seg,
            used: Mutex::new(vec![false; WAKE_SLOTS as usize]),
            pid,
            tag,
        }))
    }

    /// Remove this table's file when the process exits normally (return
    /// from `main`, `std::process::exit`, Ctrl-C handled by a context): a
    /// process-wide table lives in a static, whose destructor never runs.
    /// A process killed outright leaves it to the survivors' sweep
    /// (`cleanup_stale_host`). A forked child that exits leaves its
    /// parent's table alone.
    pub fn remove_at_exit(&self) {
        // Every segment this process creates is removed at its exit while
        // it owns it (`segment::remove_at_exit`); this says so for the
        // table, which lives in a static and is never dropped.
        crate::segment::remove_at_exit(&self.seg.path);
    }

    /// Open the table of process `pid` to notify its slots; `tag` is the
    /// table's [`tag`](Self::tag), which that process's endpoints
    /// announce.
    pub fn open(pid: u32, tag: u64) -> Result<WakeTable, ShmError> {
        let seg = Segment::open_kind(&name_for(pid, tag)?, KIND_WAKE)?;
        if seg.len() != HEADER_SIZE + WAKE_SLOTS as usize * SLOT {
            return Err(ShmError::BadHeader {
                path: seg.path_str(),
                what: format!("wake table of {} bytes", seg.len()),
            });
        }
        Ok(WakeTable {
            seg,
            used: Mutex::new(Vec::new()),
            pid,
            tag,
        })
    }

    /// The process this table belongs to.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The random part of the table's name, which the process's endpoints
    /// announce ([`EndpointInfo::wake_tag`](crate::endpoint::EndpointInfo::wake_tag))
    /// so publishers can open it.
    pub fn tag(&self) -> u64 {
        self.tag
    }

    /// Take a free slot (this process's table only).
    pub fn alloc(self: &Arc<Self>) -> Option<WakeSlot> {
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        let idx = used.iter().position(|u| !u)?;
        used[idx] = true;
        Some(WakeSlot {
            table: self.clone(),
            idx: idx as u32,
        })
    }

    #[inline]
    fn event(&self, idx: u32) -> &SharedEvent {
        self.seg.event(HEADER_SIZE + idx as usize * SLOT)
    }

    #[inline]
    fn pending(&self, idx: u32) -> &AtomicU32 {
        self.seg
            .atomic_u32(HEADER_SIZE + idx as usize * SLOT + OFF_PENDING)
    }

    #[inline]
    fn lane_word(&self, idx: u32, word: usize) -> &AtomicU64 {
        self.seg
            .atomic_u64(HEADER_SIZE + idx as usize * SLOT + OFF_LANES + 8 * word)
    }

    /// Mark the lane of `word` (see [`wake_word`]) ready, mark its slot
    /// pending and wake its waiter. `word` comes from another process's
    /// segment: a slot out of range is refused, a lane is taken modulo
    /// [`WAKE_LANES`] (a wrong lane costs the waiter one empty drain).
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    pub fn signal(&self, word: u32) -> Result<(), ShmError> {
        let idx = word & 0xffff;
        let lane = (word >> 16) % WAKE_LANES;
        if idx >= WAKE_SLOTS {
            return Err(self.bad_slot(idx));
        }
        // SYNC: the lane bit (SeqCst) before `pending` (SeqCst): a waiter
        // that takes `pending` and then the lane words sees every lane set
        // before the `pending` store it consumed (`take_lanes`).
        self.lane_word(idx, lane as usize / 64)
            .fetch_or(1 << (lane % 64), Ordering::SeqCst);
        // SYNC: a SeqCst read-modify-write (not a store), then the event
        // only if someone waits: every waiter's check reads `pending` with
        // a SeqCst load or swap after registering (executors, wait sets and
        // the inline pump: `is_pending`; a polling subscription's
        // `wait_for_message`: `take_pending`), so either our waiters load
        // sees it registered and the epoch moves, or its check sees this
        // swap (and, through it, the messages pushed before). Nobody
        // waiting, a signal costs no epoch increment (a locked instruction
        // on every message). Modelled in myelin-sync's loom tests
        // (`wake_slot_signal_without_epoch_loses_no_wakeup`).
        self.pending(idx).swap(1, Ordering::SeqCst);
        self.event(idx).notify_if_waiting();
        Ok(())
    }

    /// Mark the lane of `word` ready and its slot pending without waking
    /// anyone, when nobody sleeps on the slot: a publisher warming the
    /// path of its next message (`Publisher::warm`) makes a polling
    /// executor drain the inbox behind the lane, which finds nothing.
    /// Returns whether it marked; a sleeping waiter is left alone (a
    /// wake-up ahead of time costs more than it saves), and one that goes
    /// to sleep meanwhile sees the mark, drains nothing, and sleeps.
    /// `word` is checked as [`signal`](Self::signal) checks it.
    ///
    /// ```
    /// use myelin_shm::wake::{WakeTable, wake_word};
    /// let table = WakeTable::create()?;
    /// let slot = table.alloc().expect("a free slot");
    /// // Nobody sleeps on the slot: the lane is marked, nobody is woken.
    /// assert!(table.rehearse(wake_word(slot.index(), 3))?);
    /// assert_eq!(slot.take_lanes().map(|l| l.iter().collect::<Vec<_>>()), Some(vec![3]));
    /// # Ok::<(), myelin_shm::ShmError>(())
    /// ```
    pub fn rehearse(&self, word: u32) -> Result<bool, ShmError> {
        let idx = word & 0xffff;
        let lane = (word >> 16) % WAKE_LANES;
        if idx >= WAKE_SLOTS {
            return Err(self.bad_slot(idx));
        }
        if self.event(idx).has_waiters() {
            return Ok(false);
        }
        // SYNC: as in `signal`: the lane bit, then `pending` (a waiter that
        // registered after the check above sees `pending` in its own check
        // and does not sleep).
        self.lane_word(idx, lane as usize / 64)
            .fetch_or(1 << (lane % 64), Ordering::SeqCst);
        self.pending(idx).swap(1, Ordering::SeqCst);
        Ok(true)
    }

    /// A wake word naming a slot past the table (from another process).
    #[cold]
    fn bad_slot(&self, idx: u32) -> ShmError {
        ShmError::Corrupt {
            path: self.seg.path_str(),
            what: "wake slot",
            value: u64::from(idx),
            limit: u64::from(WAKE_SLOTS - 1),
        }
    }
}

impl std::fmt::Debug for WakeTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WakeTable").field("pid", &self.pid).finish()
    }
}

/// One slot of this process's table; freed when dropped.
pub struct WakeSlot {
    table: Arc<WakeTable>,
    idx: u32,
}

impl WakeSlot {
    /// The slot's index (what other processes are told to signal).
    pub fn index(&self) -> u32 {
        self.idx
    }

    /// The futex event waiters sleep on.
    #[inline]
    pub fn event(&self) -> &SharedEvent {
        self.table.event(self.idx)
    }

    /// Whether a remote process signalled since the last call (clears the
    /// mark and the lanes).
    #[inline]
    pub fn take_pending(&self) -> bool {
        self.take_lanes().is_some()
    }

    /// The lanes remote processes marked ready since the last call (clears
    /// them), or `None` when nothing was signalled.
    #[inline]
    pub fn take_lanes(&self) -> Option<Lanes> {
        // SYNC: the cheap load first (an executor looks at every turn, and
        // nothing is pending almost always); the swap (SeqCst, pairs with
        // the store in `signal`) only when set, out of line.
        if self.table.pending(self.idx).load(Ordering::Relaxed) == 0 {
            return None;
        }
        self.take_marked()
    }

    /// [`take_lanes`](Self::take_lanes) once `pending` was seen set.
    #[inline(never)]
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn take_marked(&self) -> Option<Lanes> {
        if self.table.pending(self.idx).swap(0, Ordering::SeqCst) == 0 {
            return None;
        }
        let mut lanes = Lanes::default();
        for (i, w) in lanes.0.iter_mut().enumerate() {
            let a = self.table.lane_word(self.idx, i);
            // SYNC: after the `pending` swap (SeqCst): every lane set before
            // a `pending` store we consumed is visible here. A lane set after
            // it is taken now or with the next `pending`.
            if a.load(Ordering::Relaxed) != 0 {
                *w = a.swap(0, Ordering::SeqCst);
            }
        }
        Some(lanes)
    }

    /// Whether a remote signal is pending (without clearing it).
    #[inline]
    pub fn is_pending(&self) -> bool {
        self.table.pending(self.idx).load(Ordering::SeqCst) != 0
    }
}

impl Drop for WakeSlot {
    fn drop(&mut self) {
        let mut used = self.table.used.lock().unwrap_or_else(|e| e.into_inner());
        used[self.idx as usize] = false;
    }
}

impl std::fmt::Debug for WakeSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WakeSlot")
            .field("pid", &self.table.pid)
            .field("index", &self.idx)
            .finish()
    }
}

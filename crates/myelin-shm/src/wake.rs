//! A process's wake-up table: futex events in shared memory, one per
//! executor (or blocked waiter), that other processes notify.
//!
//! One segment per process, `myelin_<uid>_h_w_<pid>`, of [`WAKE_SLOTS`]
//! cache-line sized slots: `[epoch, waiters]` (a [`SharedEvent`]) and a
//! `pending` word a remote publisher sets before notifying, so the executor
//! knows to look at its remote inboxes (one wait for the whole executor,
//! not one per subscription).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use myelin_sync::SharedEvent;

use crate::ShmError;
use crate::segment::{HEADER_SIZE, KIND_WAKE, Segment, SegmentName};

/// Slots per process.
pub const WAKE_SLOTS: u32 = 256;
const SLOT: usize = 64;

fn name_for(pid: u32) -> Result<SegmentName, ShmError> {
    SegmentName::host(&format!("w_{pid}"))
}

/// This process's wake-up table (or another process's, opened to notify).
pub struct WakeTable {
    seg: Segment,
    used: Mutex<Vec<bool>>,
    pid: u32,
}

impl WakeTable {
    /// Create this process's table (replacing a stale one of a dead process
    /// that had the same pid).
    pub fn create() -> Result<Arc<WakeTable>, ShmError> {
        let pid = std::process::id();
        let seg = Segment::create_fresh(&name_for(pid)?, HEADER_SIZE + WAKE_SLOTS as usize * SLOT)?;
        seg.publish_header(KIND_WAKE, pid);
        Ok(Arc::new(WakeTable {
            seg,
            used: Mutex::new(vec![false; WAKE_SLOTS as usize]),
            pid,
        }))
    }

    /// Open the table of process `pid` to notify its slots.
    pub fn open(pid: u32) -> Result<WakeTable, ShmError> {
        let seg = Segment::open_kind(&name_for(pid)?, KIND_WAKE)?;
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
        })
    }

    /// The process this table belongs to.
    pub fn pid(&self) -> u32 {
        self.pid
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

    fn event(&self, idx: u32) -> &SharedEvent {
        self.seg.event(HEADER_SIZE + idx as usize * SLOT)
    }

    fn pending(&self, idx: u32) -> &AtomicU32 {
        self.seg.atomic_u32(HEADER_SIZE + idx as usize * SLOT + 8)
    }

    /// Mark slot `idx` pending and wake its waiter. `idx` comes from another
    /// process's segment: out-of-range values are refused.
    pub fn signal(&self, idx: u32) -> Result<(), ShmError> {
        if idx >= WAKE_SLOTS {
            return Err(ShmError::Corrupt {
                path: self.seg.path_str(),
                what: "wake slot",
                value: u64::from(idx),
                limit: u64::from(WAKE_SLOTS - 1),
            });
        }
        // SYNC: SeqCst, before the event's SeqCst epoch increment: a waiter
        // that sees the new epoch (or re-checks after registering) sees
        // `pending`.
        self.pending(idx).store(1, Ordering::SeqCst);
        self.event(idx).notify();
        Ok(())
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
    pub fn event(&self) -> &SharedEvent {
        self.table.event(self.idx)
    }

    /// Whether a remote process signalled since the last call (clears the
    /// mark).
    #[inline]
    pub fn take_pending(&self) -> bool {
        let p = self.table.pending(self.idx);
        // SYNC: the cheap load first; the swap (SeqCst, pairs with the store
        // in `signal`) only when set.
        p.load(Ordering::Relaxed) != 0 && p.swap(0, Ordering::SeqCst) != 0
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

//! The copy rules: how one publish reaches the matched subscriptions in
//! this context (see the table in the [module docs](super)), and how
//! refusals and inline-callback panics are reported.

use std::collections::VecDeque;
use std::sync::Arc;

use super::PubInner;
use crate::buffer::Pushed;
use crate::error::PublishError;
use crate::message::Message;
use crate::subscription::SubInner;
use crate::transport::SubOwner;

/// The subscriptions a publisher delivers to, split by how they take a
/// message (the split the copy rules need: see [the module docs](super)).
pub(crate) struct Matched<T> {
    /// Want ownership: get the original (last one) or a copy.
    pub(crate) owners: Vec<Arc<SubInner<T>>>,
    /// Share one `Arc`.
    pub(crate) sharers: Vec<Arc<SubInner<T>>>,
    /// Always get their own copy.
    pub(crate) values: Vec<Arc<SubInner<T>>>,
    /// The subscriptions among the above a publish waits for when full
    /// (reliable keep_all, with a reliable publisher that may block; see
    /// [`QoS::waits_for`](crate::QoS)).
    pub(crate) paced: Vec<Arc<SubInner<T>>>,
    /// More than one subscription takes a message: a publish prefetches
    /// (set by [`sealed`](Self::sealed) when the lists are built, so that
    /// a publish to one subscription pays one branch for it).
    fanout: bool,
    /// One subscription, which owns what it takes: an owned message is
    /// moved into it and nothing else is done (set by `sealed`).
    sole_owner: bool,
}

impl<T> Default for Matched<T> {
    fn default() -> Self {
        Matched {
            owners: Vec::new(),
            sharers: Vec::new(),
            values: Vec::new(),
            paced: Vec::new(),
            fanout: false,
            sole_owner: false,
        }
    }
}

impl<T: crate::Message> Matched<T> {
    /// Before a delivery to more than one subscription: ask for every
    /// subscription's first lines, then for every buffer's next slot, so
    /// that the cache misses of subscriptions whose memory went cold (an
    /// executor that slept between ticks) overlap instead of coming one
    /// after the other (BENCHMARKS.md, "Fan-out's cold misses, overlapped").
    #[inline]
    pub(crate) fn prefetch(&self) {
        if !self.fanout {
            return;
        }
        for slot in [false, true] {
            for s in self.all() {
                s.prefetch(slot);
            }
        }
    }

    /// The lists complete: note whether a publish fans out.
    pub(crate) fn sealed(mut self) -> Self {
        self.fanout = self.len() >= 2;
        self.sole_owner = self.owners.len() == 1 && self.len() == 1;
        self
    }

    /// Every matched subscription, whatever its copy rule (`paced` is a
    /// subset of these).
    #[inline]
    pub(crate) fn all(&self) -> impl Iterator<Item = &Arc<SubInner<T>>> {
        self.owners.iter().chain(&self.sharers).chain(&self.values)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.owners.is_empty() && self.sharers.is_empty() && self.values.is_empty()
    }
    pub(crate) fn len(&self) -> usize {
        self.owners.len() + self.sharers.len() + self.values.len()
    }
}

impl<T: Message> PubInner<T> {
    /// Wait (up to the QoS's `max_blocking_time`) until every paced
    /// subscription has room; one that still has none refuses the message
    /// as before.
    #[inline]
    pub(super) fn pace(&self, m: &Matched<T>) {
        if !m.paced.is_empty() {
            self.wait_for_room(&m.paced);
        }
    }

    #[cold]
    fn wait_for_room(&self, subs: &[Arc<SubInner<T>>]) {
        if subs.iter().all(|s| s.has_room()) {
            return;
        }
        let mut pacer = crate::clock::Pacer::new(self.qos.max_blocking_time);
        pacer.until(|| subs.iter().all(|s| s.has_room()));
    }

    #[inline]
    pub(super) fn remember(
        &self,
        history: &mut VecDeque<(u64, Arc<T>, u64)>,
        msg: Arc<T>,
        exp: u64,
    ) {
        let depth = self.qos.effective_depth();
        while history.len() >= depth {
            history.pop_front();
        }
        history.push_back((self.node.ctx.graph.next_seq(), msg, exp));
    }

    /// Deliver an owned message following the copy rules.
    #[inline]
    pub(super) fn deliver_owned(
        &self,
        m: &Matched<T>,
        msg: T,
        history: Option<&mut VecDeque<(u64, Arc<T>, u64)>>,
        exp: u64,
    ) -> Full {
        // The common publish (one owning subscription, no history kept):
        // the message moves into it. The rules for the rest are out of
        // line, so that this path's code stays in fewer cache lines (a
        // thread that slept between frames misses every one).
        if m.sole_owner
            && history.is_none()
            && let Some(o) = m.owners.first()
        {
            let mut full = Full::default();
            full.note(o.push_owned(msg, exp, self.origin()), o.limit());
            return full;
        }
        self.deliver_owned_to_all(m, msg, history, exp)
    }

    /// [`deliver_owned`](Self::deliver_owned) to any mix of subscriptions.
    #[inline(never)]
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn deliver_owned_to_all(
        &self,
        m: &Matched<T>,
        msg: T,
        history: Option<&mut VecDeque<(u64, Arc<T>, u64)>>,
        exp: u64,
    ) -> Full {
        m.prefetch();
        let mut full = Full::default();
        for v in &m.values {
            full.note(v.push_owned(msg.clone(), exp, self.origin()), v.limit());
        }
        if m.owners.is_empty() {
            if !m.sharers.is_empty() || history.is_some() {
                let arc = Arc::new(msg);
                for s in &m.sharers {
                    full.note(s.push_shared(arc.clone(), exp, self.origin()), s.limit());
                }
                if let Some(h) = history {
                    self.remember(h, arc, exp);
                }
            }
            return full;
        }
        // Owners present: sharers (and the history) share one copy.
        if !m.sharers.is_empty() || history.is_some() {
            let arc = Arc::new(msg.clone());
            for s in &m.sharers {
                full.note(s.push_shared(arc.clone(), exp, self.origin()), s.limit());
            }
            if let Some(h) = history {
                self.remember(h, arc, exp);
            }
        }
        let (last, rest) = m.owners.split_last().expect("owners is not empty");
        for o in rest {
            full.note(o.push_owned(msg.clone(), exp, self.origin()), o.limit());
        }
        full.note(last.push_owned(msg, exp, self.origin()), last.limit());
        full
    }

    #[inline]
    pub(super) fn deliver_shared(
        &self,
        m: &Matched<T>,
        msg: Arc<T>,
        history: Option<&mut VecDeque<(u64, Arc<T>, u64)>>,
        exp: u64,
    ) -> Full {
        m.prefetch();
        let mut full = Full::default();
        for v in &m.values {
            full.note(v.push_owned((*msg).clone(), exp, self.origin()), v.limit());
        }
        for o in &m.owners {
            full.note(o.push_owned((*msg).clone(), exp, self.origin()), o.limit());
        }
        for s in &m.sharers {
            full.note(s.push_shared(msg.clone(), exp, self.origin()), s.limit());
        }
        if let Some(h) = history {
            self.remember(h, msg, exp);
        }
        full
    }

    #[inline]
    pub(super) fn finish(&self, m: &Matched<T>, full: Full) -> Result<(), PublishError> {
        if full.panicked || full.count > 0 {
            return self.refused_or_panicked(m, full);
        }
        Ok(())
    }

    /// [`finish`](Self::finish) when a subscription refused the message
    /// or an inline callback panicked: the error, out of line.
    #[cold]
    #[inline(never)]
    fn refused_or_panicked(&self, m: &Matched<T>, full: Full) -> Result<(), PublishError> {
        if full.panicked {
            for s in m.all() {
                if let Some((entity, message)) = s.take_inline_panic() {
                    return Err(PublishError::CallbackPanicked { entity, message });
                }
            }
        }
        if full.count > 0 {
            return Err(PublishError::ResourceLimit {
                topic: self.topic.clone(),
                full: full.count,
                limit: full.limit,
            });
        }
        Ok(())
    }
}

/// Subscriptions that refused a message (keep_all at its limit).
#[derive(Default)]
pub(super) struct Full {
    count: usize,
    limit: usize,
    panicked: bool,
}

impl Full {
    /// `count` subscriptions refused, the smallest limit being `limit`.
    #[inline]
    pub(super) fn refused(count: usize, limit: usize) -> Full {
        Full {
            count,
            limit,
            panicked: false,
        }
    }

    /// Add another outcome (the reported limit is the smallest).
    #[inline]
    pub(super) fn merge(&mut self, o: Full) {
        if o.count > 0 {
            self.limit = if self.count == 0 {
                o.limit
            } else {
                self.limit.min(o.limit)
            };
            self.count += o.count;
        }
        self.panicked |= o.panicked;
    }

    #[inline]
    pub(super) fn note(&mut self, p: Pushed, limit: usize) {
        match p {
            Pushed::Refused => self.merge(Full::refused(1, limit)),
            Pushed::Panicked => self.panicked = true,
            Pushed::Stored | Pushed::Overwrote(_) | Pushed::Stretched => {}
        }
    }
}

//! Callback groups: which callbacks a multi-threaded executor may run at the
//! same time.
//!
//! * [`CallbackGroupKind::MutuallyExclusive`] (the default group of every
//!   node, as in ROS 2): at most one callback of the group runs at a time.
//! * [`CallbackGroupKind::Reentrant`]: callbacks of *different* entities of
//!   the group may run in parallel.
//!
//! Whatever the group, one subscription's (or timer's) callback never runs
//! twice at once: callbacks are `FnMut`, and messages of a topic are handled
//! in order. A single-threaded executor never runs two callbacks at once, and
//! inline subscriptions run in the publisher's thread, outside any group.

use std::sync::Arc;

pub use crate::dispatch::CallbackGroupKind;
use crate::dispatch::GroupInner;

/// A callback group. Create with
/// [`Node::create_callback_group`](crate::Node::create_callback_group); pass
/// it in [`SubscriptionOptions::callback_group`](crate::SubscriptionOptions)
/// or to [`Node::create_timer_in`](crate::Node::create_timer_in). Cheap to
/// clone.
#[derive(Clone)]
pub struct CallbackGroup {
    pub(crate) inner: Arc<GroupInner>,
}

impl CallbackGroup {
    /// A new group of `kind`, not tied to a node (rclpy makes groups this
    /// way; [`Node::create_callback_group`](crate::Node::create_callback_group)
    /// is rclcpp's spelling of the same).
    ///
    /// ```
    /// use myelin_core::{CallbackGroup, CallbackGroupKind};
    /// let g = CallbackGroup::new(CallbackGroupKind::Reentrant);
    /// assert_eq!(g.kind(), CallbackGroupKind::Reentrant);
    /// ```
    pub fn new(kind: CallbackGroupKind) -> Self {
        CallbackGroup {
            inner: GroupInner::new(kind),
        }
    }

    /// The kind.
    pub fn kind(&self) -> CallbackGroupKind {
        self.inner.kind
    }
}

impl std::fmt::Debug for CallbackGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallbackGroup")
            .field("kind", &self.inner.kind)
            .finish()
    }
}

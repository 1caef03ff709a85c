//! Subscription callbacks: the signatures a callback may have (`T`,
//! `Box<T>`, `Arc<T>`, `&T`, `Received<T>`, each alone or followed by
//! `&MessageInfo`), which decide the buffer kind when it is
//! `CallbackDefault`.

use std::marker::PhantomData;
use std::sync::Arc;

use super::MessageInfo;
use crate::buffer::Received;
use crate::message::Message;
use crate::message_info::Origin;

/// Markers that tell the callback signatures apart (type inference picks one
/// from the closure's argument types).
pub mod marker {
    /// `FnMut(T)`.
    #[derive(Debug)]
    pub enum ByValue {}
    /// `FnMut(Box<T>)`.
    #[derive(Debug)]
    pub enum ByBox {}
    /// `FnMut(Arc<T>)`.
    #[derive(Debug)]
    pub enum ByArc {}
    /// `FnMut(&T)`.
    #[derive(Debug)]
    pub enum ByRef {}
    /// `FnMut(Received<T>)`: whatever the buffer holds, without conversion.
    #[derive(Debug)]
    pub enum ByReceived {}
    /// `FnMut(T, &MessageInfo)`.
    #[derive(Debug)]
    pub enum ByValueWithInfo {}
    /// `FnMut(Box<T>, &MessageInfo)`.
    #[derive(Debug)]
    pub enum ByBoxWithInfo {}
    /// `FnMut(Arc<T>, &MessageInfo)`.
    #[derive(Debug)]
    pub enum ByArcWithInfo {}
    /// `FnMut(&T, &MessageInfo)`.
    #[derive(Debug)]
    pub enum ByRefWithInfo {}
    /// `FnMut(Received<T>, &MessageInfo)`.
    #[derive(Debug)]
    pub enum ByReceivedWithInfo {}
}

/// A subscription callback: a closure taking `T`, `Box<T>`, `Arc<T>`, `&T`
/// or [`Received<T>`], optionally followed by a
/// [`&MessageInfo`](MessageInfo) (the publisher's gid, timestamps, whether
/// it came in-process), as rclcpp's callbacks may. Annotate the argument
/// types (`|msg: Arc<Image>| ...`, `|msg: &Image, info: &MessageInfo| ...`)
/// so the right signature is chosen.
///
/// ```
/// use myelin_core::{Context, MessageInfo, QoS};
/// let ctx = Context::builder().shared_memory(false).network(false).build()?;
/// let node = ctx.create_node("listener")?;
/// let _sub = node.create_subscription("chatter", QoS::default(), |msg: &String, info: &MessageInfo| {
///     println!("{msg} from {} (in-process: {})", info.publisher_gid(), info.from_intra_process());
/// })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait SubscriptionCallback<T, Marker>: Send + 'static {
    /// Whether this signature wants ownership (decides `CallbackDefault`).
    const WANTS_OWNERSHIP: bool;
    /// Turn into the type-erased form the executor calls (used by
    /// myelin itself; the result is opaque).
    #[doc(hidden)]
    fn into_dispatch(self) -> Dispatch<T>;
}

/// Implement [`SubscriptionCallback`] for a closure of `$arg` alone and
/// for one of `$arg` followed by `&MessageInfo`, converting the buffered
/// [`Received`] with `$convert`.
macro_rules! signatures {
    ($marker:ident, $with_info:ident, $owns:expr, |$r:ident| $convert:expr, $($arg:tt)+) => {
        impl<T: Message, F: for<'a> FnMut($($arg)+) + Send + 'static>
            SubscriptionCallback<T, marker::$marker> for F
        {
            const WANTS_OWNERSHIP: bool = $owns;
            fn into_dispatch(self) -> Dispatch<T> {
                Dispatch(Box::new(Adapter::<F, marker::$marker>(self, PhantomData)))
            }
        }

        impl<T: Message, F: for<'a> FnMut($($arg)+) + Send + 'static> Call<T>
            for Adapter<F, marker::$marker>
        {
            // SAFETY: hot text is executable code (see `myelin_sync::hot`).
            #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
            unsafe fn call(&mut self, msg: *const Received<T>, _: &Origin, _: u32) {
                // SAFETY: the caller gives up `*msg` (the trait's contract):
                // it is read once, here, and owned from now on.
                let $r = unsafe { std::ptr::read(msg) };
                (self.0)($convert)
            }
        }

        impl<T: Message, F: for<'a, 'i> FnMut($($arg)+, &'i MessageInfo) + Send + 'static>
            SubscriptionCallback<T, marker::$with_info> for F
        {
            const WANTS_OWNERSHIP: bool = $owns;
            fn into_dispatch(self) -> Dispatch<T> {
                Dispatch(Box::new(Adapter::<F, marker::$with_info>(self, PhantomData)))
            }
        }

        impl<T: Message, F: for<'a, 'i> FnMut($($arg)+, &'i MessageInfo) + Send + 'static>
            Call<T> for Adapter<F, marker::$with_info>
        {
            // SAFETY: hot text is executable code (see `myelin_sync::hot`).
            #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
            unsafe fn call(&mut self, msg: *const Received<T>, origin: &Origin, pid: u32) {
                // SAFETY: as above.
                let $r = unsafe { std::ptr::read(msg) };
                (self.0)($convert, &origin.info(pid))
            }
        }
    };
}

signatures!(ByValue, ByValueWithInfo, true, |r| r.into_owned(), T);
signatures!(
    ByBox,
    ByBoxWithInfo,
    true,
    |r| Box::new(r.into_owned()),
    Box<T>
);
signatures!(ByArc, ByArcWithInfo, false, |r| r.into_shared(), Arc<T>);
signatures!(ByRef, ByRefWithInfo, false, |r| &r, &'a T);
signatures!(ByReceived, ByReceivedWithInfo, false, |r| r, Received<T>);

/// A type-erased subscription callback (what the executor calls): the
/// user's closure behind one `Call` of the message, its origin and the
/// context's pid (a callback that wants the [`MessageInfo`] makes it of
/// those; one that does not ignores them). One pointer pair, so that the
/// subscription's fields a delivery reads stay within two cache lines.
pub struct Dispatch<T>(Box<dyn Call<T>>);

/// What the executor calls: the message, where it came from, and the pid
/// for [`Origin::info`].
pub(crate) trait Call<T>: Send {
    /// Run the user's callback on the message at `msg`, converted to its
    /// signature. Taken by pointer, not by value: the executor passes the
    /// message where it popped it, and a by-value argument was one more
    /// copy of it (12 instructions for 64 bytes, on the path to the
    /// callback).
    ///
    /// # Safety
    /// `msg` points to a valid message that this call takes (moves out
    /// of `*msg`): the caller neither uses nor drops it afterwards, even
    /// when the callback panics.
    unsafe fn call(&mut self, msg: *const Received<T>, origin: &Origin, pid: u32);
}

/// A user's callback `F` of signature `M` (one of the [`marker`]s), as
/// the executor calls it: a named type rather than a closure, so that its
/// `call` (the conversion, and the user's code inlined into it) can be
/// put in the hot text with the rest of a delivery.
pub(crate) struct Adapter<F, M>(F, PhantomData<fn() -> M>);

impl<T> Dispatch<T> {
    /// Run the callback on the message at `msg`, from `origin` (`pid`:
    /// the subscription's context's, for [`Origin::info`]).
    ///
    /// # Safety
    /// As [`Call::call`]: `msg` points to a valid message the call takes;
    /// the caller neither uses nor drops it afterwards.
    #[inline]
    pub(crate) unsafe fn call_from(&mut self, msg: *const Received<T>, origin: &Origin, pid: u32) {
        // SAFETY: the caller's contract is the trait's.
        unsafe { self.0.call(msg, origin, pid) }
    }

    /// Where the closure's captured state lives (it never moves: it is
    /// boxed), as an address to prefetch, never to read through.
    pub(crate) fn state_addr(&self) -> usize {
        (&*self.0 as *const dyn Call<T>).cast::<u8>() as usize
    }
}

impl<T> std::fmt::Debug for Dispatch<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Dispatch")
    }
}

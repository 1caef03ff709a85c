//! Zero-copy publishing: memory loaned from a transport (the publisher's
//! shared-memory pool) or the heap, filled in place, then published as
//! typed steps (`loan_uninit()? -> write(v) -> publish()?`).

use std::any::Any;
use std::sync::Arc;

use super::deliver::Full;
use super::{PubInner, Publisher};
use crate::error::PublishError;
use crate::message::Message;
use crate::transport::{Lender, LinkLoan};
use crate::wire::SharedBytes;

/// Memory for one message, loaned from a transport (shared memory: the
/// publisher's pool) or, when no link lends memory, the heap.
enum LoanMem<'a> {
    /// Lent by a link: a pointer and the link's token, no allocation.
    Lent(Lent<'a>),
    /// Lent, and owned by an `Arc` the link made (a detached loan, or one
    /// whose bytes go further than the lending link).
    Kept(Kept),
    Heap(Vec<u128>),
}

/// A loan of the link at `index`, given back if dropped unpublished.
struct Lent<'a> {
    lender: &'a dyn Lender,
    index: usize,
    loan: LinkLoan,
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        self.lender.unloan(self.loan.token);
    }
}

impl<'a> Lent<'a> {
    /// The loan's parts, no longer given back by this value's drop: the
    /// caller sends, keeps or gives it back itself.
    fn take(self) -> (&'a dyn Lender, usize, LinkLoan) {
        let this = std::mem::ManuallyDrop::new(self);
        (this.lender, this.index, this.loan)
    }

    /// The loan as memory its owner keeps alive (the link makes one).
    fn keep(self) -> Kept {
        let (lender, index, loan) = self.take();
        Kept {
            index,
            ptr: loan.ptr,
            keep: lender.keep_loan(loan.token),
        }
    }
}

/// Loaned memory kept alive by `keep` (made by the link at `index`).
struct Kept {
    index: usize,
    ptr: *mut u8,
    keep: Arc<dyn Any + Send + Sync>,
}

// SAFETY: `ptr` points into memory that `keep` (`Send + Sync`) keeps
// mapped, and only the one holder of the loan writes through it before it
// is published; moving the loan moves that sole writer with it.
unsafe impl Send for Kept {}

impl<'a> LoanMem<'a> {
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn new<T: Message>(p: &'a PubInner<T>, len: usize) -> Result<LoanMem<'a>, PublishError> {
        p.check_alive()?;
        for (index, l) in p.links.iter().enumerate() {
            if let Some(lender) = l.lender() {
                return lender
                    .loan(len)
                    .map(|loan| {
                        LoanMem::Lent(Lent {
                            lender,
                            index,
                            loan,
                        })
                    })
                    .map_err(|e| p.send_error(e));
            }
        }
        Ok(LoanMem::Heap(vec![0u128; len.div_ceil(16)]))
    }

    fn ptr(&mut self) -> *mut u8 {
        match self {
            LoanMem::Lent(l) => l.loan.ptr,
            LoanMem::Kept(k) => k.ptr,
            LoanMem::Heap(v) => v.as_mut_ptr() as *mut u8,
        }
    }

    fn ptr_const(&self) -> *const u8 {
        match self {
            LoanMem::Lent(l) => l.loan.ptr as *const u8,
            LoanMem::Kept(k) => k.ptr as *const u8,
            LoanMem::Heap(v) => v.as_ptr() as *const u8,
        }
    }

    /// The loan without a borrow of its link (an owner made for lent
    /// memory), for a loan that outlives the borrow.
    fn detached(self) -> LoanMem<'static> {
        match self {
            LoanMem::Lent(l) => LoanMem::Kept(l.keep()),
            LoanMem::Kept(k) => LoanMem::Kept(k),
            LoanMem::Heap(v) => LoanMem::Heap(v),
        }
    }

    /// Hand the memory over to readers: immutable from now on. Returns the
    /// lending link's index, if a link lent it.
    fn freeze(self, len: usize) -> (SharedBytes, Option<usize>) {
        let k = match self {
            LoanMem::Lent(l) => l.keep(),
            LoanMem::Kept(k) => k,
            LoanMem::Heap(v) => {
                let v = Arc::new(v);
                let ptr = v.as_ptr() as *const u8;
                // SAFETY: the vector has at least `len` bytes, is owned by
                // the Arc and never written again.
                return (unsafe { SharedBytes::from_raw(ptr, len, v) }, None);
            }
        };
        // SAFETY: the loan holds at least `len` bytes, is not written after
        // this point (the loan is consumed), and `keep` keeps it out of the
        // link's free list while the bytes live.
        let b = unsafe { SharedBytes::from_raw(k.ptr, len, k.keep) };
        (b, Some(k.index))
    }
}

impl<T: Message> PubInner<T> {
    /// Publish bytes written into a loan: in place to every subscription
    /// (the lending link sends its own memory, the others copy or encode).
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    fn publish_loaned(&self, mem: LoanMem<'_>, len: usize) -> Result<(), PublishError> {
        self.check_alive()?;
        let exp = self.on_publish();
        let mut h = self.lock_history();
        let m = self.matched.read();
        let mut full = Full::default();
        let mut error = None;
        let local = !(m.owners.is_empty() && m.sharers.is_empty() && m.values.is_empty());
        let mem = match mem {
            LoanMem::Lent(l)
                if h.is_none()
                    && !local
                    && (self.wanted.iter().enumerate()).all(|(j, w)| j == l.index || !w.get()) =>
            {
                // Nobody but the lending link takes these bytes: it sends
                // its memory and gives the loan back, and no owner is made
                // (no allocation, no reference count).
                let (lender, i, loan) = l.take();
                if self.wanted[i].get() {
                    match lender.send_loaned(loan.token, len) {
                        Ok(r) => full.merge(Full::refused(r.count, r.limit)),
                        Err(e) => error = Some(self.send_error(e)),
                    }
                } else {
                    lender.unloan(loan.token);
                }
                self.pace(&m);
                self.finish(&m, full)?;
                return error.map_or(Ok(()), Err);
            }
            mem => mem,
        };
        let (bytes, origin) = mem.freeze(len);
        for (i, (l, w)) in self.links.iter().zip(self.wanted.iter()).enumerate() {
            if !w.get() {
                continue;
            }
            let own = (origin == Some(i)).then(|| bytes.owner()).flatten();
            match l.send_bytes(&bytes, own) {
                Ok(r) => full.merge(Full::refused(r.count, r.limit)),
                Err(e) => {
                    error.get_or_insert(self.send_error(e));
                }
            }
        }
        self.pace(&m);
        for s in m.all() {
            let r =
                crate::buffer::from_wire::<T>(bytes.clone()).map_err(|e| PublishError::Wire {
                    topic: self.topic.clone(),
                    why: e.to_string(),
                })?;
            full.note(s.push_received(r, exp, self.origin()), s.limit());
        }
        if let Some(h) = h.as_deref_mut()
            && let Ok(r) = crate::buffer::from_wire::<T>(bytes)
        {
            self.remember(h, r.into_shared(), exp);
        }
        // Local delivery happened either way; a link error is reported
        // after it.
        self.finish(&m, full)?;
        match error {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }
}

/// A loaned, not yet written message (first step of a zero-copy publish):
/// [`write`](Self::write) it, or fill it in place after
/// [`assume_init`](Self::assume_init).
pub struct LoanUninit<'a, T: Message> {
    publisher: &'a Publisher<T>,
    mem: LoanMem<'a>,
}

/// A loaned message ready to be filled in place and published
/// ([`publish`](Self::publish)). Dropping it unpublished returns the memory.
pub struct Loan<'a, T: Message> {
    publisher: &'a Publisher<T>,
    mem: LoanMem<'a>,
}

impl<T: Message + bytemuck::Pod> Publisher<T> {
    /// Loan memory for one message in this publisher's shared-memory pool
    /// (zero-copy: subscriptions in every process read it in place). The
    /// type must be plain old data.
    ///
    /// ```
    /// # use myelin_core::{Context, QoS};
    /// # let ctx = Context::builder().handle_signals(false).shared_memory(false).build().unwrap();
    /// # let node = ctx.create_node("n").unwrap();
    /// let publisher = node.create_publisher::<u64>("/count", QoS::default()).unwrap();
    /// let loan = publisher.loan_uninit().unwrap().write(42);
    /// loan.publish().unwrap();
    /// ```
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    pub fn loan_uninit(&self) -> Result<LoanUninit<'_, T>, PublishError> {
        Ok(LoanUninit {
            publisher: self,
            mem: LoanMem::new(&self.inner, std::mem::size_of::<T>())?,
        })
    }

    /// [`loan_uninit`](Self::loan_uninit) then
    /// [`assume_init`](LoanUninit::assume_init): for filling a large
    /// message field by field without building it on the stack.
    pub fn loan(&self) -> Result<Loan<'_, T>, PublishError> {
        Ok(self.loan_uninit()?.assume_init())
    }
}

impl<'a, T: Message + bytemuck::Pod> LoanUninit<'a, T> {
    /// Move `value` into the loan.
    pub fn write(mut self, value: T) -> Loan<'a, T> {
        // SAFETY: the memory holds at least size_of::<T>() bytes, aligned
        // for T (chunks are 64-byte aligned, heap loans 16; bytemuck::Pod
        // types asking more are refused by `wire_view` at the reader), and
        // this loan is its only user.
        unsafe { std::ptr::write_unaligned(self.mem.ptr() as *mut T, value) };
        Loan {
            publisher: self.publisher,
            mem: self.mem,
        }
    }

    /// Use the memory as it is: whatever it held before (zeros, or an
    /// earlier message). Safe because `T` is plain old data: every bit
    /// pattern is a valid `T`, and the memory is always initialised.
    pub fn assume_init(self) -> Loan<'a, T> {
        Loan {
            publisher: self.publisher,
            mem: self.mem,
        }
    }
}

impl<T: Message + bytemuck::Pod> std::ops::Deref for Loan<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        let len = std::mem::size_of::<T>();
        let ptr = self.mem.ptr_const();
        // SAFETY: `len` initialised bytes that only this loan uses.
        bytemuck::from_bytes(unsafe { std::slice::from_raw_parts(ptr, len) })
    }
}

impl<T: Message + bytemuck::Pod> std::ops::DerefMut for Loan<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        let len = std::mem::size_of::<T>();
        // SAFETY: as `deref`, and `&mut self` makes the access exclusive.
        bytemuck::from_bytes_mut(unsafe { std::slice::from_raw_parts_mut(self.mem.ptr(), len) })
    }
}

impl<T: Message> Loan<'_, T> {
    /// Publish the loaned message: no copy, to every subscription in this
    /// and other processes.
    // SAFETY: hot text is executable code (see `myelin_sync::hot`).
    #[cfg_attr(target_os = "linux", unsafe(link_section = ".text.hot.myelin"))]
    pub fn publish(self) -> Result<(), PublishError> {
        self.publisher
            .inner
            .publish_loaned(self.mem, std::mem::size_of::<T>())
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for crate::Blob {}
    impl Sealed for crate::AnyMessage {}
}

/// Messages that are their own wire bytes, so a publisher of one can lend
/// a byte buffer ([`Publisher::loan_slice`]): [`Blob`](crate::Blob), and
/// [`AnyMessage`](crate::AnyMessage) (a run-time typed publisher's CDR).
pub trait BytesMessage: Message + sealed::Sealed {}
impl BytesMessage for crate::Blob {}
impl BytesMessage for crate::AnyMessage {}

/// A loaned byte buffer of a fixed length for a [`Blob`](crate::Blob) or
/// [`AnyMessage`](crate::AnyMessage) message: fill it, then
/// [`publish`](Self::publish).
pub struct SliceLoan<'a, T: BytesMessage = crate::Blob> {
    publisher: &'a Publisher<T>,
    mem: LoanMem<'a>,
    len: usize,
}

impl<T: BytesMessage> Publisher<T> {
    /// Loan `len` bytes in shared memory (zero-copy: subscribers in every
    /// process read them in place). The contents start as whatever the
    /// memory held before.
    ///
    /// ```
    /// use myelin_core::{Blob, Context, QoS};
    ///
    /// let ctx = Context::builder().shared_memory(false).network(false).build().unwrap();
    /// let node = ctx.create_node("loaner").unwrap();
    /// let p = node.create_publisher::<Blob>("bytes", QoS::keep_last(1)).unwrap();
    /// let mut loan = p.loan_slice(3).unwrap();
    /// loan.copy_from_slice(b"abc");
    /// loan.publish().unwrap();
    /// ```
    pub fn loan_slice(&self, len: usize) -> Result<SliceLoan<'_, T>, PublishError> {
        Ok(SliceLoan {
            publisher: self,
            mem: LoanMem::new(&self.inner, len)?,
            len,
        })
    }
}

impl<T: BytesMessage> std::ops::Deref for SliceLoan<'_, T> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        let ptr = self.mem.ptr_const();
        // SAFETY: `len` initialised bytes used only by this loan.
        unsafe { std::slice::from_raw_parts(ptr, self.len) }
    }
}

impl<T: BytesMessage> std::ops::DerefMut for SliceLoan<'_, T> {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as `deref`, exclusive through `&mut self`.
        unsafe { std::slice::from_raw_parts_mut(self.mem.ptr(), self.len) }
    }
}

impl<T: BytesMessage> SliceLoan<'_, T> {
    /// Publish the bytes: no copy.
    pub fn publish(self) -> Result<(), PublishError> {
        self.publisher.inner.publish_loaned(self.mem, self.len)
    }
}

impl<'a, T: BytesMessage> SliceLoan<'a, T> {
    /// Unborrow the loan from its publisher, to keep it where a borrow
    /// cannot go (another thread, an object of a language binding), then
    /// publish it with [`Publisher::publish_detached`]. Dropping it
    /// unpublished returns the memory, as for a `SliceLoan`.
    ///
    /// ```
    /// use myelin_core::{Blob, Context, QoS};
    ///
    /// let ctx = Context::builder().shared_memory(false).network(false).build().unwrap();
    /// let node = ctx.create_node("loaner").unwrap();
    /// let p = node.create_publisher::<Blob>("bytes", QoS::keep_last(1)).unwrap();
    /// let mut loan = p.loan_slice(3).unwrap().detach();
    /// let filler = std::thread::spawn(move || {
    ///     loan.copy_from_slice(b"abc");
    ///     loan
    /// });
    /// p.publish_detached(filler.join().unwrap()).unwrap();
    /// ```
    pub fn detach(self) -> DetachedSliceLoan<T> {
        DetachedSliceLoan {
            owner: Arc::downgrade(&self.publisher.inner),
            mem: self.mem.detached(),
            len: self.len,
        }
    }
}

/// A [`SliceLoan`] that no longer borrows its publisher
/// ([`SliceLoan::detach`]): fill it anywhere, publish it with
/// [`Publisher::publish_detached`] on the publisher that lent it.
pub struct DetachedSliceLoan<T: BytesMessage = crate::Blob> {
    /// The publisher that lent the memory (a weak reference: it names the
    /// publisher without keeping it alive, and keeps its address from
    /// being reused by another one while the loan lives).
    owner: std::sync::Weak<PubInner<T>>,
    mem: LoanMem<'static>,
    len: usize,
}

impl<T: BytesMessage> std::ops::Deref for DetachedSliceLoan<T> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `len` initialised bytes used only by this loan.
        unsafe { std::slice::from_raw_parts(self.mem.ptr_const(), self.len) }
    }
}

impl<T: BytesMessage> std::ops::DerefMut for DetachedSliceLoan<T> {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as `deref`, exclusive through `&mut self`.
        unsafe { std::slice::from_raw_parts_mut(self.mem.ptr(), self.len) }
    }
}

impl<T: BytesMessage> Publisher<T> {
    /// Publish a [`DetachedSliceLoan`] this publisher lent: no copy, as
    /// [`SliceLoan::publish`]. A loan lent by another publisher is refused
    /// ([`PublishError::ForeignLoan`]; its memory returns to its own pool).
    pub fn publish_detached(&self, loan: DetachedSliceLoan<T>) -> Result<(), PublishError> {
        if !std::ptr::eq(loan.owner.as_ptr(), Arc::as_ptr(&self.inner)) {
            return Err(PublishError::ForeignLoan(self.inner.topic.clone()));
        }
        self.inner.publish_loaned(loan.mem, loan.len)
    }
}

impl<T: BytesMessage> std::fmt::Debug for DetachedSliceLoan<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DetachedSliceLoan")
            .field("len", &self.len)
            .finish()
    }
}

impl<T: Message> std::fmt::Debug for LoanUninit<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoanUninit")
            .field("type", &T::TYPE_NAME)
            .finish()
    }
}

impl<T: Message> std::fmt::Debug for Loan<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loan").field("type", &T::TYPE_NAME).finish()
    }
}

impl std::fmt::Debug for SliceLoan<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SliceLoan").field("len", &self.len).finish()
    }
}

//! Subscription callbacks: the signatures a callback may have (`T`,
//! `Box<T>`, `Arc<T>`, `&T`, `Received<T>`), which decide the buffer kind
//! when it is `CallbackDefault`.

use std::sync::Arc;

use crate::buffer::Received;
use crate::message::Message;

/// Markers that tell the callback signatures apart (type inference picks one
/// from the closure's argument type).
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
}

/// A subscription callback: a closure taking `T`, `Box<T>`, `Arc<T>`, `&T`
/// or [`Received<T>`]. Annotate the argument type (`|msg: Arc<Image>| ...`)
/// so the right signature is chosen.
pub trait SubscriptionCallback<T, Marker>: Send + 'static {
    /// Whether this signature wants ownership (decides `CallbackDefault`).
    const WANTS_OWNERSHIP: bool;
    /// Turn into the type-erased form the executor calls.
    fn into_dispatch(self) -> Box<dyn FnMut(Received<T>) + Send>;
}

impl<T: Message, F: FnMut(T) + Send + 'static> SubscriptionCallback<T, marker::ByValue> for F {
    const WANTS_OWNERSHIP: bool = true;
    fn into_dispatch(mut self) -> Box<dyn FnMut(Received<T>) + Send> {
        Box::new(move |r| self(r.into_owned()))
    }
}

impl<T: Message, F: FnMut(Box<T>) + Send + 'static> SubscriptionCallback<T, marker::ByBox> for F {
    const WANTS_OWNERSHIP: bool = true;
    fn into_dispatch(mut self) -> Box<dyn FnMut(Received<T>) + Send> {
        Box::new(move |r| self(Box::new(r.into_owned())))
    }
}

impl<T: Message, F: FnMut(Arc<T>) + Send + 'static> SubscriptionCallback<T, marker::ByArc> for F {
    const WANTS_OWNERSHIP: bool = false;
    fn into_dispatch(mut self) -> Box<dyn FnMut(Received<T>) + Send> {
        Box::new(move |r| self(r.into_shared()))
    }
}

impl<T: Message, F: for<'a> FnMut(&'a T) + Send + 'static> SubscriptionCallback<T, marker::ByRef>
    for F
{
    const WANTS_OWNERSHIP: bool = false;
    fn into_dispatch(mut self) -> Box<dyn FnMut(Received<T>) + Send> {
        Box::new(move |r| self(&r))
    }
}

impl<T: Message, F: FnMut(Received<T>) + Send + 'static> SubscriptionCallback<T, marker::ByReceived>
    for F
{
    const WANTS_OWNERSHIP: bool = false;
    fn into_dispatch(self) -> Box<dyn FnMut(Received<T>) + Send> {
        Box::new(self)
    }
}

/// A type-erased subscription callback.
pub(crate) type Dispatch<T> = Box<dyn FnMut(Received<T>) + Send>;

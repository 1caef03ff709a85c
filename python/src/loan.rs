//! Loaned messages: a message encoded straight into the publisher's
//! shared-memory chunk, with its large numeric arrays left for Python to
//! fill in place through writable numpy views, then published without a
//! copy.
//!
//! A view must not outlive the publish: readers in other processes read
//! the chunk from then on, and a write through a stale view would change
//! a message under them. The chunk is held by a [`LoanMemory`], the base
//! object of every view, and [`Loan::publish`] refuses (`BufferError`, as
//! Python's own `bytearray` refuses to resize with exports alive) while
//! anything but the publish itself holds that object (it takes it out of
//! the loan first, so nothing can release or view the loan meanwhile): no
//! view is left when the chunk is handed to readers. A view that outlives an unpublished
//! loan keeps the chunk out of the pool until it dies, so it never points
//! into memory another message reuses.

use std::sync::{Arc, Mutex};

use myelin::{AnyMessage, DetachedSliceLoan};
use numpy::PyArray1;
use pyo3::exceptions::{PyAttributeError, PyBufferError, PyValueError};
use pyo3::prelude::*;

use crate::codec::{self, Reserved, lock};
use crate::{Publisher, core_error};

/// The loaned chunk: the base object of the numpy views of its arrays.
#[pyclass(module = "myelin._myelin", frozen)]
pub struct LoanMemory {
    /// The chunk, until it is published.
    loan: Mutex<Option<DetachedSliceLoan<AnyMessage>>>,
    /// Where the chunk's bytes start (they do not move while it lives).
    base: usize,
}

/// A message loaned from a publisher ([`Publisher::loan`]): its reserved
/// arrays are writable numpy views (`loan.data`), its other fields are
/// those of [`msg`](Self::msg) when [`publish`](Self::publish) runs.
#[pyclass(module = "myelin._myelin", frozen)]
pub struct Loan {
    publisher: Py<Publisher>,
    plan: Arc<codec::Plan>,
    msg: Py<PyAny>,
    /// The arrays filled in place, with their offsets in the CDR.
    reserved: Vec<Reserved>,
    /// The chunk, until the loan is published or released.
    memory: Mutex<Option<Py<LoanMemory>>>,
}

/// Loan a chunk for `msg` with the `sizes` arrays (field, elements) left
/// to fill in place.
pub fn loan(
    publisher: &Bound<'_, Publisher>,
    msg: &Bound<'_, PyAny>,
    sizes: Vec<(String, usize)>,
) -> PyResult<Loan> {
    let py = publisher.py();
    let p = publisher.get();
    let mut reserved = codec::reserve(&p.plan, &sizes)?;
    let len = codec::reserved_len(&p.plan, msg, &mut reserved)?;
    // The fields around the arrays are written at publish (they may change
    // until then); only the arrays' places are fixed now.
    let mut chunk = p.publisher.loan_slice(len).map_err(core_error)?.detach();
    let base = chunk.as_mut_ptr() as usize;
    let memory = Py::new(
        py,
        LoanMemory {
            loan: Mutex::new(Some(chunk)),
            base,
        },
    )?;
    Ok(Loan {
        publisher: publisher.clone().unbind(),
        plan: p.plan.clone(),
        msg: msg.clone().unbind(),
        reserved,
        memory: Mutex::new(Some(memory)),
    })
}

impl Loan {
    /// Refuse while any numpy array views the chunk, encode the fields
    /// around the arrays again (a stamp set after the loan counts), check
    /// that the arrays did not move, and hand out the chunk. `memory` is
    /// owned by the publish (taken out of the loan), so it has exactly
    /// one reference when no view is left.
    fn finish(
        &self,
        py: Python<'_>,
        memory: &Py<LoanMemory>,
    ) -> PyResult<DetachedSliceLoan<AnyMessage>> {
        // Before encoding too: the second pass writes around the arrays,
        // and no view should be writing them meanwhile.
        Self::no_views(py, memory)?;
        let mut chunk = lock(&memory.get().loan)
            .take()
            .ok_or_else(|| PyValueError::new_err("the loan was already published"))?;
        match self.encode(py, &mut chunk) {
            // Python code ran while encoding (properties); it could not
            // make a view (the loan is closed while it publishes), but
            // count again rather than rely on that.
            Ok(()) => match Self::no_views(py, memory) {
                Ok(()) => Ok(chunk),
                Err(e) => {
                    *lock(&memory.get().loan) = Some(chunk);
                    Err(e)
                }
            },
            Err(e) => {
                *lock(&memory.get().loan) = Some(chunk);
                Err(e)
            }
        }
    }

    /// The fields around the arrays, again, into `chunk`.
    fn encode(&self, py: Python<'_>, chunk: &mut DetachedSliceLoan<AnyMessage>) -> PyResult<()> {
        let moved = || {
            PyValueError::new_err(format!(
                "{}: a string or sequence changed length after loan() (it would move the loaned arrays or outgrow the chunk); set them before loan()",
                self.plan.type_name
            ))
        };
        let mut now = self.reserved.clone();
        let len = codec::reserved_len(&self.plan, self.msg.bind(py), &mut now)?;
        if len != chunk.len() || now != self.reserved {
            return Err(moved());
        }
        codec::encode_reserved_into(&self.plan, self.msg.bind(py), &mut now, chunk)?;
        // A field that changed between the two passes (a property with
        // side effects) moved the arrays after all.
        if now != self.reserved {
            return Err(moved());
        }
        Ok(())
    }

    /// An error while anything but the publish holds `memory`: numpy
    /// arrays viewing the chunk (each holds its base, or a view of it).
    fn no_views(py: Python<'_>, memory: &Py<LoanMemory>) -> PyResult<()> {
        let views = memory.get_refcnt(py) - 1;
        if views > 0 {
            return Err(PyBufferError::new_err(format!(
                "{views} numpy array(s) still view the loaned message: delete them (del array) before publish, so that nothing writes into a message other processes read"
            )));
        }
        Ok(())
    }

    /// The chunk, if the loan is still open.
    fn memory<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, LoanMemory>> {
        lock(&self.memory)
            .as_ref()
            .map(|m| m.bind(py).clone())
            .ok_or_else(|| PyValueError::new_err("the loan was already published or released"))
    }
}

#[pymethods]
impl Loan {
    /// The message whose other fields are published with the arrays.
    #[getter]
    fn msg(&self, py: Python<'_>) -> Py<PyAny> {
        self.msg.clone_ref(py)
    }

    /// The names of the arrays filled in place.
    #[getter]
    fn fields(&self) -> Vec<String> {
        self.reserved.iter().map(|r| r.name.clone()).collect()
    }

    /// A writable numpy view of the array `name` inside the loaned chunk.
    fn view<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        let r = self
            .reserved
            .iter()
            .find(|r| r.name == name)
            .ok_or_else(|| {
                PyAttributeError::new_err(format!(
                    "{name:?} is not an array this loan fills in place (those are {:?})",
                    self.fields()
                ))
            })?;
        let memory = self.memory(py)?;
        let ptr = (memory.get().base + r.offset) as *mut u8;
        let len = r.byte_len();
        // SAFETY: `ptr..ptr + len` lies inside the loaned chunk (the
        // offset and length come from encoding the message into exactly
        // that chunk), which `memory`, the array's base object, owns and
        // keeps out of the pool for as long as the array or any view of
        // it lives; nothing else writes the reserved bytes, and the chunk
        // is published only once no array holds `memory`.
        let array = unsafe {
            let view = numpy::ndarray::ArrayViewMut1::from_shape_ptr(len, ptr);
            PyArray1::<u8>::borrow_from_array(&view, memory.into_any())
        };
        array.call_method1(pyo3::intern!(py, "view"), (r.dtype,))
    }

    fn __getattr__<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        self.view(py, name)
    }

    /// Publish: the chunk goes to readers without a copy, with the other
    /// fields of `msg` as they are now (encoded again, around the arrays).
    fn publish(&self, py: Python<'_>) -> PyResult<()> {
        // The publish owns the chunk's holder from here: a release() or a
        // view asked for meanwhile (by another thread, or by Python code
        // encoding runs) finds the loan closed, and the count of views
        // below is of the holder's other references only.
        let memory = lock(&self.memory)
            .take()
            .ok_or_else(|| PyValueError::new_err("the loan was already published or released"))?;
        match self.finish(py, &memory) {
            Ok(chunk) => {
                drop(memory);
                let publisher = self.publisher.bind(py).get();
                py.detach(|| publisher.publisher.publish_detached(chunk))
                    .map_err(core_error)
            }
            Err(e) => {
                // Still open: the caller may fix the message or delete its
                // views and publish again.
                *lock(&self.memory) = Some(memory);
                Err(e)
            }
        }
    }

    /// Give the chunk back unpublished (views still alive keep it until
    /// they die).
    fn release(&self) {
        lock(&self.memory).take();
    }

    /// Whether the loan is still open (neither published nor released).
    #[getter]
    fn open(&self) -> bool {
        lock(&self.memory).is_some()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Publish at the end of a `with` block; release if it raised.
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<Bound<'_, PyAny>>,
        _exc: Option<Bound<'_, PyAny>>,
        _tb: Option<Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        if exc_type.is_some() {
            self.release();
            return Ok(false);
        }
        if lock(&self.memory).is_some() {
            self.publish(py)?;
        }
        Ok(false)
    }

    fn __repr__(&self) -> String {
        let state = if self.open() { "open" } else { "closed" };
        format!(
            "<myelin loan of {} ({state}), filling {:?}>",
            self.plan.type_name,
            self.fields()
        )
    }
}

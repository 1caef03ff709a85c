//! Messages described at run time, as Python objects and as CDR.
//!
//! A Python message class (built by `myelin/msgs` from a `.msg` spec) is
//! registered once with [`register`]: its [`Plan`] lists the fields in wire
//! order with what each holds. [`encode`] walks a Python object by its plan
//! into CDR (XCDR1, little endian, as ROS 2 and the Rust message crate
//! write it); [`decode`] builds a Python object from CDR. Received bytes
//! come from other processes, so decoding checks every length against the
//! bytes left before it reads or allocates.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use myelin_msgs::idl::{self, BaseType, Collection, MsgSpec, Primitive};
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList, PyString, PyType};

/// What one value of a field is.
#[derive(Clone)]
pub enum Scalar {
    Bool,
    /// `byte`: a `bytes` of length 1 in Python (as in rclpy).
    Byte,
    /// `char`: a `str` of length 1 in Python (as in rclpy).
    Char,
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
    /// A string with its bound, if any.
    Str(Option<u64>),
    /// Another message.
    Msg(Arc<Plan>),
}

impl Scalar {
    /// Bytes of one value on the wire, for the primitives of fixed size.
    fn size(&self) -> Option<usize> {
        Some(match self {
            Scalar::Bool | Scalar::Byte | Scalar::Char | Scalar::I8 | Scalar::U8 => 1,
            Scalar::I16 | Scalar::U16 => 2,
            Scalar::I32 | Scalar::U32 | Scalar::F32 => 4,
            Scalar::I64 | Scalar::U64 | Scalar::F64 => 8,
            Scalar::Str(_) | Scalar::Msg(_) => return None,
        })
    }
}

/// One field of a message.
pub struct FieldPlan {
    name: Py<PyString>,
    label: String,
    scalar: Scalar,
    collection: Collection,
}

/// How to encode and decode one message type.
pub struct Plan {
    /// `pkg/msg/Name`.
    pub type_name: String,
    /// The REP 2011 hash (`RIHS01_...`).
    pub ros_hash: String,
    /// The Python class instances are made of.
    pub class: Py<PyType>,
    fields: Vec<FieldPlan>,
}

fn plans() -> &'static Mutex<HashMap<String, Arc<Plan>>> {
    static PLANS: OnceLock<Mutex<HashMap<String, Arc<Plan>>>> = OnceLock::new();
    PLANS.get_or_init(Default::default)
}

fn user_srvs() -> &'static Mutex<HashMap<String, idl::SrvSpec>> {
    static SRVS: OnceLock<Mutex<HashMap<String, idl::SrvSpec>>> = OnceLock::new();
    SRVS.get_or_init(Default::default)
}

fn user_actions() -> &'static Mutex<HashMap<String, idl::ActionSpec>> {
    static ACTIONS: OnceLock<Mutex<HashMap<String, idl::ActionSpec>>> = OnceLock::new();
    ACTIONS.get_or_init(Default::default)
}

/// The spec of an action type (`pkg/action/Name`): one loaded at run
/// time, else one of the message crate's.
fn action_spec(type_name: &str) -> Option<idl::ActionSpec> {
    if let Some(a) = lock(user_actions()).get(type_name) {
        return Some(a.clone());
    }
    myelin_msgs::action_spec(type_name)
}

fn srv_spec(type_name: &str) -> Option<idl::SrvSpec> {
    if let Some(s) = lock(user_srvs()).get(type_name) {
        return Some(s.clone());
    }
    // An action's services: `pkg/action/Name_SendGoal`, `..._GetResult`.
    if type_name.contains("/action/") {
        if let Some(action) = type_name.strip_suffix("_SendGoal") {
            return action_spec(action).map(|a| a.send_goal());
        }
        if let Some(action) = type_name.strip_suffix("_GetResult") {
            return action_spec(action).map(|a| a.get_result());
        }
        return None;
    }
    myelin_msgs::srv_spec(type_name)
}

/// Whether `type_name` (`pkg/action/Name`) is an action type myelin
/// knows.
pub fn knows_action(type_name: &str) -> bool {
    action_spec(type_name).is_some()
}

/// Add an `.action` definition at run time. Returns its type name.
pub fn load_action(package: &str, name: &str, text: &str) -> PyResult<String> {
    let action = idl::parse_action(package, name, text)
        .map_err(|e| PyValueError::new_err(format!("{package}/action/{name}: {e}")))?;
    let type_name = action.type_name();
    refs_loaded(
        &type_name,
        &[&action.goal, &action.result, &action.feedback],
    )?;
    if let Some(old) = action_spec(&type_name)
        && old != action
    {
        return Err(PyValueError::new_err(format!(
            "{type_name} is already defined differently"
        )));
    }
    let mut specs = lock(user_specs());
    for t in action.types() {
        specs.insert(t.type_name(), t);
    }
    drop(specs);
    lock(user_actions()).insert(type_name.clone(), action);
    Ok(type_name)
}

/// A service type: its request and response type names and its REP 2011
/// hash.
pub fn srv_info(type_name: &str) -> PyResult<(String, String, String)> {
    let srv = srv_spec(type_name)
        .ok_or_else(|| PyValueError::new_err(format!("unknown service type {type_name}")))?;
    let hash = idl::srv_type_hash(&srv, spec)
        .map_err(|e| PyValueError::new_err(format!("{type_name}: {e}")))?;
    Ok((srv.request.type_name(), srv.response.type_name(), hash))
}

/// Whether `type_name` is a service type myelin knows.
pub fn knows_srv(type_name: &str) -> bool {
    srv_spec(type_name).is_some()
}

/// Refuse `parts` of `type_name` whose fields refer to types not loaded.
fn refs_loaded(type_name: &str, parts: &[&MsgSpec]) -> PyResult<()> {
    for part in parts {
        for f in &part.fields {
            if let Some(nested) = f.ty.base.nested_type_name()
                && spec(&nested).is_none()
            {
                return Err(PyValueError::new_err(format!(
                    "{type_name}: field {:?} refers to {nested}, which is not loaded (load it first)",
                    f.name
                )));
            }
        }
    }
    Ok(())
}

/// Add a `.srv` definition at run time. Returns its type name.
pub fn load_srv(package: &str, name: &str, text: &str) -> PyResult<String> {
    let srv = idl::parse_srv(package, name, text)
        .map_err(|e| PyValueError::new_err(format!("{package}/srv/{name}: {e}")))?;
    let type_name = srv.type_name();
    refs_loaded(&type_name, &[&srv.request, &srv.response])?;
    if let Some(old) = srv_spec(&type_name)
        && old != srv
    {
        return Err(PyValueError::new_err(format!(
            "{type_name} is already defined differently"
        )));
    }
    let mut specs = lock(user_specs());
    specs.insert(srv.request.type_name(), srv.request.clone());
    specs.insert(srv.response.type_name(), srv.response.clone());
    drop(specs);
    lock(user_srvs()).insert(type_name.clone(), srv);
    Ok(type_name)
}

fn user_specs() -> &'static Mutex<HashMap<String, MsgSpec>> {
    static SPECS: OnceLock<Mutex<HashMap<String, MsgSpec>>> = OnceLock::new();
    SPECS.get_or_init(Default::default)
}

pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The spec of a message type: one loaded at run time, else one of the
/// message crate's.
pub fn spec(type_name: &str) -> Option<MsgSpec> {
    if let Some(s) = lock(user_specs()).get(type_name) {
        return Some(s.clone());
    }
    myelin_msgs::msg_spec(type_name)
}

/// Add a `.msg` definition at run time (a user's package), checking that
/// every type it refers to is known. Returns its type name.
pub fn load(package: &str, name: &str, text: &str) -> PyResult<String> {
    let spec = idl::parse_msg(package, name, text)
        .map_err(|e| PyValueError::new_err(format!("{package}/msg/{name}: {e}")))?;
    let type_name = spec.type_name();
    refs_loaded(&type_name, &[&spec])?;
    if let Some(old) = self::spec(&type_name)
        && old != spec
    {
        return Err(PyValueError::new_err(format!(
            "{type_name} is already defined differently"
        )));
    }
    lock(user_specs()).insert(type_name.clone(), spec);
    Ok(type_name)
}

/// The REP 2011 hash of a known type.
pub fn ros_hash(type_name: &str) -> PyResult<String> {
    idl::type_hash(type_name, spec).map_err(|e| PyValueError::new_err(format!("{type_name}: {e}")))
}

/// The plan of a registered type.
pub fn plan_of(type_name: &str) -> Option<Arc<Plan>> {
    lock(plans()).get(type_name).cloned()
}

/// The plan of `class`, a registered message class.
pub fn plan_of_class(class: &Bound<'_, PyAny>) -> PyResult<Arc<Plan>> {
    let name: String = class
        .getattr("_TYPE_NAME")
        .and_then(|n| n.extract())
        .map_err(|_| {
            PyTypeError::new_err(format!(
                "{} is not a message type (use a class from myelin.msgs)",
                class.repr().map(|r| r.to_string()).unwrap_or_default()
            ))
        })?;
    plan_of(&name).ok_or_else(|| PyTypeError::new_err(format!("{name} is not registered")))
}

/// Register `class` as the Python class of `type_name` (whose nested types
/// are registered already).
pub fn register(py: Python<'_>, class: &Bound<'_, PyType>, type_name: &str) -> PyResult<()> {
    let spec = spec(type_name)
        .ok_or_else(|| PyValueError::new_err(format!("unknown message type {type_name}")))?;
    let mut fields = Vec::with_capacity(spec.fields.len());
    for f in &spec.fields {
        let scalar = match &f.ty.base {
            BaseType::Primitive(p) => match p {
                Primitive::Bool => Scalar::Bool,
                Primitive::Byte => Scalar::Byte,
                Primitive::Char => Scalar::Char,
                Primitive::Int8 => Scalar::I8,
                Primitive::UInt8 => Scalar::U8,
                Primitive::Int16 => Scalar::I16,
                Primitive::UInt16 => Scalar::U16,
                Primitive::Int32 => Scalar::I32,
                Primitive::UInt32 => Scalar::U32,
                Primitive::Int64 => Scalar::I64,
                Primitive::UInt64 => Scalar::U64,
                Primitive::Float32 => Scalar::F32,
                Primitive::Float64 => Scalar::F64,
                Primitive::String => Scalar::Str(None),
                Primitive::WString => {
                    return Err(PyValueError::new_err(format!(
                        "{type_name}.{}: wstring fields are not supported yet",
                        f.name
                    )));
                }
            },
            BaseType::BoundedString(n) => Scalar::Str(Some(*n)),
            BaseType::BoundedWString(_) => {
                return Err(PyValueError::new_err(format!(
                    "{type_name}.{}: wstring fields are not supported yet",
                    f.name
                )));
            }
            nested @ BaseType::Nested { .. } => {
                let n = nested.nested_type_name().unwrap_or_default();
                Scalar::Msg(plan_of(&n).ok_or_else(|| {
                    PyValueError::new_err(format!(
                        "{type_name}.{}: {n} is not registered yet",
                        f.name
                    ))
                })?)
            }
        };
        fields.push(FieldPlan {
            name: PyString::intern(py, &f.name).unbind(),
            label: format!("{type_name}.{}", f.name),
            scalar,
            collection: f.ty.collection,
        });
    }
    let plan = Plan {
        type_name: type_name.to_string(),
        ros_hash: ros_hash(type_name)?,
        class: class.clone().unbind(),
        fields,
    };
    lock(plans()).insert(type_name.to_string(), Arc::new(plan));
    Ok(())
}

// ------------------------------------------------------------------ encode

/// CDR under construction, in two passes: one that only counts (`out`
/// None: how long the message will be) and one that writes into memory of
/// exactly that length (a shared-memory loan, or a vector). Alignment
/// counts from after the 4-byte encapsulation header.
struct Writer<'b> {
    out: Option<&'b mut [u8]>,
    pos: usize,
}

impl Writer<'_> {
    fn put(&mut self, align: usize, bytes: &[u8]) -> PyResult<()> {
        let start = self.skip(align, bytes.len())?;
        if let Some(out) = self.out.as_deref_mut() {
            // In bounds: `skip` checked the range.
            out[start..start + bytes.len()].copy_from_slice(bytes);
        }
        Ok(())
    }

    /// Pad to `align` (zeros) and step over `len` bytes, leaving them as
    /// they are (`put` writes them; a loaned array is filled in place by
    /// the caller). Returns where the `len` bytes start.
    fn skip(&mut self, align: usize, len: usize) -> PyResult<usize> {
        let pad = (align - (self.pos - 4) % align) % align;
        let start = self.pos + pad;
        if let Some(out) = self.out.as_deref_mut() {
            // The object changed between the passes (a property with
            // side effects): its bytes no longer fit.
            let dst = out.get_mut(self.pos..start + len).ok_or_else(|| {
                PyValueError::new_err("the message changed while it was being encoded")
            })?;
            dst[..pad].fill(0);
        }
        self.pos = start + len;
        Ok(start)
    }

    fn count(&mut self, n: usize, label: &str) -> PyResult<()> {
        let n = u32::try_from(n)
            .map_err(|_| PyValueError::new_err(format!("{label}: {n} elements do not fit CDR")))?;
        self.put(4, &n.to_le_bytes())
    }
}

/// The length of the CDR of `obj`, an instance of `plan`'s class (checking
/// every value on the way).
pub fn encoded_len(plan: &Plan, obj: &Bound<'_, PyAny>) -> PyResult<usize> {
    reserved_len(plan, obj, &mut [])
}

/// Write the CDR of `obj` into `out`, which is exactly
/// [`encoded_len`] long.
pub fn encode_into(plan: &Plan, obj: &Bound<'_, PyAny>, out: &mut [u8]) -> PyResult<()> {
    encode_reserved_into(plan, obj, &mut [], out)
}

/// CDR of `obj`, an instance of `plan`'s class.
pub fn encode(plan: &Plan, obj: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    let mut buf = vec![0; encoded_len(plan, obj)?];
    encode_into(plan, obj, &mut buf)?;
    Ok(buf)
}

fn type_error(label: &str, want: &str, got: &Bound<'_, PyAny>) -> PyErr {
    // A message names its ROS type; anything else its Python type.
    let got = got
        .getattr("_TYPE_NAME")
        .and_then(|n| n.extract::<String>())
        .or_else(|_| got.get_type().name().map(|n| n.to_string()))
        .unwrap_or_else(|_| "?".into());
    PyTypeError::new_err(format!("{label}: expected {want}, got {got}"))
}

fn encode_msg(plan: &Plan, obj: &Bound<'_, PyAny>, w: &mut Writer, label: &str) -> PyResult<()> {
    encode_reserving(plan, obj, w, label, &mut [])
}

/// [`encode_msg`], leaving the elements of the `reserved` top-level
/// arrays unwritten and noting where each starts.
fn encode_reserving(
    plan: &Plan,
    obj: &Bound<'_, PyAny>,
    w: &mut Writer,
    label: &str,
    reserved: &mut [Reserved],
) -> PyResult<()> {
    let py = obj.py();
    if !obj.is_instance(plan.class.bind(py))? {
        return Err(type_error(label, &plan.type_name, obj));
    }
    if plan.fields.is_empty() {
        // An empty message carries one placeholder byte.
        return w.put(1, &[0]);
    }
    for (i, f) in plan.fields.iter().enumerate() {
        if let Some(r) = reserved.iter_mut().find(|r| r.field == i) {
            if !matches!(f.collection, Collection::Array(_)) {
                w.count(r.n, &f.label)?;
            }
            // No padding before an empty array (as `encode_many`, and the
            // reader, do it).
            r.offset = if r.n == 0 {
                w.pos
            } else {
                w.skip(r.size, r.byte_len())?
            };
            continue;
        }
        let v = obj.getattr(f.name.bind(py))?;
        encode_field(f, &v, w)?;
    }
    Ok(())
}

// ------------------------------------------------------------------ loans

/// A numeric array field of a loaned message whose elements are filled in
/// place (through a writable numpy view) instead of encoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reserved {
    /// The field's index in its plan (a top-level field).
    field: usize,
    /// Its name.
    pub name: String,
    /// Elements.
    pub n: usize,
    /// Bytes per element.
    size: usize,
    /// numpy's name of the element type, little-endian (`"u1"`, `"<f8"`, ...).
    pub dtype: &'static str,
    /// Where the elements start in the CDR (set by encoding).
    pub offset: usize,
}

impl Reserved {
    /// The elements' bytes.
    pub fn byte_len(&self) -> usize {
        self.n * self.size
    }
}

/// The arrays `sizes` names (field name, element count) as reservations,
/// checked against `plan`: top-level fields of numbers, within their
/// bound (a fixed-size array takes exactly its size).
pub fn reserve(plan: &Plan, sizes: &[(String, usize)]) -> PyResult<Vec<Reserved>> {
    let mut out = Vec::with_capacity(sizes.len());
    for (name, n) in sizes {
        let (field, f) = plan
            .fields
            .iter()
            .enumerate()
            .find(|(_, f)| f.label == format!("{}.{name}", plan.type_name))
            .ok_or_else(|| {
                PyValueError::new_err(format!("{}: no field named {name:?}", plan.type_name))
            })?;
        // Little-endian, as CDR here is, whatever the host's order.
        let dtype = match f.scalar {
            Scalar::U8 | Scalar::Byte | Scalar::Char => "u1",
            Scalar::I8 => "i1",
            Scalar::I16 => "<i2",
            Scalar::U16 => "<u2",
            Scalar::I32 => "<i4",
            Scalar::U32 => "<u4",
            Scalar::I64 => "<i8",
            Scalar::U64 => "<u8",
            Scalar::F32 => "<f4",
            Scalar::F64 => "<f8",
            Scalar::Bool | Scalar::Str(_) | Scalar::Msg(_) => {
                return Err(PyTypeError::new_err(format!(
                    "{}: only arrays of numbers can be filled in place",
                    f.label
                )));
            }
        };
        match f.collection {
            Collection::Single => {
                return Err(PyTypeError::new_err(format!(
                    "{}: not an array, so there is nothing to fill in place",
                    f.label
                )));
            }
            Collection::Array(e) if *n as u64 != e => {
                return Err(PyValueError::new_err(format!(
                    "{}: expected exactly {e} elements, got {n}",
                    f.label
                )));
            }
            Collection::BoundedSequence(b) if *n as u64 > b => {
                return Err(PyValueError::new_err(format!(
                    "{}: at most {b} elements, got {n}",
                    f.label
                )));
            }
            _ => {}
        }
        if out.iter().any(|r: &Reserved| r.field == field) {
            return Err(PyValueError::new_err(format!("{}: named twice", f.label)));
        }
        let size = f.scalar.size().expect("numbers have a size");
        n.checked_mul(size)
            .filter(|b| *b <= u32::MAX as usize)
            .ok_or_else(|| {
                PyValueError::new_err(format!("{}: {n} elements do not fit CDR", f.label))
            })?;
        out.push(Reserved {
            field,
            name: name.clone(),
            n: *n,
            size,
            dtype,
            offset: 0,
        });
    }
    Ok(out)
}

/// The length of the CDR of `obj` with `reserved` arrays left to fill,
/// noting where each would start.
pub fn reserved_len(
    plan: &Plan,
    obj: &Bound<'_, PyAny>,
    reserved: &mut [Reserved],
) -> PyResult<usize> {
    let mut w = Writer { out: None, pos: 4 };
    encode_reserving(plan, obj, &mut w, "message", reserved)?;
    Ok(w.pos)
}

/// Write the CDR of `obj` into `out` ([`reserved_len`] long) except the
/// elements of the `reserved` arrays, which keep whatever `out` holds.
pub fn encode_reserved_into(
    plan: &Plan,
    obj: &Bound<'_, PyAny>,
    reserved: &mut [Reserved],
    out: &mut [u8],
) -> PyResult<()> {
    let n = out.len();
    let head = out
        .get_mut(..4)
        .ok_or_else(|| PyValueError::new_err("the message changed while it was being encoded"))?;
    head.copy_from_slice(&[0, 1, 0, 0]);
    let mut w = Writer {
        out: Some(out),
        pos: 4,
    };
    encode_reserving(plan, obj, &mut w, "message", reserved)?;
    if w.pos != n {
        return Err(PyValueError::new_err(
            "the message changed while it was being encoded",
        ));
    }
    Ok(())
}

fn encode_field(f: &FieldPlan, v: &Bound<'_, PyAny>, w: &mut Writer) -> PyResult<()> {
    match f.collection {
        Collection::Single => encode_scalar(&f.scalar, &f.label, v, w),
        Collection::Array(n) => encode_many(f, v, w, Some(n), None),
        Collection::BoundedSequence(n) => encode_many(f, v, w, None, Some(n)),
        Collection::UnboundedSequence => encode_many(f, v, w, None, None),
    }
}

/// An array (`exact` length, no count) or a sequence (count first, at most
/// `bound`).
fn encode_many(
    f: &FieldPlan,
    v: &Bound<'_, PyAny>,
    w: &mut Writer,
    exact: Option<u64>,
    bound: Option<u64>,
) -> PyResult<()> {
    let check = |n: usize| -> PyResult<()> {
        if let Some(e) = exact
            && n as u64 != e
        {
            return Err(PyValueError::new_err(format!(
                "{}: expected exactly {e} elements, got {n}",
                f.label
            )));
        }
        if let Some(b) = bound
            && n as u64 > b
        {
            return Err(PyValueError::new_err(format!(
                "{}: at most {b} elements, got {n}",
                f.label
            )));
        }
        Ok(())
    };
    // Contiguous bytes of the right type go in one copy.
    if let Some(size) = f.scalar.size() {
        let done = with_raw_elements(&f.scalar, v, |bytes| {
            let n = bytes.len() / size;
            check(n)?;
            if exact.is_none() {
                w.count(n, &f.label)?;
            }
            if n > 0 {
                w.put(size, bytes)?;
            }
            Ok(())
        })?;
        if done.is_some() {
            return Ok(());
        }
    }
    if v.is_instance_of::<PyString>() {
        return Err(type_error(&f.label, "a sequence", v));
    }
    let n = v.len().map_err(|_| type_error(&f.label, "a sequence", v))?;
    check(n)?;
    if exact.is_none() {
        w.count(n, &f.label)?;
    }
    for item in v.try_iter()? {
        encode_scalar(&f.scalar, &f.label, &item?, w)?;
    }
    Ok(())
}

/// Call `f` with the little-endian bytes of `v`'s elements if `v` is a
/// contiguous numpy array of exactly the field's element type, or
/// `bytes`/`bytearray` for a field of bytes (no copy on a little-endian
/// host); `None` if it is neither.
fn with_raw_elements<R>(
    scalar: &Scalar,
    v: &Bound<'_, PyAny>,
    f: impl FnOnce(&[u8]) -> PyResult<R>,
) -> PyResult<Option<R>> {
    fn typed<T: numpy::Element + Copy, R>(
        v: &Bound<'_, PyAny>,
        le: impl Fn(T) -> Vec<u8>,
        f: impl FnOnce(&[u8]) -> PyResult<R>,
    ) -> PyResult<Option<R>> {
        let Ok(a) = v.extract::<PyReadonlyArray1<T>>() else {
            return Ok(None);
        };
        let Ok(s) = a.as_slice() else {
            return Ok(None);
        };
        if cfg!(target_endian = "little") {
            // SAFETY: `s` is a live, initialised slice of plain numbers
            // (no padding, any bit pattern valid), borrowed read-only from
            // the array for this call; viewing it as bytes reads exactly
            // its `size_of_val` bytes.
            let bytes = unsafe {
                std::slice::from_raw_parts(s.as_ptr().cast::<u8>(), std::mem::size_of_val(s))
            };
            f(bytes).map(Some)
        } else {
            let bytes: Vec<u8> = s.iter().flat_map(|x| le(*x)).collect();
            f(&bytes).map(Some)
        }
    }
    if matches!(scalar, Scalar::U8 | Scalar::Byte | Scalar::Char) {
        if let Ok(b) = v.cast::<PyBytes>() {
            return f(b.as_bytes()).map(Some);
        }
        if let Ok(b) = v.cast::<PyByteArray>() {
            return f(&b.to_vec()).map(Some);
        }
    }
    if !v.hasattr(pyo3::intern!(v.py(), "dtype"))? {
        return Ok(None);
    }
    match scalar {
        Scalar::U8 | Scalar::Byte | Scalar::Char => typed::<u8, R>(v, |x| vec![x], f),
        Scalar::I8 => typed::<i8, R>(v, |x| x.to_le_bytes().to_vec(), f),
        Scalar::I16 => typed::<i16, R>(v, |x| x.to_le_bytes().to_vec(), f),
        Scalar::U16 => typed::<u16, R>(v, |x| x.to_le_bytes().to_vec(), f),
        Scalar::I32 => typed::<i32, R>(v, |x| x.to_le_bytes().to_vec(), f),
        Scalar::U32 => typed::<u32, R>(v, |x| x.to_le_bytes().to_vec(), f),
        Scalar::I64 => typed::<i64, R>(v, |x| x.to_le_bytes().to_vec(), f),
        Scalar::U64 => typed::<u64, R>(v, |x| x.to_le_bytes().to_vec(), f),
        Scalar::F32 => typed::<f32, R>(v, |x| x.to_le_bytes().to_vec(), f),
        Scalar::F64 => typed::<f64, R>(v, |x| x.to_le_bytes().to_vec(), f),
        Scalar::Bool | Scalar::Str(_) | Scalar::Msg(_) => Ok(None),
    }
}

fn int_in(label: &str, v: &Bound<'_, PyAny>, lo: i128, hi: i128, ty: &str) -> PyResult<i128> {
    if v.is_instance_of::<pyo3::types::PyBool>() || v.is_instance_of::<pyo3::types::PyFloat>() {
        return Err(type_error(label, "int", v));
    }
    let x: i128 = v.extract().map_err(|_| type_error(label, "int", v))?;
    if x < lo || x > hi {
        return Err(PyValueError::new_err(format!(
            "{label}: {x} is out of range for {ty} ({lo} to {hi})"
        )));
    }
    Ok(x)
}

fn encode_scalar(s: &Scalar, label: &str, v: &Bound<'_, PyAny>, w: &mut Writer) -> PyResult<()> {
    macro_rules! int {
        ($t:ty, $name:literal) => {{
            let x = int_in(label, v, <$t>::MIN as i128, <$t>::MAX as i128, $name)? as $t;
            w.put(std::mem::size_of::<$t>(), &x.to_le_bytes())?;
        }};
    }
    match s {
        Scalar::Bool => {
            let b: bool = v.extract().map_err(|_| type_error(label, "bool", v))?;
            w.put(1, &[b as u8])?;
        }
        Scalar::Byte => {
            let x = match v.cast::<PyBytes>() {
                Ok(b) if b.as_bytes().len() == 1 => b.as_bytes()[0],
                Ok(_) => return Err(PyValueError::new_err(format!("{label}: expected one byte"))),
                Err(_) => int_in(label, v, 0, 255, "byte")? as u8,
            };
            w.put(1, &[x])?;
        }
        Scalar::Char => {
            let x = match v.cast::<PyString>() {
                Ok(s) => {
                    let s = s.to_cow()?;
                    let mut cs = s.chars();
                    match (cs.next(), cs.next()) {
                        (Some(c), None) if (c as u32) < 256 => c as u8,
                        _ => {
                            return Err(PyValueError::new_err(format!(
                                "{label}: expected one character below U+0100, got {s:?}"
                            )));
                        }
                    }
                }
                Err(_) => int_in(label, v, 0, 255, "char")? as u8,
            };
            w.put(1, &[x])?;
        }
        Scalar::I8 => int!(i8, "int8"),
        Scalar::U8 => int!(u8, "uint8"),
        Scalar::I16 => int!(i16, "int16"),
        Scalar::U16 => int!(u16, "uint16"),
        Scalar::I32 => int!(i32, "int32"),
        Scalar::U32 => int!(u32, "uint32"),
        Scalar::I64 => int!(i64, "int64"),
        Scalar::U64 => int!(u64, "uint64"),
        Scalar::F32 => {
            let x: f64 = v.extract().map_err(|_| type_error(label, "float", v))?;
            w.put(4, &(x as f32).to_le_bytes())?;
        }
        Scalar::F64 => {
            let x: f64 = v.extract().map_err(|_| type_error(label, "float", v))?;
            w.put(8, &x.to_le_bytes())?;
        }
        Scalar::Str(bound) => {
            let s = v
                .cast::<PyString>()
                .map_err(|_| type_error(label, "str", v))?
                .to_cow()?;
            if s.contains('\0') {
                return Err(PyValueError::new_err(format!(
                    "{label}: a string cannot hold a NUL character"
                )));
            }
            if let Some(b) = bound
                && s.chars().count() as u64 > *b
            {
                return Err(PyValueError::new_err(format!(
                    "{label}: at most {b} characters, got {}",
                    s.chars().count()
                )));
            }
            w.count(s.len() + 1, label)?;
            w.put(1, s.as_bytes())?;
            w.put(1, &[0])?;
        }
        Scalar::Msg(plan) => encode_msg(plan, v, w, label)?,
    }
    Ok(())
}

// ------------------------------------------------------------------ decode

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// What keeps `buf` alive (a shared-memory chunk, or the publisher's
    /// buffer): large byte arrays are numpy views of it, not copies.
    owner: Option<&'a myelin::SharedBytes>,
}

/// Numeric arrays at least this many bytes long are views of the received
/// bytes rather than copies (below it a copy costs less than a view's
/// bookkeeping).
pub const VIEW_MIN: usize = 4096;

/// Keeps received bytes (a shared-memory chunk) alive while a numpy array
/// views them: the array's base object.
#[pyclass(module = "myelin._myelin", frozen)]
pub struct ReceivedBytes {
    _bytes: myelin::SharedBytes,
}

/// A read-only numpy array of `bytes`, which lie inside `owner`.
fn byte_view<'py>(
    py: Python<'py>,
    owner: &myelin::SharedBytes,
    bytes: &[u8],
) -> PyResult<Bound<'py, PyAny>> {
    let keeper = Bound::new(
        py,
        ReceivedBytes {
            _bytes: owner.clone(),
        },
    )?;
    // SAFETY: `bytes` lies inside `owner`'s immutable buffer (the reader
    // only hands out slices of it), which `keeper` (the array's base
    // object) keeps alive for as long as the array exists; the array is
    // made read-only below, before any Python code sees it.
    let array = unsafe {
        let view = numpy::ndarray::ArrayView1::from_shape_ptr(bytes.len(), bytes.as_ptr());
        PyArray1::<u8>::borrow_from_array(&view, keeper.into_any())
    };
    let kwargs = pyo3::types::PyDict::new(py);
    kwargs.set_item("write", false)?;
    array.call_method("setflags", (), Some(&kwargs))?;
    Ok(array.into_any())
}

fn truncated(label: &str) -> PyErr {
    PyValueError::new_err(format!("{label}: the message is truncated or corrupt"))
}

impl<'a> Reader<'a> {
    fn take(&mut self, align: usize, n: usize, label: &str) -> PyResult<&'a [u8]> {
        let off = self.pos - 4;
        let start = self.pos + (align - off % align) % align;
        let end = start.checked_add(n).ok_or_else(|| truncated(label))?;
        if end > self.buf.len() {
            return Err(truncated(label));
        }
        self.pos = end;
        Ok(&self.buf[start..end])
    }

    fn u32(&mut self, label: &str) -> PyResult<u32> {
        let b = self.take(4, 4, label)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn left(&self) -> usize {
        self.buf.len() - self.pos
    }
}

/// A Python object of `plan`'s class from CDR `bytes`; with `owner` (what
/// holds `bytes`), byte arrays of [`VIEW_MIN`] bytes or more are read-only
/// numpy views of it.
pub fn decode<'py>(
    py: Python<'py>,
    plan: &Plan,
    bytes: &[u8],
    owner: Option<&myelin::SharedBytes>,
) -> PyResult<Bound<'py, PyAny>> {
    match bytes.get(..2) {
        Some([0, 1]) => {}
        Some([0, 0]) => {
            return Err(PyValueError::new_err(format!(
                "{}: big-endian CDR is not supported",
                plan.type_name
            )));
        }
        _ => return Err(truncated(&plan.type_name)),
    }
    if bytes.len() < 4 {
        return Err(truncated(&plan.type_name));
    }
    // The owner must hold exactly these bytes for views into it.
    let owner = owner.filter(|o| o.as_ptr() == bytes.as_ptr() && o.len() == bytes.len());
    let mut r = Reader {
        buf: bytes,
        pos: 4,
        owner,
    };
    decode_msg(py, plan, &mut r)
}

fn decode_msg<'py>(
    py: Python<'py>,
    plan: &Plan,
    r: &mut Reader<'_>,
) -> PyResult<Bound<'py, PyAny>> {
    let class = plan.class.bind(py);
    let obj = class.call_method1(pyo3::intern!(py, "__new__"), (class,))?;
    if plan.fields.is_empty() {
        r.take(1, 1, &plan.type_name)?;
        return Ok(obj);
    }
    for f in &plan.fields {
        let v = decode_field(py, f, r)?;
        obj.setattr(f.name.bind(py), v)?;
    }
    Ok(obj)
}

fn decode_field<'py>(
    py: Python<'py>,
    f: &FieldPlan,
    r: &mut Reader<'_>,
) -> PyResult<Bound<'py, PyAny>> {
    let n = match f.collection {
        Collection::Single => return decode_scalar(py, &f.scalar, &f.label, r),
        Collection::Array(n) => n,
        Collection::BoundedSequence(b) => {
            let n = r.u32(&f.label)? as u64;
            if n > b {
                return Err(PyValueError::new_err(format!(
                    "{}: {n} elements exceed the bound {b}",
                    f.label
                )));
            }
            n
        }
        Collection::UnboundedSequence => r.u32(&f.label)? as u64,
    };
    // Every element takes at least one byte: a count beyond the bytes left
    // is corrupt (and must not size an allocation).
    if n > r.left() as u64 {
        return Err(truncated(&f.label));
    }
    let n = n as usize;
    macro_rules! array {
        ($t:ty) => {{
            let size = std::mem::size_of::<$t>();
            let bytes = if n == 0 {
                &[][..]
            } else {
                r.take(size, n * size, &f.label)?
            };
            match r.owner {
                // A large array whose elements lie aligned in the received
                // bytes, in this machine's order: a read-only view of them
                // (a byte view, retyped). CDR aligns elements relative to
                // the payload after its 4-byte header, so 8-byte elements
                // in a chunk that starts 8-aligned are not aligned: those
                // are copied (libraries such as torch refuse unaligned
                // arrays).
                Some(owner)
                    if bytes.len() >= VIEW_MIN
                        && cfg!(target_endian = "little")
                        && (bytes.as_ptr() as usize) % std::mem::align_of::<$t>() == 0 =>
                {
                    byte_view(py, owner, bytes)?
                        .call_method1(pyo3::intern!(py, "view"), (numpy::dtype::<$t>(py),))?
                }
                _ => {
                    let v: Vec<$t> = bytes
                        .chunks_exact(size)
                        .map(|c| {
                            <$t>::from_le_bytes(c.try_into().expect("chunk of the element size"))
                        })
                        .collect();
                    PyArray1::from_vec(py, v).into_any()
                }
            }
        }};
    }
    Ok(match &f.scalar {
        Scalar::U8 | Scalar::Byte | Scalar::Char => {
            let bytes = if n == 0 {
                &[][..]
            } else {
                r.take(1, n, &f.label)?
            };
            match r.owner {
                Some(owner) if n >= VIEW_MIN => byte_view(py, owner, bytes)?,
                _ => PyArray1::from_slice(py, bytes).into_any(),
            }
        }
        Scalar::I8 => array!(i8),
        Scalar::I16 => array!(i16),
        Scalar::U16 => array!(u16),
        Scalar::I32 => array!(i32),
        Scalar::U32 => array!(u32),
        Scalar::I64 => array!(i64),
        Scalar::U64 => array!(u64),
        Scalar::F32 => array!(f32),
        Scalar::F64 => array!(f64),
        s => {
            let list = PyList::empty(py);
            for _ in 0..n {
                list.append(decode_scalar(py, s, &f.label, r)?)?;
            }
            list.into_any()
        }
    })
}

fn decode_scalar<'py>(
    py: Python<'py>,
    s: &Scalar,
    label: &str,
    r: &mut Reader<'_>,
) -> PyResult<Bound<'py, PyAny>> {
    macro_rules! num {
        ($t:ty) => {{
            let size = std::mem::size_of::<$t>();
            let b = r.take(size, size, label)?;
            <$t>::from_le_bytes(b.try_into().expect("slice of the value's size"))
                .into_pyobject(py)?
                .into_any()
        }};
    }
    Ok(match s {
        Scalar::Bool => {
            let b = r.take(1, 1, label)?[0];
            if b > 1 {
                return Err(PyValueError::new_err(format!("{label}: {b} is not a bool")));
            }
            pyo3::types::PyBool::new(py, b == 1).to_owned().into_any()
        }
        Scalar::Byte => PyBytes::new(py, r.take(1, 1, label)?).into_any(),
        Scalar::Char => {
            let c = r.take(1, 1, label)?[0] as char;
            PyString::new(py, c.encode_utf8(&mut [0; 4])).into_any()
        }
        Scalar::I8 => num!(i8),
        Scalar::U8 => num!(u8),
        Scalar::I16 => num!(i16),
        Scalar::U16 => num!(u16),
        Scalar::I32 => num!(i32),
        Scalar::U32 => num!(u32),
        Scalar::I64 => num!(i64),
        Scalar::U64 => num!(u64),
        Scalar::F32 => num!(f32),
        Scalar::F64 => num!(f64),
        Scalar::Str(_) => {
            let n = r.u32(label)? as usize;
            if n == 0 {
                return Err(truncated(label));
            }
            let b = r.take(1, n, label)?;
            let (text, nul) = b.split_at(n - 1);
            if nul != [0] {
                return Err(truncated(label));
            }
            let text = std::str::from_utf8(text)
                .map_err(|_| PyValueError::new_err(format!("{label}: the string is not UTF-8")))?;
            PyString::new(py, text).into_any()
        }
        Scalar::Msg(plan) => decode_msg(py, plan, r)?,
    })
}

/// A field, for the Python class factory: `(name, ROS type, base type,
/// nested type name, collection, size or bound, default as written)`.
pub type FieldInfo = (
    String,
    String,
    String,
    Option<String>,
    &'static str,
    u64,
    Option<String>,
);

/// A constant: `(name, type, value as written)`.
pub type ConstantInfo = (String, String, String);

/// What the Python class factory needs of a type: its fields and its
/// constants.
pub type TypeInfo = (Vec<FieldInfo>, Vec<ConstantInfo>);

/// What the Python class factory needs of a type.
pub fn info(type_name: &str) -> PyResult<TypeInfo> {
    let spec = spec(type_name)
        .ok_or_else(|| PyValueError::new_err(format!("unknown message type {type_name}")))?;
    let fields = spec
        .fields
        .iter()
        .map(|f| {
            let (coll, n) = match f.ty.collection {
                Collection::Single => ("single", 0),
                Collection::Array(n) => ("array", n),
                Collection::BoundedSequence(n) => ("bounded", n),
                Collection::UnboundedSequence => ("sequence", 0),
            };
            let base = match &f.ty.base {
                BaseType::Primitive(p) => p.msg_name().to_string(),
                BaseType::BoundedString(_) => "string".into(),
                BaseType::BoundedWString(_) => "wstring".into(),
                BaseType::Nested { .. } => "message".into(),
            };
            (
                f.name.clone(),
                f.ty.to_string(),
                base,
                f.ty.base.nested_type_name(),
                coll,
                n,
                f.default.clone(),
            )
        })
        .collect();
    let constants = spec
        .constants
        .iter()
        .map(|c| (c.name.clone(), c.ty.msg_name().to_string(), c.value.clone()))
        .collect();
    Ok((fields, constants))
}

//! Parameters: Python values as the core's `ParameterValue`s and back,
//! with rclpy's exception names for the errors users catch.

use myelin::{ParameterError, ParameterValue};
use pyo3::create_exception;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyFloat, PyInt, PyList, PyString, PyTuple};

create_exception!(
    _myelin,
    ParameterNotDeclaredException,
    crate::MyelinError,
    "The parameter has not been declared."
);
create_exception!(
    _myelin,
    ParameterAlreadyDeclaredException,
    crate::MyelinError,
    "The parameter is declared already."
);
create_exception!(
    _myelin,
    InvalidParameterValueException,
    crate::MyelinError,
    "The value is of the wrong type, out of range, read-only or refused by a callback."
);

/// The Python exception for a parameter error, with the core's message.
pub fn error(e: ParameterError) -> PyErr {
    let text = e.to_string();
    match e {
        ParameterError::NotDeclared(_) => ParameterNotDeclaredException::new_err(text),
        ParameterError::AlreadyDeclared(_) => ParameterAlreadyDeclaredException::new_err(text),
        ParameterError::InvalidName { .. } => crate::InvalidNameError::new_err(text),
        ParameterError::ContextShutDown => crate::MyelinError::new_err(text),
        _ => InvalidParameterValueException::new_err(text),
    }
}

/// A Python value as a parameter value: None, bool, int, float, str,
/// bytes, or a list or tuple of bool, int, float (ints allowed among
/// floats) or str.
pub fn from_py(name: &str, v: &Bound<'_, PyAny>) -> PyResult<ParameterValue> {
    let bad = |what: &str| {
        PyTypeError::new_err(format!(
            "parameter {name:?}: {what} is not a parameter value (None, bool, int, float, str, \
             bytes, or a list of bool, int, float or str)"
        ))
    };
    if v.is_none() {
        return Ok(ParameterValue::NotSet);
    }
    if v.is_instance_of::<PyBool>() {
        return Ok(ParameterValue::Bool(v.extract()?));
    }
    if v.is_instance_of::<PyInt>() {
        return v
            .extract::<i64>()
            .map(ParameterValue::Integer)
            .map_err(|_| bad("an int beyond int64"));
    }
    if v.is_instance_of::<PyFloat>() {
        return Ok(ParameterValue::Double(v.extract()?));
    }
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(ParameterValue::String(s.to_cow()?.into_owned()));
    }
    if let Ok(b) = v.cast::<PyBytes>() {
        return Ok(ParameterValue::ByteArray(b.as_bytes().to_vec()));
    }
    if !(v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>()) {
        let ty = v
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default();
        return Err(bad(&format!("a {ty}")));
    }
    let items: Vec<Bound<'_, PyAny>> = v.try_iter()?.collect::<PyResult<_>>()?;
    let all = |f: &dyn Fn(&Bound<'_, PyAny>) -> bool| items.iter().all(f);
    if items.is_empty() {
        // No element says which array type it is; rclpy refuses it too.
        return Err(bad("an empty list"));
    }
    if all(&|x| x.is_instance_of::<PyBool>()) {
        return Ok(ParameterValue::BoolArray(
            items.iter().map(|x| x.extract()).collect::<PyResult<_>>()?,
        ));
    }
    if all(&|x| x.is_instance_of::<PyInt>() && !x.is_instance_of::<PyBool>()) {
        return Ok(ParameterValue::IntegerArray(
            items
                .iter()
                .map(|x| x.extract::<i64>().map_err(|_| bad("an int beyond int64")))
                .collect::<PyResult<_>>()?,
        ));
    }
    if all(&|x| {
        (x.is_instance_of::<PyFloat>() || x.is_instance_of::<PyInt>())
            && !x.is_instance_of::<PyBool>()
    }) {
        return Ok(ParameterValue::DoubleArray(
            items.iter().map(|x| x.extract()).collect::<PyResult<_>>()?,
        ));
    }
    if all(&|x| x.is_instance_of::<PyString>()) {
        return Ok(ParameterValue::StringArray(
            items.iter().map(|x| x.extract()).collect::<PyResult<_>>()?,
        ));
    }
    Err(bad("a list of mixed types"))
}

/// A parameter value as Python (arrays as lists, a byte array as bytes).
pub fn to_py<'py>(py: Python<'py>, v: &ParameterValue) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        ParameterValue::NotSet => py.None().into_bound(py),
        ParameterValue::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        ParameterValue::Integer(i) => i.into_pyobject(py)?.into_any(),
        ParameterValue::Double(d) => d.into_pyobject(py)?.into_any(),
        ParameterValue::String(s) => PyString::new(py, s).into_any(),
        ParameterValue::ByteArray(b) => PyBytes::new(py, b).into_any(),
        ParameterValue::BoolArray(a) => PyList::new(py, a)?.into_any(),
        ParameterValue::IntegerArray(a) => PyList::new(py, a)?.into_any(),
        ParameterValue::DoubleArray(a) => PyList::new(py, a)?.into_any(),
        ParameterValue::StringArray(a) => PyList::new(py, a)?.into_any(),
    })
}

/// rclpy's `Parameter.Type` number of a value.
pub fn type_number(v: &ParameterValue) -> u8 {
    match v {
        ParameterValue::NotSet => 0,
        ParameterValue::Bool(_) => 1,
        ParameterValue::Integer(_) => 2,
        ParameterValue::Double(_) => 3,
        ParameterValue::String(_) => 4,
        ParameterValue::ByteArray(_) => 5,
        ParameterValue::BoolArray(_) => 6,
        ParameterValue::IntegerArray(_) => 7,
        ParameterValue::DoubleArray(_) => 8,
        ParameterValue::StringArray(_) => 9,
    }
}

//! Python objects to JSON text and JSON values back, by hand over the few types JSON has.
//!
//! The direction that matters is Python → JSON: it carries whatever the model sent, so it never
//! fails. A value JSON cannot hold becomes a marker object (`{"unsupported_python_value": TYPE}`)
//! in its place; the core then rejects the call with an ordinary error result naming the field, and
//! the call is logged like any other. Conversions follow `json.dumps` where it has a rule: tuples
//! are arrays, non-string dict keys are their `str()` (two keys with the same `str()` are then a
//! duplicate key, which the core refuses).
//!
//! The text is written into a [`BoundedText`]: once it passes the server's request-size limit,
//! conversion stops at once (so neither a huge string nor a structure that shares one list many
//! times over can make it grow), and the call is refused with the digest of what was made.

use mnemo::tool::BoundedText;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};

/// Nesting beyond this is replaced by a marker (the core refuses far shallower input anyway), so
/// a hostile structure cannot exhaust the stack.
const MAX_DEPTH: usize = 256;

/// The marker that stands for a value JSON cannot represent.
fn unsupported(what: &str) -> Value {
    let mut map = Map::new();
    map.insert(
        "unsupported_python_value".into(),
        Value::String(what.into()),
    );
    Value::Object(map)
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map_or_else(|_| "object".into(), |n| n.to_string_lossy().into_owned())
}

/// A Python `int`. Integers beyond 64 bits become the nearest float (saturating at the largest
/// finite one), which is what the core's JSON parser makes of the same digits: the command parser
/// then reports such a line number as out of range.
fn int_value(int: &Bound<'_, PyInt>) -> Value {
    if let Ok(i) = int.extract::<i64>() {
        return Value::Number(i.into());
    }
    if let Ok(u) = int.extract::<u64>() {
        return Value::Number(u.into());
    }
    let negative = int.lt(0).unwrap_or(false);
    let float = int.extract::<f64>().unwrap_or(f64::MAX);
    let float = if float.is_finite() { float } else { f64::MAX };
    let float = if negative { -float.abs() } else { float.abs() };
    Number::from_f64(float).map_or_else(|| unsupported("int"), Value::Number)
}

fn string_value(s: &Bound<'_, PyString>) -> String {
    // A lone surrogate cannot be UTF-8: it is folded to U+FFFD, as the SDK's runner does.
    s.to_string_lossy().into_owned()
}

/// Writes any Python object's JSON text into `out`, stopping as soon as `out` is over its limit.
/// Never fails otherwise: see the module docs.
pub fn to_json_text(obj: &Bound<'_, PyAny>, out: &mut BoundedText) {
    write_at(obj, 0, out);
}

/// Writes one small JSON value; `false` once `out` is over its limit.
fn write_value(out: &mut BoundedText, value: &Value) -> bool {
    serde_json::to_writer(out, value).is_ok()
}

/// Writes a string, escaped; `false` once `out` is over its limit.
fn write_str(out: &mut BoundedText, s: &str) -> bool {
    serde_json::to_writer(out, s).is_ok()
}

/// Writes `obj` at nesting `depth`; `false` once `out` is over its limit (the caller stops).
fn write_at(obj: &Bound<'_, PyAny>, depth: usize, out: &mut BoundedText) -> bool {
    if depth > MAX_DEPTH {
        return write_value(out, &unsupported("nesting too deep"));
    }
    if obj.is_none() {
        return out.push(b"null");
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return out.push(if b.is_true() { b"true" } else { b"false" });
    }
    if let Ok(i) = obj.cast::<PyInt>() {
        return write_value(out, &int_value(i));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        let value = Number::from_f64(f.value())
            .map_or_else(|| unsupported("non-finite float"), Value::Number);
        return write_value(out, &value);
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return write_str(out, &s.to_string_lossy());
    }
    if let Ok(dict) = obj.cast::<PyDict>() {
        if !out.push(b"{") {
            return false;
        }
        for (n, (key, item)) in dict.iter().enumerate() {
            let key = match key.cast::<PyString>() {
                Ok(s) => string_value(s),
                Err(_) => match key.str() {
                    Ok(s) => string_value(&s),
                    Err(_) => type_name(&key),
                },
            };
            if (n > 0 && !out.push(b","))
                || !write_str(out, &key)
                || !out.push(b":")
                || !write_at(&item, depth + 1, out)
            {
                return false;
            }
        }
        return out.push(b"}");
    }
    let items: Option<Vec<Bound<'_, PyAny>>> = if let Ok(list) = obj.cast::<PyList>() {
        Some(list.iter().collect())
    } else if let Ok(tuple) = obj.cast::<PyTuple>() {
        Some(tuple.iter().collect())
    } else {
        None
    };
    if let Some(items) = items {
        if !out.push(b"[") {
            return false;
        }
        for (n, item) in items.iter().enumerate() {
            if (n > 0 && !out.push(b",")) || !write_at(item, depth + 1, out) {
                return false;
            }
        }
        return out.push(b"]");
    }
    // A pydantic model (an SDK type such as a tool_use block or a memory command): the fields it
    // was given, in their JSON form.
    if obj.hasattr("model_dump").unwrap_or(false) {
        let kwargs = PyDict::new(obj.py());
        if kwargs.set_item("mode", "json").is_ok()
            && kwargs.set_item("exclude_unset", true).is_ok()
            && let Ok(dumped) = obj.call_method("model_dump", (), Some(&kwargs))
            && dumped.cast::<PyDict>().is_ok()
        {
            return write_at(&dumped, depth + 1, out);
        }
    }
    write_value(out, &unsupported(&type_name(obj)))
}

/// The `id` of a `tool_use` block given as a dict, when it is a string.
pub fn block_id(obj: &Bound<'_, PyAny>) -> Option<String> {
    let dict = obj.cast::<PyDict>().ok()?;
    let kind = dict.get_item("type").ok()??;
    if kind.extract::<String>().ok()? != "tool_use" {
        return None;
    }
    dict.get_item("id").ok()??.extract::<String>().ok()
}

/// Converts JSON to the plain Python objects `json.loads` would give.
pub fn to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any()
            } else if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any()
            } else {
                PyFloat::new(py, n.as_f64().unwrap_or(f64::NAN)).into_any()
            }
        }
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (key, item) in map {
                dict.set_item(key, to_py(py, item)?)?;
            }
            dict.into_any()
        }
    })
}

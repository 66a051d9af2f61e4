//! Options: names parsed as the library spells them, the defaults, and the dedup options
//! the Python side passes as a dict.

use super::*;

/// An option whose values are names, as the library spells them; a `ValueError` naming them
/// otherwise.
pub(crate) fn named<T: Named>(value: &str) -> PyResult<T> {
    T::from_name(value).map_err(|e| PyValueError::new_err(e.to_string()))
}

pub(crate) fn engine_choice(engine: &str) -> PyResult<EngineChoice> {
    named(engine)
}

pub(crate) fn gpu_kernels(kernels: &str) -> PyResult<Kernels> {
    named(kernels)
}

/// Every shared option's default, as JSON: what `neardup.defaults()` returns.
#[pyfunction]
pub(crate) fn defaults() -> String {
    serde_json::Value::Object(neardup::ops::defaults()).to_string()
}

/// One option's value as JSON: what its serde form reads. `None` means the default.
fn json_value(key: &str, v: &Bound<'_, PyAny>) -> PyResult<Option<serde_json::Value>> {
    use pyo3::types::{PyBool, PyFloat, PyInt};
    let type_err = |what: String| PyTypeError::new_err(format!("option {key}: {what}"));
    if v.is_none() {
        return Ok(None);
    }
    let value = if v.is_instance_of::<PyBool>() {
        serde_json::Value::Bool(v.extract()?)
    } else if v.is_instance_of::<PyInt>() {
        match (v.extract::<i64>(), v.extract::<u64>()) {
            (Ok(n), _) => n.into(),
            (_, Ok(n)) => n.into(),
            _ => return Err(type_err(format!("{v} is out of range"))),
        }
    } else if v.is_instance_of::<PyFloat>() {
        let x: f64 = v.extract()?;
        serde_json::Number::from_f64(x)
            .map(serde_json::Value::Number)
            .ok_or_else(|| PyValueError::new_err(format!("option {key}: {x} is not a number")))?
    } else if v.is_instance_of::<PyString>() {
        serde_json::Value::String(v.extract()?)
    } else if let Ok(n) = v.extract::<i64>() {
        // NumPy's integers (anything with `__index__`), then its bools.
        n.into()
    } else if let Ok(b) = v.extract::<bool>() {
        serde_json::Value::Bool(b)
    } else {
        let t = v.get_type().name()?;
        return Err(type_err(format!("{t} is not a bool, int, float or str")));
    };
    Ok(Some(value))
}

/// The dedup options the Python side passes as a dict (its keyword arguments; a missing or
/// `None` value takes the library's default), resolved: the configuration and the fields
/// records are read by. Their names and forms are [`DedupOptions`]'s serde form: a value of
/// the wrong type is a `TypeError`, a value the option does not take a `ValueError`, each
/// naming the option.
pub(crate) fn parse_options(o: &Bound<'_, PyDict>) -> PyResult<(DedupConfig, Fields)> {
    let names = DedupOptions::names();
    let mut given = serde_json::Map::new();
    for (key, value) in o.iter() {
        let key: String = key.extract()?;
        if !names.contains(&key) {
            return Err(PyTypeError::new_err(format!(
                "unknown option {key:?} (options: {})",
                names.join(", ")
            )));
        }
        let Some(value) = json_value(&key, &value)? else {
            continue;
        };
        // Each option read alone first, so that its error names it.
        let alone = serde_json::Map::from_iter([(key.clone(), value.clone())]);
        if let Err(e) = serde_json::from_value::<DedupOptions>(alone.into()) {
            let m = e.to_string();
            return Err(
                if m.starts_with("invalid type") || m.starts_with("invalid value") {
                    PyTypeError::new_err(format!("option {key}: {m}"))
                } else {
                    PyValueError::new_err(m)
                },
            );
        }
        given.insert(key, value);
    }
    let options: DedupOptions =
        serde_json::from_value(given.into()).map_err(|e| PyValueError::new_err(e.to_string()))?;
    options.resolve().map_err(err)
}

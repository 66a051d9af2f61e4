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

/// The text options (SPEC §1.4) as Python spells them.
pub(crate) fn text_rule(shingle: &str, normalize: &str) -> PyResult<neardup::text::TextRule> {
    Ok(neardup::text::TextRule {
        shingle: named(shingle)?,
        normalize: named(normalize)?,
    })
}

/// The dedup options the Python side passes as a dict (its keyword arguments; a missing or
/// `None` value takes the library's default), resolved: the configuration and the fields
/// records are read by.
pub(crate) fn parse_options(o: &Bound<'_, PyDict>) -> PyResult<(DedupConfig, Fields)> {
    for key in o.keys() {
        let key: String = key.extract()?;
        if !DedupOptions::NAMES.contains(&key.as_str()) {
            return Err(PyTypeError::new_err(format!(
                "unknown option {key:?} (options: {})",
                DedupOptions::NAMES.join(", ")
            )));
        }
    }
    fn get<'py, T: for<'a> FromPyObject<'a, 'py>>(
        o: &Bound<'py, PyDict>,
        key: &str,
        default: T,
    ) -> PyResult<T> {
        match o.get_item(key)? {
            Some(v) if !v.is_none() => v.extract().map_err(|e| {
                PyTypeError::new_err(format!("option {key}: {}", Into::<PyErr>::into(e)))
            }),
            _ => Ok(default),
        }
    }
    fn get_named<T: Named + Copy>(o: &Bound<'_, PyDict>, key: &str, default: T) -> PyResult<T> {
        match o.get_item(key)? {
            Some(v) if !v.is_none() => named(&v.extract::<String>().map_err(|e| {
                PyTypeError::new_err(format!("option {key}: {}", Into::<PyErr>::into(e)))
            })?),
            _ => Ok(default),
        }
    }
    let d = DedupOptions::default();
    let keep = match get(o, "keep", None::<String>)?.as_deref() {
        None => d.keep.clone(),
        // In memory, a policy by value reads `keep_values`, not a field.
        Some("max") => KeepChoice {
            policy: Keep::FieldMax,
            field: None,
        },
        Some("min") => KeepChoice {
            policy: Keep::FieldMin,
            field: None,
        },
        Some(s) => s.parse().map_err(PyValueError::new_err)?,
    };
    let options = DedupOptions {
        k: get(o, "k", d.k)?,
        num_perm: get(o, "num_perm", d.num_perm)?,
        seed: get(o, "seed", d.seed)?,
        shingle: get_named(o, "shingle", d.shingle)?,
        normalize: get_named(o, "normalize", d.normalize)?,
        bands: get(o, "bands", d.bands)?,
        rows: get(o, "rows", d.rows)?,
        threshold: get(o, "threshold", d.threshold)?,
        confirm: get_named(o, "confirm", d.confirm)?,
        exact: get(o, "exact", d.exact)?,
        tag_only: get(o, "tag_only", d.tag_only)?,
        keep,
        group_field: get(o, "group_field", d.group_field.clone())?,
        group_missing: get_named(o, "group_missing", d.group_missing)?,
        id_field: get(o, "id_field", d.id_field.clone())?,
        text_field: get(o, "text_field", d.text_field.clone())?,
        numeric_ids: get(o, "numeric_ids", d.numeric_ids)?,
        cluster: get_named(o, "cluster", d.cluster)?,
    };
    options.resolve().map_err(err)
}

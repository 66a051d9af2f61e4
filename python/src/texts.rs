//! Texts in: a list of `str`, or Arrow strings through the PyCapsule interface, read in
//! place.

use super::*;

/// Texts taken from Python: copies of `str` objects, or Arrow arrays read in place.
pub(crate) enum Texts {
    Owned(Vec<String>),
    Arrow(Vec<ArrayRef>),
}

impl Texts {
    /// Every text, as a slice into the copies or into the Arrow buffers (no copy). `what`
    /// names the argument in errors.
    pub(crate) fn strs(&self, what: &str) -> PyResult<Vec<&str>> {
        match self {
            Texts::Owned(v) => Ok(v.iter().map(String::as_str).collect()),
            Texts::Arrow(arrays) => {
                let mut out = Vec::with_capacity(arrays.iter().map(|a| a.len()).sum());
                for a in arrays {
                    let base = out.len();
                    match a.data_type() {
                        DataType::Utf8 => push_all(a.as_string::<i32>(), &mut out, base, what)?,
                        DataType::LargeUtf8 => {
                            push_all(a.as_string::<i64>(), &mut out, base, what)?
                        }
                        DataType::Utf8View => push_all(a.as_string_view(), &mut out, base, what)?,
                        other => {
                            return Err(PyTypeError::new_err(format!(
                                "{what}: an Arrow array of {other}, not of strings"
                            )))
                        }
                    }
                }
                Ok(out)
            }
        }
    }
}

/// Append every string of `a` (a string array of any layout) to `out`; a null is an error naming
/// its row (`base` + its index).
pub(crate) fn push_all<'a, A>(a: A, out: &mut Vec<&'a str>, base: usize, what: &str) -> PyResult<()>
where
    A: arrow_array::ArrayAccessor<Item = &'a str>,
{
    for i in 0..a.len() {
        if a.is_null(i) {
            return Err(PyValueError::new_err(format!(
                "{what}[{}] is null",
                base + i
            )));
        }
        out.push(a.value(i));
    }
    Ok(())
}

pub(crate) fn arrow_err(what: &str, e: arrow_schema::ArrowError) -> PyErr {
    PyValueError::new_err(format!("{what}: cannot import the Arrow data: {e}"))
}

/// A table's column `column` (the stream or array of a table is a struct of its columns).
pub(crate) fn column_of(a: ArrayRef, column: &str, what: &str) -> PyResult<ArrayRef> {
    match a.data_type() {
        DataType::Struct(_) => {
            let s: &StructArray = a.as_struct();
            s.column_by_name(column).cloned().ok_or_else(|| {
                PyValueError::new_err(format!(
                    "{what}: the table has no column {column:?} (columns: {})",
                    s.column_names().join(", ")
                ))
            })
        }
        _ => Ok(a),
    }
}

/// Take `obj`'s texts: Arrow data through `__arrow_c_stream__` or `__arrow_c_array__` (pyarrow,
/// polars, anything that speaks the PyCapsule interface; for a table, its column `column`),
/// else a sequence of `str`.
pub(crate) fn texts_of(obj: &Bound<'_, PyAny>, column: &str, what: &str) -> PyResult<Texts> {
    if obj.hasattr("__arrow_c_stream__")? {
        let cap = obj.call_method0("__arrow_c_stream__")?;
        let cap = cap.cast::<PyCapsule>()?;
        let ptr = cap.pointer_checked(Some(c"arrow_array_stream"))?;
        // SAFETY: the capsule holds a valid stream; `from_raw` moves it out and leaves a
        // released one behind, which the capsule's destructor ignores.
        let reader = unsafe { ArrayStreamReader::from_raw(ptr.as_ptr().cast()) }
            .map_err(|e| arrow_err(what, e))?;
        let mut arrays = Vec::new();
        for a in reader {
            arrays.push(column_of(a.map_err(|e| arrow_err(what, e))?, column, what)?);
        }
        return Ok(Texts::Arrow(arrays));
    }
    if obj.hasattr("__arrow_c_array__")? {
        let pair = obj.call_method0("__arrow_c_array__")?;
        let (schema_cap, array_cap): (Bound<'_, PyAny>, Bound<'_, PyAny>) = pair.extract()?;
        let schema_cap = schema_cap.cast::<PyCapsule>()?;
        let array_cap = array_cap.cast::<PyCapsule>()?;
        let sp = schema_cap.pointer_checked(Some(c"arrow_schema"))?;
        let ap = array_cap.pointer_checked(Some(c"arrow_array"))?;
        // SAFETY: valid C data interface structs, moved out of their capsules as above.
        let data = unsafe {
            let schema = FFI_ArrowSchema::from_raw(sp.as_ptr().cast());
            let array = FFI_ArrowArray::from_raw(ap.as_ptr().cast());
            from_ffi(array, &schema)
        }
        .map_err(|e| arrow_err(what, e))?;
        return Ok(Texts::Arrow(vec![column_of(
            make_array(data),
            column,
            what,
        )?]));
    }
    if obj.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "{what} is one str: pass a list of texts"
        )));
    }
    let mut out = Vec::new();
    for (i, item) in obj.try_iter()?.enumerate() {
        let item = item?;
        let s = item.cast::<PyString>().map_err(|_| {
            PyTypeError::new_err(format!(
                "{what}[{i}] is {}, not str",
                item.get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default()
            ))
        })?;
        out.push(match s.to_cow()? {
            Cow::Borrowed(b) => b.to_string(),
            Cow::Owned(o) => o,
        });
    }
    Ok(Texts::Owned(out))
}

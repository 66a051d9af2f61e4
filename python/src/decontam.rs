//! Decontamination: a protected set built once, then checked against batches of texts.

use super::*;
use neardup::stages::decontam::ProtectedSet;

/// A protected set (SPEC §4): texts and files added once, documents checked many times.
#[pyclass(name = "Protected", module = "neardup._neardup")]
pub(crate) struct Protected {
    set: ProtectedSet,
}

/// Each text's tag, or `None` for a clean one.
type Tags = Vec<Option<String>>;

/// `min_score` as `decontam --min-score` takes it.
fn checked_min_score(min_score: Option<f64>) -> PyResult<Option<f64>> {
    match min_score {
        Some(s) if !(s > 0.0 && s <= 1.0) => Err(PyValueError::new_err(format!(
            "min_score {s} is outside (0, 1]"
        ))),
        s => Ok(s),
    }
}

#[pymethods]
impl Protected {
    #[new]
    #[pyo3(signature = (*, n, protect_short, join_fields, task_field))]
    fn new(
        n: usize,
        protect_short: usize,
        join_fields: bool,
        task_field: Option<String>,
    ) -> PyResult<Self> {
        let set = ProtectedSet::new(n)
            .map_err(err)?
            .with_short_items(protect_short)
            .with_joined_fields(join_fields)
            .with_task_field(task_field);
        Ok(Protected { set })
    }

    /// Add a protected file, read as `decontam --protected` reads it.
    fn add_file(&mut self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        let set = &mut self.set;
        detached(py, || set.add_file(&path).map_err(err))
    }

    /// Add protected texts, as one source named `name`.
    fn add_texts(&mut self, py: Python<'_>, name: &str, texts: &Bound<'_, PyAny>) -> PyResult<()> {
        let t = texts_of(texts, "text", "texts")?;
        let strs = t.strs("texts")?;
        let set = &mut self.set;
        detached(py, || {
            set.add_texts(name, strs.iter().copied());
            Ok(())
        })
    }

    /// Each text's verdict: a byte per text (1: caught) and, with `tags`, the tag of each
    /// caught text (`None` for a clean one) as `decontam --mode tag` writes it.
    #[pyo3(signature = (texts, *, column, min_score, tags))]
    fn check<'py>(
        &self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
        column: &str,
        min_score: Option<f64>,
        tags: bool,
    ) -> PyResult<(Bound<'py, PyByteArray>, Option<Tags>)> {
        let min_score = checked_min_score(min_score)?;
        let t = texts_of(texts, column, "texts")?;
        let strs = t.strs("texts")?;
        let set = &self.set;
        let (caught, tags) = detached(py, || {
            let verdicts = set.verdicts(&strs, tags, min_score);
            let caught: Vec<u8> = verdicts.iter().map(|(h, _)| !h.is_empty() as u8).collect();
            let tags = tags.then(|| {
                verdicts
                    .iter()
                    .map(|(hits, score)| {
                        (!hits.is_empty()).then(|| {
                            let sources: Vec<u32> = hits.iter().map(|h| h.0).collect();
                            set.tag(&sources, *score)
                        })
                    })
                    .collect()
            });
            Ok((caught, tags))
        })?;
        Ok((PyByteArray::new(py, &caught), tags))
    }

    /// The set's shape as JSON: `n`, the keys, and each source with its counts.
    fn summary(&self) -> String {
        json(&serde_json::json!({
            "n": self.set.n(),
            "protect_short": self.set.short_min(),
            "ngrams": self.set.ngram_keys(),
            "whole": self.set.whole_keys(),
            "files": self.set.files(),
            "sources": self.set.sources(),
            "warning": self.set.short_texts_warning(),
        }))
    }
}

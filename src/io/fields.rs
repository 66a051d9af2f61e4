//! Which fields of a record (a JSONL line or a Parquet row) hold its id and its text, and the
//! values dedup's policies read.

/// Which fields of a record hold its id and its text.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Fields {
    /// The id's field; in Parquet a dotted path (`metadata.id`) names a field of a struct
    /// column.
    pub id: String,
    pub text: String,
    /// Accept integer ids (written as their decimal digits) instead of rejecting them.
    pub numeric_ids: bool,
    /// A numeric field read for each document, to choose a cluster's survivor by
    /// (`dedup --keep field:NAME:max|min`).
    pub keep: Option<String>,
    /// A field whose value puts each document in a group; clusters never cross groups
    /// (`dedup --group-field`).
    pub group: Option<String>,
}

/// `--id-field @row`: the records have no id field; each one's id is its input's name and its
/// place there ([`Fields::row_id`]).
pub const ROW_IDS: &str = "@row";

impl Fields {
    /// Are ids made from each record's place (`--id-field @row`) instead of read?
    pub fn row_ids(&self) -> bool {
        self.id == ROW_IDS
    }

    /// The id `--id-field @row` gives the record at `place` of input `file`: its 1-based line in
    /// a JSONL file, its 0-based row in a Parquet file (the places error messages name),
    /// zero-padded to 12 digits so that ids sort in input order within a file.
    pub fn row_id(file: &str, place: u64) -> String {
        format!("{file}:{place:012}")
    }

    /// Records read by the `id` and `text` fields: two different, non-empty names.
    pub fn new(id: &str, text: &str, numeric_ids: bool) -> Result<Fields, crate::error::Error> {
        if id.is_empty() || text.is_empty() {
            return Err(crate::error::Error::Param(
                "the id field and the text field must not be empty".into(),
            ));
        }
        if id == text {
            return Err(crate::error::Error::Param(format!(
                "the id field and the text field are both {id:?}"
            )));
        }
        Ok(Fields {
            id: id.into(),
            text: text.into(),
            numeric_ids,
            keep: None,
            group: None,
        })
    }
}

impl Default for Fields {
    fn default() -> Self {
        Fields {
            id: "id".into(),
            text: "text".into(),
            numeric_ids: false,
            keep: None,
            group: None,
        }
    }
}

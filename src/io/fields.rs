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

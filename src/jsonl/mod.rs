//! JSONL records: the id and text of a line ([`record`]), the fast scanner that reads the
//! common shape in one pass (`scan`), and writing a record back tagged ([`tag`]).

pub mod record;
pub(crate) mod scan;
pub mod tag;

pub use record::{
    field_value, json_kind, parse_record, parse_record_full, parse_text, Fields, Record,
};
pub use tag::{write_tagged, write_tagged_json};

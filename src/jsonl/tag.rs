//! Writing a record back with `meta.<key>` set, every other byte of the line as it was.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, MapAccess, Visitor};

use super::record::{describe_json_error, top_level_keys_without, Key};
use crate::error::Error;

/// Copy `line` (a JSON object) to `out` with `meta.<key> = value` set, keeping every field and
/// its order. An existing `meta` object keeps its fields; a `meta` that is not an object is an
/// error naming the field.
pub fn write_tagged(
    out: &mut Vec<u8>,
    line: &[u8],
    key: &str,
    value: &str,
    file: &str,
    line_no: u64,
) -> Result<(), Error> {
    write_tag(out, line, key, TagValue::Str(value), file, line_no)
}

/// [`write_tagged`] with a value given as JSON text (an object, a number ...), written as it is.
pub fn write_tagged_json(
    out: &mut Vec<u8>,
    line: &[u8],
    key: &str,
    json: &str,
    file: &str,
    line_no: u64,
) -> Result<(), Error> {
    write_tag(out, line, key, TagValue::Json(json), file, line_no)
}

/// A tag's value: a string (written as a JSON string), or JSON text.
#[derive(Clone, Copy)]
enum TagValue<'a> {
    Str(&'a str),
    Json(&'a str),
}

impl TagValue<'_> {
    fn write(self, out: &mut Vec<u8>) {
        match self {
            TagValue::Str(s) => {
                serde_json::to_writer(&mut *out, s).expect("writing JSON to memory cannot fail")
            }
            TagValue::Json(j) => out.extend_from_slice(j.as_bytes()),
        }
    }
}

fn write_tag(
    out: &mut Vec<u8>,
    line: &[u8],
    key: &str,
    value: TagValue<'_>,
    file: &str,
    line_no: u64,
) -> Result<(), Error> {
    // Most records have no `meta`: then the line is copied as it is and the new member
    // spliced in before its closing brace, without building the record as a value. The
    // scanner of flat records answers for most lines; serde_json for the rest.
    let keys = crate::jsonl::scan::scan_keys_without(line, "meta")
        .or_else(|| top_level_keys_without(line, "meta"));
    if let Some(keys) = keys {
        let end = line
            .iter()
            .rposition(|&b| b == b'}')
            .expect("a JSON object ends with a brace");
        out.extend_from_slice(&line[..end]);
        if keys > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"\"meta\":{");
        serde_json::to_writer(&mut *out, key).expect("writing JSON to memory cannot fail");
        out.push(b':');
        value.write(out);
        out.extend_from_slice(b"}}\n");
        return Ok(());
    }
    // The record has a `meta`: every other member is copied as its raw JSON text; only `meta`
    // is parsed, extended and written back.
    let members = raw_members(line).map_err(|e| Error::Parse {
        path: file.into(),
        line: line_no,
        msg: describe_json_error(&e, line, line_no),
    })?;
    out.push(b'{');
    for (i, (k, raw)) in members.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut *out, k.as_ref()).expect("writing JSON to memory cannot fail");
        out.push(b':');
        if k == "meta" {
            // Its own members stay raw too; the tag replaces an old one in place, or comes
            // last.
            let inner = raw_members(raw.get().as_bytes()).map_err(|_| {
                let kind = match raw.get().trim_start().as_bytes().first() {
                    Some(b'[') => "an array",
                    Some(b'"') => "a string",
                    Some(b't') | Some(b'f') => "a boolean",
                    Some(b'n') => "null",
                    _ => "a number",
                };
                Error::Field {
                    path: file.into(),
                    line: line_no,
                    field: "meta".into(),
                    msg: format!("is {kind}, it must be an object to hold `{key}`"),
                }
            })?;
            out.push(b'{');
            let mut replaced = false;
            for (j, (ik, iraw)) in inner.iter().enumerate() {
                if j > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, ik.as_ref()).expect("in memory");
                out.push(b':');
                if ik == key {
                    value.write(out);
                    replaced = true;
                } else {
                    out.extend_from_slice(iraw.get().as_bytes());
                }
            }
            if !replaced {
                if !inner.is_empty() {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, key).expect("in memory");
                out.push(b':');
                value.write(out);
            }
            out.push(b'}');
        } else {
            out.extend_from_slice(raw.get().as_bytes());
        }
    }
    out.extend_from_slice(b"}\n");
    Ok(())
}

/// The members of a JSON object line, each value as its raw text.
fn raw_members(
    line: &[u8],
) -> Result<Vec<(Cow<'_, str>, &serde_json::value::RawValue)>, serde_json::Error> {
    struct Members;
    impl<'de> Visitor<'de> for Members {
        type Value = Vec<(Cow<'de, str>, &'de serde_json::value::RawValue)>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("NEARDUP_NOT_AN_OBJECT")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut v = Vec::new();
            while let Some(Key(k)) = map.next_key::<Key>()? {
                v.push((k, map.next_value::<&serde_json::value::RawValue>()?));
            }
            Ok(v)
        }
    }
    let mut de = serde_json::Deserializer::from_slice(line);
    let v = de::Deserializer::deserialize_map(&mut de, Members)?;
    de.end()?;
    Ok(v)
}

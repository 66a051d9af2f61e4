//! JSONL records: the id and text of one line, read by the fast scanner where it answers and
//! by serde_json otherwise, with errors that name the file, line and field.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};

use crate::error::Error;
pub use crate::io::Fields;

/// The id and text of one JSONL record, borrowed from the line when the JSON has no escapes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<'a> {
    pub id: Cow<'a, str>,
    pub text: Cow<'a, str>,
}

/// The value of field `name` of a parsed record: the member of that exact name, else the
/// dotted path through nested objects (`meta.quality`); `None` when absent.
pub fn field_value<'v>(record: &'v serde_json::Value, name: &str) -> Option<&'v serde_json::Value> {
    if let Some(x) = record.get(name) {
        return Some(x);
    }
    name.split('.').try_fold(record, |at, part| at.get(part))
}

/// Parse one line into its id and text. `file` and `line` are used for the error message only.
pub fn parse_record<'a>(
    bytes: &'a [u8],
    fields: &Fields,
    file: &str,
    line: u64,
) -> Result<Record<'a>, Error> {
    // The common shape in one pass; anything else (errors included) takes the full parse.
    if let Some((id, text)) = crate::jsonl::scan::scan_record(bytes, &fields.id, &fields.text) {
        if !id.is_empty() {
            return Ok(Record { id, text });
        }
    }
    parse_record_full(bytes, fields, file, line)
}

/// [`parse_record`] by serde_json alone, without the fast scanner in front: the same answer
/// for every line (the reference the scanner is tested and fuzzed against).
pub fn parse_record_full<'a>(
    bytes: &'a [u8],
    fields: &Fields,
    file: &str,
    line: u64,
) -> Result<Record<'a>, Error> {
    let (id, text) = parse_fields(bytes, fields, file, line)?;
    let field_err = |field: &str, msg: String| Error::Field {
        path: file.to_string(),
        line,
        field: field.to_string(),
        msg,
    };
    let id = match id {
        None => return Err(field_err(&fields.id, missing_field(bytes, "--id-field"))),
        Some(FieldValue::Str(s)) => s,
        Some(FieldValue::Integer(n)) if fields.numeric_ids => Cow::Owned(n),
        Some(FieldValue::Integer(_)) => {
            return Err(field_err(
                &fields.id,
                "is a number, ids must be strings (pass --numeric-ids to accept integer ids, \
                 or --id-field to name another field)"
                    .into(),
            ))
        }
        Some(other) => {
            return Err(field_err(
                &fields.id,
                format!("is {}, ids must be strings", other.kind()),
            ))
        }
    };
    if id.is_empty() {
        return Err(field_err(&fields.id, "is empty".into()));
    }
    let text = text_of(text, bytes, fields, file, line)?;
    Ok(Record { id, text })
}

/// The text of one line whose id is not read (`--id-field @row`), as [`parse_record_full`]
/// reads it.
pub fn parse_text<'a>(
    bytes: &'a [u8],
    fields: &Fields,
    file: &str,
    line: u64,
) -> Result<Cow<'a, str>, Error> {
    let (_, text) = parse_fields(bytes, fields, file, line)?;
    text_of(text, bytes, fields, file, line)
}

/// The id and text fields of one line, by serde_json; a line that is not a JSON object is an
/// error naming the file and line.
fn parse_fields<'a>(
    bytes: &'a [u8],
    fields: &Fields,
    file: &str,
    line: u64,
) -> Result<IdText<'a>, Error> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    RecordSeed { fields }
        .deserialize(&mut de)
        .and_then(|r| de.end().map(|_| r))
        .map_err(|e| Error::Parse {
            path: file.to_string(),
            line,
            msg: describe_json_error(&e, bytes, line),
        })
}

/// The text field's value: a string, else an error naming the field.
fn text_of<'a>(
    text: Option<FieldValue<'a>>,
    bytes: &[u8],
    fields: &Fields,
    file: &str,
    line: u64,
) -> Result<Cow<'a, str>, Error> {
    let msg = match text {
        Some(FieldValue::Str(s)) => return Ok(s),
        None => missing_field(bytes, "--text-field"),
        Some(other) => format!("is {}, the text must be a string", other.kind()),
    };
    Err(Error::Field {
        path: file.to_string(),
        line,
        field: fields.text.clone(),
        msg,
    })
}

/// "missing", with the fields the record has and the flag that names another one: a corpus
/// whose text sits under `content` or `raw_content` fails on its first line, and the message
/// should say how to go on.
fn missing_field(line: &[u8], flag: &str) -> String {
    let keys = top_level_keys(line);
    if keys.is_empty() {
        return format!("missing (the record has no fields; {flag} names the field to read)");
    }
    const SHOWN: usize = 20;
    let mut list: Vec<String> = keys.iter().take(SHOWN).map(|k| format!("{k:?}")).collect();
    if keys.len() > SHOWN {
        list.push(format!("and {} more", keys.len() - SHOWN));
    }
    format!(
        "missing (the record's fields are {}; name the one to read with {flag})",
        list.join(", ")
    )
}

/// The top-level keys of a JSON object line, in order (empty when it is not one).
fn top_level_keys(line: &[u8]) -> Vec<String> {
    struct Keys;
    impl<'de> Visitor<'de> for Keys {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut v = Vec::new();
            while let Some(Key(k)) = map.next_key::<Key>()? {
                map.next_value::<IgnoredAny>()?;
                v.push(k.into_owned());
            }
            Ok(v)
        }
    }
    let mut de = serde_json::Deserializer::from_slice(line);
    de::Deserializer::deserialize_map(&mut de, Keys).unwrap_or_default()
}

/// The UTF-8 byte-order mark, which some editors and tools put at the start of a file.
pub const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// What to say of line `line` when it starts with a UTF-8 byte-order mark (JSON allows none):
/// on line 1, that the file starts with one and how to strip it; on a later line, that files
/// were joined with theirs. `None` when the line does not start with one.
pub(crate) fn bom_message(bytes: &[u8], line: u64) -> Option<String> {
    if !bytes.starts_with(UTF8_BOM) {
        return None;
    }
    Some(if line <= 1 {
        "the file starts with a UTF-8 byte-order mark (the bytes EF BB BF), which JSON does not \
         allow: strip it, e.g. with `sed -i '1s/^\\xEF\\xBB\\xBF//' FILE` (GNU sed; for a \
         compressed file, decompress it first), or save the file as UTF-8 without a BOM"
            .to_string()
    } else {
        "the line starts with a UTF-8 byte-order mark (the bytes EF BB BF), which JSON does not \
         allow (files joined with their marks?): strip every one, e.g. with \
         `sed -i 's/^\\xEF\\xBB\\xBF//' FILE` (GNU sed)"
            .to_string()
    })
}

/// The message of a JSON error `e` on line `line`, whose bytes are `bytes`: what is wrong in
/// words a user can act on (a byte-order mark, a record that is no object, invalid UTF-8), else
/// serde_json's own.
pub(crate) fn describe_json_error(e: &serde_json::Error, bytes: &[u8], line: u64) -> String {
    let msg = e.to_string();
    if let Some(bom) = bom_message(bytes, line) {
        return bom;
    }
    if msg.contains("NEARDUP_NOT_AN_OBJECT") {
        let kind = match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
            Some(b'[') => "an array",
            Some(b'"') => "a string",
            Some(b't') | Some(b'f') => "a boolean",
            Some(b'n') => "null",
            _ => "a number",
        };
        return format!("the record is {kind}, not a JSON object");
    }
    if let Err(u) = std::str::from_utf8(bytes) {
        return format!(
            "invalid UTF-8 at byte {} of the line (JSON must be UTF-8): {msg}",
            u.valid_up_to()
        );
    }
    format!("not valid JSON: {msg}")
}

/// A field's value as far as reading a record needs it: a string, an integer, or something
/// else (named).
enum FieldValue<'a> {
    Str(Cow<'a, str>),
    Integer(String),
    Other(&'static str),
}

impl FieldValue<'_> {
    fn kind(&self) -> &'static str {
        match self {
            FieldValue::Str(_) => "a string",
            FieldValue::Integer(_) => "a number",
            FieldValue::Other(k) => k,
        }
    }
}

struct FieldValueVisitor;

impl<'de> Visitor<'de> for FieldValueVisitor {
    type Value = FieldValue<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(FieldValue::Str(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(FieldValue::Str(Cow::Owned(v.to_string())))
    }
    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(FieldValue::Str(Cow::Owned(v)))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(FieldValue::Integer(v.to_string()))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(FieldValue::Integer(v.to_string()))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        // serde_json reads an integer past 64 bits as a float, so this is not only fractions.
        Ok(FieldValue::Other(
            "a number that is not a 64-bit integer (a fraction, an exponent, or an integer past \
             64 bits)",
        ))
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(FieldValue::Other("a boolean"))
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(FieldValue::Other("null"))
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(FieldValue::Other("an array"))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(FieldValue::Other("an object"))
    }
}

impl<'de> de::Deserialize<'de> for FieldValue<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(FieldValueVisitor)
    }
}

/// A key, borrowed when it has no escapes.
pub(crate) struct Key<'a>(pub(crate) Cow<'a, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v.to_string())))
            }
        }
        d.deserialize_str(V)
    }
}

type IdText<'a> = (Option<FieldValue<'a>>, Option<FieldValue<'a>>);

struct RecordSeed<'f> {
    fields: &'f Fields,
}

impl<'de> DeserializeSeed<'de> for RecordSeed<'_> {
    type Value = IdText<'de>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RecordSeed<'_> {
    type Value = IdText<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        // A marker that `describe_json_error` translates into a friendly message.
        f.write_str("NEARDUP_NOT_AN_OBJECT")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut id, mut text) = (None, None);
        while let Some(Key(k)) = map.next_key::<Key>()? {
            if k == self.fields.id.as_str() {
                id = Some(map.next_value::<FieldValue>()?);
            } else if k == self.fields.text.as_str() {
                text = Some(map.next_value::<FieldValue>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok((id, text))
    }
}

/// If `line` is a valid JSON object without the top-level key `absent`, its number of keys;
/// `None` if it has that key or is not a valid object (the caller then takes the full parse,
/// which explains any error).
pub(crate) fn top_level_keys_without(line: &[u8], absent: &str) -> Option<usize> {
    struct Count<'a>(&'a str);
    impl<'de> Visitor<'de> for Count<'_> {
        type Value = Option<usize>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut n = 0;
            let mut found = false;
            while let Some(Key(k)) = map.next_key::<Key>()? {
                found |= k == self.0;
                map.next_value::<IgnoredAny>()?;
                n += 1;
            }
            Ok(if found { None } else { Some(n) })
        }
    }
    let mut de = serde_json::Deserializer::from_slice(line);
    let r = de::Deserializer::deserialize_map(&mut de, Count(absent)).ok()?;
    de.end().ok()?;
    r
}

/// "a string", "an array", ... for messages.
pub fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

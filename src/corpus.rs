//! A chunk of a corpus as the stages hand it on: parsed (ids and packed words, per document)
//! or scanned (ids, lines, word counts, signature rows; no text). The types that both the
//! engines and the pipeline need, so neither imports the other for them.

use std::time::Instant;

use rayon::prelude::*;

use crate::batch::PackedBatch;
use crate::error::Error;
use crate::ids::IdArena;
use crate::io::Chunk;
use crate::jsonl::{parse_record, Fields, Record};
use crate::text::TextRule;

pub use crate::batch::{pieces_per_chunk, DEFAULT_CHUNK_BYTES};

/// Record `i` of `chunk` (read from `file_name`): a JSONL line parsed, or a Parquet row's id
/// and text columns.
pub fn record<'a>(
    chunk: &'a Chunk,
    i: usize,
    fields: &Fields,
    file_name: &str,
) -> Result<Record<'a>, Error> {
    match &chunk.rows {
        // A Parquet row's id under `--id-field @row` is made by `Rows::id` itself.
        Some(rows) => Ok(Record {
            id: rows.id(i, file_name)?,
            text: std::borrow::Cow::Borrowed(rows.text(i, file_name)?),
        }),
        None if fields.row_ids() => Ok(Record {
            id: std::borrow::Cow::Owned(Fields::row_id(file_name, chunk.line_no(i))),
            text: crate::jsonl::parse_text(chunk.line(i), fields, file_name, chunk.line_no(i))?,
        }),
        None => parse_record(chunk.line(i), fields, file_name, chunk.line_no(i)),
    }
}

/// What dedup's policies read of a record besides its id and text.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Extras {
    /// The keep field's value (`--keep field:NAME`), when asked for.
    pub keep: Option<f64>,
    /// The group field's value (`--group-field`): a string, or a number's or boolean's JSON
    /// text; `None` when absent or null.
    pub group: Option<String>,
}

/// Record `i`'s [`Extras`], for the fields `fields` names. A keep field that is missing, null or
/// not a number is an error naming the record.
pub fn record_extras(
    chunk: &Chunk,
    i: usize,
    fields: &Fields,
    file_name: &str,
) -> Result<Extras, Error> {
    if fields.keep.is_none() && fields.group.is_none() {
        return Ok(Extras::default());
    }
    if let Some(rows) = &chunk.rows {
        return Ok(Extras {
            keep: rows.keep(i, file_name)?,
            group: rows.group(i).map(str::to_string),
        });
    }
    let line = chunk.line(i);
    // The whole line is parsed, once for both fields: a policy's field is read only where a
    // policy asks for it.
    let parsed: serde_json::Value = serde_json::from_slice(line).map_err(|e| Error::Parse {
        path: file_name.to_string(),
        line: chunk.line_no(i),
        msg: crate::jsonl::record::bom_message(line, chunk.line_no(i))
            .unwrap_or_else(|| format!("not valid JSON: {e}")),
    })?;
    value_extras(&parsed, fields, file_name, chunk.line_no(i))
}

/// The [`Extras`] of a record already parsed (line `line_no` of `file_name`, for errors).
pub fn value_extras(
    parsed: &serde_json::Value,
    fields: &Fields,
    file_name: &str,
    line_no: u64,
) -> Result<Extras, Error> {
    let field_err = |field: &str, msg: String| Error::Field {
        path: file_name.to_string(),
        line: line_no,
        field: field.to_string(),
        msg,
    };
    let value = |name: &str| crate::jsonl::field_value(parsed, name);
    let mut out = Extras::default();
    if let Some(k) = &fields.keep {
        out.keep = Some(match value(k) {
            Some(serde_json::Value::Number(n)) => n.as_f64().unwrap_or(f64::NAN),
            None | Some(serde_json::Value::Null) => {
                return Err(field_err(
                    k,
                    format!("is missing; --keep field:{k} needs a number"),
                ))
            }
            Some(other) => {
                return Err(field_err(
                    k,
                    format!(
                        "is {}; --keep field:{k} needs a number",
                        crate::jsonl::json_kind(other)
                    ),
                ))
            }
        });
    }
    if let Some(g) = &fields.group {
        out.group = match value(g) {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::String(s)) => Some(s.clone()),
            Some(v @ (serde_json::Value::Number(_) | serde_json::Value::Bool(_))) => {
                Some(v.to_string())
            }
            Some(other) => {
                return Err(field_err(
                    g,
                    format!(
                        "is {}; a group is a string, a number or a boolean",
                        crate::jsonl::json_kind(other)
                    ),
                ))
            }
        };
    }
    Ok(out)
}

/// One chunk parsed: its documents tokenized into batches (the parts the workers packed side by
/// side, in order; never joined), with ids and line numbers.
#[derive(Debug, Default)]
pub struct ParsedChunk {
    pub file_index: usize,
    pub parts: Vec<PackedBatch>,
    pub ids: IdArena,
    pub lines: Vec<u64>,
    /// Per document, with a keep or group field: what the policies read (else empty).
    pub extras: Vec<Extras>,
    /// Bytes of text (the text field, UTF-8) in this chunk.
    pub text_bytes: u64,
    /// Raw bytes of the chunk's lines.
    pub raw_bytes: u64,
    /// Seconds spent parsing and tokenizing (summed over threads, then divided by their number).
    pub parse_seconds: f64,
}

/// Parse and tokenize every line of `chunk` under `rule` (in parallel; order kept). The first
/// bad line (by line number) is the error.
pub fn parse_chunk(
    chunk: &Chunk,
    fields: &Fields,
    file_name: &str,
    rule: TextRule,
) -> Result<ParsedChunk, Error> {
    parse_chunk_into(chunk, fields, file_name, &|| PackedBatch::with_rule(rule))
}

/// [`parse_chunk`] into batches `new_part` hands out (empty, under the rule wanted): a caller
/// that gets its parts back when they are signed passes them in again, so a run cycles through
/// warm buffers instead of faulting in fresh pages for every chunk.
pub fn parse_chunk_into(
    chunk: &Chunk,
    fields: &Fields,
    file_name: &str,
    new_part: &(dyn Fn() -> PackedBatch + Sync),
) -> Result<ParsedChunk, Error> {
    let t0 = Instant::now();
    let n = chunk.len();
    let pieces = pieces_per_chunk().clamp(1, n.max(1));
    let per = n.div_ceil(pieces).max(1);
    let parts: Vec<Result<ParsedChunk, Error>> = (0..n)
        .step_by(per)
        .collect::<Vec<_>>()
        .into_par_iter()
        .map(|start| {
            let mut part = ParsedChunk {
                parts: vec![new_part()],
                ..Default::default()
            };
            let end = (start + per).min(n);
            // Room for the piece's words up front, a guess from its record bytes (a record
            // of other fields than the text makes the guess large; it is capped).
            let raw: usize = (start..end).map(|i| chunk.record_bytes(i)).sum();
            part.parts[0].reserve_for(raw, end - start);
            for i in start..end {
                let rec = record(chunk, i, fields, file_name)?;
                if fields.keep.is_some() || fields.group.is_some() {
                    part.extras
                        .push(record_extras(chunk, i, fields, file_name)?);
                }
                part.parts[0].push_text(&rec.text);
                part.ids.push(&rec.id);
                part.lines.push(chunk.line_no(i));
                part.text_bytes += rec.text.len() as u64;
            }
            Ok(part)
        })
        .collect();
    let mut out = ParsedChunk {
        file_index: chunk.file_index,
        raw_bytes: chunk.raw_bytes(),
        ..Default::default()
    };
    for p in parts {
        let p = p?;
        out.parts.extend(p.parts);
        out.ids.extend_from(&p.ids);
        out.lines.extend_from_slice(&p.lines);
        out.extras.extend(p.extras);
        out.text_bytes += p.text_bytes;
    }
    out.parse_seconds = t0.elapsed().as_secs_f64();
    Ok(out)
}

/// Signature matrices of chunks already handed over, for the next chunks to sign into. A fresh
/// matrix (0.8 MB for 2 MiB of 75-word records) faults in each of its 4 KiB pages when first
/// written, which shows in a `signatures` profile (docs/BENCHMARKS.md). Bounded like the byte
/// buffers (see [`crate::io::pool::Spares`]), so the spares kept after pass 1 stay small.
pub(crate) static SPARE_SIGS: crate::io::pool::Spares<u32> = crate::io::pool::Spares::new();

/// A zeroed `docs x num_perm` matrix for a chunk's signatures: a spare one when there is one.
pub(crate) fn signature_rows(len: usize) -> Vec<u32> {
    match SPARE_SIGS.take() {
        Some(mut v) => {
            v.clear();
            v.resize(len, 0);
            v
        }
        None => vec![0; len],
    }
}

/// One chunk as pass 1 hands it over: per document its id, line, word count, signature row
/// and (when asked) exact-dedup key. No text.
#[derive(Debug, Default)]
pub struct ScannedChunk {
    pub file_index: usize,
    pub ids: IdArena,
    pub lines: Vec<u64>,
    pub words: Vec<u32>,
    /// Per document, with a keep or group field: what the policies read (else empty).
    pub extras: Vec<Extras>,
    /// `xxh3_128` of each document's packed words (equal exactly when the word sequences are
    /// equal, but for a collision chance of about `n^2 / 2^129`); empty unless asked for.
    pub exact_keys: Vec<u128>,
    /// `docs x num_perm` signature rows.
    pub sigs: Vec<u32>,
    /// Each document's shingle set (sorted 64-bit FNV-1a values), from the words just signed;
    /// empty unless asked for.
    pub sets: Vec<Vec<u64>>,
    pub shingles: u64,
    pub text_bytes: u64,
    pub raw_bytes: u64,
}

impl ScannedChunk {
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Build from a parsed chunk, without signatures yet; the parts come back for signing.
    pub fn from_parsed(
        p: ParsedChunk,
        k: usize,
        want_exact_keys: bool,
        want_sets: bool,
    ) -> (Self, Vec<PackedBatch>) {
        let docs = |b: &PackedBatch| 0..b.num_docs();
        let exact_keys = if want_exact_keys {
            p.parts
                .par_iter()
                .flat_map_iter(|b| docs(b).map(|d| xxhash_rust::xxh3::xxh3_128(b.doc_bytes(d))))
                .collect()
        } else {
            Vec::new()
        };
        let sets = if want_sets {
            p.parts
                .par_iter()
                .flat_map_iter(|b| crate::sign::fnv::batch_fnv_sets(b, docs(b), k))
                .collect()
        } else {
            Vec::new()
        };
        let sc = ScannedChunk {
            file_index: p.file_index,
            words: p
                .parts
                .iter()
                .flat_map(|b| docs(b).map(|d| b.doc_words(d).len() as u32))
                .collect(),
            shingles: p.parts.iter().map(|b| b.total_shingles(k) as u64).sum(),
            exact_keys,
            sigs: Vec::new(),
            sets,
            text_bytes: p.text_bytes,
            raw_bytes: p.raw_bytes,
            ids: p.ids,
            lines: p.lines,
            extras: p.extras,
        };
        (sc, p.parts)
    }

    /// Append another chunk's documents (pieces of one chunk processed in parallel).
    pub fn append(&mut self, o: ScannedChunk) {
        self.ids.extend_from(&o.ids);
        self.lines.extend_from_slice(&o.lines);
        self.words.extend_from_slice(&o.words);
        self.extras.extend(o.extras);
        self.exact_keys.extend_from_slice(&o.exact_keys);
        self.sigs.extend_from_slice(&o.sigs);
        self.sets.extend(o.sets);
        self.shingles += o.shingles;
        self.text_bytes += o.text_bytes;
        self.raw_bytes += o.raw_bytes;
    }
}

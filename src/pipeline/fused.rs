//! Parse, tokenize and sign a chunk piece by piece, each piece on its own worker, for an engine
//! that signs pieces from many threads ([`PieceSigner`]): the text is signed while it is still
//! in cache, no batch is copied, and workers never wait between chunks. The records and what a
//! dedup keeps of them (ids, lines, keep and group values, exact-duplicate keys) stay here; the
//! engine sees batches only.

use rayon::prelude::*;

use crate::batch::with_scratch;
use crate::corpus::{record, record_extras, signature_rows, ScannedChunk};
use crate::engine::PieceSigner;
use crate::error::Error;
use crate::io::Chunk;
use crate::jsonl::Fields;
use crate::sign::minhash::MinHashParams;

/// One chunk's documents (read from `name`), signed by `signer` under `params`, in line order;
/// with `want_sets`, their shingle sets too, hashed from the words just signed.
pub fn sign_records(
    signer: &dyn PieceSigner,
    params: &MinHashParams,
    chunk: &Chunk,
    fields: &Fields,
    name: &str,
    want_exact_keys: bool,
    want_sets: bool,
) -> Result<ScannedChunk, Error> {
    let (k, np, rule) = (params.k, params.num_perm, params.rule());
    let n = chunk.len();
    // Every line is one record, so the signature matrix can be laid out before parsing and
    // each piece writes its rows in place.
    let mut out = ScannedChunk {
        file_index: chunk.file_index,
        raw_bytes: chunk.raw_bytes(),
        sigs: signature_rows(n * np),
        ..Default::default()
    };
    let mut result = Ok(());
    signer.run(&mut || {
        // Pieces of about equal bytes (documents vary by orders of magnitude in length, so
        // equal line counts leave one thread idle at the end of every chunk).
        let ranges = split_by_bytes(chunk, rayon::current_num_threads() * 8);
        let mut slots: Vec<(usize, usize, &mut [u32])> = Vec::with_capacity(ranges.len());
        let mut rest: &mut [u32] = &mut out.sigs;
        for &(start, end) in &ranges {
            let (head, tail) = rest.split_at_mut((end - start) * np);
            slots.push((start, end, head));
            rest = tail;
        }
        let parts: Vec<Result<ScannedChunk, Error>> = slots
            .into_par_iter()
            .map(|(start, end, sigs)| {
                with_scratch(|batch, xs| {
                    batch.clear();
                    batch.rule = rule;
                    let mut part = ScannedChunk::default();
                    for i in start..end {
                        let rec = record(chunk, i, fields, name)?;
                        if fields.keep.is_some() || fields.group.is_some() {
                            part.extras.push(record_extras(chunk, i, fields, name)?);
                        }
                        batch.push_text(&rec.text);
                        part.ids.push(&rec.id);
                        part.lines.push(chunk.line_no(i));
                        part.text_bytes += rec.text.len() as u64;
                    }
                    let docs = batch.num_docs();
                    let sets = want_sets.then_some(&mut part.sets);
                    signer.sign_piece(batch, 0..docs, xs, sigs, sets);
                    part.words = (0..docs).map(|d| batch.doc_words(d).len() as u32).collect();
                    part.shingles = batch.total_shingles(k) as u64;
                    if want_exact_keys {
                        part.exact_keys = (0..docs)
                            .map(|d| xxhash_rust::xxh3::xxh3_128(batch.doc_bytes(d)))
                            .collect();
                    }
                    Ok(part)
                })
            })
            .collect();
        // The parts' signatures are already in place in `out.sigs` (theirs are empty).
        result = parts.into_iter().try_for_each(|part| {
            out.append(part?);
            Ok(())
        });
    });
    result.map(|()| out)
}

/// Cut a chunk's lines into at most `pieces` contiguous ranges of about equal bytes.
fn split_by_bytes(chunk: &Chunk, pieces: usize) -> Vec<(usize, usize)> {
    let n = chunk.len();
    if n == 0 {
        return Vec::new();
    }
    let total: usize = (0..n).map(|i| chunk.record_bytes(i)).sum();
    let target = total.div_ceil(pieces.max(1)).max(1);
    let mut out = Vec::with_capacity(pieces);
    let (mut start, mut acc) = (0, 0);
    for i in 0..n {
        acc += chunk.record_bytes(i);
        if acc >= target {
            out.push((start, i + 1));
            start = i + 1;
            acc = 0;
        }
    }
    if start < n {
        out.push((start, n));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{CpuEngine, Engine};
    use crate::sign::docs::SPLIT_DOC_SHINGLES;

    /// Through the record path (parse, tokenize and sign per piece, several threads): pieces
    /// holding documents signed in parts, among small ones, equal the oracle. The parts run on
    /// the pool while their piece's thread waits, and that thread may meanwhile sign another
    /// piece with the per-thread scratch.
    #[test]
    fn records_with_documents_signed_in_parts_conform() {
        let params = MinHashParams::new(5, 64, 3).unwrap();
        let perms = crate::perm_params(params.num_perm, params.seed);
        let big = |n: usize, salt: usize| -> String {
            (0..n)
                .map(|i| format!("b{}y{}", i % 101, (i * 7 + salt) % 2039))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let mut texts = Vec::new();
        for i in 0..200 {
            texts.push(format!("small document number {i} with a few words in it"));
            if i % 25 == 3 {
                texts.push(big(SPLIT_DOC_SHINGLES + 4 + 1000 * i, i));
            }
        }
        let mut data = Vec::new();
        let mut lines = Vec::new();
        for (i, t) in texts.iter().enumerate() {
            let start = data.len();
            serde_json::to_writer(
                &mut data,
                &serde_json::json!({"id": i.to_string(), "text": t}),
            )
            .unwrap();
            lines.push((start, data.len(), i as u64 + 1));
            data.push(b'\n');
        }
        let chunk = Chunk {
            file_index: 0,
            data: data.into(),
            lines,
            rows: None,
        };
        let fields = Fields {
            id: "id".into(),
            text: "text".into(),
            numeric_ids: false,
            ..Default::default()
        };
        let want: Vec<Vec<u32>> = texts
            .iter()
            .map(|t| crate::minhash(crate::shingles(t, params.k), &perms))
            .collect();
        // Whether a thread meets a piece while it waits for a part depends on timing: several
        // rounds make it likely (a borrowed scratch then panics).
        for threads in [1, 2, 3, 4].into_iter().chain([2, 3].repeat(4)) {
            let engine = CpuEngine::new(params, threads).unwrap();
            let signer = engine.piece_signer().expect("the CPU engine signs pieces");
            let got = sign_records(signer, &params, &chunk, &fields, "t", false, false).unwrap();
            assert_eq!(got.len(), texts.len());
            for (d, want) in want.iter().enumerate() {
                assert_eq!(
                    &got.sigs[d * params.num_perm..(d + 1) * params.num_perm],
                    &want[..],
                    "{threads} threads, document {d}"
                );
            }
        }
    }
}

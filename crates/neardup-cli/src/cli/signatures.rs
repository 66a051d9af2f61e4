//! `neardup signatures`: every document's signature, as npy or tsv.

use super::*;

/// The least a first chunk must hold for `signatures` to size its id storage from it.
const ESTIMATE_FROM_BYTES: u64 = 128 << 10;

/// The most documents `signatures` reserves room for from that estimate (more grow as needed).
const ESTIMATE_MAX_DOCS: usize = 1 << 24;

/// The documents of a corpus of `total` bytes, from its first chunk (`bytes`, `docs`); `None`
/// when the chunk is too small to tell.
fn corpus_docs_estimate(total: u64, bytes: u64, docs: usize) -> Option<usize> {
    if bytes < ESTIMATE_FROM_BYTES || docs == 0 {
        return None;
    }
    let est = docs as f64 * (total as f64 / bytes as f64);
    Some((est as usize).min(ESTIMATE_MAX_DOCS))
}

pub(super) fn run(a: SignaturesArgs) -> Result<ExitCode> {
    let params = a.hash.params()?;
    a.check_paths()?;
    let fields = a.input.fields()?;
    let progress = setup(&a.run)?;
    let t0 = Instant::now();
    let inputs = a.input.open(false)?;
    let gpu = a.engine.gpu_options_for(inputs.total_bytes())?;
    let mut engine = build_engine(a.engine.engine, params, 0, &gpu)?;
    let info = engine.info();
    warn_software(&a.run, &info);
    let mut w = sigfile::SigWriter::create(&a.output, a.format, params, &info.to_string())?;
    let total_bytes = inputs.total_bytes();
    let bar = progress.pass("signatures", total_bytes);
    // Ids are kept (not the text) to refuse a repeated id before the file appears.
    let mut ids = neardup::ids::UniqueIds::default();
    let place_of = |l: neardup::ids::DocLoc| inputs.place(l.file as usize, l.line);
    let stats = pipeline::scan(&inputs, &fields, engine.as_mut(), false, None, &bar, |sc| {
        if let (true, Some(total)) = (ids.is_empty(), total_bytes) {
            // Sized once, from the first chunk, for the whole corpus: grown by doubling, the
            // ids were copied each time onto fresh pages, each a page fault. Only from a chunk
            // large enough to say something, and never past a bound (a tiny first file before
            // a terabyte of others would ask for billions of documents).
            if let Some(docs) = corpus_docs_estimate(total, sc.raw_bytes, sc.len()) {
                ids.reserve(docs, docs * sc.ids.bytes_len().div_ceil(sc.len()));
            }
        }
        let file = sc.file_index as u32;
        let locs = sc
            .lines
            .iter()
            .map(|&line| neardup::ids::DocLoc { file, line });
        ids.extend(&sc.ids, locs, &place_of)?;
        w.push_rows((0..sc.len()).map(|d| sc.ids.get(d)), &sc.sigs)?;
        Ok(())
    })?;
    drop(bar);
    w.finish()?;
    if std::env::var_os("NEARDUP_DEBUG_STAGES").is_some() {
        eprintln!("{stats:?}");
    }
    let secs = t0.elapsed().as_secs_f64();
    // The bars' last state (written when they go) comes before the summary.
    drop(progress);
    say(
        &a.run,
        format!(
            "neardup signatures: {} documents read, {} shingles; {:.2} s, {} docs/s, {} \
             shingles/s [{}]",
            stats.documents,
            stats.shingles,
            secs,
            human_count(per_second(stats.documents as f64, secs)),
            human_count(per_second(stats.shingles as f64, secs)),
            info.summary()
        ),
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The id storage is sized from a first chunk only when it is large enough to tell, and
    /// never past the bound: a tiny first file before a terabyte of others asked for billions.
    #[test]
    fn the_corpus_estimate_needs_a_real_chunk_and_stays_bounded() {
        let tb = 1u64 << 40;
        assert_eq!(corpus_docs_estimate(tb, 1_000, 10), None);
        assert_eq!(corpus_docs_estimate(tb, 256 << 10, 0), None);
        assert_eq!(
            corpus_docs_estimate(tb, 256 << 10, 200),
            Some(ESTIMATE_MAX_DOCS)
        );
        // peers50k: 58.7 MB, a first chunk of 256 KiB with 223 documents: about 50k.
        let est = corpus_docs_estimate(58_722_377, 256 << 10, 223).unwrap();
        assert!((49_000..51_000).contains(&est), "{est}");
    }
}

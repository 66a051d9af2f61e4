//! `neardup inspect`: why two documents are, or are not, near duplicates.

use super::*;

pub(super) fn run(a: InspectArgs) -> Result<ExitCode> {
    let fields = a.input.fields()?;
    let cfg = neardup::stages::dedup::DedupConfig {
        params: a.hash.params()?,
        lsh: a.lsh.params()?,
        threshold: a.threshold,
        ..Default::default()
    };
    cfg.validate()?;
    let inputs = a.input.open(false)?;
    let (mut ta, mut tb): (Option<String>, Option<String>) = (None, None);
    'files: for i in 0..inputs.len() {
        let plan = neardup::io::ReadPlan::needed(&fields);
        let mut r = inputs.reader(i, plan, corpus::DEFAULT_CHUNK_BYTES)?;
        while let Some(chunk) = r.next_chunk(corpus::DEFAULT_CHUNK_BYTES)? {
            for l in 0..chunk.len() {
                let rec = corpus::record(&chunk, l, &fields, inputs.name(i))?;
                // Independent checks: `inspect X X` (a document against itself) is allowed.
                if rec.id == a.a && ta.is_none() {
                    ta = Some(rec.text.to_string());
                }
                if rec.id == a.b && tb.is_none() {
                    tb = Some(rec.text.into_owned());
                }
                if ta.is_some() && tb.is_some() {
                    break 'files;
                }
            }
        }
    }
    let missing: Vec<&str> = [(&a.a, ta.is_none()), (&a.b, tb.is_none())]
        .iter()
        .filter(|(_, m)| *m)
        .map(|(id, _)| id.as_str())
        .collect();
    let (Some(ta), Some(tb)) = (ta, tb) else {
        anyhow::bail!("no document with id {} in the inputs", missing.join(" or "));
    };
    let r = neardup::stages::dedup::inspect_pair(&ta, &tb, &cfg, a.show)?;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(ExitCode::SUCCESS);
    }
    outln!("{:<22} {:>12} {:>12}", "", a.a, a.b);
    let units = match cfg.params.shingle {
        neardup::text::ShingleUnit::Word => "words",
        neardup::text::ShingleUnit::Char => "characters",
    };
    outln!("{:<22} {:>12} {:>12}", units, r.words[0], r.words[1]);
    outln!(
        "{:<22} {:>12} {:>12}",
        format!("shingles (k={})", cfg.params.k),
        r.shingles[0],
        r.shingles[1]
    );
    outln!("shared shingles        {}", r.shared_shingles);
    outln!(
        "exact Jaccard          {:.4}  ({} threshold {})",
        r.jaccard,
        if r.jaccard >= cfg.threshold {
            "at or above"
        } else {
            "below"
        },
        cfg.threshold
    );
    outln!(
        "MinHash estimate       {:.4}  ({} permutations)",
        r.estimate,
        cfg.params.num_perm
    );
    outln!(
        "colliding bands        {} of {} ({} x {}): {}",
        r.colliding_bands.len(),
        cfg.lsh.bands,
        cfg.lsh.bands,
        cfg.lsh.rows,
        if r.colliding_bands.is_empty() {
            "none: not an LSH candidate".to_string()
        } else {
            format!("{:?}: an LSH candidate", r.colliding_bands)
        }
    );
    outln!(
        "p(candidate) at this Jaccard: {:.4}",
        cfg.lsh.probability(r.jaccard)
    );
    if !r.shared.is_empty() {
        outln!("shared shingles (first {}):", r.shared.len());
        for s in &r.shared {
            outln!("  {s}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

//! `neardup compare`: two signature files matched by id and compared.

use super::*;

pub(super) fn run(a: CompareArgs) -> Result<ExitCode> {
    let fa = sigfile::read_signatures(&a.a)?;
    let fb = sigfile::read_signatures(&a.b)?;
    let want = neardup::MinHashParams {
        k: a.k.unwrap_or(fa.meta.params.k),
        num_perm: a.num_perm.unwrap_or(fa.meta.params.num_perm),
        seed: a.seed.unwrap_or(fa.meta.params.seed),
        shingle: a.shingle.map_or(fa.meta.params.shingle, Into::into),
        normalize: a.normalize.map_or(fa.meta.params.normalize, Into::into),
    };
    fa.expect_params(&want, &a.a)?;
    fb.expect_params(&want, &a.b)?;
    let np = want.num_perm;
    let index: std::collections::HashMap<&str, usize> = fb
        .ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i))
        .collect();
    let (mut entries, mut bad_entries, mut bad_docs, mut missing) = (0u64, 0u64, 0u64, 0u64);
    let mut shown = 0;
    for (i, id) in fa.ids.iter().enumerate() {
        let Some(&j) = index.get(id.as_str()) else {
            missing += 1;
            if shown < a.show {
                outln!("  only in {}: {id:?}", a.a);
                shown += 1;
            }
            continue;
        };
        let (ra, rb) = (fa.row(i), fb.row(j));
        entries += np as u64;
        if ra != rb {
            bad_docs += 1;
            for (p, (x, y)) in ra.iter().zip(rb).enumerate() {
                if x != y {
                    bad_entries += 1;
                    if shown < a.show {
                        outln!("  mismatch: id {id:?} position {p}: {x} vs {y}");
                        shown += 1;
                    }
                }
            }
        }
    }
    let only_b = fb.ids.len() as u64 - (fa.ids.len() as u64 - missing);
    outln!(
        "documents compared: {}\nentries compared: {entries}\nmismatches: {bad_entries} (in {bad_docs} documents)\nonly in {}: {missing}\nonly in {}: {only_b}",
        fa.ids.len() as u64 - missing,
        a.a,
        a.b
    );
    Ok(if bad_entries == 0 && missing == 0 && only_b == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

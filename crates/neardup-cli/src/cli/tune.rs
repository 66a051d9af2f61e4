//! `neardup tune`: the banding for a threshold and a confirmation mode.

use super::*;

pub(super) fn run(a: TuneArgs) -> Result<ExitCode> {
    if !(a.threshold > 0.0 && a.threshold < 1.0) {
        anyhow::bail!("--threshold {} is outside (0, 1)", a.threshold);
    }
    if a.num_perm == 0 {
        anyhow::bail!("--num-perm must be at least 1");
    }
    let weight = |w: f64| w.is_finite() && w >= 0.0;
    if !(weight(a.fp_weight) && weight(a.fn_weight) && a.fp_weight + a.fn_weight > 0.0) {
        anyhow::bail!(
            "--fp-weight {:?} and --fn-weight {:?}: the weights must be finite and at least 0, and \
             not both 0",
            a.fp_weight,
            a.fn_weight
        );
    }
    if !(a.recall > 0.0 && a.recall <= 1.0) {
        anyhow::bail!("--recall {} is outside (0, 1]", a.recall);
    }
    let t = a.threshold;
    let choices = match a.confirm {
        Confirm::Jaccard => neardup::index::scurve::tune_for_recall(t, a.num_perm, a.recall),
        _ => neardup::index::scurve::tune(t, a.num_perm, a.fp_weight, a.fn_weight),
    };
    let best = choices[0];
    let confirm = a.confirm;
    outln!(
        "threshold {t}, {} permutations, --confirm {confirm}:",
        a.num_perm
    );
    if a.confirm == Confirm::Jaccard {
        outln!(
            "every candidate is checked by exact Jaccard, so a false positive costs one check and \
             a false negative is a lost duplicate: the least work with p({t}) >= {}",
            a.recall
        );
        if best.p_at_threshold < a.recall {
            outln!(
                "warning: no split of {} permutations reaches p({t}) >= {}; the most likely one \
                 is shown (more permutations allow more bands)",
                a.num_perm,
                a.recall
            );
        }
        outln!(
            "best: --bands {} --rows {}  (p({t}) = {:.4}, work {:.4})\n",
            best.bands,
            best.rows,
            best.p_at_threshold,
            best.work
        );
    } else {
        outln!(
            "a candidate above the estimate's threshold is merged unchecked: the least weighted \
             error area, weights fp {} / fn {}",
            a.fp_weight,
            a.fn_weight
        );
        outln!(
            "best: --bands {} --rows {}  (false-positive area {:.4}, false-negative area {:.4})\n",
            best.bands,
            best.rows,
            best.false_positive_area,
            best.false_negative_area
        );
    }
    outln!(
        "{:>6} {:>5} {:>10} {:>10} {:>10} {:>10} {:>10} {:>12}",
        "bands",
        "rows",
        format!("p({t})"),
        "work",
        "fp area",
        "fn area",
        "cost",
        "(1/b)^(1/r)"
    );
    for c in choices.iter().take(8) {
        let p = neardup::LshParams {
            bands: c.bands,
            rows: c.rows,
        };
        outln!(
            "{:>6} {:>5} {:>10.4} {:>10.4} {:>10.4} {:>10.4} {:>10.4} {:>12.4}",
            c.bands,
            c.rows,
            c.p_at_threshold,
            c.work,
            c.false_positive_area,
            c.false_negative_area,
            c.cost,
            p.threshold()
        );
    }
    outln!(
        "(p({t}): the chance a pair at the threshold becomes a candidate; work: the expected \
         share of pairs checked when similarities spread evenly over [0, 1])"
    );
    let p = neardup::LshParams {
        bands: best.bands,
        rows: best.rows,
    };
    outln!();
    out!("{}", neardup::index::scurve::scurve_table(p));
    if let Some(path) = &a.svg {
        let svg = neardup::report::html::scurve_svg(&[p], Some(a.threshold), &[]);
        neardup::io::write_file_atomic(path, svg.as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
}

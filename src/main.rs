//! The `neardup` binary: parse the command line, run the command, print the summary. Errors
//! reach the user as one clear message and exit code 1; a reader that closes our stdout early
//! (`| head`) is not an error.

use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Parser;
use serde_json::json;

mod cli;

use cli::{
    BenchArgs, Cli, Command, CompareArgs, DecontamArgs, DedupArgs, DevicesArgs, InspectArgs,
    RunArgs, ScurveArgs, SignaturesArgs, SynthArgs, TuneArgs, VerifyArgs,
};
use neardup::engine::gpu::{list_adapters, GpuOptions};
use neardup::engine::{build_engine, CpuEngine, Engine, GpuEngine};
use neardup::io::sigfile;
use neardup::progress::ProgressFactory;
use neardup::report::human_count;
use neardup::stages::{decontam, dedup};
use neardup::sys::peak_rss_bytes;
use neardup::{bench, corpus, pipeline, CONTRACT_VERSION};

fn main() -> ExitCode {
    // An interrupted run removes its unfinished outputs (they are hidden temporary files;
    // nothing ever appears under an output's name before the run succeeds).
    let _ = ctrlc::set_handler(|| {
        let done = neardup::io::remove_partial_outputs();
        eprintln!("{}", neardup::io::interrupt_message(&done));
        std::process::exit(130);
    });
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            if is_broken_pipe(&e) {
                return ExitCode::SUCCESS;
            }
            eprintln!("neardup: error: {e}");
            let mut src = e.source();
            while let Some(s) = src {
                let text = s.to_string();
                if !e.to_string().contains(&text) {
                    eprintln!("  caused by: {text}");
                }
                src = s.source();
            }
            ExitCode::FAILURE
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<neardup::Error>()
            .is_some_and(neardup::Error::is_broken_pipe)
            || c.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Dedup(a) => cmd_dedup(a),
        Command::Decontam(a) => cmd_decontam(a),
        Command::Signatures(a) => cmd_signatures(a),
        Command::Scurve(a) => cmd_scurve(a),
        Command::Verify(a) => cmd_verify(a),
        Command::Bench(a) => cmd_bench(a),
        Command::Devices(a) => cmd_devices(a),
        Command::Synth(a) => cmd_synth(a),
        Command::Compare(a) => cmd_compare(a),
        Command::Tune(a) => cmd_tune(a),
        Command::Inspect(a) => cmd_inspect(a),
    }
}

/// Size the global rayon pool (parsing, tokenizing, LSH) to `--threads`.
fn setup(run: &RunArgs) -> Result<ProgressFactory> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(run.threads)
        .build_global()
        .context("starting the thread pool")?;
    Ok(ProgressFactory::new(run.progress.into(), run.quiet))
}

fn say(run: &RunArgs, line: impl AsRef<str>) {
    if !run.quiet {
        eprintln!("{}", line.as_ref());
    }
}

/// Reports named `*.html` / `*.htm` are pages; anything else is JSON.
fn is_html(path: &str) -> bool {
    let p = path.to_ascii_lowercase();
    p.ends_with(".html") || p.ends_with(".htm")
}

fn per_second(n: f64, secs: f64) -> f64 {
    if secs > 0.0 {
        n / secs
    } else {
        0.0
    }
}

fn cmd_dedup(a: DedupArgs) -> Result<ExitCode> {
    let cfg = a.config()?;
    a.check_paths()?;
    let fields = a.input.fields()?;
    let progress = setup(&a.run)?;
    let t0 = Instant::now();
    let inputs = a.input.open(true)?;
    let mut engine = build_engine(a.engine.engine.into(), cfg.params, 0, &a.engine.gpu_options())?;
    let info = engine.info();
    let outs = dedup::DedupOutputs {
        output: a.output.clone(),
        clusters: a.clusters.clone(),
        pairs: a.pairs.clone(),
        measure: !a.report.is_empty(),
    };
    let s = dedup::run_dedup(
        &inputs,
        &fields,
        &cfg,
        engine.as_mut(),
        &outs,
        &progress,
        a.max_memory
            .map(|m| m << 20)
            .or_else(neardup::sys::default_memory_limit),
    )?;
    let secs = t0.elapsed().as_secs_f64();
    let docs = s.scan.documents as f64;
    if !a.report.is_empty() {
        let report = json!({
            "command": "dedup",
            "contract": CONTRACT_VERSION,
            "neardup_version": env!("CARGO_PKG_VERSION"),
            "inputs": (0..inputs.len()).map(|i| inputs.name(i)).collect::<Vec<_>>(),
            "output": a.output,
            "parameters": {
                "k": cfg.params.k, "num_perm": cfg.params.num_perm, "seed": cfg.params.seed,
                "bands": cfg.lsh.bands, "rows": cfg.lsh.rows, "threshold": cfg.threshold,
                "lsh_threshold": cfg.lsh.threshold(), "confirm": cfg.confirm,
                "exact": cfg.exact, "drop": cfg.drop,
                "id_field": fields.id, "text_field": fields.text,
            },
            "engine": info,
            "counts": {
                "documents_read": s.scan.documents,
                "documents_written": s.documents_written,
                "exact_duplicates_dropped": if cfg.drop { s.cluster.exact_duplicates } else { 0 },
                "near_duplicates_dropped": if cfg.drop { s.cluster.near_duplicates } else { 0 },
                "exact_duplicates": s.cluster.exact_duplicates,
                "near_duplicates": s.cluster.near_duplicates,
                "clusters": s.cluster.clusters,
                "documents_in_clusters": s.cluster.documents_in_clusters,
                "wordless_documents": s.cluster.wordless,
                "cluster_sizes": s.cluster.cluster_sizes,
                "lsh_buckets": s.cluster.buckets,
                "pairs_checked": s.cluster.pairs_checked,
                "pairs_confirmed": s.cluster.pairs_confirmed,
                "pairs_rejected": s.cluster.pairs_rejected,
                "pairs_already_joined": s.cluster.pairs_already_joined,
                "shingle_sets_loaded": s.cluster.sets_loaded,
                "words": s.scan.words,
                "shingles": s.scan.shingles,
                "text_bytes": s.scan.text_bytes,
            },
            "stages": {
                "signatures": { "seconds": s.scan.seconds, "parse_seconds": s.scan.parse_seconds,
                    "sign_seconds": s.scan.sign_seconds,
                    "shingles_per_second": per_second(s.scan.shingles as f64, s.scan.seconds) },
                "order": { "seconds": s.cluster.order_seconds },
                "lsh": { "seconds": s.cluster.lsh_seconds },
                "confirm": { "seconds": s.cluster.confirm_seconds,
                    "load_sets_seconds": s.cluster.sets_seconds },
                "cluster": { "seconds": s.cluster.cluster_seconds },
                "write": { "seconds": s.write_seconds },
            },
            "seconds": secs,
            "documents_per_second": per_second(docs, secs),
            "peak_rss_bytes": peak_rss_bytes(),
            "table_bytes": s.table_bytes,
            "similarity_buckets": s.similarity_buckets,
            "largest_clusters": s.examples,
        });
        let names: Vec<String> = (0..inputs.len())
            .map(|i| inputs.name(i).to_string())
            .collect();
        for path in &a.report {
            let body = if is_html(path) {
                neardup::report::html::dedup_page(&s, &cfg, &names, &info.to_string())
            } else {
                format!("{report:#}\n")
            };
            neardup::io::write_file_atomic(path, body.as_bytes())?;
        }
    }
    // Only what applies: exact duplicates with --exact; "tagged" rather than "dropped" with
    // --tag-only.
    let verb = if cfg.drop { "dropped" } else { "tagged" };
    let exact = if cfg.exact {
        format!("{} exact duplicates {verb}, ", s.cluster.exact_duplicates)
    } else {
        String::new()
    };
    // The bars' last state (written when they go) comes before the summary.
    drop(progress);
    say(
        &a.run,
        format!(
            "neardup dedup: {} documents read, {exact}{} near duplicates {verb}, {} clusters, {} \
             written; {:.2} s, {} docs/s, {} shingles/s [{}]",
            s.scan.documents,
            s.cluster.near_duplicates,
            s.cluster.clusters,
            s.documents_written,
            secs,
            human_count(per_second(docs, secs)),
            human_count(per_second(s.scan.shingles as f64, s.scan.seconds)),
            info
        ),
    );
    Ok(ExitCode::SUCCESS)
}

fn cmd_decontam(a: DecontamArgs) -> Result<ExitCode> {
    a.check_paths()?;
    let fields = a.input.fields()?;
    let progress = setup(&a.run)?;
    let t0 = Instant::now();
    let inputs = a.input.open(false)?;
    let grams = decontam::protected_ngrams(&a.protected, a.n)?;
    let load = t0.elapsed().as_secs_f64();
    let mut s = decontam::run_decontam(&inputs, &fields, &grams, &a.output, &progress)?;
    s.load_seconds = load;
    let secs = t0.elapsed().as_secs_f64();
    if !a.report.is_empty() {
        let report = json!({
            "command": "decontam",
            "contract": CONTRACT_VERSION,
            "neardup_version": env!("CARGO_PKG_VERSION"),
            "inputs": (0..inputs.len()).map(|i| inputs.name(i)).collect::<Vec<_>>(),
            "output": a.output,
            "parameters": { "n": a.n, "id_field": fields.id, "text_field": fields.text },
            "counts": {
                "documents_read": s.documents,
                "contaminated": s.contaminated,
                "documents_written": s.documents_written,
                "protected_ngrams": s.protected_ngrams,
            },
            "protected_files": s.files,
            "stages": { "load_protected": { "seconds": s.load_seconds },
                        "filter": { "seconds": s.seconds } },
            "seconds": secs,
            "documents_per_second": per_second(s.documents as f64, secs),
            "peak_rss_bytes": peak_rss_bytes(),
        });
        let names: Vec<String> = (0..inputs.len())
            .map(|i| inputs.name(i).to_string())
            .collect();
        for path in &a.report {
            let body = if is_html(path) {
                neardup::report::html::decontam_page(&s, &names)
            } else {
                format!("{report:#}\n")
            };
            neardup::io::write_file_atomic(path, body.as_bytes())?;
        }
    }
    // The bars' last state (written when they go) comes before the summary.
    drop(progress);
    if let Some(w) = grams.short_texts_warning() {
        // A run that protects nothing says so even under --quiet: it is close to an error.
        if grams.is_empty() || !a.run.quiet {
            eprintln!("neardup: {w}");
        }
    }
    say(
        &a.run,
        format!(
            "neardup decontam: {} documents read, {} contaminated, {} written; {} protected \
             {}-grams from {} files; {:.2} s, {} docs/s",
            s.documents,
            s.contaminated,
            s.documents_written,
            s.protected_ngrams,
            a.n,
            s.files.len(),
            secs,
            human_count(per_second(s.documents as f64, secs))
        ),
    );
    Ok(ExitCode::SUCCESS)
}

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

fn cmd_signatures(a: SignaturesArgs) -> Result<ExitCode> {
    let params = a.hash.params()?;
    a.check_paths()?;
    let fields = a.input.fields()?;
    let progress = setup(&a.run)?;
    let t0 = Instant::now();
    let inputs = a.input.open(false)?;
    let mut engine = build_engine(a.engine.engine.into(), params, 0, &a.engine.gpu_options())?;
    let info = engine.info();
    let mut w = sigfile::SigWriter::create(&a.output, a.format.into(), params, &info.to_string())?;
    let total_bytes = inputs.total_bytes();
    let bar = progress.pass("signatures", total_bytes);
    // Ids are kept (not the text) to refuse a repeated id before the file appears.
    let mut ids = neardup::ids::UniqueIds::default();
    let name_of = |f: u32| inputs.name(f as usize).to_string();
    let stats = pipeline::scan(&inputs, &fields, engine.as_mut(), false, &bar, |sc| {
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
        ids.extend(&sc.ids, locs, &name_of)?;
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
            info
        ),
    );
    Ok(ExitCode::SUCCESS)
}

fn cmd_scurve(a: ScurveArgs) -> Result<ExitCode> {
    let curves = a.params()?;
    if let Some(path) = &a.svg {
        let svg = neardup::report::html::scurve_svg(&curves, None, &[]);
        neardup::io::write_file_atomic(path, svg.as_bytes())?;
    }
    for (i, p) in curves.iter().enumerate() {
        if i > 0 {
            println!();
        }
        print!("{}", neardup::index::scurve::scurve_table(*p));
    }
    Ok(ExitCode::SUCCESS)
}

fn cmd_verify(a: VerifyArgs) -> Result<ExitCode> {
    let params = a.hash.params()?;
    let fields = a.input.fields()?;
    let progress = setup(&a.run)?;
    let inputs = a.input.open(false)?;
    let gpu_opts = GpuOptions {
        backend: a.backend.map(Into::into),
        allow_software: true,
        ..GpuOptions::default()
    };
    let mut gpu = GpuEngine::new(params, &gpu_opts).map_err(|e| {
        e.with_hint(
            "verify compares the GPU engine with the CPU engine, so it needs an adapter; to \
             compute signatures on the CPU alone, run `neardup signatures IN... -o OUT \
             --engine cpu`",
        )
    })?;
    let mut cpu = CpuEngine::new(params, 0)?;
    let report = neardup::bench::verify(&inputs, &fields, &mut cpu, &mut gpu, a.show, &progress)?;
    let np = params.num_perm;
    println!(
        "documents checked: {}\nentries compared: {}\nmismatches: {} (in {} documents)",
        report.documents,
        report.documents * np as u64,
        report.mismatched_entries,
        report.mismatched_documents
    );
    for m in &report.examples {
        println!(
            "  mismatch: id {:?} position {}: cpu {} gpu {}",
            m.id, m.position, m.cpu, m.gpu
        );
    }
    if gpu.adapter().software {
        println!(
            "note: {} is a software adapter (it runs on the CPU): the comparison holds, but its \
             speed is not a GPU's",
            gpu.adapter().name
        );
    }
    println!(
        "cpu: {} shingles/s ({:.3} s) [{}]\ngpu: {} shingles/s ({:.3} s) [{}]",
        human_count(per_second(report.shingles as f64, report.cpu_seconds)),
        report.cpu_seconds,
        cpu.info(),
        human_count(per_second(report.shingles as f64, report.gpu_seconds)),
        report.gpu_seconds,
        gpu.info()
    );
    Ok(if report.mismatched_entries == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn cmd_bench(a: BenchArgs) -> Result<ExitCode> {
    let progress = setup(&a.run)?;
    let r = bench::run(&a.config()?, &progress)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print!("{}", bench::render(&r));
    }
    Ok(ExitCode::SUCCESS)
}

fn cmd_devices(a: DevicesArgs) -> Result<ExitCode> {
    let opts = GpuOptions {
        backend: a.backend.map(Into::into),
        ..GpuOptions::default()
    };
    let adapters = list_adapters(&opts);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&adapters)?);
        return Ok(ExitCode::SUCCESS);
    }
    if adapters.is_empty() {
        println!(
            "no adapters found on backends {:?} (install a Vulkan driver; without a GPU: \
             apt-get install mesa-vulkan-drivers libvulkan1)",
            opts.backends()
        );
    }
    for (i, d) in adapters.iter().enumerate() {
        println!(
            "[{i}] {}\n    backend: {}  type: {}{}\n    driver: {} {}\n    \
             max storage binding: {} MiB  max buffer: {} MiB\n    \
             max workgroups/dim: {}  max invocations/workgroup: {}  workgroup storage: {} KiB  \
             storage buffers/stage: {}",
            d.name,
            d.backend,
            d.device_type,
            if d.software { " (software)" } else { "" },
            d.driver,
            d.driver_info,
            d.max_storage_buffer_binding_size >> 20,
            d.max_buffer_size >> 20,
            d.max_compute_workgroups_per_dimension,
            d.max_compute_invocations_per_workgroup,
            d.max_compute_workgroup_storage_size >> 10,
            d.max_storage_buffers_per_shader_stage
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn cmd_synth(a: SynthArgs) -> Result<ExitCode> {
    let mut out = neardup::io::Output::create(&a.output)?;
    let mut buf = Vec::with_capacity(1 << 20);
    for (id, text) in neardup::synth::SyntheticDocs::new(a.docs, a.words, a.seed) {
        serde_json::to_writer(&mut buf, &json!({ "id": id, "text": text }))?;
        buf.push(b'\n');
        if buf.len() > 1 << 20 {
            out.write_all(&buf)?;
            buf.clear();
        }
    }
    out.write_all(&buf)?;
    out.finish()?;
    Ok(ExitCode::SUCCESS)
}

fn cmd_compare(a: CompareArgs) -> Result<ExitCode> {
    let fa = sigfile::read_signatures(&a.a)?;
    let fb = sigfile::read_signatures(&a.b)?;
    let want = neardup::MinHashParams {
        k: a.k.unwrap_or(fa.meta.k),
        num_perm: a.num_perm.unwrap_or(fa.meta.num_perm),
        seed: a.seed.unwrap_or(fa.meta.seed),
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
                println!("  only in {}: {id:?}", a.a);
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
                        println!("  mismatch: id {id:?} position {p}: {x} vs {y}");
                        shown += 1;
                    }
                }
            }
        }
    }
    let only_b = fb.ids.len() as u64 - (fa.ids.len() as u64 - missing);
    println!(
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

fn cmd_tune(a: TuneArgs) -> Result<ExitCode> {
    if !(a.threshold > 0.0 && a.threshold < 1.0) {
        anyhow::bail!("--threshold {} is outside (0, 1)", a.threshold);
    }
    if a.num_perm == 0 || a.fp_weight < 0.0 || a.fn_weight < 0.0 || a.fp_weight + a.fn_weight <= 0.0
    {
        anyhow::bail!("--num-perm must be at least 1 and the weights non-negative, not both 0");
    }
    if !(a.recall > 0.0 && a.recall <= 1.0) {
        anyhow::bail!("--recall {} is outside (0, 1]", a.recall);
    }
    let t = a.threshold;
    let choices = match a.confirm {
        cli::Confirm::Jaccard => neardup::index::scurve::tune_for_recall(t, a.num_perm, a.recall),
        _ => neardup::index::scurve::tune(t, a.num_perm, a.fp_weight, a.fn_weight),
    };
    let best = choices[0];
    let confirm = match a.confirm {
        cli::Confirm::Jaccard => "jaccard",
        cli::Confirm::Estimate => "estimate",
        cli::Confirm::None => "none",
    };
    println!(
        "threshold {t}, {} permutations, --confirm {confirm}:",
        a.num_perm
    );
    if a.confirm == cli::Confirm::Jaccard {
        println!(
            "every candidate is checked by exact Jaccard, so a false positive costs one check and \
             a false negative is a lost duplicate: the least work with p({t}) >= {}",
            a.recall
        );
        if best.p_at_threshold < a.recall {
            println!(
                "warning: no split of {} permutations reaches p({t}) >= {}; the most likely one \
                 is shown (more permutations allow more bands)",
                a.num_perm, a.recall
            );
        }
        println!(
            "best: --bands {} --rows {}  (p({t}) = {:.4}, work {:.4})\n",
            best.bands, best.rows, best.p_at_threshold, best.work
        );
    } else {
        println!(
            "a candidate above the estimate's threshold is merged unchecked: the least weighted \
             error area, weights fp {} / fn {}",
            a.fp_weight, a.fn_weight
        );
        println!(
            "best: --bands {} --rows {}  (false-positive area {:.4}, false-negative area {:.4})\n",
            best.bands, best.rows, best.false_positive_area, best.false_negative_area
        );
    }
    println!(
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
        println!(
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
    println!(
        "(p({t}): the chance a pair at the threshold becomes a candidate; work: the expected \
         share of pairs checked when similarities spread evenly over [0, 1])"
    );
    let p = neardup::LshParams {
        bands: best.bands,
        rows: best.rows,
    };
    println!();
    print!("{}", neardup::index::scurve::scurve_table(p));
    if let Some(path) = &a.svg {
        let svg = neardup::report::html::scurve_svg(&[p], Some(a.threshold), &[]);
        neardup::io::write_file_atomic(path, svg.as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
}

fn cmd_inspect(a: InspectArgs) -> Result<ExitCode> {
    let fields = a.input.fields()?;
    let cfg = dedup::DedupConfig {
        params: a.hash.params()?,
        lsh: a.lsh.params()?,
        threshold: a.threshold,
        ..Default::default()
    };
    cfg.validate()?;
    let inputs = a.input.open(false)?;
    let (mut ta, mut tb): (Option<String>, Option<String>) = (None, None);
    'files: for i in 0..inputs.len() {
        let mut r = inputs.open(i)?;
        while let Some(chunk) = r.next_chunk(corpus::DEFAULT_CHUNK_BYTES)? {
            for l in 0..chunk.len() {
                let rec = neardup::jsonl::parse_record(
                    chunk.line(l),
                    &fields,
                    inputs.name(i),
                    chunk.line_no(l),
                )?;
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
    let r = dedup::inspect_pair(&ta, &tb, &cfg, a.show)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("{:<22} {:>12} {:>12}", "", a.a, a.b);
    println!("{:<22} {:>12} {:>12}", "words", r.words[0], r.words[1]);
    println!(
        "{:<22} {:>12} {:>12}",
        format!("shingles (k={})", cfg.params.k),
        r.shingles[0],
        r.shingles[1]
    );
    println!("shared shingles        {}", r.shared_shingles);
    println!(
        "exact Jaccard          {:.4}  ({} threshold {})",
        r.jaccard,
        if r.jaccard >= cfg.threshold {
            "at or above"
        } else {
            "below"
        },
        cfg.threshold
    );
    println!(
        "MinHash estimate       {:.4}  ({} permutations)",
        r.estimate, cfg.params.num_perm
    );
    println!(
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
    println!(
        "p(candidate) at this Jaccard: {:.4}",
        cfg.lsh.probability(r.jaccard)
    );
    if !r.shared.is_empty() {
        println!("shared shingles (first {}):", r.shared.len());
        for s in &r.shared {
            println!("  {s}");
        }
    }
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

//! The `neardup` binary: parse the command line, run the command, print the summary. Errors
//! reach the user as one clear message and exit code 1; a reader that closes our stdout early
//! (`| head`) is not an error.

use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Parser;
use serde_json::json;

use neardup::cli::{
    BenchArgs, Cli, Command, CompareArgs, DecontamArgs, DedupArgs, DevicesArgs, RunArgs,
    ScurveArgs, SignaturesArgs, SynthArgs, VerifyArgs,
};
use neardup::engine::gpu::{list_adapters, GpuOptions};
use neardup::engine::{build_engine, CpuEngine, Engine, GpuEngine};
use neardup::io::Inputs;
use neardup::progress::ProgressFactory;
use neardup::report::{human_count, peak_rss_bytes};
use neardup::{bench, decontam, dedup, pipeline, sigfile, CONTRACT_VERSION};

fn main() -> ExitCode {
    // An interrupted run removes its unfinished outputs (they are hidden temporary files;
    // nothing ever appears under an output's name before the run succeeds).
    let _ = ctrlc::set_handler(|| {
        neardup::io::remove_partial_outputs();
        eprintln!("neardup: interrupted; no output was written");
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
    }
}

/// Size the global rayon pool (parsing, tokenizing, LSH) to `--threads`.
fn setup(run: &RunArgs) -> Result<ProgressFactory> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(run.threads)
        .build_global()
        .context("starting the thread pool")?;
    Ok(ProgressFactory::new(run.progress, run.quiet))
}

fn say(run: &RunArgs, line: impl AsRef<str>) {
    if !run.quiet {
        eprintln!("{}", line.as_ref());
    }
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
    let fields = a.input.fields()?;
    let progress = setup(&a.run)?;
    let t0 = Instant::now();
    let inputs = Inputs::new(&a.input.specs(), true)?;
    let mut engine = build_engine(a.engine.engine, cfg.params, 0, &a.engine.gpu_options())?;
    let info = engine.info();
    let outs = dedup::DedupOutputs {
        output: a.output.clone(),
        clusters: a.clusters.clone(),
        pairs: a.pairs.clone(),
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
            .or_else(neardup::report::default_memory_limit),
    )?;
    let secs = t0.elapsed().as_secs_f64();
    let docs = s.scan.documents as f64;
    if let Some(path) = &a.report {
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
                "lsh": { "seconds": s.cluster.lsh_seconds },
                "confirm": { "seconds": s.cluster.confirm_seconds },
                "cluster": { "seconds": s.cluster.cluster_seconds },
                "write": { "seconds": s.write_seconds },
            },
            "seconds": secs,
            "documents_per_second": per_second(docs, secs),
            "peak_rss_bytes": peak_rss_bytes(),
            "table_bytes": s.table_bytes,
        });
        neardup::io::write_file_atomic(path, format!("{report:#}\n").as_bytes())?;
    }
    let (ex, near) = if cfg.drop {
        (s.cluster.exact_duplicates, s.cluster.near_duplicates)
    } else {
        (0, 0)
    };
    say(
        &a.run,
        format!(
            "neardup dedup: {} documents read, {} exact duplicates dropped, {} near duplicates \
             dropped, {} clusters, 0 contaminated, {} written; {:.2} s, {} docs/s, {} shingles/s \
             [{}]",
            s.scan.documents,
            ex,
            near,
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
    let fields = a.input.fields()?;
    let progress = setup(&a.run)?;
    let t0 = Instant::now();
    let inputs = Inputs::new(&a.input.specs(), false)?;
    let grams = decontam::protected_ngrams(&a.protected, a.n)?;
    let load = t0.elapsed().as_secs_f64();
    let mut s = decontam::run_decontam(&inputs, &fields, &grams, &a.output, &progress)?;
    s.load_seconds = load;
    let secs = t0.elapsed().as_secs_f64();
    if let Some(path) = &a.report {
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
        neardup::io::write_file_atomic(path, format!("{report:#}\n").as_bytes())?;
    }
    say(
        &a.run,
        format!(
            "neardup decontam: {} documents read, 0 exact duplicates dropped, 0 near duplicates \
             dropped, 0 clusters, {} contaminated, {} written; {} protected {}-grams from {} \
             files; {:.2} s, {} docs/s",
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

fn cmd_signatures(a: SignaturesArgs) -> Result<ExitCode> {
    let params = a.hash.params()?;
    let fields = a.input.fields()?;
    let progress = setup(&a.run)?;
    let t0 = Instant::now();
    let inputs = Inputs::new(&a.input.specs(), false)?;
    let mut engine = build_engine(a.engine.engine, params, 0, &a.engine.gpu_options())?;
    let info = engine.info();
    let mut w = sigfile::SigWriter::create(&a.output, a.format, params, &info.to_string())?;
    let np = params.num_perm;
    let bar = progress.pass("signatures", inputs.total_bytes());
    // Ids are kept (not the text) to refuse a repeated id before the file appears.
    let mut ids = neardup::pipeline::IdArena::default();
    let mut locs = Vec::new();
    let stats = pipeline::scan(&inputs, &fields, engine.as_mut(), false, &bar, |sc| {
        for d in 0..sc.len() {
            w.push(sc.ids.get(d), &sc.sigs[d * np..(d + 1) * np])?;
        }
        ids.extend_from(&sc.ids);
        locs.extend(sc.lines.iter().map(|&line| dedup::DocLoc {
            file: sc.file_index as u32,
            line,
        }));
        Ok(())
    })?;
    drop(bar);
    dedup::id_order(&ids, &locs, &|f| inputs.name(f as usize).to_string())?;
    w.finish()?;
    if std::env::var_os("NEARDUP_DEBUG_STAGES").is_some() {
        eprintln!("{stats:?}");
    }
    let secs = t0.elapsed().as_secs_f64();
    say(
        &a.run,
        format!(
            "neardup signatures: {} documents read, 0 exact duplicates dropped, 0 near \
             duplicates dropped, 0 clusters, 0 contaminated; {} shingles; {:.2} s, {} docs/s, {} \
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
    for (i, p) in curves.iter().enumerate() {
        if i > 0 {
            println!();
        }
        print!("{}", neardup::report::scurve_table(*p));
    }
    Ok(ExitCode::SUCCESS)
}

fn cmd_verify(a: VerifyArgs) -> Result<ExitCode> {
    let params = a.hash.params()?;
    let fields = a.input.fields()?;
    let progress = setup(&a.run)?;
    let inputs = Inputs::new(&a.input.specs(), false)?;
    let gpu_opts = GpuOptions {
        backend: a.backend,
        allow_software: true,
        ..GpuOptions::default()
    };
    let mut gpu = GpuEngine::new(params, &gpu_opts)?;
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
    let r = bench::run(&a, &progress)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print!("{}", bench::render(&r));
    }
    Ok(ExitCode::SUCCESS)
}

fn cmd_devices(a: DevicesArgs) -> Result<ExitCode> {
    let opts = GpuOptions {
        backend: a.backend,
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

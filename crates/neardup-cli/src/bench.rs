//! `neardup bench` and `neardup verify`: measured, never asserted.
//!
//! `bench` loads the corpus into memory (so disk speed does not blur the figures), then times
//! each stage on its own: read+parse, tokenize, hash, permute+min (CPU engine), the whole
//! signing step of each engine (best of `--repeat`), LSH, clustering and writing.

use std::time::Instant;

use rayon::prelude::*;

use neardup::batch::PackedBatch;
use neardup::corpus::DEFAULT_CHUNK_BYTES;
use neardup::engine::gpu::{GpuOptions, Kernels};
use neardup::engine::{CpuEngine, Engine, GpuEngine};
use neardup::ids::DocLoc;
use neardup::ids::IdArena;
use neardup::index::lsh::LshParams;
use neardup::io::{Chunk, InputSpec, Inputs};
use neardup::jsonl::{write_tagged, Fields};
use neardup::progress::ProgressFactory;
use neardup::report::per_second;
use neardup::sign::minhash::MinHashParams;
use neardup::stages::dedup::{cluster_corpus, Confirm, DedupConfig, SignedCorpus};
use neardup::Error;

/// Which engines `bench` measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BenchEngines {
    /// The CPU engine, and a hardware GPU when wgpu finds one (never a software adapter).
    Auto,
    Cpu,
    /// The GPU engine on any adapter, a software one (llvmpipe) included.
    Gpu,
    /// Both, the GPU on any adapter.
    All,
}

/// What `bench` measures: a corpus (input files, or a synthetic one) and the engines.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// JSONL inputs; empty with `synthetic`.
    pub inputs: Vec<String>,
    /// Generate this many synthetic documents instead of reading inputs.
    pub synthetic: Option<usize>,
    /// Mean words per synthetic document.
    pub synthetic_words: usize,
    pub fields: Fields,
    pub params: MinHashParams,
    pub lsh: LshParams,
    pub engines: BenchEngines,
    /// How the GPU engine finds its adapter (`bench` sets what it allows and profiles).
    pub gpu: GpuOptions,
    /// Repetitions of the signing stage (the best is reported).
    pub repeat: usize,
}

/// One mismatch between the engines.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Mismatch {
    pub id: String,
    pub position: usize,
    pub cpu: u32,
    pub gpu: u32,
}

/// What `verify` found.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct VerifyReport {
    pub documents: u64,
    pub shingles: u64,
    pub mismatched_entries: u64,
    pub mismatched_documents: u64,
    pub examples: Vec<Mismatch>,
    pub cpu_seconds: f64,
    pub gpu_seconds: f64,
}

/// Sign every document with both engines and compare entry by entry.
pub fn verify(
    inputs: &Inputs,
    fields: &Fields,
    cpu: &mut dyn Engine,
    gpu: &mut dyn Engine,
    show: usize,
    progress: &ProgressFactory,
) -> Result<VerifyReport, Error> {
    let np = cpu.params().num_perm;
    let k = cpu.params().k;
    let rule = cpu.params().rule();
    let mut r = VerifyReport::default();
    let bar = progress.pass("verify", inputs.total_bytes());
    neardup::pipeline::pipelined(
        inputs,
        neardup::io::ReadPlan::needed(fields),
        gpu.preferred_chunk_bytes(),
        &bar,
        |chunk, name| neardup::corpus::parse_chunk(&chunk, fields, name, rule),
        |p| {
            let docs: usize = p.parts.iter().map(|b| b.num_docs()).sum();
            let mut a = vec![0u32; docs * np];
            let mut g = vec![0u32; docs * np];
            let t = Instant::now();
            cpu.sign_parts(&p.parts, &mut a)?;
            r.cpu_seconds += t.elapsed().as_secs_f64();
            let t = Instant::now();
            gpu.sign_parts(&p.parts, &mut g)?;
            r.gpu_seconds += t.elapsed().as_secs_f64();
            for d in 0..docs {
                let (ra, rg) = (&a[d * np..(d + 1) * np], &g[d * np..(d + 1) * np]);
                if ra != rg {
                    r.mismatched_documents += 1;
                    for (i, (&x, &y)) in ra.iter().zip(rg).enumerate() {
                        if x != y {
                            r.mismatched_entries += 1;
                            if r.examples.len() < show {
                                r.examples.push(Mismatch {
                                    id: p.ids.get(d).to_string(),
                                    position: i,
                                    cpu: x,
                                    gpu: y,
                                });
                            }
                        }
                    }
                }
            }
            r.documents += docs as u64;
            r.shingles += p
                .parts
                .iter()
                .map(|b| b.total_shingles(k) as u64)
                .sum::<u64>();
            bar.add_docs(docs as u64);
            Ok(())
        },
    )?;
    Ok(r)
}

/// One timed stage.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Stage {
    pub stage: String,
    pub engine: String,
    pub seconds: f64,
    pub docs_per_second: f64,
    pub shingles_per_second: f64,
    pub text_mb_per_second: f64,
}

/// The corpus measured.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct CorpusFacts {
    pub source: String,
    pub documents: u64,
    pub words: u64,
    pub shingles: u64,
    pub text_bytes: u64,
    pub jsonl_bytes: u64,
}

/// Everything `bench` prints.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BenchReport {
    pub machine: String,
    pub threads: usize,
    pub contract: &'static str,
    pub k: usize,
    pub num_perm: usize,
    pub bands: usize,
    pub rows: usize,
    pub corpus: CorpusFacts,
    pub stages: Vec<Stage>,
    pub engines_skipped: Vec<String>,
    /// What the reader must know to read the figures (a software GPU adapter).
    pub notes: Vec<String>,
    /// Each engine's pass as a run makes it, with the CPU time of neardup's own threads.
    pub host_cpu: Vec<HostCpu>,
    pub peak_rss_bytes: Option<u64>,
}

/// The CPU model and core count, for the report.
pub fn machine_description() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    format!("{model}, {cores} cores available")
}

/// Run the benchmark.
pub fn run(a: &BenchConfig, progress: &ProgressFactory) -> Result<BenchReport, Error> {
    let (params, lsh) = (a.params, a.lsh);
    lsh.check_num_perm(params.num_perm)?;
    let fields = a.fields.clone();
    // Raw chunks in memory: generated, or read from the inputs.
    let step = progress.step("loading");
    let (chunks, source, files) = match (a.synthetic, a.inputs.is_empty()) {
        (Some(n), true) => {
            // The end-to-end rows read files, as a run does: the corpus goes to one, untimed.
            let chunks = synthetic_chunks(n, a.synthetic_words);
            let io = |e| Error::io("a temporary file for the synthetic corpus", e);
            let mut file = tempfile::Builder::new()
                .prefix("neardup-bench")
                .suffix(".jsonl")
                .tempfile()
                .map_err(io)?;
            for (_, c) in &chunks {
                std::io::Write::write_all(&mut file, &c.data).map_err(io)?;
            }
            let inputs = Inputs::new(&[InputSpec::Path(file.path().to_path_buf())], false)?;
            (chunks, format!("synthetic {n} docs"), (inputs, Some(file)))
        }
        (None, false) => {
            let specs: Vec<InputSpec> = a.inputs.iter().map(|s| InputSpec::parse(s)).collect();
            let inputs = Inputs::new(&specs, false)?;
            let mut v = Vec::new();
            // Parquet rows come with their JSONL lines too: the write stage tags lines.
            let plan = neardup::io::ReadPlan {
                fields: &fields,
                columns: neardup::io::Columns::AllAsJson,
            };
            for i in 0..inputs.len() {
                let mut r = inputs.reader(i, plan, DEFAULT_CHUNK_BYTES)?;
                while let Some(c) = r.next_chunk(DEFAULT_CHUNK_BYTES)? {
                    v.push((inputs.name(i).to_string(), c));
                }
            }
            (v, a.inputs.join(" "), (inputs, None))
        }
        _ => {
            return Err(Error::Param(
                "give either input files or --synthetic N, not both".into(),
            ))
        }
    };
    drop(step);
    let mut facts = CorpusFacts {
        source,
        jsonl_bytes: chunks.iter().map(|(_, c)| c.data.len() as u64).sum(),
        ..Default::default()
    };
    let mut stages = Vec::new();
    let push = |stages: &mut Vec<Stage>, name: &str, engine: &str, secs: f64, f: &CorpusFacts| {
        stages.push(Stage {
            stage: name.to_string(),
            engine: engine.to_string(),
            seconds: secs,
            docs_per_second: per_second(f.documents as f64, secs),
            shingles_per_second: per_second(f.shingles as f64, secs),
            text_mb_per_second: per_second(f.text_bytes as f64 / 1e6, secs),
        });
    };

    // read+parse: ids and texts out of the JSON.
    let t = Instant::now();
    let parsed: Vec<(IdArena, Vec<String>)> = chunks
        .par_iter()
        .map(|(name, c)| {
            let mut ids = IdArena::default();
            let mut texts = Vec::with_capacity(c.len());
            for i in 0..c.len() {
                let r = neardup::corpus::record(c, i, &fields, name)?;
                ids.push(&r.id);
                texts.push(r.text.into_owned());
            }
            Ok((ids, texts))
        })
        .collect::<Result<_, Error>>()?;
    let parse_secs = t.elapsed().as_secs_f64();
    facts.documents = parsed.iter().map(|(i, _)| i.len() as u64).sum();
    facts.text_bytes = parsed
        .iter()
        .flat_map(|(_, t)| t.iter().map(|s| s.len() as u64))
        .sum();

    // tokenize: the packed batches.
    let t = Instant::now();
    let batches: Vec<PackedBatch> = parsed
        .par_iter()
        .map(|(_, texts)| {
            let per = texts
                .len()
                .div_ceil(rayon::current_num_threads() * 4)
                .max(1);
            let rule = params.rule();
            let parts: Vec<PackedBatch> = texts
                .par_chunks(per)
                .map(|t| PackedBatch::from_texts_with(t, rule))
                .collect();
            let mut b = PackedBatch::with_rule(rule);
            for p in &parts {
                b.append(p);
            }
            b
        })
        .collect();
    let tok_secs = t.elapsed().as_secs_f64();
    facts.words = batches.iter().map(|b| b.num_words() as u64).sum();
    facts.shingles = batches
        .iter()
        .map(|b| b.total_shingles(params.k) as u64)
        .sum();
    push(&mut stages, "read+parse", "host", parse_secs, &facts);
    push(&mut stages, "tokenize", "host", tok_secs, &facts);

    let texts: Vec<&str> = parsed
        .iter()
        .flat_map(|(_, t)| t.iter().map(String::as_str))
        .collect();
    let mut skipped = Vec::new();
    let mut notes = Vec::new();
    let mut host_cpu = Vec::new();
    let mut sigs: Vec<u32> = Vec::new();
    let want_cpu = matches!(
        a.engines,
        BenchEngines::Auto | BenchEngines::Cpu | BenchEngines::All
    );
    let no_gpu_here = a.engines == BenchEngines::Auto
        && neardup::engine::gpu_device_nodes(std::path::Path::new("/dev")) == Some(false);
    if no_gpu_here {
        skipped.push(
            "gpu: this machine has no GPU device node (--engine gpu measures a software adapter)"
                .into(),
        );
    }
    let want_gpu = a.engines != BenchEngines::Cpu && !no_gpu_here;
    if want_cpu {
        let perms = params.perms();
        // hash: every shingle's x, as the engine hashes them (runs of documents at once), kept
        // per run with each document's shingle count for the next stage.
        const RUN: usize = neardup::engine::cpu::DOCS_PER_TASK;
        let t = Instant::now();
        let xs: Vec<(Vec<u32>, Vec<usize>)> = batches
            .iter()
            .flat_map(|b| {
                (0..b.num_docs())
                    .step_by(RUN)
                    .collect::<Vec<_>>()
                    .into_par_iter()
                    .map(|d0| {
                        let docs = d0..(d0 + RUN).min(b.num_docs());
                        let mut v = Vec::new();
                        neardup::sign::fnv::hash_docs(b, docs.clone(), params.k, &mut v);
                        (v, docs.map(|d| b.shingle_count(d, params.k)).collect())
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        push(
            &mut stages,
            "hash",
            "cpu",
            t.elapsed().as_secs_f64(),
            &facts,
        );
        let t = Instant::now();
        // As the engine permutes: a long document's repeats are dropped first (the check is
        // timed here too).
        let total: u64 = xs
            .par_iter()
            .map(|(x, counts)| {
                let mut row = vec![neardup::hash::P; params.num_perm];
                let mut filter = neardup::sign::repeats::RepeatFilter::default();
                let mut doc = Vec::new();
                let mut at = 0;
                let mut sum = 0;
                for &n in counts {
                    row.fill(neardup::hash::P);
                    let mut fresh = &x[at..at + n];
                    if n >= neardup::sign::repeats::REPEAT_FILTER_MIN_SHINGLES {
                        doc.clear();
                        doc.extend_from_slice(fresh);
                        let m = filter.keep_first_seen(&mut doc);
                        fresh = &doc[..m];
                    }
                    neardup::sign::permute::permute_min(fresh, &perms.a, &perms.b, &mut row);
                    sum += row[0] as u64;
                    at += n;
                }
                sum
            })
            .sum();
        std::hint::black_box(total);
        push(
            &mut stages,
            "permute+min",
            "cpu",
            t.elapsed().as_secs_f64(),
            &facts,
        );
        drop(xs);
        let mut cpu = CpuEngine::new(params, 0)?;
        let (secs, s) = time_engine(&mut cpu, &batches, a.repeat)?;
        push(
            &mut stages,
            "sign (hash+permute+min)",
            &cpu.info().to_string(),
            secs,
            &facts,
        );
        sigs = s;
        let secs = time_texts(&mut cpu, &texts, a.repeat, &sigs)?;
        push(
            &mut stages,
            TEXTS_ROW,
            &cpu.info().to_string(),
            secs,
            &facts,
        );
        let e2e = end_to_end(&mut cpu, &files.0, &fields, a.repeat, |_| None)?;
        push(&mut stages, E2E_ROW, &e2e.engine, e2e.wall_seconds, &facts);
        host_cpu.push(e2e);
    }
    if want_gpu {
        let opts = GpuOptions {
            // A software adapter times the CPU under another name: only when asked for.
            allow_software: a.engines != BenchEngines::Auto,
            profile: true,
            ..a.gpu.clone()
        };
        if let Some(rows) = startup_rows(params, &opts)? {
            for (row, engine, secs) in rows {
                push(&mut stages, &row, &engine, secs, &facts);
            }
        }
        match GpuEngine::new(params, &opts) {
            Ok(mut gpu) => {
                if gpu.adapter().software {
                    notes.push(format!(
                        "{} is a software adapter (it runs on the CPU): its gpu rows are not a \
                         GPU's speed",
                        gpu.adapter().name
                    ));
                }
                // The sign row as a run signs: one compute pass, no timestamps.
                let can_profile = gpu.profiling();
                gpu.set_profiling(false);
                let (secs, s) = time_engine(&mut gpu, &batches, a.repeat)?;
                let name = gpu.info().to_string();
                push(&mut stages, "sign (hash+permute+min)", &name, secs, &facts);
                // The in-memory path (the Python package's), with the kernels and without.
                let texts_secs = time_texts(&mut gpu, &texts, a.repeat, &s)?;
                push(&mut stages, TEXTS_ROW, &name, texts_secs, &facts);
                gpu.set_kernels(false);
                let texts_secs = time_texts(&mut gpu, &texts, a.repeat, &[])?;
                gpu.set_kernels(true);
                push(
                    &mut stages,
                    "  texts, kernels left out",
                    &name,
                    texts_secs,
                    &facts,
                );
                // A first pass faults in the staging and readback buffers (wgpu zeroes each
                // range the first time it is mapped); the figures are of the passes after it.
                let host = |g: &GpuEngine| Some(g.host_seconds());
                end_to_end(&mut gpu, &files.0, &fields, 1, host)?;
                let mut e2e = end_to_end(&mut gpu, &files.0, &fields, a.repeat, host)?;
                let chunk = gpu.preferred_chunk_bytes();
                let read =
                    read_seconds(&files.0, &fields, chunk)? * 1e9 / e2e.shingles.max(1) as f64;
                e2e.host_stages
                    .insert(0, ("read (reader thread)".into(), read));
                push(&mut stages, E2E_ROW, &name, e2e.wall_seconds, &facts);
                host_cpu.push(e2e);
                // The host alone: the kernels left out, so no software adapter's threads share
                // the cores (its signatures are not used).
                gpu.set_kernels(false);
                let mut alone = end_to_end(&mut gpu, &files.0, &fields, a.repeat, host)?;
                gpu.set_kernels(true);
                push(
                    &mut stages,
                    "  end to end, kernels left out",
                    &name,
                    alone.wall_seconds,
                    &facts,
                );
                alone.engine = format!("{}, kernels left out", alone.engine);
                alone
                    .host_stages
                    .insert(0, ("read (reader thread)".into(), read));
                host_cpu.push(alone);
                if can_profile {
                    // GPU timestamps: the kernels alone, without uploads, readback or the host;
                    // each kernel's best run of `--repeat`, like the sign row.
                    gpu.set_profiling(true);
                    let mut best = [f64::INFINITY; 3];
                    for _ in 0..a.repeat.max(1) {
                        gpu.reset_kernel_seconds();
                        time_engine(&mut gpu, &batches, 1)?;
                        for (b, k) in best.iter_mut().zip(gpu.kernel_seconds()) {
                            *b = b.min(k);
                        }
                    }
                    let [init, hash, min] = best;
                    push(&mut stages, "  kernel: init", &name, init, &facts);
                    match opts.kernels {
                        Kernels::Split => {
                            push(&mut stages, "  kernel: hash", &name, hash, &facts);
                            push(&mut stages, "  kernel: permute+min", &name, min, &facts);
                        }
                        Kernels::Fused => push(
                            &mut stages,
                            "  kernel: hash+permute+min",
                            &name,
                            min,
                            &facts,
                        ),
                    }
                } else {
                    skipped.push("gpu kernel times: the adapter has no timestamp queries".into());
                }
                if !sigs.is_empty() && sigs != s {
                    return Err(Error::Engine(neardup::engine::EngineError::Gpu(
                        "the GPU signatures differ from the CPU's: run `neardup verify`".into(),
                    )));
                }
                sigs = s;
            }
            Err(e) if matches!(a.engines, BenchEngines::All | BenchEngines::Auto) => {
                skipped.push(format!("gpu: {e}"))
            }
            Err(e) => return Err(e),
        }
    }

    // LSH and clustering over the signatures (estimate confirmation: no text needed).
    let mut corpus = SignedCorpus {
        num_perm: params.num_perm,
        sigs,
        ..Default::default()
    };
    for ((ids, _), b) in parsed.iter().zip(&batches) {
        corpus.ids.extend_from(ids);
        for d in 0..b.num_docs() {
            corpus.words.push(b.doc_words(d).len() as u32);
            corpus.locs.push(DocLoc { file: 0, line: 0 });
        }
    }
    let cfg = DedupConfig {
        params,
        lsh,
        threshold: 0.8,
        confirm: Confirm::Estimate,
        exact: false,
        drop: true,
        ..Default::default()
    };
    let clustering = cluster_corpus(
        &corpus,
        &cfg,
        &|_| "<bench>".to_string(),
        |_| Ok(Default::default()),
        &ProgressFactory::hidden(),
        false,
    )?;
    let cs = &clustering.stats;
    push(&mut stages, "LSH", "host", cs.lsh_seconds, &facts);
    push(
        &mut stages,
        "cluster",
        "host",
        cs.confirm_seconds + cs.cluster_seconds,
        &facts,
    );

    // write: tag the survivors, as pass 2 does (into memory, so the disk does not count).
    let t = Instant::now();
    let mut base = 0usize;
    let mut written = 0usize;
    for (name, c) in &chunks {
        let bytes: Result<usize, Error> = (0..c.len())
            .into_par_iter()
            .map_init(Vec::new, |buf, i| {
                let d = base + i;
                if !clustering.is_root(d) {
                    return Ok(0);
                }
                buf.clear();
                let root = corpus.ids.get(clustering.root[d] as usize);
                write_tagged(buf, c.line(i), "minhash_cluster", root, name, c.line_no(i))?;
                Ok(buf.len())
            })
            .sum();
        written += bytes?;
        base += c.len();
    }
    std::hint::black_box(written);
    push(
        &mut stages,
        "write",
        "host",
        t.elapsed().as_secs_f64(),
        &facts,
    );

    Ok(BenchReport {
        machine: machine_description(),
        threads: rayon::current_num_threads(),
        contract: neardup::CONTRACT_VERSION,
        k: params.k,
        num_perm: params.num_perm,
        bands: lsh.bands,
        rows: lsh.rows,
        corpus: facts,
        stages,
        engines_skipped: skipped,
        notes,
        host_cpu,
        peak_rss_bytes: neardup::sys::peak_rss_bytes(),
    })
}

/// One engine's pass as `signatures` makes it: read, parse, tokenize, sign, over the files.
#[derive(Debug, Clone, serde::Serialize)]
pub struct HostCpu {
    pub engine: String,
    pub shingles: u64,
    /// Wall seconds of the pass (the run of `--repeat` with the least own CPU).
    pub wall_seconds: f64,
    /// CPU time of neardup's own threads, nanoseconds a shingle.
    pub own_cpu_ns_per_shingle: Option<f64>,
    /// CPU time of the process's other threads (a software adapter's), nanoseconds a shingle.
    pub other_cpu_ns_per_shingle: Option<f64>,
    /// GPU engine: of `own_cpu_ns_per_shingle`, the part inside the calls that run the driver
    /// (`queue.submit`, `device.poll`), where a software adapter copies buffers on the calling
    /// thread.
    pub driver_cpu_ns_per_shingle: Option<f64>,
    /// GPU engine: the single-threaded host stages, nanoseconds a shingle each (the reader's
    /// pass over the files alone; then plan, fill, submit, wait, readback and host documents on
    /// the thread that drives the engine, the fill's pieces running on the pool).
    pub host_stages: Vec<(String, f64)>,
}

/// The GPU engine's host seconds between two readings, in nanoseconds a shingle.
fn host_stages(
    a: &neardup::engine::gpu::ring::HostSeconds,
    b: &neardup::engine::gpu::ring::HostSeconds,
    shingles: u64,
) -> Vec<(String, f64)> {
    let per = 1e9 / shingles.max(1) as f64;
    [
        ("plan", b.plan - a.plan),
        ("map staging", b.map - a.map),
        ("fill (on the pool)", b.fill - a.fill),
        ("submit", b.submit - a.submit),
        ("wait for the GPU", b.wait - a.wait),
        ("readback", b.readback - a.readback),
        ("host documents", b.host_docs - a.host_docs),
        ("driver calls (CPU)", b.driver_cpu - a.driver_cpu),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v * per))
    .collect()
}

/// CPU seconds of one thread reading every input into chunks of `chunk_bytes`, as the
/// pipeline's reader does:
/// the line split it hands to the pool is not included, and neither is dropping the chunks
/// (unmapping a mapped chunk's pages), which in a run happens on the thread done with each,
/// here another thread; wall seconds where a thread's CPU time cannot be read.
fn read_seconds(inputs: &Inputs, fields: &Fields, chunk_bytes: usize) -> Result<f64, Error> {
    use neardup::sys::threads::this_thread_cpu_seconds;
    let plan = neardup::io::ReadPlan::needed(fields);
    let (tx, rx) = std::sync::mpsc::sync_channel::<neardup::io::Chunk>(2);
    std::thread::scope(|s| {
        s.spawn(move || rx.into_iter().map(|c| c.len()).sum::<usize>());
        let t = Instant::now();
        let c = this_thread_cpu_seconds();
        for i in 0..inputs.len() {
            let mut r = inputs.reader(i, plan, chunk_bytes)?;
            while let Some(c) = r.next_chunk(chunk_bytes)? {
                tx.send(c).expect("the dropping thread outlives the reader");
            }
        }
        let secs = match (c, this_thread_cpu_seconds()) {
            (Some(a), Some(b)) => b - a,
            _ => t.elapsed().as_secs_f64(),
        };
        drop(tx);
        Ok(secs)
    })
}

/// Run `pipeline::scan` over `inputs` with `engine`, `repeat` times; the run with the least CPU
/// in neardup's own threads is kept, with its host stages when `host` reads them.
fn end_to_end<E: Engine>(
    engine: &mut E,
    inputs: &Inputs,
    fields: &Fields,
    repeat: usize,
    host: impl Fn(&E) -> Option<neardup::engine::gpu::ring::HostSeconds>,
) -> Result<HostCpu, Error> {
    use neardup::sys::threads::{own_cpu_seconds, process_cpu_seconds};
    let mut best: Option<HostCpu> = None;
    for _ in 0..repeat.max(1) {
        let h0 = host(engine);
        let (own0, all0) = (own_cpu_seconds(), process_cpu_seconds());
        let t = Instant::now();
        let stats = neardup::pipeline::scan(
            inputs,
            fields,
            engine,
            false,
            None,
            &neardup::progress::Progress::hidden(),
            |sc| {
                std::hint::black_box(sc.sigs.len());
                Ok(())
            },
        )?;
        let wall = t.elapsed().as_secs_f64();
        let (own1, all1) = (own_cpu_seconds(), process_cpu_seconds());
        let mut stages = h0
            .zip(host(engine))
            .map(|(a, b)| host_stages(&a, &b, stats.shingles))
            .unwrap_or_default();
        if !stages.is_empty() {
            let per = 1e9 / stats.shingles.max(1) as f64;
            let driver = stages.last().map_or(0.0, |d| d.1);
            stages.extend([
                (
                    "preparer thread (CPU)".to_string(),
                    stats.prepare_thread_cpu * per,
                ),
                (
                    "engine thread (CPU, driver calls out)".to_string(),
                    stats.drive_thread_cpu * per - driver,
                ),
            ]);
        }
        let per = |x: f64| x * 1e9 / stats.shingles.max(1) as f64;
        let own = own0.zip(own1).map(|(a, b)| per(b - a));
        let all = all0.zip(all1).map(|(a, b)| per(b - a));
        let run = HostCpu {
            engine: engine.info().to_string(),
            shingles: stats.shingles,
            wall_seconds: wall,
            own_cpu_ns_per_shingle: own,
            other_cpu_ns_per_shingle: own.zip(all).map(|(o, a)| (a - o).max(0.0)),
            driver_cpu_ns_per_shingle: stages
                .iter()
                .find(|d| d.0.starts_with("driver"))
                .map(|d| d.1),
            host_stages: stages,
        };
        let better = match (&best, run.own_cpu_ns_per_shingle) {
            (None, _) => true,
            (Some(b), Some(o)) => b.own_cpu_ns_per_shingle.is_some_and(|x| o < x),
            (Some(b), None) => run.wall_seconds < b.wall_seconds,
        };
        if better {
            best = Some(run);
        }
    }
    Ok(best.expect("at least one run"))
}

/// Best wall time of `repeat` runs of the engine over every batch, and the signatures.
fn time_engine(
    engine: &mut dyn Engine,
    batches: &[PackedBatch],
    repeat: usize,
) -> Result<(f64, Vec<u32>), Error> {
    let np = engine.params().num_perm;
    let total: usize = batches.iter().map(|b| b.num_docs()).sum();
    let mut sigs = vec![0u32; total * np];
    let mut best = f64::INFINITY;
    for _ in 0..repeat.max(1) {
        let t = Instant::now();
        let mut off = 0;
        for b in batches {
            let n = b.num_docs() * np;
            engine.sign(b, &mut sigs[off..off + n])?;
            off += n;
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    Ok((best, sigs))
}

/// The stage name of the in-memory path's rows.
const TEXTS_ROW: &str = "sign texts (in memory)";

/// The stage name of the file path's rows: read, parse, tokenize and sign, as `signatures`
/// runs them (the best of `--repeat`).
const E2E_ROW: &str = "end to end (file)";

/// A start-up row: its stage name, the engine, and seconds.
type StartupRow = (String, String, f64);

/// The GPU engine's start-up, step by step: once with an empty pipeline cache, once with the
/// cache that start-up left (a fresh directory, so the user's own cache is neither read nor
/// changed). `None` when the engine cannot be built (the caller says why).
fn startup_rows(
    params: MinHashParams,
    opts: &GpuOptions,
) -> Result<Option<Vec<StartupRow>>, Error> {
    let dir = tempfile::tempdir().map_err(|e| Error::io("a temporary pipeline cache", e))?;
    let opts = GpuOptions {
        cache: neardup::engine::gpu::CacheDir::At(dir.path().to_path_buf()),
        profile: false,
        ..opts.clone()
    };
    let mut rows = Vec::new();
    for pass in ["first", "second"] {
        // Each engine goes before the next starts: a start-up alone, as a run pays it.
        let (s, name) = match GpuEngine::new(params, &opts) {
            Ok(g) => (*g.startup(), g.info().to_string()),
            Err(_) => return Ok(None),
        };
        let cache = serde_json::to_value(s.cache_use)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        rows.push((
            format!("start-up, {pass} ({cache} pipeline cache)"),
            name.clone(),
            s.total(),
        ));
        for (part, secs) in s.steps() {
            rows.push((format!("  start-up: {part}"), name.clone(), secs));
        }
    }
    Ok(Some(rows))
}

/// Best wall time of `repeat` runs of [`Engine::sign_texts`] over every text at once, as the
/// Python package and in-memory dedup sign; the signatures must equal `want` unless it is
/// empty.
fn time_texts(
    engine: &mut dyn Engine,
    texts: &[&str],
    repeat: usize,
    want: &[u32],
) -> Result<f64, Error> {
    let mut sigs = vec![0u32; texts.len() * engine.params().num_perm];
    let mut best = f64::INFINITY;
    for _ in 0..repeat.max(1) {
        let t = Instant::now();
        engine.sign_texts(texts, &mut sigs)?;
        best = best.min(t.elapsed().as_secs_f64());
        if !want.is_empty() && sigs != want {
            return Err(Error::Incomparable(format!(
                "{}: the in-memory path's signatures differ from the packed batches': run \
                 `neardup verify`",
                engine.info()
            )));
        }
    }
    Ok(best)
}

/// Synthetic documents as JSONL chunks (generation is not timed).
fn synthetic_chunks(n: usize, words: usize) -> Vec<(String, Chunk)> {
    let mut out = Vec::new();
    let (mut data, mut lines) = (Vec::new(), Vec::new());
    let mut line_no = 0;
    let mut flush = |data: &mut Vec<u8>, lines: &mut Vec<(usize, usize, u64)>| {
        let c = Chunk {
            file_index: 0,
            data: std::mem::take(data).into(),
            lines: std::mem::take(lines),
            rows: None,
        };
        out.push(("<synthetic>".to_string(), c));
    };
    for (id, text) in neardup::synth::SyntheticDocs::new(n, words, 1) {
        let start = data.len();
        serde_json::to_writer(&mut data, &serde_json::json!({"id": id, "text": text}))
            .expect("writing to memory");
        line_no += 1;
        lines.push((start, data.len(), line_no));
        data.push(b'\n');
        if data.len() >= DEFAULT_CHUNK_BYTES {
            flush(&mut data, &mut lines);
        }
    }
    if !lines.is_empty() {
        flush(&mut data, &mut lines);
    }
    out
}

/// The human table.
pub fn render(r: &BenchReport) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(s, "machine: {} ({} threads)", r.machine, r.threads);
    let _ = writeln!(
        s,
        "corpus: {} — {} docs, {} words, {} shingles, {:.1} MB text, {:.1} MB JSONL",
        r.corpus.source,
        r.corpus.documents,
        r.corpus.words,
        r.corpus.shingles,
        r.corpus.text_bytes as f64 / 1e6,
        r.corpus.jsonl_bytes as f64 / 1e6
    );
    let _ = writeln!(
        s,
        "parameters: k={} num_perm={} bands={} rows={} ({})",
        r.k, r.num_perm, r.bands, r.rows, r.contract
    );
    let _ = writeln!(
        s,
        "{:<26} {:<40} {:>9} {:>12} {:>14} {:>10}",
        "stage", "engine", "seconds", "docs/s", "shingles/s", "MB/s"
    );
    for st in &r.stages {
        let _ = writeln!(
            s,
            "{:<26} {:<40} {:>9.4} {:>12} {:>14} {:>10.1}",
            st.stage,
            truncate(&st.engine, 40),
            st.seconds,
            neardup::report::human_count(st.docs_per_second),
            neardup::report::human_count(st.shingles_per_second),
            st.text_mb_per_second
        );
    }
    if !r.host_cpu.is_empty() {
        let _ = writeln!(
            s,
            "end to end (read, parse, tokenize, sign), CPU a shingle: {:<32} {:>9} {:>10} {:>12} {:>10}",
            "engine", "seconds", "neardup", "(in driver)", "other"
        );
        let ns = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.2} ns"));
        for h in &r.host_cpu {
            let _ = writeln!(
                s,
                "{:<58} {:<32} {:>9.4} {:>10} {:>12} {:>10}",
                "",
                truncate(&h.engine, 32),
                h.wall_seconds,
                ns(h.own_cpu_ns_per_shingle),
                ns(h.driver_cpu_ns_per_shingle),
                ns(h.other_cpu_ns_per_shingle)
            );
            for (stage, v) in &h.host_stages {
                let _ = writeln!(s, "  host stage {stage:<30} {v:>8.3} ns a shingle");
            }
        }
    }
    for e in &r.engines_skipped {
        let _ = writeln!(s, "skipped {e}");
    }
    for n in &r.notes {
        let _ = writeln!(s, "note: {n}");
    }
    if let Some(p) = r.peak_rss_bytes {
        let _ = writeln!(s, "peak RSS: {:.1} MiB", p as f64 / (1 << 20) as f64);
    }
    s
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).chain(['…']).collect()
    }
}

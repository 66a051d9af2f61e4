//! The command line: raw arguments (clap) and their validation into the library's configs.
//! Every check that can fail on a user's value happens here, before any work starts.

use std::path::PathBuf;

use clap::builder::TypedValueParser;
use clap::{Args, Parser, Subcommand};

use crate::bench::{BenchConfig, BenchEngines};
pub use crate::progress::ProgressMode;
use neardup::engine::gpu::GpuOptions;
pub use neardup::engine::gpu::{BackendChoice, Kernels};
pub use neardup::engine::EngineChoice;
use neardup::index::lsh::LshParams;
pub use neardup::io::sigfile::SigFormat;
use neardup::io::{check_output_paths, check_outputs, InputSpec, Inputs, NamedPath, OwnedDir};
use neardup::jsonl::Fields;
use neardup::ops::{DedupOptions, FieldOptions, HashOptions};
use neardup::options::{defaults, Mib, Named};
use neardup::sign::minhash::MinHashParams;
pub use neardup::stages::dedup::{ClusterRule, Confirm, GroupMissing};
use neardup::stages::dedup::{DedupConfig, KeepChoice};
pub use neardup::text::{Normalize, ShingleUnit};
use neardup::Error;

/// clap's parser for a library option whose values are names: the names, and the line on
/// each that `--help` shows, come from the library ([`Named`]).
fn named<T: Named + Clone + Send + Sync + 'static>() -> impl TypedValueParser<Value = T> {
    clap::builder::PossibleValuesParser::new(T::VALUES.iter().map(|&(name, _, help)| {
        let v = clap::builder::PossibleValue::new(name);
        if help.is_empty() {
            v
        } else {
            v.help(help)
        }
    }))
    .map(|s| T::from_name(&s).expect("clap accepts listed names only"))
}

/// What `decontam` does with a caught document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DecontamMode {
    /// Leave it out of the output.
    Drop,
    /// Write it, tagged with `meta.decontam`.
    Tag,
}

/// A `--keep` policy, and the field it reads.
fn parse_keep(s: &str) -> Result<KeepChoice, String> {
    s.parse()
}

// Every numeric option has a range, checked by [`Cli::check`] before any work starts: a value
// that does not parse is a usage error (exit 2, clap's), one out of its range an error (exit
// 1) that names the range. Ranges the library checks itself (`--k 0`, `--threshold`) are left
// to it, with its messages.

/// The most a width or a count of the signature may be: `--k`, `--bands`, `--rows`,
/// decontam's `--n` (the library's bound on `num_perm`).
const MAX_WIDTH: usize = 1 << 20;
/// The most words of a synthetic document (`--words`, `--template`, `--synthetic-words`).
const MAX_SYNTH_WORDS: usize = 1_000_000;
/// The most documents `synth` writes.
const MAX_SYNTH_DOCS: u64 = 10_000_000_000;
/// The most documents `bench --synthetic` generates (in memory).
const MAX_BENCH_DOCS: usize = 1_000_000_000;
/// The most repetitions of `bench`'s signing stage.
const MAX_REPEAT: usize = 1000;
/// The most MiB `--max-memory` may name: 2^40 MiB, an exbibyte.
const MAX_MIB: u64 = 1 << 40;
/// The most partitions of a work directory, whatever the open-file limit.
const MAX_PARTITIONS: usize = 1 << 16;
/// The longest `--gpu-timeout`, in seconds (about 11.6 days).
const MAX_GPU_TIMEOUT: f64 = 1e6;

/// `value` of `flag` within `lo..=hi`.
fn check_range<T: PartialOrd + std::fmt::Display>(
    flag: &str,
    value: T,
    lo: T,
    hi: T,
) -> Result<(), Error> {
    if value < lo || value > hi {
        return Err(Error::Param(format!(
            "{flag} {value} is outside {lo}..={hi}"
        )));
    }
    Ok(())
}

/// `value` of `flag` at most `hi` (its lower bound is the library's to check).
fn check_at_most<T: PartialOrd + std::fmt::Display>(
    flag: &str,
    value: T,
    hi: T,
) -> Result<(), Error> {
    if value > hi {
        return Err(Error::Param(format!(
            "{flag} {value} is above the most it may be, {hi}"
        )));
    }
    Ok(())
}

/// `--threads`: 0 (one per core) up to 8 per core this process may use, at least 16.
fn check_threads(n: usize) -> Result<(), Error> {
    let (limit, cores) = neardup::sys::thread_limit();
    if n > limit {
        return Err(Error::Param(format!(
            "--threads {n} is above the limit of {limit} threads (8 per core, at least 16; this \
             run may use {cores} cores); --threads 0 starts one per core"
        )));
    }
    Ok(())
}

/// `--partitions`: at least 1, at most 65536, and no more than the open-file limit lets the
/// `bands` stage write at once (one file per partition; see
/// [`neardup::sys::partition_limit`]).
fn check_partitions(n: usize) -> Result<(), Error> {
    if n == 0 {
        return Err(Error::Param("--partitions must be at least 1".into()));
    }
    // The open-file limit first: it is the one a user can raise.
    neardup::sys::check_partition_files(n, MAX_PARTITIONS)?;
    check_range("--partitions", n, 1, MAX_PARTITIONS)
}

/// decontam's `--protect-short`: MIN words, or `off` (also `0`).
fn parse_protect_short(s: &str) -> Result<usize, String> {
    let s = s.trim();
    if s.eq_ignore_ascii_case("off") {
        return Ok(0);
    }
    s.parse::<usize>()
        .map_err(|_| format!("`{s}` is neither a number of words nor `off`"))
}

impl Cli {
    /// Input directories replaced by the files under them, before anything reads the inputs.
    pub fn expand_inputs(&mut self) -> Result<(), Error> {
        let input = match &mut self.command {
            Command::Dedup(a) => &mut a.input,
            Command::Decontam(a) => &mut a.input,
            Command::Signatures(a) => &mut a.input,
            Command::Inspect(a) => &mut a.input,
            Command::Verify(a) => &mut a.input,
            Command::Stage(StageArgs {
                stage: Stage::Init { input, .. },
                ..
            }) => input,
            Command::Index(IndexArgs {
                command: IndexCommand::Build { input, .. } | IndexCommand::Add { input, .. },
                ..
            }) => input,
            _ => return Ok(()),
        };
        input.expand()
    }

    /// Refuse every numeric value out of its range, before any work starts (see above).
    pub fn check(&self) -> Result<(), Error> {
        match &self.command {
            Command::Dedup(a) => {
                a.cluster.hash.check()?;
                a.cluster.lsh.check()?;
                a.engine.gpu.check()?;
                check_threads(a.run.threads)?;
                if let Some(m) = a.max_memory {
                    check_range("--max-memory", m, 1, MAX_MIB)?;
                }
                if a.work_dir.is_some() {
                    check_partitions(a.partitions)?;
                }
                Ok(())
            }
            Command::Decontam(a) => {
                check_at_most("--n", a.n, MAX_WIDTH)?;
                if let Some(s) = a.min_score {
                    if !(s > 0.0 && s <= 1.0) {
                        return Err(Error::Param(format!("--min-score {s:?} is outside (0, 1]")));
                    }
                }
                check_threads(a.run.threads)
            }
            Command::Signatures(a) => {
                a.hash.check()?;
                a.engine.gpu.check()?;
                check_threads(a.run.threads)
            }
            Command::Scurve(a) => {
                for &b in &a.bands {
                    check_at_most("--bands", b, MAX_WIDTH)?;
                }
                for &r in &a.rows {
                    check_at_most("--rows", r, MAX_WIDTH)?;
                }
                Ok(())
            }
            Command::Verify(a) => {
                a.hash.check()?;
                a.gpu.check()?;
                check_threads(a.run.threads)
            }
            Command::Bench(a) => {
                a.hash.check()?;
                a.lsh.check()?;
                a.gpu.check()?;
                if let Some(n) = a.synthetic {
                    check_range("--synthetic", n, 1, MAX_BENCH_DOCS)?;
                }
                check_range("--synthetic-words", a.synthetic_words, 0, MAX_SYNTH_WORDS)?;
                check_range("--repeat", a.repeat, 1, MAX_REPEAT)?;
                check_threads(a.run.threads)
            }
            Command::Compare(a) => {
                if let Some(k) = a.k {
                    check_range("--k", k, 1, MAX_WIDTH)?;
                }
                if let Some(p) = a.num_perm {
                    check_range("--num-perm", p, 1, MAX_WIDTH)?;
                }
                Ok(())
            }
            Command::Devices(_) => Ok(()),
            Command::Tune(a) => check_range("--num-perm", a.num_perm, 1, MAX_WIDTH),
            Command::Inspect(a) => {
                a.hash.check()?;
                a.lsh.check()
            }
            Command::Synth(a) => {
                check_range("N (documents)", a.docs as u64, 0, MAX_SYNTH_DOCS)?;
                check_range("--words", a.words, 0, MAX_SYNTH_WORDS)?;
                check_range("--template", a.template, 0, MAX_SYNTH_WORDS)
            }
            Command::Stage(a) => {
                check_threads(a.run.threads)?;
                match &a.stage {
                    Stage::Init {
                        cluster,
                        partitions,
                        ..
                    } => {
                        cluster.hash.check()?;
                        cluster.lsh.check()?;
                        check_partitions(*partitions)
                    }
                    Stage::Sign { engine, .. } | Stage::Run { engine, .. } => engine.gpu.check(),
                    Stage::Report {
                        seconds: Some(s), ..
                    } if !(s.is_finite() && *s >= 0.0) => Err(Error::Param(format!(
                        "--seconds {s:?} must be a finite number of seconds, at least 0"
                    ))),
                    _ => Ok(()),
                }
            }
            Command::Index(a) => {
                check_threads(a.run.threads)?;
                match &a.command {
                    IndexCommand::Build {
                        hash, lsh, engine, ..
                    } => {
                        hash.check()?;
                        lsh.check()?;
                        engine.gpu.check()
                    }
                    IndexCommand::Add { engine, .. } => engine.gpu.check(),
                    IndexCommand::Info { .. } => Ok(()),
                }
            }
        }
    }
}

/// Find and remove near-duplicate documents in JSONL and Parquet corpora, and drop documents that
/// leak
/// benchmark text. MinHash signatures run on the GPU (wgpu) or the CPU, bit for bit the same.
#[derive(Debug, Parser)]
#[command(name = "neardup", version, about, long_about = None)]
#[command(
    after_help = "Exit codes: 0 success; 1 an error (bad input, I/O, a GPU failure) or, \
for `verify`, a mismatch; 2 a usage error (unknown flag, bad value).\n\
Run `neardup <command> --help` for each command's flags and an example."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Near-dedup JSONL or Parquet: keep one document per cluster of near duplicates.
    #[command(
        after_help = "Example:\n  neardup dedup fixtures/example.jsonl -o deduped.jsonl \
--clusters clusters.jsonl --report report.json\n\n\
Output records keep every input field in order and gain meta.minhash_cluster, the id of the \
cluster's root (its smallest id). Use --tag-only to keep every record."
    )]
    Dedup(DedupArgs),
    /// Drop documents that share a word n-gram with protected eval sets.
    #[command(
        after_help = "Example:\n  neardup decontam fixtures/example.jsonl --protected \
fixtures/protected.jsonl -o clean.jsonl --report decontam.json\n\n\
In a .jsonl protected file every string value at any depth is protected, except under the keys \
case_id, id, tags and scorer_args; any other file is one text."
    )]
    Decontam(DecontamArgs),
    /// Write the MinHash signature of every document (npy or tsv), for cross-checking.
    #[command(
        after_help = "Example:\n  neardup signatures fixtures/example.jsonl -o sigs.npy \
--format npy\n\n\
npy: OUT is a uint32 array [docs, num_perm], OUT.ids the ids (one JSON string a line), \
OUT.meta.json the contract version and parameters. tsv: a `#neardup-signatures` header line, \
then `id<TAB>v1,v2,...` per document."
    )]
    Signatures(SignaturesArgs),
    /// Print the LSH S-curve p(s) = 1 - (1 - s^rows)^bands for a banding.
    #[command(
        after_help = "Examples:\n  neardup scurve --bands 16 --rows 8\n  neardup scurve --bands 16 14 20 --rows 8 8 5 --svg curves.svg"
    )]
    Scurve(ScurveArgs),
    /// Compute signatures with both engines and compare them entry by entry.
    #[command(
        after_help = "Example:\n  neardup verify fixtures/example.jsonl --backend vulkan\n\n\
Exits 1 on any mismatch, naming the first few (document id and position)."
    )]
    Verify(VerifyArgs),
    /// Measure signature throughput (and stage times) of each engine.
    #[command(after_help = "Examples:\n  neardup bench fixtures/example.jsonl\n  \
neardup bench --synthetic 100000 --engine cpu --json")]
    Bench(BenchArgs),
    /// List every GPU adapter wgpu can see, with the limits that matter.
    #[command(after_help = "Example:\n  neardup devices --backend all")]
    Devices(DevicesArgs),
    /// Choose bands x rows for a threshold: for exact-Jaccard confirmation the least work that
    /// keeps the recall at the threshold, otherwise the least weighted error area.
    #[command(after_help = "Examples:\n  neardup tune --threshold 0.8\n  \
neardup tune --threshold 0.8 --confirm estimate --fp-weight 0.3 --fn-weight 0.7\n\n\
Only splits with bands x rows = num_perm are considered (dedup needs them equal). work is the \
expected share of pairs checked when similarities spread evenly over [0, 1].")]
    Tune(TuneArgs),
    /// Explain a pair: shingle counts, exact Jaccard, MinHash estimate, colliding bands, shared
    /// shingles.
    #[command(
        after_help = "Example:\n  neardup inspect doc-00001 doc-00170 fixtures/example.jsonl"
    )]
    Inspect(InspectArgs),
    /// Compare two signature files (npy or tsv, from neardup or another implementation).
    #[command(
        after_help = "Example:\n  neardup compare ours.npy theirs.tsv --k 5 --num-perm 128 --seed 0\n\n\
Both files must state the same contract version and parameters (and those given here, if any): \
signatures made otherwise are refused, never compared. Documents are matched by id. Exits 1 on \
any mismatch or missing document."
    )]
    Compare(CompareArgs),
    /// Write a seeded synthetic JSONL corpus (for benchmarks and scale tests).
    #[command(
        after_help = "Example:\n  neardup synth 100000 -o synthetic.jsonl --words 300 --seed 7"
    )]
    Synth(SynthArgs),
    /// Run one stage of `dedup` over a work directory: for corpora past one machine's memory,
    /// under any scheduler (docs/GUIDE.md has the shell loop).
    #[command(
        after_help = "Example, as tasks (8 at a time; any scheduler runs the same loop):\n  \
neardup stage init work a.jsonl b.jsonl c.jsonl --partitions 2 --out out\n  \
while t=$(neardup stage next work) && [ -n \"$t\" ]; do\n    \
echo \"$t\" | xargs -d '\\n' -n 1 -P 8 neardup stage run work\n  \
done\n\n\
The same, stage by stage, 3 shards and 2 partitions:\n  \
neardup stage init work a.jsonl b.jsonl c.jsonl --partitions 2\n  \
for i in 0 1 2; do neardup stage sign work --shard $i; done\n  \
neardup stage rank work\n  \
for i in 0 1 2; do neardup stage bands work --shard $i; done\n  \
for p in 0 1; do neardup stage confirm work --partition $p; done\n  \
neardup stage cluster work --clusters clusters.jsonl\n  \
for i in 0 1 2; do neardup stage apply work --shard $i -o out-$i.jsonl; done\n\n\
Each stage's outputs appear whole or not at all; a finished stage run again is skipped."
    )]
    Stage(StageArgs),
    /// Build, grow and show an index of documents already kept, that `dedup --against INDEX`
    /// checks new documents against.
    #[command(
        after_help = "Example:\n  neardup index build kept.jsonl -o kept.index\n  \
neardup dedup new.jsonl -o new-kept.jsonl --against kept.index --update-index\n  \
neardup index info kept.index\n\n\
The index holds ids, signatures and band tables (about 0.7 KB a document at the defaults), \
memory-mapped when queried; its parameters are fixed when it is built, and a query or addition \
with others is refused. Each build or addition writes one new segment; files appear \
atomically."
    )]
    Index(IndexArgs),
}

/// The flags that decide a signature's bits.
#[derive(Debug, Clone, Args)]
pub struct HashArgs {
    /// Shingle width in words, 1 to 1048576.
    #[arg(long, default_value_t = defaults::K)]
    pub k: usize,
    /// Permutations (signature length), 1 to 1048576.
    #[arg(long = "num-perm", default_value_t = defaults::NUM_PERM)]
    pub num_perm: usize,
    /// Seed of the permutation parameters (PCG32).
    #[arg(long, default_value_t = defaults::SEED)]
    pub seed: u64,
    /// What a shingle is made of: words, or characters (then --k is the n-gram length in
    /// characters; docs/SPEC.md §1.4).
    #[arg(long, value_parser = named::<ShingleUnit>(), default_value_t = ShingleUnit::default())]
    pub shingle: ShingleUnit,
    /// The Unicode normal form texts are put in before anything else.
    #[arg(long, value_parser = named::<Normalize>(), default_value_t = Normalize::default())]
    pub normalize: Normalize,
}

impl HashArgs {
    /// The widths' upper bounds (the library checks the rest).
    pub fn check(&self) -> Result<(), Error> {
        check_at_most("--k", self.k, MAX_WIDTH)?;
        check_at_most("--num-perm", self.num_perm, MAX_WIDTH)
    }

    /// The options as the library takes them.
    pub fn options(&self) -> HashOptions {
        HashOptions {
            k: self.k,
            num_perm: self.num_perm,
            seed: self.seed,
            shingle: self.shingle,
            normalize: self.normalize,
        }
    }

    pub fn params(&self) -> Result<MinHashParams, Error> {
        self.check()?;
        self.options().params()
    }
}

/// The LSH banding.
#[derive(Debug, Clone, Args)]
pub struct LshArgs {
    /// LSH bands, 1 to 1048576.
    #[arg(long, default_value_t = defaults::BANDS)]
    pub bands: usize,
    /// Rows per band, 1 to 1048576 (bands x rows must equal --num-perm).
    #[arg(long, default_value_t = defaults::ROWS)]
    pub rows: usize,
}

impl LshArgs {
    /// The upper bounds of bands and rows (the library checks that both are at least 1): their
    /// product is then no overflow.
    pub fn check(&self) -> Result<(), Error> {
        check_at_most("--bands", self.bands, MAX_WIDTH)?;
        check_at_most("--rows", self.rows, MAX_WIDTH)
    }

    pub fn params(&self) -> Result<LshParams, Error> {
        self.check()?;
        LshParams::new(self.bands, self.rows)
    }
}

/// Which inputs and which fields.
#[derive(Debug, Clone, Args)]
pub struct InputArgs {
    /// JSONL inputs (plain, .gz or .zst) or Parquet files, detected by content; `-` reads stdin
    /// (JSONL). A directory stands for the data files under it (.parquet, .jsonl, .jsonl.gz,
    /// .jsonl.zst, .ndjson; or those --glob matches), recursively, sorted by path; names that
    /// begin with a dot are skipped.
    #[arg(required = true, value_name = "IN")]
    pub inputs: Vec<String>,
    /// Which files of an input directory to read: a pattern over their path below it (`*` and
    /// `?` within a segment, `**` any segments), e.g. 'data/*/train-*.parquet' in a Hugging
    /// Face snapshot. Files named directly are read whatever it says.
    #[arg(long, value_name = "PATTERN")]
    pub glob: Option<String>,
    /// Field holding each record's unique id. `@row`: the records have none; each is named by
    /// its input and its place there, `IN:LINE` (a JSONL line, from 1) or `IN:ROW` (a Parquet
    /// row, from 0), the number padded to 12 digits.
    #[arg(long = "id-field", default_value = defaults::ID_FIELD)]
    pub id_field: String,
    /// Field holding each record's text.
    #[arg(long = "text-field", default_value = defaults::TEXT_FIELD)]
    pub text_field: String,
    /// Accept integer ids (used as their decimal digits) instead of rejecting them.
    #[arg(long = "numeric-ids")]
    pub numeric_ids: bool,
    /// Read plain input files with read(2) instead of mapping them into memory. Mapping is
    /// faster (no copy), but a file that another process truncates during the run is an error
    /// at best and a SIGBUS at worst (see the README). Compressed files and stdin are always
    /// read. NEARDUP_NO_MMAP=1 (or true, yes, on) sets it too.
    #[arg(
        long = "no-mmap",
        env = "NEARDUP_NO_MMAP",
        value_parser = clap::builder::FalseyValueParser::new()
    )]
    pub no_mmap: bool,
}

impl InputArgs {
    /// Replace each input directory by the data files under it (see `inputs`).
    pub fn expand(&mut self) -> Result<(), Error> {
        self.inputs = neardup::io::expand_inputs(&self.inputs, self.glob.as_deref())?;
        Ok(())
    }

    pub fn specs(&self) -> Vec<InputSpec> {
        self.inputs.iter().map(|s| InputSpec::parse(s)).collect()
    }

    /// The inputs, checked and ready to read (see [`Inputs::new`] for `spool_stdin`).
    pub fn open(&self, spool_stdin: bool) -> Result<Inputs, Error> {
        Ok(Inputs::new(&self.specs(), spool_stdin)?.with_mmap(!self.no_mmap))
    }

    /// The inputs as the user named them, for [`check_output_paths`].
    pub fn named(&self) -> Vec<NamedPath<'_>> {
        self.inputs.iter().map(|p| ("input", p.as_str())).collect()
    }

    pub fn fields(&self) -> Result<Fields, Error> {
        Fields::new(&self.id_field, &self.text_field, self.numeric_ids)
    }
}

/// Threads, progress and verbosity.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Worker threads: 0 (the default) starts one per core; at most 8 per core this run may
    /// use, or 16 where that is fewer.
    #[arg(long, default_value_t = defaults::THREADS, global = true)]
    pub threads: usize,
    /// Progress bars on stderr: auto (when stderr is a terminal), always, never.
    #[arg(long, value_enum, default_value_t = ProgressMode::Auto, global = true)]
    pub progress: ProgressMode,
    /// Print nothing but errors (no progress, no summary).
    #[arg(long, short, global = true)]
    pub quiet: bool,
}

/// Which GPU adapter, and how long to wait for it.
#[derive(Debug, Clone, Args)]
pub struct GpuArgs {
    /// wgpu backends to search (default: WGPU_BACKEND if set, else all).
    #[arg(long, value_parser = named::<BackendChoice>())]
    pub backend: Option<BackendChoice>,
    /// The GPU adapter to use, as `neardup devices` lists them: its index, or a part of its
    /// name (any case). Default: the best one (hardware before software, Vulkan, Metal or
    /// DX12 before GL, discrete before integrated).
    #[arg(long, value_name = "INDEX|NAME")]
    pub adapter: Option<String>,
    /// Seconds to wait for the GPU to finish one sub-batch before giving up with an error, in
    /// (0, 1000000].
    #[arg(long = "gpu-timeout", value_name = "SECONDS", default_value_t = 120.0)]
    pub gpu_timeout: f64,
    /// Word bytes of one GPU sub-batch, in MiB, 1 to 4096 (capped by the device's buffer
    /// limits); the results are the same for every size. Default: sized by the input (a
    /// twelfth of it, 1 to 8 MiB; on a software adapter a 24th, 1 to 4 MiB) where its size is
    /// known, else 32.
    #[arg(long = "gpu-batch-mib", value_name = "MIB")]
    pub gpu_batch_mib: Option<usize>,
    /// GPU kernels: split (hash, then reduce) or fused (both in one dispatch).
    #[arg(long = "gpu-kernels", value_parser = named::<Kernels>(), default_value_t = Kernels::default())]
    pub gpu_kernels: Kernels,
    /// Native 64-bit shader integers instead of the emulated arithmetic (the same bits; the
    /// adapter must offer them: see `neardup devices`).
    #[arg(long = "gpu-int64")]
    pub gpu_int64: bool,
}

impl GpuArgs {
    /// The GPU flags' ranges, checked whichever engine runs.
    pub fn check(&self) -> Result<(), Error> {
        if !(self.gpu_timeout.is_finite()
            && self.gpu_timeout > 0.0
            && self.gpu_timeout <= MAX_GPU_TIMEOUT)
        {
            return Err(Error::Param(format!(
                "--gpu-timeout {:?} must be a positive number of seconds, at most \
                 {MAX_GPU_TIMEOUT}",
                self.gpu_timeout
            )));
        }
        match self.gpu_batch_mib {
            Some(m) => check_range("--gpu-batch-mib", m, 1, 4096),
            None => Ok(()),
        }
    }

    /// The GPU engine's options (software adapters allowed).
    pub fn options(&self) -> Result<GpuOptions, Error> {
        self.check()?;
        Ok(GpuOptions {
            backend: self.backend,
            allow_software: true,
            adapter: self.adapter.clone(),
            wait_timeout: std::time::Duration::from_secs_f64(self.gpu_timeout),
            batch_bytes: self
                .gpu_batch_mib
                .map_or(GpuOptions::default().batch_bytes, |m| Mib(m as u64).bytes()),
            input_sized: self.gpu_batch_mib.is_none(),
            kernels: self.gpu_kernels,
            int64: self.gpu_int64,
            ..GpuOptions::default()
        })
    }
}

/// Which engine, and which GPU.
#[derive(Debug, Clone, Args)]
pub struct EngineArgs {
    /// Signature engine: auto (a hardware GPU where it signs faster than the CPU engine, else
    /// the CPU; the summary line says which and why), cpu, gpu (any adapter, software ones such
    /// as llvmpipe included).
    #[arg(long, value_parser = named::<EngineChoice>(), default_value_t = EngineChoice::default())]
    pub engine: EngineChoice,
    #[command(flatten)]
    pub gpu: GpuArgs,
}

impl EngineArgs {
    /// The GPU engine's options for a run over `input_bytes` bytes (when known): its buffers
    /// are sized for them, and `auto` weighs them.
    pub fn gpu_options_for(&self, input_bytes: Option<u64>) -> Result<GpuOptions, Error> {
        Ok(GpuOptions {
            input_bytes,
            ..self.gpu.options()?
        })
    }
}

/// What decides which documents are near duplicates and which survive: the flags `dedup` and
/// `stage init` share.
#[derive(Debug, Args)]
pub struct ClusterArgs {
    #[command(flatten)]
    pub hash: HashArgs,
    #[command(flatten)]
    pub lsh: LshArgs,
    /// Similarity at or above which a candidate pair is a duplicate, in (0, 1].
    #[arg(long, default_value_t = defaults::THRESHOLD)]
    pub threshold: f64,
    /// How candidates are confirmed: exact Jaccard of the shingle sets, the MinHash estimate,
    /// or not at all.
    #[arg(long, value_parser = named::<Confirm>(), default_value_t = Confirm::default())]
    pub confirm: Confirm,
    /// Drop exact duplicates (identical word sequences, smallest id kept) before near-dedup.
    #[arg(long)]
    pub exact: bool,
    /// Keep every record; only tag it with meta.minhash_cluster (in a Parquet output, the
    /// minhash_cluster column).
    #[arg(long = "tag-only")]
    pub tag_only: bool,
    /// Which document of a cluster survives: smallest-id, first (in input order), longest (most
    /// words), field:NAME:max or field:NAME:min (a numeric field or column). Ties go to the
    /// smallest id; the cluster tag stays the smallest id whichever survives.
    #[arg(long, value_name = "POLICY", default_value = defaults::KEEP, value_parser = parse_keep)]
    pub keep: KeepChoice,
    /// Deduplicate within groups: documents with different values of this field (e.g. `dump`)
    /// are never duplicates of each other. Values compare as text: a number by its JSON
    /// spelling, so `2024` and `"2024"` are one group and `2024` and `2024.0` two.
    #[arg(long, value_name = "FIELD")]
    pub group_field: Option<String>,
    /// With --group-field, what a document without the field is: an error, or a member of a
    /// group of its own with every other such document.
    #[arg(long, value_parser = named::<GroupMissing>(), default_value_t = GroupMissing::default(), requires = "group_field")]
    pub group_missing: GroupMissing,
    /// How confirmed pairs become clusters: components (chains of near duplicates join, one
    /// survivor each) or greedy (in --keep order, a document is dropped only when an already
    /// kept document is its confirmed near duplicate, and joins the first such one). In memory,
    /// with --work-dir and as `neardup stage` jobs alike.
    #[arg(long, value_parser = named::<ClusterRule>(), default_value_t = ClusterRule::default())]
    pub cluster: ClusterRule,
}

impl ClusterArgs {
    /// The options as the library takes them (with the input's fields); `resolve()` checks
    /// them.
    pub fn options(&self, input: &InputArgs) -> DedupOptions {
        DedupOptions {
            hash: self.hash.options(),
            bands: self.lsh.bands,
            rows: self.lsh.rows,
            threshold: self.threshold,
            confirm: self.confirm,
            exact: self.exact,
            tag_only: self.tag_only,
            keep: self.keep.clone(),
            group_field: self.group_field.clone(),
            group_missing: self.group_missing,
            cluster: self.cluster,
            fields: FieldOptions {
                id_field: input.id_field.clone(),
                text_field: input.text_field.clone(),
                numeric_ids: input.numeric_ids,
            },
        }
    }
}

#[derive(Debug, Args)]
pub struct DedupArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// Output JSONL (`-`: stdout; .gz/.zst compress), or Parquet for a name ending in .parquet
    /// (the inputs' columns plus `minhash_cluster`; docs/FORMATS.md).
    #[arg(short, long, value_name = "OUT")]
    pub output: String,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Write one JSON line per cluster of 2+ documents: root, members, size.
    #[arg(long, value_name = "FILE")]
    pub clusters: Option<String>,
    /// Write one JSON line per confirmed pair: a, b, estimate, and jaccard when computed.
    #[arg(long, value_name = "FILE")]
    pub pairs: Option<String>,
    /// Write the documents a dropping run removes as Parquet: `id`, `root` (its cluster's
    /// root) and `survivor` (the kept document it duplicates), in input order; NeMo Curator's
    /// removal workflow reads it as its ids to remove.
    #[arg(long, value_name = "FILE.parquet")]
    pub removed: Option<String>,
    /// Write a report: JSON (counts, clusters by size, parameters, stage times and throughput,
    /// peak memory, engine), or with a `.html` name a self-contained page with the S-curve,
    /// cluster sizes and the largest clusters side by side. May be given more than once.
    #[arg(long, value_name = "FILE")]
    pub report: Vec<String>,
    /// Stop with a clear error, before writing anything, when the signature tables (and, for
    /// `--confirm jaccard`, the shingle sets) would pass this many MiB. Default: 3/4 of the
    /// memory available when the run starts. (--work-dir runs are bounded by a partition
    /// instead.) At least 1.
    #[arg(long = "max-memory", value_name = "MIB", conflicts_with = "work_dir")]
    pub max_memory: Option<u64>,
    /// Run out of core: the stages of `neardup stage` in one process, through files in DIR
    /// (each input file a shard). The outputs are the same bytes; a run repeated over the same
    /// DIR skips the stages it finished. docs/GUIDE.md has the details.
    #[arg(long = "work-dir", value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// With --work-dir: the partitions of the band rows; memory is bounded by one. 1 to 65536,
    /// and no more than the open-file limit (`ulimit -n`) allows: `bands` writes one file per
    /// partition at once.
    #[arg(long, value_name = "R", default_value_t = defaults::PARTITIONS, requires = "work_dir")]
    pub partitions: usize,
    /// With --work-dir: MiB of id records `rank` sorts at once (as `neardup stage rank
    /// --sort-memory`), at least 1; a larger corpus is sorted in id-range buckets through files.
    #[arg(long, value_name = "MIB", default_value_t = Mib(defaults::SORT_MEMORY_MIB), requires = "work_dir", value_parser = mib())]
    pub sort_memory: Mib,
    /// With --work-dir: MiB a `confirm` job holds at most, at least 1 (as `neardup stage next
    /// --task-memory`): a partition whose buckets need more documents than a group holds (one
    /// giant bucket of templated pages) is confirmed in blocks of a quarter of this, two at a time.
    #[arg(long = "task-memory", value_name = "MIB", default_value_t = Mib(defaults::TASK_MEMORY_MIB), requires = "work_dir", value_parser = mib())]
    pub task_memory: Mib,
    /// Check the documents against an index of documents already kept (`neardup index
    /// build`): one with a near duplicate there is dropped (with --tag-only, tagged with that
    /// document's id in meta.minhash_index_match). Pairs with an indexed document are confirmed
    /// by their MinHash estimate. May be given more than once.
    #[arg(long, value_name = "INDEX")]
    pub against: Vec<PathBuf>,
    /// Add the run's survivors to the index of --against (one index), once the outputs are
    /// written. In memory only: with --work-dir, `neardup index add INDEX OUT` afterwards.
    #[arg(long = "update-index", requires = "against")]
    pub update_index: bool,
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    pub run: RunArgs,
}

/// `neardup index`: an index of documents already kept.
#[derive(Debug, Args)]
pub struct IndexArgs {
    #[command(subcommand)]
    pub command: IndexCommand,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Subcommand)]
pub enum IndexCommand {
    /// Sign the inputs into a new index (a directory; missing or empty).
    Build {
        #[command(flatten)]
        input: InputArgs,
        /// The index directory.
        #[arg(short, long, value_name = "INDEX")]
        output: PathBuf,
        #[command(flatten)]
        hash: HashArgs,
        #[command(flatten)]
        lsh: LshArgs,
        #[command(flatten)]
        engine: EngineArgs,
    },
    /// Sign the inputs and add them to an index, as one new segment.
    Add {
        /// The index directory.
        #[arg(value_name = "INDEX")]
        index: PathBuf,
        #[command(flatten)]
        input: InputArgs,
        #[command(flatten)]
        engine: EngineArgs,
    },
    /// Print an index's manifest (contract, parameters, segments) as JSON.
    Info {
        /// The index directory.
        #[arg(value_name = "INDEX")]
        index: PathBuf,
    },
}

/// `neardup stage`: one stage of the sharded dedup.
#[derive(Debug, Args)]
pub struct StageArgs {
    #[command(subcommand)]
    pub stage: Stage,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Subcommand)]
pub enum Stage {
    /// Make a work directory for these shards (one input file each) and parameters.
    Init {
        /// The work directory (made if missing; one made for other inputs or parameters is
        /// refused).
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        #[command(flatten)]
        input: InputArgs,
        #[command(flatten)]
        cluster: ClusterArgs,
        /// Partitions of the band rows: `confirm` runs once per partition, and its memory is
        /// bounded by one. 1 to 65536, and no more than the open-file limit (`ulimit -n`)
        /// allows: `bands` writes one file per partition at once.
        #[arg(long, value_name = "R", default_value_t = defaults::PARTITIONS)]
        partitions: usize,
        /// Check every document against this index in `apply`, as it is now (segments added
        /// later are not seen). May be given more than once.
        #[arg(long, value_name = "INDEX")]
        against: Vec<PathBuf>,
        /// Where the run's outputs go when it runs as tasks (`stage next`, `stage run`): each
        /// shard's under the shard's file name, and clusters.jsonl and report.json (made if
        /// missing).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// The tasks that may run now, one per line, in any order or all at once; nothing once
    /// the run is complete (the work directory needs `init --out`).
    Next {
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        /// MiB a task of `rank`, `confirm` or `cluster` holds at most, at least 1: their plans
        /// cut as many ranges and parts as the records need at this much each, and a partition
        /// past what a confirm group holds is confirmed in blocks of a quarter of this.
        #[arg(long = "task-memory", value_name = "MIB", default_value_t = Mib(defaults::TASK_MEMORY_MIB), value_parser = mib())]
        task_memory: Mib,
        /// How many tasks confirm the partitions, each a group of them confirmed together (a
        /// document in buckets of several is read and signed again once); by default one per
        /// partition.
        #[arg(long = "confirm-tasks", value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        confirm_tasks: Option<u64>,
    },
    /// Run one task, a line `stage next` printed (a task done already is skipped; two runs
    /// of one task at once are safe).
    Run {
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        /// The task, as one argument: `sign shard=3`, `confirm partitions=0,2`, ...
        #[arg(value_name = "TASK")]
        task: String,
        #[command(flatten)]
        engine: EngineArgs,
    },
    /// Stage 1, per shard: ids, word counts and signatures.
    Sign {
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        #[arg(long, value_name = "I")]
        shard: usize,
        #[command(flatten)]
        engine: EngineArgs,
    },
    /// Stage 2, after every shard is signed: ids in order, and exact duplicates.
    ///
    /// Without --step, the whole stage in this process. With --step, one of its parallel jobs,
    /// in this order: `split` per shard, `plan` once (it prints how many ranges), `sort` per
    /// range, `exact` per range (runs with --exact only), `write` per shard, `finish` once.
    /// Both forms write the same files.
    Rank {
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        /// MiB of id records sorted at once, at least 1; a larger corpus is sorted in id-range
        /// buckets through files in the work directory (the peak is about twice this).
        #[arg(long, value_name = "MIB", default_value_t = Mib(defaults::SORT_MEMORY_MIB), value_parser = mib(), conflicts_with = "step")]
        sort_memory: Mib,
        /// One parallel job of the stage (see above).
        #[arg(long, value_enum, value_name = "STEP")]
        step: Option<RankStep>,
        /// The shard of a `split` or `write` job.
        #[arg(long, value_name = "I", requires = "step", conflicts_with = "range")]
        shard: Option<usize>,
        /// The range of a `sort` or `exact` job.
        #[arg(long, value_name = "R", requires = "step")]
        range: Option<usize>,
        /// MiB a job holds at most, at least 1: `split` sorts runs of half this, and `plan`
        /// cuts as many ranges as the records need at this much each.
        #[arg(long = "task-memory", value_name = "MIB", default_value_t = Mib(defaults::TASK_MEMORY_MIB), value_parser = mib(), requires = "step")]
        task_memory: Mib,
    },
    /// Stage 3, per shard, after rank: band rows, split into partitions.
    Bands {
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        #[arg(long, value_name = "I")]
        shard: usize,
    },
    /// Stage 4, per partition, after every shard is banded: buckets and confirmed pairs.
    Confirm {
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        /// The partition, or several (`--partition 0 3 5`): confirmed together, a document in
        /// buckets of several of them is read and signed again once.
        #[arg(long, value_name = "P", num_args = 1.., required = true)]
        partition: Vec<usize>,
        /// MiB a job holds at most, at least 1: a partition whose buckets need more documents
        /// than a group holds is confirmed in blocks, two held at a time, of a quarter of this each.
        #[arg(long = "task-memory", value_name = "MIB", default_value_t = Mib(defaults::TASK_MEMORY_MIB), value_parser = mib())]
        task_memory: Mib,
    },
    /// Stage 4b, under `--cluster greedy`, after every partition is confirmed: the rule's rounds.
    ///
    /// With `--round R --partition P`, one partition's job of round R (1 on; `confirm` ran
    /// round 0's); with `--round R` alone, the round's settling, once its partitions' jobs ran
    /// (it says whether another round is needed); with neither, every round still to run, in
    /// this process.
    Greedy {
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        /// The round: its partitions' jobs with `--partition`, else its settling.
        #[arg(long, value_name = "R")]
        round: Option<u32>,
        /// The partition, or several, each its own job of the round.
        #[arg(long, value_name = "P", num_args = 1.., requires = "round")]
        partition: Vec<usize>,
        /// MiB a partition's job holds at most, at least 1: one whose walks need more
        /// documents than a group holds walks them in blocks, two held at a time, of a quarter
        /// of this each.
        #[arg(long = "task-memory", value_name = "MIB", default_value_t = Mib(defaults::TASK_MEMORY_MIB), value_parser = mib())]
        task_memory: Mib,
    },
    /// Stage 5, once, after every partition is confirmed (and under `--cluster greedy`, every
    /// round run): clusters and who survives.
    ///
    /// Without --step, the whole stage in this process. With --step, one of its parallel jobs,
    /// in this order: `plan` once (it prints how many
    /// parts), `edges` per partition and `locate` per shard, `star` per part for rounds 0, 1,
    /// ... until a round says the components are found, `roots` per part, `attributes` per
    /// shard, `clusters` per part, `verdicts` per shard, `finish` once (with --clusters and
    /// --pairs). Both forms write the same files.
    Cluster {
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        /// Copy the clusters file (as `dedup --clusters` writes it) here.
        #[arg(long, value_name = "FILE")]
        clusters: Option<String>,
        /// Copy the pairs file (as `dedup --pairs` writes it) here.
        #[arg(long, value_name = "FILE")]
        pairs: Option<String>,
        /// Write the removed documents (as `dedup --removed`) here, once the stage is done:
        /// without --step, or with `--step finish`.
        #[arg(long, value_name = "FILE.parquet")]
        removed: Option<String>,
        /// One parallel job of the stage (see above).
        #[arg(long, value_enum, value_name = "STEP")]
        step: Option<ClusterStep>,
        /// The partition of an `edges` job.
        #[arg(long, value_name = "P", requires = "step")]
        partition: Option<usize>,
        /// The shard of a `locate`, `attributes` or `verdicts` job.
        #[arg(long, value_name = "I", requires = "step")]
        shard: Option<usize>,
        /// The part of a `star`, `roots` or `clusters` job.
        #[arg(long, value_name = "K", requires = "step")]
        part: Option<usize>,
        /// The round of a `star` job.
        #[arg(long, value_name = "R", requires = "step")]
        round: Option<u32>,
        /// MiB a job holds at most, at least 1: `plan` cuts as many parts as the pairs and
        /// documents need at this much each.
        #[arg(long = "task-memory", value_name = "MIB", default_value_t = Mib(defaults::TASK_MEMORY_MIB), value_parser = mib(), requires = "step")]
        task_memory: Mib,
    },
    /// Stage 6, per shard, after cluster: the shard's kept records, tagged, in input order.
    Apply {
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        #[arg(long, value_name = "I")]
        shard: usize,
        /// The shard's output (JSONL, or Parquet for a name ending in .parquet).
        #[arg(short, long, value_name = "OUT")]
        output: String,
    },
    /// After every shard is applied: the run's report, as `dedup --report` writes it.
    Report {
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        /// JSON, or a page for a name ending in .html; repeatable.
        #[arg(long, value_name = "FILE", required = true)]
        report: Vec<String>,
        /// What the report names as the output (the shards' outputs went where `apply` put
        /// them).
        #[arg(long, value_name = "NAME", default_value = "")]
        output: String,
        /// The run's wall time in seconds (at least 0), when the scheduler knows it (the
        /// stages' own times are summed otherwise).
        #[arg(long, value_name = "SECONDS")]
        seconds: Option<f64>,
    },
}

impl BenchArgs {
    pub fn config(&self) -> Result<BenchConfig, Error> {
        Ok(BenchConfig {
            inputs: self.inputs.clone(),
            synthetic: self.synthetic,
            synthetic_words: self.synthetic_words,
            fields: Fields {
                id: self.id_field.clone(),
                text: self.text_field.clone(),
                numeric_ids: false,
                ..Default::default()
            },
            params: self.hash.params()?,
            lsh: self.lsh.params()?,
            engines: match self.engine {
                BenchEngine::Auto => BenchEngines::Auto,
                BenchEngine::Cpu => BenchEngines::Cpu,
                BenchEngine::Gpu => BenchEngines::Gpu,
                BenchEngine::All => BenchEngines::All,
            },
            gpu: self.gpu.options()?,
            repeat: self.repeat,
        })
    }
}

impl DedupArgs {
    /// Refuse outputs that name an input or each other, or that land in the work directory or
    /// an index, before any work.
    pub fn check_paths(&self) -> Result<(), Error> {
        let mut outs = vec![("-o", self.output.as_str())];
        outs.extend(self.clusters.iter().map(|p| ("--clusters", p.as_str())));
        outs.extend(self.pairs.iter().map(|p| ("--pairs", p.as_str())));
        outs.extend(self.removed.iter().map(|p| ("--removed", p.as_str())));
        outs.extend(self.report.iter().map(|p| ("--report", p.as_str())));
        // An index's files and a work directory's are neardup's: no output may land on them.
        let mut owned: Vec<OwnedDir> = self
            .against
            .iter()
            .map(|d| ("the index", d.as_path()))
            .collect();
        if let Some(w) = &self.work_dir {
            owned.push(("the work directory", w.as_path()));
        }
        check_outputs(&self.input.named(), &owned, &outs)
    }

    /// The run's configuration and the fields records are read by.
    pub fn resolve(&self) -> Result<(DedupConfig, Fields), Error> {
        self.cluster.options(&self.input).resolve()
    }

    #[cfg(feature = "parquet")]
    /// The knobs of a `--work-dir` run (one process runs it).
    pub fn sharded(&self) -> neardup::options::ShardedOptions {
        neardup::options::ShardedOptions {
            partitions: self.partitions,
            sort_memory: self.sort_memory,
            task_memory: self.task_memory,
        }
    }
}

#[derive(Debug, Args)]
pub struct DecontamArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// Protected eval files (.jsonl and Parquet: every string value but ids and tags; others:
    /// whole text).
    #[arg(long, required = true, num_args = 1.., value_name = "FILE")]
    pub protected: Vec<PathBuf>,
    /// Output JSONL of the clean documents, lines unchanged (`-`: stdout), or Parquet for a name
    /// ending in .parquet (the inputs' rows, values unchanged).
    #[arg(short, long, value_name = "OUT")]
    pub output: String,
    /// n-gram length in words, 1 to 1048576.
    #[arg(long, default_value_t = neardup::stages::decontam::DEFAULT_N)]
    pub n: usize,
    /// Protect each protected text shorter than n words but of MIN words or more by its whole
    /// word sequence: a document holding that sequence is caught (SPEC §4). MIN is 8 by default
    /// (and when the flag is given without a value); `off` (or 0) protects nothing shorter
    /// than n words: the strict n-gram rule.
    #[arg(long, value_name = "MIN|off", num_args = 0..=1, default_value = "8", default_missing_value = "8", value_parser = parse_protect_short)]
    pub protect_short: usize,
    /// Protect each item (a JSONL line, a Parquet row) of a protected file as one text: its
    /// string values in order, so n-grams span a question and its answer. Off by default: each
    /// string value is a text of its own (SPEC §4).
    #[arg(long)]
    pub join_fields: bool,
    /// The top-level field of a JSONL or Parquet protected item that names its task (BIG-bench's
    /// task, say): the report then breaks the catch down by task, with evidence per task. The
    /// field's value is not protected.
    #[arg(long, value_name = "NAME")]
    pub task_field: Option<String>,
    /// Catch only documents whose score (the share of their words inside protected n-grams) is
    /// at least S, in (0, 1]; by default any protected n-gram catches a document.
    #[arg(long, value_name = "S")]
    pub min_score: Option<f64>,
    /// drop: write only clean documents; tag: write every document, each caught one with
    /// meta.decontam = {score, matched, sources} (JSONL output).
    #[arg(long, value_enum, default_value_t = DecontamMode::Drop)]
    pub mode: DecontamMode,
    /// Write a report: JSON (per protected file, documents caught and matched n-grams), or with
    /// a `.html` name a page with the hits highlighted. May be given more than once.
    #[arg(long, value_name = "FILE")]
    pub report: Vec<String>,
    #[command(flatten)]
    pub run: RunArgs,
}

impl DecontamArgs {
    /// Refuse outputs that name an input, a protected file or each other, before any work.
    pub fn check_paths(&self) -> Result<(), Error> {
        let mut ins = self.input.named();
        let protected: Vec<String> = self
            .protected
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        ins.extend(protected.iter().map(|p| ("--protected", p.as_str())));
        let mut outs = vec![("-o", self.output.as_str())];
        outs.extend(self.report.iter().map(|p| ("--report", p.as_str())));
        check_output_paths(&ins, &outs)
    }
}

#[derive(Debug, Args)]
pub struct SignaturesArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// Output file (a plain path; npy also writes OUT.ids and OUT.meta.json).
    #[arg(short, long, value_name = "OUT")]
    pub output: String,
    /// npy (uint32 [docs, num_perm]), tsv (id TAB comma-separated values) or parquet (columns
    /// id and signature, the parameters in the file's metadata).
    #[arg(long, value_parser = named::<SigFormat>(), default_value_t = SigFormat::Npy)]
    pub format: SigFormat,
    #[command(flatten)]
    pub hash: HashArgs,
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    pub run: RunArgs,
}

impl SignaturesArgs {
    /// Refuse outputs (the npy format's two companion files included) that name an input or
    /// each other, before any work.
    pub fn check_paths(&self) -> Result<(), Error> {
        let ids = format!("{}.ids", self.output);
        let meta = format!("{}.meta.json", self.output);
        let mut outs = vec![("-o", self.output.as_str())];
        if self.format == SigFormat::Npy {
            outs.push(("-o (its ids file)", ids.as_str()));
            outs.push(("-o (its metadata file)", meta.as_str()));
        }
        check_output_paths(&self.input.named(), &outs)
    }
}

#[derive(Debug, Args)]
pub struct ScurveArgs {
    /// Bands, 1 to 1048576 (several values, with as many --rows, draw several curves).
    #[arg(long, default_value = "16", num_args = 1..)]
    pub bands: Vec<usize>,
    /// Rows per band, 1 to 1048576, one per --bands.
    #[arg(long, default_value = "8", num_args = 1..)]
    pub rows: Vec<usize>,
    /// Also draw the curves, with their thresholds marked, to this SVG file.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<String>,
}

#[derive(Debug, Args)]
pub struct TuneArgs {
    /// The similarity at which documents should count as duplicates, in (0, 1).
    #[arg(long)]
    pub threshold: f64,
    /// Permutations to split into bands x rows, 1 to 1048576.
    #[arg(long = "num-perm", default_value_t = defaults::NUM_PERM)]
    pub num_perm: usize,
    /// How dedup will confirm candidates. jaccard (dedup's default): a false positive costs
    /// only an exact check, so the split with the least work whose p(threshold) reaches
    /// --recall; estimate or none: the least weighted false-positive and false-negative area.
    #[arg(long, value_parser = named::<Confirm>(), default_value_t = Confirm::default())]
    pub confirm: Confirm,
    /// With --confirm jaccard: the least chance that a pair at the threshold becomes a
    /// candidate, in (0, 1].
    #[arg(long, default_value_t = 0.95)]
    pub recall: f64,
    /// With --confirm estimate or none: weight of false positives (area under p(s) below the
    /// threshold), a finite number >= 0 (not 0 with --fn-weight 0).
    #[arg(long = "fp-weight", default_value_t = 0.5)]
    pub fp_weight: f64,
    /// With --confirm estimate or none: weight of false negatives (area above p(s) from the
    /// threshold up), a finite number >= 0 (not 0 with --fp-weight 0).
    #[arg(long = "fn-weight", default_value_t = 0.5)]
    pub fn_weight: f64,
    /// Also draw the chosen curve to this SVG file.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<String>,
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// First document's id.
    pub a: String,
    /// Second document's id.
    pub b: String,
    /// JSONL or Parquet inputs holding them, and their fields.
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    pub hash: HashArgs,
    #[command(flatten)]
    pub lsh: LshArgs,
    /// The similarity `dedup` would hold the pair to (said beside the exact Jaccard), in
    /// (0, 1].
    #[arg(long, default_value_t = defaults::THRESHOLD)]
    pub threshold: f64,
    /// Shared shingles to list.
    #[arg(long, default_value_t = 20)]
    pub show: usize,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

impl ScurveArgs {
    pub fn params(&self) -> Result<Vec<LshParams>, Error> {
        if self.bands.len() != self.rows.len() {
            return Err(Error::Param(format!(
                "{} --bands values but {} --rows values; give one of each per curve",
                self.bands.len(),
                self.rows.len()
            )));
        }
        self.bands
            .iter()
            .zip(&self.rows)
            .map(|(&b, &r)| LshParams::new(b, r))
            .collect()
    }
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    pub hash: HashArgs,
    #[command(flatten)]
    pub gpu: GpuArgs,
    /// Mismatches to print in full.
    #[arg(long = "show", default_value_t = 5)]
    pub show: usize,
    #[command(flatten)]
    pub run: RunArgs,
}

/// A parallel job of `neardup stage rank`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RankStep {
    Split,
    Plan,
    Sort,
    Exact,
    Write,
    Finish,
}

/// A parallel job of `neardup stage cluster`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ClusterStep {
    Plan,
    Edges,
    Locate,
    Star,
    Roots,
    Attributes,
    Clusters,
    Verdicts,
    Finish,
}

/// Which engines `bench` measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchEngine {
    /// The CPU engine, and a hardware GPU when wgpu finds one (never a software adapter).
    Auto,
    Cpu,
    /// The GPU engine on any adapter, a software one (llvmpipe) included.
    Gpu,
    /// Both, the GPU on any adapter.
    All,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// JSONL or Parquet inputs (omit with --synthetic).
    #[arg(value_name = "IN")]
    pub inputs: Vec<String>,
    /// Generate this many synthetic documents (1 to 1000000000, held in memory) instead of
    /// reading inputs.
    #[arg(long, value_name = "N")]
    pub synthetic: Option<usize>,
    /// Mean words per synthetic document, 0 to 1000000.
    #[arg(long = "synthetic-words", default_value_t = 300)]
    pub synthetic_words: usize,
    #[arg(long = "id-field", default_value = defaults::ID_FIELD)]
    pub id_field: String,
    #[arg(long = "text-field", default_value = defaults::TEXT_FIELD)]
    pub text_field: String,
    #[command(flatten)]
    pub hash: HashArgs,
    #[command(flatten)]
    pub lsh: LshArgs,
    /// Engines to measure: auto (the CPU, and a hardware GPU if wgpu finds one), cpu, gpu or
    /// all (gpu and all take any adapter, a software one such as llvmpipe included).
    #[arg(long, value_enum, default_value_t = BenchEngine::Auto)]
    pub engine: BenchEngine,
    #[command(flatten)]
    pub gpu: GpuArgs,
    /// Repetitions of the signing stage (the best is reported), 1 to 1000.
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Args)]
pub struct DevicesArgs {
    /// wgpu backends to search.
    #[arg(long, value_parser = named::<BackendChoice>())]
    pub backend: Option<BackendChoice>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// First signature file.
    pub a: String,
    /// Second signature file.
    pub b: String,
    /// Require this shingle width (1 to 1048576).
    #[arg(long)]
    pub k: Option<usize>,
    /// Require this many permutations (1 to 1048576).
    #[arg(long = "num-perm")]
    pub num_perm: Option<usize>,
    /// Require this seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Require this shingle unit.
    #[arg(long, value_parser = named::<ShingleUnit>())]
    pub shingle: Option<ShingleUnit>,
    /// Require this normal form.
    #[arg(long, value_parser = named::<Normalize>())]
    pub normalize: Option<Normalize>,
    /// Mismatches to print in full.
    #[arg(long, default_value_t = 5)]
    pub show: usize,
}

#[derive(Debug, Args)]
pub struct SynthArgs {
    /// Number of documents, 0 to 10000000000.
    pub docs: usize,
    /// Output JSONL (`-`: stdout; .gz/.zst compress).
    #[arg(short, long, value_name = "OUT")]
    pub output: String,
    /// Mean words per document (uniform in [words/2, 3*words/2]), 0 to 1000000.
    #[arg(long, default_value_t = 300)]
    pub words: usize,
    /// Generator seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Words of boilerplate that begin every document (0: none; at most 1000000), as on
    /// templated web pages; `--words` then counts each document's own words after it.
    #[arg(long, default_value_t = 0, value_name = "WORDS")]
    pub template: usize,
    /// Print nothing but errors (no summary).
    #[arg(long, short)]
    pub quiet: bool,
}

/// A memory budget in MiB, at least 1.
fn mib() -> impl clap::builder::TypedValueParser<Value = Mib> {
    use clap::builder::TypedValueParser;
    clap::value_parser!(u64).range(1..).map(Mib)
}

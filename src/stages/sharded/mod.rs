//! `dedup` cut into stages over files, for corpora past one machine's memory: each stage reads
//! and writes files in a work directory, so one process, a shell loop, any scheduler or Ray can
//! run them, and the outputs are byte-identical to in-memory `dedup`.
//!
//! 1. [`sign`], per shard: ids, word counts, exact keys, policy values and band digests.
//! 2. [`rank`]: every id's place in id order (the root of a cluster is its smallest id), and
//!    the exact-duplicate pre-pass; in one process, or as parallel tasks ([`rank::tasks`]).
//! 3. [`bands`], per shard: one row per document and band, split into partitions by the band's
//!    digest.
//! 4. [`confirm`], per partition: the buckets, each confirmed on its own
//!    ([`confirm_bucket`](crate::stages::dedup::confirm_bucket)); the signatures and shingle
//!    sets of just the documents in some bucket are computed again from their text
//!    (`gather.rs`).
//!    Under `--cluster greedy` it keeps the buckets instead, and answers the first of the
//!    [`greedy`] rule's rounds; the others run per partition too, each settled in one pass.
//! 5. [`cluster`]: union-find over every partition's pairs (or the greedy rounds' verdicts);
//!    each document's tag and verdict; in one process, or as parallel tasks
//!    ([`cluster::tasks`]) that hold a part of the members each.
//! 6. [`apply`], per shard: the kept records, in input order.
//!
//! [`summary`] reads the run's counts back for its reports. [`task`] cuts the run into units of
//! work and says which may run now: every scheduler, and `--work-dir`, is a loop over its
//! waves.
//!
//! The manifest (`manifest.json`) fixes the contract, the parameters, the partitions and the
//! shards (their paths, sizes and fingerprints). Every stage file carries the manifest's key in
//! its metadata, so a file of another run is refused rather than mixed in. Every stage output
//! appears atomically, so a stage killed midway leaves nothing half-written, and a finished
//! stage is skipped when run again.

pub mod apply;
pub mod bands;
mod blocks;
pub mod cluster;
mod codec;
pub mod confirm;
mod deliver;
mod gather;
pub mod greedy;
mod lock;
pub mod rank;
mod raw;
pub mod run;
pub mod ship;
pub mod sign;
mod sliced;
mod spill;
pub mod summary;
mod table;
pub mod task;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::io::{Fields, InputSpec, Inputs};
use crate::stages::dedup::{Against, DedupConfig, RecordedIndex};

pub use deliver::*;
pub use lock::UnitLock;
pub use run::*;
pub use table::Table;
pub use task::{next_wave, StepIndex, Task, TaskEnv, TaskReport, Waves};

/// The layout of the work directories this build makes. 4: `cluster` records each member's
/// survivor wherever the keep policy may choose another than the root (3: every stage file
/// carries a checksum of its contents, and `sign` records each shard's; 2: band digests in
/// `sign`, keyed band rows without ranks; 1, unnumbered in its manifests: signatures in `sign`,
/// band rows as tables).
pub const WORK_LAYOUT: u32 = 4;

/// What a work directory is for: fixed when it is made, checked by every stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub contract: String,
    /// The work directory's layout ([`WORK_LAYOUT`]): which files its stages write.
    #[serde(default)]
    pub layout: u32,
    pub config: DedupConfig,
    pub fields: Fields,
    /// Partitions of the band rows (`confirm` runs once per partition).
    pub partitions: usize,
    pub shards: Vec<ShardEntry>,
    /// `--against`: the indexes `apply` checks each shard's documents against, as they were
    /// when the directory was made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub against: Vec<RecordedIndex>,
    /// Where `init` ran (absolute), when a shard or index path is relative: such a path is
    /// read from there by every stage, whatever directory a job starts in. Paths stay as given
    /// everywhere else (messages, reports).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub base: String,
    /// `--out`: where the run's tasks write its outputs. None: they go where `stage apply`,
    /// `stage cluster` and `stage report` are told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out: Option<OutDir>,
}

/// The directory a run's tasks write its outputs into: each shard's output under the shard's
/// file name, and beside them the run's own files, by the names given here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutDir {
    /// The directory, as given (read from [`Manifest::base`] when relative).
    pub dir: String,
    /// The clusters file's name, as `dedup --clusters` writes it.
    pub clusters: Option<String>,
    /// The pairs file's name, as `dedup --pairs` writes it.
    pub pairs: Option<String>,
    /// The report's name: JSON, or a page for a name ending in `.html`.
    pub report: Option<String>,
}

impl OutDir {
    /// The directory `dir` with the clusters file and the JSON report by their usual names
    /// ([`task::OUT_CLUSTERS`], [`task::OUT_REPORT`]), and no pairs file.
    pub fn new(dir: &Path) -> Self {
        OutDir {
            dir: dir.display().to_string(),
            clusters: Some(task::OUT_CLUSTERS.into()),
            pairs: None,
            report: Some(task::OUT_REPORT.into()),
        }
    }

    /// The run's own files' names.
    fn own(&self) -> impl Iterator<Item = &str> {
        [&self.clusters, &self.pairs, &self.report]
            .into_iter()
            .flatten()
            .map(|s| s.as_str())
    }
}

/// One input shard as the manifest knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardEntry {
    pub path: String,
    pub bytes: u64,
    /// xxh3 of the file's size, first MiB and last MiB: a shard replaced by another file is
    /// noticed without reading it whole.
    pub fingerprint: String,
}

impl ShardEntry {
    /// The entry of the file at `path` as it is now.
    pub fn of(path: &str) -> Result<Self, Error> {
        Self::of_at(path, Path::new(path))
    }

    /// The entry of the shard `path` (as given) as the file at `at` is now.
    pub fn of_at(path: &str, at: &Path) -> Result<Self, Error> {
        use std::io::{Read, Seek, SeekFrom};
        let io = |e| Error::io(path, e);
        if !std::fs::metadata(at).map_err(io)?.is_file() {
            // A named pipe or a device gives its bytes once; every stage reads its shard again.
            return Err(Error::io(
                path,
                std::io::Error::other(
                    "not a regular file (a named pipe, a process substitution or a device?): \
                     the stages read each shard several times, from several processes; write \
                     it to a file first",
                ),
            ));
        }
        let mut f = std::fs::File::open(at).map_err(io)?;
        let bytes = f.metadata().map_err(io)?.len();
        const EDGE: u64 = 1 << 20;
        let mut buf = Vec::with_capacity(2 * EDGE as usize + 8);
        buf.extend_from_slice(&bytes.to_le_bytes());
        f.by_ref().take(EDGE).read_to_end(&mut buf).map_err(io)?;
        if bytes > EDGE {
            f.seek(SeekFrom::Start(bytes.saturating_sub(EDGE).max(EDGE)))
                .map_err(io)?;
            f.take(EDGE).read_to_end(&mut buf).map_err(io)?;
        }
        Ok(ShardEntry {
            path: path.to_string(),
            bytes,
            fingerprint: format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&buf)),
        })
    }
}

impl Manifest {
    /// The manifest of a run over `shards` (paths).
    pub fn new(
        shards: &[String],
        config: DedupConfig,
        fields: Fields,
        partitions: usize,
    ) -> Result<Self, Error> {
        config.validate()?;
        if partitions == 0 {
            return Err(Error::Param("--partitions must be at least 1".into()));
        }
        // `bands` holds a file per partition open: refused here, not midway through it.
        crate::sys::check_partition_files(partitions, partitions)?;
        if shards.iter().any(|s| s == "-") {
            return Err(Error::Param(
                "the sharded stages read their inputs more than once: standard input cannot be \
                 a shard"
                    .into(),
            ));
        }
        Ok(Manifest {
            contract: crate::CONTRACT_VERSION.to_string(),
            layout: WORK_LAYOUT,
            config,
            fields,
            partitions,
            shards: shards
                .iter()
                .map(|s| ShardEntry::of(s))
                .collect::<Result<_, _>>()?,
            against: Vec::new(),
            base: String::new(),
            out: None,
        }
        .with_base())
    }

    /// The manifest with the indexes of `paths` to check every document against (refused with
    /// a group field, as in memory).
    pub fn with_against(mut self, paths: &[PathBuf]) -> Result<Self, Error> {
        self.against = Against::record(paths, &self.config, self.fields.group.is_some())?;
        Ok(self.with_base())
    }

    /// The manifest with the run's outputs going into `out` (its directory made if missing).
    /// Refused when two shards share a file name, a shard is named like one of the run's own
    /// files or two of those alike, a name is not a plain file name, or an output would land
    /// on a shard.
    pub fn with_out(mut self, out: OutDir) -> Result<Self, Error> {
        let given = &out.dir;
        let mut names: std::collections::BTreeMap<String, String> = Default::default();
        for own in out.own() {
            if own.is_empty() || own.contains(['/', '\\']) || own == "." || own == ".." {
                return Err(Error::Param(format!(
                    "{own:?} is not a file name: the run's own files go into --out {given} by \
                     name"
                )));
            }
            if names
                .insert(own.to_string(), format!("the run's own {own}"))
                .is_some()
            {
                return Err(Error::Param(format!(
                    "two of the run's own files are named {own} in --out {given}"
                )));
            }
        }
        for e in &self.shards {
            let name = out_name(&e.path);
            if let Some(other) = names.insert(name.clone(), e.path.clone()) {
                return Err(Error::Param(format!(
                    "the shard {} and {other} are both named {name}: each shard's output in \
                     --out {given} takes the shard's file name",
                    e.path
                )));
            }
        }
        std::fs::create_dir_all(given).map_err(|e| Error::io(given, e))?;
        for (s, e) in self.shards.iter().enumerate() {
            let to = Path::new(given).join(out_name(&e.path));
            let shard = self.shard_path(s);
            if crate::io::paths::same_file(&to.display().to_string(), &shard.display().to_string())
            {
                return Err(Error::Param(format!(
                    "--out {given} holds the shard {}: its output there would replace it; give \
                     another directory",
                    e.path
                )));
            }
        }
        self.out = Some(out);
        Ok(self.with_base())
    }

    /// [`Manifest::base`] set to the current directory when some path is relative.
    fn with_base(mut self) -> Self {
        let relative = self
            .shards
            .iter()
            .map(|e| e.path.as_str())
            .chain(self.against.iter().map(|a| a.path.as_str()))
            .chain(self.out.iter().map(|o| o.dir.as_str()))
            .any(|p| Path::new(p).is_relative());
        self.base = match relative {
            true => std::env::current_dir()
                .map(|d| d.display().to_string())
                .unwrap_or_default(),
            false => String::new(),
        };
        self
    }

    /// Where the path `p` (a shard's or an index's, as given to `init`) is read from: from
    /// [`Manifest::base`] when relative.
    pub fn resolve(&self, p: &str) -> PathBuf {
        match self.base.is_empty() {
            true => PathBuf::from(p),
            false => Path::new(&self.base).join(p),
        }
    }

    /// The path shard `s` is read from ([`Manifest::resolve`]).
    pub fn shard_path(&self, s: usize) -> PathBuf {
        self.resolve(&self.shards[s].path)
    }

    /// The `--against` indexes, their paths resolved ([`Manifest::resolve`]).
    pub fn against_resolved(&self) -> Vec<RecordedIndex> {
        self.against
            .iter()
            .map(|a| RecordedIndex {
                path: self.resolve(&a.path).display().to_string(),
                ..a.clone()
            })
            .collect()
    }

    /// The first differences from `other`, as `key: this vs other`, for a refusal.
    fn differences(&self, other: &Manifest) -> Vec<String> {
        let a = serde_json::to_value(self).expect("a manifest is JSON");
        let b = serde_json::to_value(other).expect("a manifest is JSON");
        let mut out = Vec::new();
        diff_values("", &a, &b, &mut out);
        out.truncate(4);
        out
    }
}

/// The file name of a shard's output in `--out`: the shard's own.
fn out_name(shard: &str) -> String {
    Path::new(shard)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| shard.to_string())
}

/// Remove the files of `dir` whose names `ours` accepts, then `dir` if that leaves it empty:
/// nothing else in it is neardup's to delete.
fn remove_own_files(dir: &Path, ours: impl Fn(&str) -> bool) -> Result<(), Error> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io(&dir.display().to_string(), e)),
    };
    for e in entries.flatten() {
        if ours(&e.file_name().to_string_lossy()) {
            let p = e.path();
            std::fs::remove_file(&p).map_err(|e| Error::io(&p.display().to_string(), e))?;
        }
    }
    // Left in place when something else is in it.
    let _ = std::fs::remove_dir(dir);
    Ok(())
}

/// The checksum ([`crate::io::checksum`]) of a summary's compact JSON, as read back from the
/// file: the same for the writer and every reader.
fn summary_checksum(v: &serde_json::Value) -> String {
    let mut sum = crate::io::checksum::Checksum::new();
    sum.update(serde_json::to_string(v).expect("JSON").as_bytes());
    sum.hex()
}

fn diff_values(at: &str, a: &serde_json::Value, b: &serde_json::Value, out: &mut Vec<String>) {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                let key = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                diff_values(&key, v, y.get(k).unwrap_or(&Value::Null), out);
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (v, w)) in x.iter().zip(y).enumerate() {
                diff_values(&format!("{at}[{i}]"), v, w, out);
            }
        }
        _ if a != b => out.push(format!("{at}: {a} there, {b} here")),
        _ => {}
    }
}

/// The outputs the user named for one unit of a run (`outputs/UNIT.json`).
#[derive(Debug, Default, Serialize, Deserialize)]
struct UnitOutputs {
    /// The unit as `neardup stage` names it: `apply --shard 3`, `cluster`, `report`.
    unit: String,
    /// Each output's option, path as given, and where it is
    /// ([`crate::io::paths::location`], through its links).
    outputs: Vec<(String, String, String)>,
}

/// A work directory and its manifest.
#[derive(Debug, Clone)]
pub struct WorkDir {
    root: PathBuf,
    pub manifest: Manifest,
    /// xxh3 of the manifest's bytes, written into every stage file.
    key: String,
}

const MANIFEST: &str = "manifest.json";

impl WorkDir {
    /// Make the work directory `root` for `manifest`, or reopen it when it was made for the
    /// same one; one made for other inputs or parameters is refused, naming what differs.
    /// A directory that exists, has no manifest and is not empty is refused: later stages
    /// write and delete files in a work directory, and none of them may be the user's.
    pub fn init(root: &Path, manifest: Manifest) -> Result<Self, Error> {
        let path = root.join(MANIFEST);
        if !path.exists() {
            let holds = |e: std::io::Error| Error::io(&root.display().to_string(), e);
            match std::fs::read_dir(root) {
                Ok(entries) => {
                    // What a killed `init` leaves is the one thing such a directory may hold,
                    // besides the manifest another `init` published since the check above
                    // (compared below like any other).
                    let left = format!(".{MANIFEST}.");
                    let mut foreign = entries.filter(|e| {
                        e.as_ref().map_or(true, |e| {
                            let n = e.file_name();
                            let n = n.to_string_lossy();
                            !((n.starts_with(&left) && n.ends_with(".partial")) || n == MANIFEST)
                        })
                    });
                    if let Some(first) = foreign.next() {
                        let first = first.map_err(holds)?.file_name();
                        return Err(Error::Work {
                            path: root.display().to_string(),
                            msg: format!(
                                "not empty (it holds {} and has no {MANIFEST}), so not a work \
                                 directory: its stages write and delete files of their own \
                                 there; give an empty or new directory",
                                first.to_string_lossy()
                            ),
                        });
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(holds(e)),
            }
        }
        std::fs::create_dir_all(root).map_err(|e| Error::io(&root.display().to_string(), e))?;
        if !path.exists() {
            // Published without replacing: of two runs making this directory at once, one
            // manifest lands and the other run finds it below, compared like any other.
            let body = serde_json::to_string_pretty(&manifest).expect("a manifest is JSON") + "\n";
            crate::io::output::write_internal_new(&path.display().to_string(), body.as_bytes())?;
        }
        // Whatever is in place now is what every stage will read: this run goes on only if it
        // is the manifest asked for.
        let w = Self::open(root)?;
        let diff = w.manifest.differences(&manifest);
        if !diff.is_empty() {
            return Err(w.refuse(format!(
                "this work directory was made for other inputs or parameters ({}); use \
                 another directory, or empty this one",
                diff.join("; ")
            )));
        }
        Ok(w)
    }

    /// Open the work directory `root` made by [`WorkDir::init`].
    pub fn open(root: &Path) -> Result<Self, Error> {
        let path = root.join(MANIFEST);
        let name = path.display().to_string();
        let bytes = std::fs::read(&path).map_err(|e| Error::Work {
            path: name.clone(),
            msg: format!("{e}: not a work directory (run `neardup stage init` first)"),
        })?;
        let manifest: Manifest = serde_json::from_slice(&bytes).map_err(|e| Error::Work {
            path: name.clone(),
            msg: format!("not a neardup manifest: {e}"),
        })?;
        if manifest.contract != crate::CONTRACT_VERSION {
            return Err(Error::Work {
                path: name,
                msg: format!(
                    "made under contract {}, this neardup implements {}",
                    manifest.contract,
                    crate::CONTRACT_VERSION
                ),
            });
        }
        if manifest.layout != WORK_LAYOUT {
            return Err(Error::Work {
                path: name,
                msg: format!(
                    "made by another neardup, whose stages write other files (layout {}, this \
                     one writes layout {WORK_LAYOUT}); start again in an empty work directory",
                    manifest.layout.max(1)
                ),
            });
        }
        Ok(WorkDir {
            root: root.to_path_buf(),
            key: format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&bytes)),
            manifest,
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn shards(&self) -> usize {
        self.manifest.shards.len()
    }

    pub fn partitions(&self) -> usize {
        self.manifest.partitions
    }

    pub fn config(&self) -> &DedupConfig {
        &self.manifest.config
    }

    pub fn fields(&self) -> &Fields {
        &self.manifest.fields
    }

    fn refuse(&self, msg: String) -> Error {
        Error::Work {
            path: self.root.display().to_string(),
            msg,
        }
    }

    /// Refuse, before any work, an output of the unit `unit` (`("apply-00003", "apply --shard
    /// 3")`, `("cluster", "cluster")`, `("report", "report")`: its file name under `outputs/`,
    /// and how `neardup stage` names it) that would land on an input shard, on another output,
    /// on an output another unit of this run named, in this work directory or in one of its
    /// `--against` indexes; then record the outputs as the unit's (`outputs/UNIT.json`), so
    /// that no other unit writes over them. A unit may name its own outputs again.
    pub fn check_outputs(
        &self,
        unit: (&str, &str),
        outputs: &[crate::io::NamedPath],
    ) -> Result<(), Error> {
        let (key, label) = unit;
        // One unit at a time: two naming one path at once cannot both pass.
        let _lock = self.lock("outputs")?;
        let dir = self.root().join("outputs");
        let mut mine = UnitOutputs {
            unit: label.to_string(),
            outputs: Vec::new(),
        };
        let mut others: Vec<(String, String)> = Vec::new();
        match std::fs::read_dir(&dir) {
            Ok(entries) => {
                for e in entries.flatten() {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let Some(stem) = name.strip_suffix(".json") else {
                        continue;
                    };
                    let Some(u) = self.read_json::<UnitOutputs>(&e.path())? else {
                        continue;
                    };
                    if stem == key {
                        mine = u;
                        continue;
                    }
                    for (opt, given, at) in u.outputs {
                        others.push((format!("`neardup stage {}` ({opt} {given})", u.unit), at));
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(&dir.display().to_string(), e)),
        }
        let shards: Vec<String> = (0..self.shards())
            .map(|s| self.manifest.shard_path(s).display().to_string())
            .collect();
        let ins: Vec<crate::io::NamedPath> = shards.iter().map(|p| ("input", p.as_str())).collect();
        for &(opt, p) in outputs.iter().filter(|o| o.1 != "-") {
            let target = crate::io::output::through_links(Path::new(p));
            let target = target.display().to_string();
            if let Some((whose, _)) = others
                .iter()
                .find(|(_, at)| crate::io::paths::same_file(&target, at))
            {
                return Err(Error::Output(format!(
                    "{opt} {p} is the output of {whose} in the work directory {}: one unit's \
                     output never replaces another's; give {opt} another path",
                    self.root().display()
                )));
            }
        }
        let against: Vec<PathBuf> = self
            .manifest
            .against
            .iter()
            .map(|a| self.manifest.resolve(&a.path))
            .collect();
        let mut owned: Vec<crate::io::OwnedDir> = vec![("the work directory", self.root())];
        owned.extend(against.iter().map(|a| ("the index", a.as_path())));
        crate::io::check_outputs(&ins, &owned, outputs)?;
        // Where each output is (its links followed, its directory resolved), recorded before
        // the work: a unit that fails keeps its claim, which only its own runs may reuse.
        let before = mine.outputs.len();
        for &(opt, p) in outputs.iter().filter(|o| o.1 != "-") {
            let at = crate::io::output::through_links(Path::new(p));
            let at = crate::io::paths::location(&at).display().to_string();
            if !mine.outputs.iter().any(|o| o.2 == at) {
                mine.outputs.push((opt.to_string(), p.to_string(), at));
            }
        }
        if mine.outputs.len() > before {
            self.write_json(&dir.join(format!("{key}.json")), &mine)?;
        }
        Ok(())
    }

    /// Check a shard number.
    pub fn check_shard(&self, shard: usize) -> Result<(), Error> {
        if shard >= self.shards() {
            return Err(self.refuse(format!(
                "shard {shard} does not exist: the work directory has {} (0 to {})",
                self.shards(),
                self.shards().saturating_sub(1)
            )));
        }
        Ok(())
    }

    /// Check a partition number.
    pub fn check_partition(&self, p: usize) -> Result<(), Error> {
        if p >= self.partitions() {
            return Err(self.refuse(format!(
                "partition {p} does not exist: the work directory has {} (0 to {})",
                self.partitions(),
                self.partitions() - 1
            )));
        }
        Ok(())
    }

    /// The shards `which` (all when `None`) opened for reading, each checked against its
    /// fingerprint. Input `i` of the result is shard `which[i]`.
    pub fn inputs(&self, which: &[usize]) -> Result<Inputs, Error> {
        let mut specs = Vec::new();
        for &s in which {
            let e = &self.manifest.shards[s];
            let at = self.manifest.shard_path(s);
            let now = ShardEntry::of_at(&e.path, &at)?;
            if &now != e {
                return Err(Error::Work {
                    path: e.path.clone(),
                    msg: format!(
                        "shard {s} changed since the work directory was made ({} bytes then, \
                         {} now, or other contents); start again in an empty work directory",
                        e.bytes, now.bytes
                    ),
                });
            }
            specs.push((InputSpec::Path(at), e.path.clone()));
        }
        let (specs, names): (Vec<InputSpec>, Vec<String>) = specs.into_iter().unzip();
        Ok(Inputs::new(&specs, false)?.with_names(names))
    }

    /// A stage file's path: `root/stage/name`.
    fn file(&self, stage: &str, name: String) -> PathBuf {
        self.root.join(stage).join(name)
    }

    pub fn sign_file(&self, shard: usize) -> PathBuf {
        self.file("sign", format!("{shard:05}.parquet"))
    }

    /// The band digests of shard `shard` as raw rows (`sign` writes them beside its table).
    pub fn digests_file(&self, shard: usize) -> PathBuf {
        self.file("sign", format!("{shard:05}.dig"))
    }

    /// With `--against`, the signatures of shard `shard` as raw rows (`sign` writes them beside
    /// its table).
    pub fn sig_rows_file(&self, shard: usize) -> PathBuf {
        self.file("sign", format!("{shard:05}.sig"))
    }

    /// Of a plain JSONL shard, where each document's line is (`sign` writes it beside its
    /// table).
    pub fn lines_file(&self, shard: usize) -> PathBuf {
        self.file("sign", format!("{shard:05}.lines"))
    }

    pub fn rank_file(&self, shard: usize) -> PathBuf {
        self.file("rank", format!("{shard:05}.parquet"))
    }

    /// Shard `shard`'s band rows of partition `partition`, a keyed row file (`raw.rs`).
    pub fn bands_file(&self, shard: usize, partition: usize) -> PathBuf {
        self.file("bands", format!("{shard:05}-{partition:04}.rows"))
    }

    pub fn pairs_file(&self, partition: usize) -> PathBuf {
        self.file("pairs", format!("{partition:04}.parquet"))
    }

    /// The documents in some bucket of partition `partition` (`--confirm jaccard` only), for
    /// the measured S-curve of reports.
    pub fn bucketed_file(&self, partition: usize) -> PathBuf {
        self.file("pairs", format!("{partition:04}-docs.parquet"))
    }

    /// The rows of shard `shard` that partition `partition`'s buckets hold, a keyed row file
    /// (`ship.rs`).
    pub fn needs_file(&self, partition: usize, shard: usize) -> PathBuf {
        self.file("ship", format!("needs-{partition:04}-{shard:05}.rows"))
    }

    /// The band rows of partition `partition`'s buckets, a keyed row file (`ship.rs`).
    pub fn bucketed_rows_file(&self, partition: usize) -> PathBuf {
        self.file("ship", format!("bucketed-{partition:04}.rows"))
    }

    /// Written once every shard's [`WorkDir::needs_file`] of partition `partition` is.
    pub fn needs_summary(&self, partition: usize) -> PathBuf {
        self.file("ship", format!("needs-{partition:04}.json"))
    }

    /// The documents of shard `shard` that partition `partition` needs (their texts, ranks,
    /// groups and band digests), a keyed byte file (`ship.rs`).
    pub fn texts_file(&self, shard: usize, partition: usize) -> PathBuf {
        self.file("ship", format!("shipped-{shard:05}-{partition:04}.rows"))
    }

    /// Written once every partition's [`WorkDir::texts_file`] of shard `shard` is.
    pub fn texts_summary(&self, shard: usize) -> PathBuf {
        self.file("ship", format!("shipped-{shard:05}.json"))
    }

    pub fn cluster_file(&self, shard: usize) -> PathBuf {
        self.file("cluster", format!("{shard:05}.parquet"))
    }

    /// The summary of the whole `rank` stage.
    pub fn rank_summary(&self) -> PathBuf {
        self.file("rank", "summary.json".into())
    }

    /// The summary of the whole `cluster` stage.
    pub fn cluster_summary(&self) -> PathBuf {
        self.file("cluster", "summary.json".into())
    }

    /// Write a stage's JSON summary atomically, with the manifest's key and the checksum of the
    /// summary ([`summary_checksum`]).
    pub(crate) fn write_json<T: Serialize>(&self, path: &Path, value: &T) -> Result<(), Error> {
        // The value as it reads back: a float's text may not parse back to its exact bits,
        // and the checksum is of what a reader will see.
        let text = serde_json::to_string(value).expect("a summary is JSON");
        let value: serde_json::Value = serde_json::from_str(&text).expect("JSON reads back");
        let sum = summary_checksum(&value);
        let v = serde_json::json!({ "work": self.key, "summary": value, "checksum": sum });
        let name = path.display().to_string();
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(&name, e))?;
        }
        let body = serde_json::to_string_pretty(&v).expect("JSON") + "\n";
        crate::io::output::write_internal_atomic(&name, body.as_bytes())
    }

    /// Read a stage's JSON summary; `None` when it is not there yet.
    pub(crate) fn read_json<T: serde::de::DeserializeOwned>(
        &self,
        path: &Path,
    ) -> Result<Option<T>, Error> {
        let name = path.display().to_string();
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(&name, e)),
        };
        let bad = |msg: String| Error::Work {
            path: name.clone(),
            msg,
        };
        let mut v: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| bad(format!("not JSON: {e}")))?;
        self.check_key(&name, v.get("work").and_then(|k| k.as_str()))?;
        if v.get("checksum").and_then(|s| s.as_str()) != Some(&summary_checksum(&v["summary"])) {
            return Err(bad(
                "its summary does not match its checksum (edited or damaged since neardup wrote \
                 it): run its stage again in an empty work directory"
                    .into(),
            ));
        }
        serde_json::from_value(v["summary"].take())
            .map(Some)
            .map_err(|e| bad(format!("not a stage summary: {e}")))
    }

    /// Read a stage's JSON summary that an earlier stage must have written.
    pub(crate) fn need_json<T: serde::de::DeserializeOwned>(
        &self,
        path: &Path,
        stage: &str,
    ) -> Result<T, Error> {
        self.read_json(path)?
            .ok_or_else(|| self.missing(path, stage))
    }

    /// The error for a stage file that is not there yet.
    pub(crate) fn missing(&self, path: &Path, stage: &str) -> Error {
        Error::Work {
            path: path.display().to_string(),
            msg: format!("not there yet: run `neardup stage {stage}` first"),
        }
    }

    fn check_key(&self, name: &str, key: Option<&str>) -> Result<(), Error> {
        if key != Some(self.key.as_str()) {
            return Err(Error::Work {
                path: name.to_string(),
                msg: "made for another manifest (other inputs or parameters): it belongs to \
                      another run; start again in an empty work directory"
                    .into(),
            });
        }
        Ok(())
    }
}

//! Decontamination (SPEC §4): drop every document that shares a word `n`-gram with a protected
//! eval set. It streams: the protected set is held, the corpus never is.
//!
//! An `n`-gram is keyed by `xxh3_128` of its bytes (the words joined by one space). With `G`
//! protected n-grams and `W` n-grams checked, the chance that any key collision makes a false
//! hit is below `G * W / 2^128` (under 1e-20 for a million protected n-grams against 1e12
//! checked), so the keys stand in for the strings.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::Read;
use std::path::Path;
use std::time::Instant;

use rayon::prelude::*;
use xxhash_rust::xxh3::xxh3_128;

use crate::error::Error;
use crate::io::{InputSpec, Inputs, ReadPlan};
use crate::jsonl::Fields;
use crate::pipeline::pipelined;
use crate::progress::ProgressFactory;
use crate::stages::sink::{table_rows, RecordSink};
use crate::text::Words;

/// Keys that are already uniform hashes need no more hashing: use their low 64 bits.
#[derive(Default)]
struct PrehashedHasher(u64);

impl Hasher for PrehashedHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only reached for non-u128 keys; fold them in.
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x100000001b3);
        }
    }
    fn write_u128(&mut self, i: u128) {
        self.0 = i as u64;
    }
}

type GramMap<V> = HashMap<u128, V, BuildHasherDefault<PrehashedHasher>>;

/// A document's id, the protected sources it shares an n-gram with (with the first such
/// n-gram of each), and, where asked for, its score and matched windows.
type Verdict = (
    String,
    Vec<(u32, String, String, (usize, usize))>,
    Option<(f64, u64)>,
);

/// What decontam does with what it finds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DecontamOptions {
    /// Drop (or tag) only documents whose score ([`ProtectedSet::score`]) is at least this;
    /// `None`: any document with a protected window, as SPEC §4 defines.
    pub min_score: Option<f64>,
    /// Keep every document, and record in `meta.decontam` of each contaminated one its score,
    /// matched windows and protected sources.
    pub tag: bool,
}

/// Keys a JSONL protected file never protects (ids and scorer plumbing, not eval text).
pub const UNPROTECTED_KEYS: [&str; 4] = ["case_id", "id", "tags", "scorer_args"];

/// One document's verdict ([`ProtectedSet::verdict`]): each protected source (an index into
/// [`ProtectedSet::sources`]) it shares a window with, with the first window shared (empty:
/// clean), and its score and matched windows when scored and caught.
pub type Caught = (Vec<(u32, String)>, Option<(f64, u64)>);

/// The n-gram length in words of SPEC §4 by default (`decontam --n`): the 13-grams of GPT-3's
/// contamination study.
pub const DEFAULT_N: usize = 13;

/// The least words of a protected text shorter than `n` that is protected whole by default
/// (SPEC §4's `m`; `--protect-short`): the minimum window GPT-3's contamination study used.
pub const DEFAULT_PROTECT_SHORT: usize = 8;

/// The `meta` key (JSONL) or column (Parquet) of `--mode tag`: what caught a document.
pub const DECONTAM_TAG: &str = "decontam";

/// One protected file's contribution.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ProtectedFile {
    pub path: String,
    /// Texts read from it (string values of a JSONL file, or 1 for a plain file).
    pub texts: u64,
    /// Distinct n-grams it contributes.
    pub ngrams: u64,
    /// Texts of at least one word but fewer than `n` (and, with short items protected, fewer
    /// than their minimum): they contribute no n-gram, so they protect nothing.
    pub texts_too_short: u64,
    /// Texts shorter than `n` words protected whole (`--protect-short`): a document holding
    /// their word sequence is caught.
    pub texts_protected_whole: u64,
}

/// The protected n-grams of a set of files.
#[derive(Debug, Clone)]
pub struct ProtectedSet {
    n: usize,
    /// Texts of at least this many words but fewer than `n` are protected whole; 0: none.
    /// [`DEFAULT_PROTECT_SHORT`] unless set.
    short_min: usize,
    /// The word counts of the texts protected whole (each is checked as a window length).
    short_lengths: std::collections::BTreeSet<usize>,
    /// Keys of texts protected whole (the rest of `grams` are `n`-grams).
    whole_keys: usize,
    /// Each item of a JSONL or Parquet file is one text (see
    /// [`ProtectedSet::with_joined_fields`]).
    join_fields: bool,
    /// With a task field: the top-level field of a protected item that names its task.
    task_field: Option<String>,
    /// Key -> the (first) source holding it.
    grams: GramMap<u32>,
    /// Keys held by more than one source -> all of them.
    shared: GramMap<Vec<u32>>,
    files: Vec<ProtectedFile>,
    /// What the keys point at: a file, or with a task field one task of a file.
    sources: Vec<ProtectedSource>,
    /// Files read whole (not named `.jsonl`) whose first line is a JSON object: most likely
    /// JSONL under another name, whose values the user meant to protect one by one.
    jsonl_by_content: Vec<String>,
}

/// A protected file, or with a task field ([`ProtectedSet::with_task_field`]) the items of one
/// task in a file.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ProtectedSource {
    /// Index into [`ProtectedSet::files`].
    #[serde(skip)]
    pub file: u32,
    pub path: String,
    /// The task's name; `None` for a whole file, or items without the task field.
    pub task: Option<String>,
    pub texts: u64,
    /// Distinct n-grams of this source.
    pub ngrams: u64,
}

/// Whether `bytes` (a protected file read whole) start with a line that is a JSON object.
fn looks_like_jsonl(bytes: &[u8]) -> bool {
    let first = bytes
        .split(|&b| b == b'\n')
        .map(|l| l.trim_ascii())
        .find(|l| !l.is_empty());
    first.is_some_and(|l| {
        l.first() == Some(&b'{')
            && serde_json::from_slice::<serde_json::Value>(l).is_ok_and(|v| v.is_object())
    })
}

impl ProtectedSet {
    /// An empty set for `n`-grams, protecting texts of [`DEFAULT_PROTECT_SHORT`] to `n - 1`
    /// words whole (SPEC §4; see [`ProtectedSet::with_short_items`]).
    pub fn new(n: usize) -> Result<Self, Error> {
        if n == 0 {
            return Err(Error::Param(
                "n (the n-gram length) must be at least 1".into(),
            ));
        }
        Ok(ProtectedSet {
            n,
            short_min: DEFAULT_PROTECT_SHORT,
            short_lengths: Default::default(),
            whole_keys: 0,
            join_fields: false,
            task_field: None,
            grams: GramMap::default(),
            shared: GramMap::default(),
            files: Vec::new(),
            sources: Vec::new(),
            jsonl_by_content: Vec::new(),
        })
    }

    pub fn n(&self) -> usize {
        self.n
    }

    /// Protect each item of a JSONL or Parquet protected file (a line, a row) as one text: its
    /// string values in order, joined by a line break, so n-grams span a question and its
    /// answer. A line break is no word and joins no two words into one, so no n-gram appears
    /// that the values' words in order do not hold. Set before adding files.
    pub fn with_joined_fields(mut self, on: bool) -> Self {
        self.join_fields = on;
        self
    }

    /// Name each item of a JSONL or Parquet protected file by the value of its top-level field
    /// `name` (a string or a number; BIG-bench's task, say): the report then counts documents
    /// caught per task, with evidence per task. The field's value is not protected text. Set
    /// before adding files.
    pub fn with_task_field(mut self, name: Option<String>) -> Self {
        self.task_field = name;
        self
    }

    pub fn task_field(&self) -> Option<&str> {
        self.task_field.as_deref()
    }

    /// One item's texts, each with the item's task: each string value, or with joined fields
    /// all of them as one.
    fn collect_item(&self, v: &serde_json::Value, texts: &mut Vec<(Option<String>, String)>) {
        let mut parts = Vec::new();
        let task = match (&self.task_field, v) {
            (Some(f), serde_json::Value::Object(m)) => {
                for (k, x) in m {
                    if k != f {
                        collect_strings_under(k, x, &mut parts);
                    }
                }
                match m.get(f) {
                    Some(serde_json::Value::String(t)) => Some(t.clone()),
                    Some(serde_json::Value::Number(n)) => Some(n.to_string()),
                    _ => None,
                }
            }
            _ => {
                collect_strings(v, &mut parts);
                None
            }
        };
        if self.join_fields {
            if !parts.is_empty() {
                texts.push((task, parts.join("\n")));
            }
        } else {
            texts.extend(parts.into_iter().map(|p| (task.clone(), p)));
        }
    }

    /// The least words of a text protected whole (0: none is).
    pub fn short_min(&self) -> usize {
        self.short_min
    }

    /// Whether any text shorter than `n` words can be protected whole: a minimum is set, and it
    /// is below `n`.
    pub fn protects_short(&self) -> bool {
        self.short_min > 0 && self.short_min < self.n
    }

    /// Protect texts of `min` to `n - 1` words by their whole word sequence (SPEC §4; the
    /// default is [`DEFAULT_PROTECT_SHORT`]); 0 turns it off: no text shorter than `n` words is
    /// protected, the strict n-gram rule. Set before adding texts.
    pub fn with_short_items(mut self, min: usize) -> Self {
        self.short_min = min;
        self
    }

    /// Distinct protected n-grams.
    pub fn len(&self) -> usize {
        self.grams.len()
    }

    pub fn is_empty(&self) -> bool {
        self.grams.is_empty()
    }

    /// The distinct `n`-grams protected (of [`ProtectedSet::len`] keys).
    pub fn ngram_keys(&self) -> usize {
        self.grams.len() - self.whole_keys
    }

    /// The distinct short texts protected whole (of [`ProtectedSet::len`] keys).
    pub fn whole_keys(&self) -> usize {
        self.whole_keys
    }

    pub fn files(&self) -> &[ProtectedFile] {
        &self.files
    }

    /// Add the texts of one protected source named `name`.
    pub fn add_texts<'a>(&mut self, name: &str, texts: impl IntoIterator<Item = &'a str>) {
        self.add_items(name, texts.into_iter().map(|t| (None, t)));
    }

    /// The source of file `fi`'s task `task`, made when new (`tasks` holds the file's).
    fn source_of(
        &mut self,
        fi: u32,
        task: Option<&str>,
        tasks: &mut HashMap<Option<String>, u32>,
    ) -> u32 {
        if let Some(&si) = tasks.get(&task.map(str::to_string)) {
            return si;
        }
        let si = self.sources.len() as u32;
        self.sources.push(ProtectedSource {
            file: fi,
            path: String::new(),
            task: task.map(str::to_string),
            texts: 0,
            ngrams: 0,
        });
        tasks.insert(task.map(str::to_string), si);
        si
    }

    /// Add one protected file named `name`: its texts, each with its task (`None` without).
    fn add_items<'a>(
        &mut self,
        name: &str,
        items: impl IntoIterator<Item = (Option<&'a str>, &'a str)>,
    ) {
        let fi = self.files.len() as u32;
        let mut file = ProtectedFile {
            path: name.to_string(),
            texts: 0,
            ngrams: 0,
            texts_too_short: 0,
            texts_protected_whole: 0,
        };
        let mut tasks: HashMap<Option<String>, u32> = HashMap::new();
        let mut w = Words::default();
        for (task, t) in items {
            let si = self.source_of(fi, task, &mut tasks);
            file.texts += 1;
            self.sources[si as usize].texts += 1;
            w.reset(t);
            // A short text's one window is all of its words.
            let mut len = self.n;
            if !w.is_empty() && w.len() < self.n {
                if self.short_min > 0 && w.len() >= self.short_min {
                    file.texts_protected_whole += 1;
                    len = w.len();
                    self.short_lengths.insert(len);
                } else {
                    file.texts_too_short += 1;
                }
            }
            for g in w.ngram_slices(len) {
                let key = xxh3_128(g);
                match self.grams.get(&key) {
                    None => {
                        self.grams.insert(key, si);
                        if len != self.n {
                            self.whole_keys += 1;
                        }
                        file.ngrams += 1;
                        self.sources[si as usize].ngrams += 1;
                    }
                    Some(&first) if first != si => {
                        let list = self.shared.entry(key).or_insert_with(|| vec![first]);
                        if !list.contains(&si) {
                            let sources = &self.sources;
                            if !list.iter().any(|&x| sources[x as usize].file == fi) {
                                file.ngrams += 1;
                            }
                            list.push(si);
                            self.sources[si as usize].ngrams += 1;
                        }
                    }
                    Some(_) => {}
                }
            }
        }
        for src in self.sources.iter_mut().filter(|x| x.file == fi) {
            src.path = name.to_string();
        }
        self.files.push(file);
    }

    /// Every source: one per file, or with a task field one per task of each file, in order
    /// of first appearance.
    pub fn sources(&self) -> &[ProtectedSource] {
        &self.sources
    }

    /// Add a protected file: in a `.jsonl` file (also `.jsonl.gz` / `.jsonl.zst`) and in a
    /// Parquet file (by content) every string value at any depth is a text, except under the
    /// keys in [`UNPROTECTED_KEYS`]; any other file is one text, read whole. Compressed files
    /// are read by content.
    pub fn add_file(&mut self, path: &Path) -> Result<(), Error> {
        let name = path.display().to_string();
        if crate::io::parquet::sniff(path) {
            let mut texts: Vec<(Option<String>, String)> = Vec::new();
            crate::io::parquet::for_each_row_as_json(path, &name, |line, row| {
                let v: serde_json::Value = serde_json::from_slice(line).map_err(|e| {
                    Error::io(&name, std::io::Error::other(format!("row {row}: {e}")))
                })?;
                self.collect_item(&v, &mut texts);
                Ok(())
            })?;
            self.add_items(&name, texts.iter().map(|(k, t)| (k.as_deref(), t.as_str())));
            return Ok(());
        }
        // Read, not mapped: a protected file is read once and whole (a text file is copied
        // out anyway), so a map would save nothing and add the truncation hazard.
        let inputs = Inputs::new(&[InputSpec::Path(path.to_path_buf())], false)?.with_mmap(false);
        let is_jsonl = {
            let s = name.to_ascii_lowercase();
            s.ends_with(".jsonl") || s.ends_with(".jsonl.gz") || s.ends_with(".jsonl.zst")
        };
        let mut reader = inputs.open(0)?;
        if is_jsonl {
            let mut texts: Vec<(Option<String>, String)> = Vec::new();
            while let Some(chunk) = reader.next_chunk(crate::corpus::DEFAULT_CHUNK_BYTES)? {
                for i in 0..chunk.len() {
                    let line = chunk.line(i);
                    let v: serde_json::Value =
                        serde_json::from_slice(line).map_err(|e| Error::Parse {
                            path: name.clone(),
                            line: chunk.line_no(i),
                            msg: crate::jsonl::record::bom_message(line, chunk.line_no(i))
                                .unwrap_or_else(|| format!("not valid JSON: {e}")),
                        })?;
                    self.collect_item(&v, &mut texts);
                }
            }
            self.add_items(&name, texts.iter().map(|(k, t)| (k.as_deref(), t.as_str())));
        } else {
            let mut bytes = Vec::new();
            reader.read_to_end(&mut bytes).map_err(|e| Error::Io {
                path: name.clone(),
                source: e,
            })?;
            if looks_like_jsonl(&bytes) {
                self.jsonl_by_content.push(name.clone());
            }
            let text = String::from_utf8(bytes).map_err(|e| {
                let at = e.utf8_error().valid_up_to();
                let line = e.as_bytes()[..at].iter().filter(|&&b| b == b'\n').count() + 1;
                Error::Parse {
                    path: name.clone(),
                    line: line as u64,
                    msg: format!("invalid UTF-8 at byte {at}; protected text files must be UTF-8"),
                }
            })?;
            self.add_texts(&name, [text.as_str()]);
        }
        Ok(())
    }

    /// The files read whole as one text whose content is JSONL all the same (its first line is
    /// a JSON object): SPEC §4 goes by the name, so they are worth a warning.
    pub fn jsonl_by_content(&self) -> &[String] {
        &self.jsonl_by_content
    }

    /// The sources (indices into [`ProtectedSet::sources`]) holding the n-gram with this key.
    fn holders(&self, key: u128) -> Option<Holders<'_>> {
        let &first = self.grams.get(&key)?;
        Some(match self.shared.get(&key) {
            Some(all) => Holders::Many(all),
            None => Holders::One(first),
        })
    }

    /// Check a tokenized document: every protected source it shares an n-gram with, and the
    /// first n-gram shared with each.
    pub fn check(&self, words: &Words) -> Vec<(u32, String)> {
        let mut hits: Vec<(u32, String)> = Vec::new();
        for g in self.windows(words) {
            if let Some(h) = self.holders(xxh3_128(g)) {
                for f in h.iter() {
                    if !hits.iter().any(|(x, _)| *x == f) {
                        hits.push((f, String::from_utf8_lossy(g).into_owned()));
                    }
                }
                if hits.len() == self.sources.len() {
                    break;
                }
            }
        }
        hits
    }

    /// Does the tokenized document share any n-gram with the set?
    pub fn is_contaminated(&self, words: &Words) -> bool {
        self.windows(words)
            .any(|g| self.grams.contains_key(&xxh3_128(g)))
    }

    /// How much of a tokenized document the protected set covers: the share of its words that
    /// lie in some protected window (an n-gram, or a short item protected whole), and the
    /// number of such windows. `(0.0, 0)` for a document without words.
    pub fn score(&self, words: &Words) -> (f64, u64) {
        let w = words.len();
        if w == 0 {
            return (0.0, 0);
        }
        let mut covered = vec![false; w];
        let mut matched = 0u64;
        for len in std::iter::once(self.n).chain(self.short_lengths.iter().copied()) {
            for (j, g) in words.ngram_slices(len).enumerate() {
                if self.grams.contains_key(&xxh3_128(g)) {
                    matched += 1;
                    covered[j..j + len].iter_mut().for_each(|c| *c = true);
                }
            }
        }
        let n = covered.iter().filter(|&&c| c).count();
        (n as f64 / w as f64, matched)
    }

    /// Every window of `words` to look up: its `n`-grams, then its windows of each length a
    /// text protected whole has. (The keys of windows of different lengths never meet: their
    /// texts hold different numbers of spaces.)
    fn windows<'w>(&'w self, words: &'w Words) -> impl Iterator<Item = &'w [u8]> + 'w {
        std::iter::once(self.n)
            .chain(self.short_lengths.iter().copied())
            .flat_map(move |len| words.ngram_slices(len))
    }
}

enum Holders<'a> {
    One(u32),
    Many(&'a [u32]),
}

impl Holders<'_> {
    fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        let (one, many): (Option<u32>, &[u32]) = match self {
            Holders::One(f) => (Some(*f), &[]),
            Holders::Many(all) => (None, all),
        };
        one.into_iter().chain(many.iter().copied())
    }
}

/// The string values of the field `k` of an item, unless `k` is an unprotected key.
fn collect_strings_under(k: &str, x: &serde_json::Value, out: &mut Vec<String>) {
    if !UNPROTECTED_KEYS.contains(&k) {
        collect_strings(x, out);
    }
}

/// Every string value of `v` at any depth, except under the unprotected keys.
fn collect_strings(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(a) => a.iter().for_each(|x| collect_strings(x, out)),
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                collect_strings_under(k, x, out);
            }
        }
        _ => {}
    }
}

impl ProtectedSet {
    /// One document checked as `decontam` checks it: each protected source it shares a window
    /// with and the first window shared, and with `scored` its [`ProtectedSet::score`] (only
    /// when caught). Under `min_score`, a document scoring less is clean: no hits.
    pub fn verdict(&self, words: &Words, scored: bool, min_score: Option<f64>) -> Caught {
        let mut hits = self.check(words);
        let score =
            ((scored || min_score.is_some()) && !hits.is_empty()).then(|| self.score(words));
        if let (Some(min), Some((s, _))) = (min_score, score) {
            if s < min {
                hits.clear();
            }
        }
        (hits, score)
    }

    /// [`ProtectedSet::verdict`] of every text, on every core, in order.
    pub fn verdicts(&self, texts: &[&str], scored: bool, min_score: Option<f64>) -> Vec<Caught> {
        texts
            .par_iter()
            .map_init(Words::default, |w, t| {
                w.reset(t);
                self.verdict(w, scored, min_score)
            })
            .collect()
    }

    /// The tag `--mode tag` gives a caught document (`meta.decontam`, or the Parquet column),
    /// as JSON: its score and matched windows, the protected files of `sources` (indices into
    /// [`ProtectedSet::sources`], as [`ProtectedSet::verdict`] gives them) and, with a task
    /// field, each source's task.
    pub fn tag(&self, sources: &[u32], score: Option<(f64, u64)>) -> String {
        let (s, matched) = score.unwrap_or_default();
        let mut paths: Vec<&str> = Vec::new();
        for &si in sources {
            let p = self.files[self.sources[si as usize].file as usize]
                .path
                .as_str();
            if !paths.contains(&p) {
                paths.push(p);
            }
        }
        let mut tag = serde_json::json!({
            "score": s,
            "matched": matched,
            "sources": paths,
        });
        if self.task_field.is_some() {
            let names: Vec<Option<&str>> = sources
                .iter()
                .map(|&si| self.sources[si as usize].task.as_deref())
                .collect();
            tag["tasks"] = serde_json::json!(names);
        }
        tag.to_string()
    }
}

/// SPEC §4's protected set of the given files at the defaults: their `n`-grams, and their texts
/// of [`DEFAULT_PROTECT_SHORT`] to `n - 1` words whole.
pub fn protected_ngrams<P: AsRef<Path>>(paths: &[P], n: usize) -> Result<ProtectedSet, Error> {
    protected_set(paths, n, DEFAULT_PROTECT_SHORT, false)
}

/// [`protected_ngrams`], with texts of `short_min` to `n - 1` words protected whole (see
/// [`ProtectedSet::with_short_items`]) and, with `join_fields`, each item's fields as one text
/// ([`ProtectedSet::with_joined_fields`]).
pub fn protected_set<P: AsRef<Path>>(
    paths: &[P],
    n: usize,
    short_min: usize,
    join_fields: bool,
) -> Result<ProtectedSet, Error> {
    let mut set = ProtectedSet::new(n)?
        .with_short_items(short_min)
        .with_joined_fields(join_fields);
    for p in paths {
        set.add_file(p.as_ref())?;
    }
    Ok(set)
}

impl ProtectedSet {
    /// What the user must hear about the protected texts before trusting the run: nothing is
    /// protected at all (every text is too short, or there is none), or some texts protect
    /// nothing. `None` when every text of a word or more protects something.
    pub fn short_texts_warning(&self) -> Option<String> {
        let texts: u64 = self.files.iter().map(|f| f.texts).sum();
        let short: u64 = self.files.iter().map(|f| f.texts_too_short).sum();
        let n = self.n;
        if self.protects_short() {
            // Texts of `m` to `n - 1` words are protected whole: only those under `m` are lost.
            let m = self.short_min;
            if self.is_empty() {
                Some(format!(
                    "warning: NOTHING IS PROTECTED: the protected files yield nothing to protect \
                     ({short} of their {texts} texts are shorter than {m} words, the least \
                     --protect-short protects whole, the others have no words), so no document \
                     can be caught; a lower --protect-short MIN or --n protects shorter items, \
                     at the risk of catching documents by chance"
                ))
            } else if short > 0 {
                Some(format!(
                    "note: {short} of the {texts} protected texts are shorter than {m} words (the \
                     --protect-short minimum) and protect nothing"
                ))
            } else {
                None
            }
        } else {
            // Short items are not protected whole: turned off, or a minimum that is not below
            // `n`. The advice names what would change that, not the flag as it was given.
            let hint = match self.short_min {
                0 => "short items are protected whole only with a minimum, and --protect-short \
                      off turned that off; --protect-short MIN protects those of MIN words or \
                      more"
                    .to_string(),
                m => format!(
                    "--protect-short {m} is not below --n {n}, so none is protected whole; a MIN \
                     below {n} protects those of MIN words or more"
                ),
            };
            if self.is_empty() {
                Some(format!(
                    "warning: NOTHING IS PROTECTED: the protected files yield no {n}-gram \
                     ({short} of their {texts} texts are shorter than {n} words, the others have \
                     no words), so no document can be caught; {hint} (or lower --n)"
                ))
            } else if short > 0 {
                Some(format!(
                    "note: {short} of the {texts} protected texts are shorter than {n} words and \
                     protect nothing ({hint}; or lower --n)"
                ))
            } else {
                None
            }
        }
    }
}

/// Is `text` contaminated: does any of its word `n`-grams (the last window included) belong to
/// `grams`? `n` must be the `n` the set was built with.
pub fn contaminated(text: &str, grams: &ProtectedSet, n: usize) -> bool {
    assert_eq!(
        n,
        grams.n(),
        "contaminated() asked for {n}-grams of a set of {}-grams",
        grams.n()
    );
    grams.is_contaminated(&Words::new(text))
}

/// The streaming decontamination stage: pulls one document at a time, yields the clean ones,
/// counts the rest.
pub struct Decontaminator<'a> {
    grams: &'a ProtectedSet,
    words: Words,
    pub seen: u64,
    pub dropped: u64,
}

impl<'a> Decontaminator<'a> {
    pub fn new(grams: &'a ProtectedSet) -> Self {
        Decontaminator {
            grams,
            words: Words::default(),
            seen: 0,
            dropped: 0,
        }
    }

    /// Is this text clean (and count it)?
    pub fn keep(&mut self, text: &str) -> bool {
        self.seen += 1;
        self.words.reset(text);
        let bad = self.grams.is_contaminated(&self.words);
        if bad {
            self.dropped += 1;
        }
        !bad
    }

    /// Filter a stream of documents lazily: nothing is read ahead of what is asked for.
    pub fn filter<'s, I, D>(&'s mut self, docs: I) -> impl Iterator<Item = D> + use<'s, 'a, I, D>
    where
        I: IntoIterator<Item = D> + 's,
        D: AsRef<str> + 's,
    {
        docs.into_iter().filter(move |d| self.keep(d.as_ref()))
    }
}

/// Per protected file: how many documents it caught and a few n-grams as evidence.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FileHits {
    pub path: String,
    pub texts: u64,
    pub ngrams: u64,
    /// Texts shorter than `n` words, which protect nothing.
    pub texts_too_short: u64,
    /// Texts shorter than `n` words protected whole (`--protect-short`).
    pub texts_protected_whole: u64,
    pub documents_caught: u64,
    /// Up to [`EVIDENCE_PER_FILE`] (document id, matched n-gram) pairs.
    pub evidence: Vec<Evidence>,
}

/// Per task of a protected file (`--task-field`): how many documents it caught, with evidence.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TaskHits {
    pub path: String,
    /// `None`: the file's items without the task field.
    pub task: Option<String>,
    pub texts: u64,
    pub ngrams: u64,
    pub documents_caught: u64,
    /// Up to [`EVIDENCE_PER_FILE`] matches.
    pub evidence: Vec<Evidence>,
}

/// One matched n-gram and the document it was found in, with the text around the match.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Evidence {
    pub id: String,
    pub ngram: String,
    /// Up to ~120 bytes of the document's text on each side of the match.
    pub context: String,
    /// The match's byte range within `context`.
    pub highlight: (usize, usize),
}

/// The text around a match, for the report.
pub fn evidence_context(text: &str, gram: &str) -> (String, (usize, usize)) {
    match crate::text::locate_ngram(text, gram) {
        Some((s, e)) => {
            let mut from = s.saturating_sub(120);
            while !text.is_char_boundary(from) {
                from -= 1;
            }
            let mut to = (e + 120).min(text.len());
            while !text.is_char_boundary(to) {
                to += 1;
            }
            (text[from..to].to_string(), (s - from, e - from))
        }
        None => (gram.to_string(), (0, gram.len())),
    }
}

/// Examples of matches kept per protected file.
pub const EVIDENCE_PER_FILE: usize = 5;

/// Everything `neardup decontam` reports.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DecontamSummary {
    pub n: usize,
    /// The least words of a protected text protected whole (0: none shorter than `n` is).
    pub protect_short: usize,
    /// Each protected item's fields were one text.
    pub join_fields: bool,
    /// See [`DecontamOptions`].
    pub min_score: Option<f64>,
    pub tag: bool,
    /// Distinct `n`-grams protected.
    pub protected_ngrams: u64,
    /// Distinct short texts protected whole (`--protect-short`), beside the `n`-grams.
    pub protected_whole: u64,
    pub documents: u64,
    pub contaminated: u64,
    pub documents_written: u64,
    pub files: Vec<FileHits>,
    /// With a task field: the field, and per task of each file what it caught.
    pub task_field: Option<String>,
    pub tasks: Vec<TaskHits>,
    pub load_seconds: f64,
    pub seconds: f64,
}

/// `neardup decontam` on files: stream every input record through the set, writing the clean
/// lines unchanged.
pub fn run_decontam(
    inputs: &Inputs,
    fields: &Fields,
    grams: &ProtectedSet,
    output: &str,
    opts: &DecontamOptions,
    progress: &ProgressFactory,
) -> Result<DecontamSummary, Error> {
    let t0 = Instant::now();
    if let Some(s) = opts.min_score {
        if !(s > 0.0 && s <= 1.0) {
            return Err(Error::Param(format!("--min-score {s} is outside (0, 1]")));
        }
    }
    let scored = opts.min_score.is_some() || opts.tag;
    // With `--mode tag`, a Parquet output gets the tag as a column: the JSON object a JSONL
    // record gets under `meta.decontam`, null for a clean row.
    let tag_columns: &[&str] = if opts.tag { &[DECONTAM_TAG] } else { &[] };
    let mut out = RecordSink::create(output, inputs, tag_columns)?;
    let plan = ReadPlan {
        fields,
        columns: out.columns(),
    };
    let table_schema = out.table_schema();
    let mut files: Vec<FileHits> = grams
        .files()
        .iter()
        .map(|f| FileHits {
            path: f.path.clone(),
            texts: f.texts,
            ngrams: f.ngrams,
            texts_too_short: f.texts_too_short,
            texts_protected_whole: f.texts_protected_whole,
            documents_caught: 0,
            evidence: Vec::new(),
        })
        .collect();
    let mut tasks: Vec<TaskHits> = match grams.task_field() {
        None => Vec::new(),
        Some(_) => grams
            .sources()
            .iter()
            .map(|x| TaskHits {
                path: x.path.clone(),
                task: x.task.clone(),
                texts: x.texts,
                ngrams: x.ngrams,
                documents_caught: 0,
                evidence: Vec::new(),
            })
            .collect(),
    };
    let file_of = |si: u32| grams.sources()[si as usize].file;
    let (mut documents, mut contaminated, mut written) = (0u64, 0u64, 0u64);
    let bar = progress.pass("decontam", inputs.total_bytes());
    pipelined(
        inputs,
        plan,
        crate::corpus::DEFAULT_CHUNK_BYTES,
        &bar,
        |chunk, name| {
            let verdicts: Result<Vec<Verdict>, Error> = (0..chunk.len())
                .into_par_iter()
                .map_init(Words::default, |w, i| {
                    let rec = crate::corpus::record(&chunk, i, fields, name)?;
                    w.reset(&rec.text);
                    let (hits, score) = grams.verdict(w, scored, opts.min_score);
                    let hits = hits
                        .into_iter()
                        .map(|(f, gram)| {
                            let (ctx, hl) = evidence_context(&rec.text, &gram);
                            (f, gram, ctx, hl)
                        })
                        .collect();
                    Ok((rec.id.into_owned(), hits, score))
                })
                .collect();
            let verdicts = verdicts?;
            // A Parquet output's rows are cut out here, beside the other chunks' work.
            let rows = match &table_schema {
                Some(schema) => {
                    let kept: Vec<usize> = (0..chunk.len())
                        .filter(|&i| opts.tag || verdicts[i].1.is_empty())
                        .collect();
                    Some(table_rows(schema, &chunk, &kept, name)?)
                }
                None => None,
            };
            Ok((chunk, verdicts, rows))
        },
        |(chunk, verdicts, rows)| {
            let mut buf = Vec::new();
            // With `--mode tag` and a Parquet output, each row's tag column value.
            let mut column: Vec<Option<String>> = Vec::new();
            for (i, (id, hits, score)) in verdicts.into_iter().enumerate() {
                documents += 1;
                if hits.is_empty() || opts.tag {
                    let tag = (!hits.is_empty()).then(|| {
                        let sources: Vec<u32> = hits.iter().map(|h| h.0).collect();
                        grams.tag(&sources, score)
                    });
                    match (&rows, tag) {
                        (Some(_), tag) => column.push(tag),
                        (None, None) => {
                            buf.extend_from_slice(chunk.line(i));
                            buf.push(b'\n');
                        }
                        (None, Some(tag)) => crate::jsonl::write_tagged_json(
                            &mut buf,
                            chunk.line(i),
                            DECONTAM_TAG,
                            &tag,
                            inputs.name(chunk.file_index),
                            chunk.line_no(i),
                        )?,
                    }
                    written += 1;
                    if hits.is_empty() {
                        continue;
                    }
                }
                contaminated += 1;
                let mut seen_files: Vec<u32> = Vec::new();
                for (si, gram, context, highlight) in hits {
                    let evidence = Evidence {
                        id: id.clone(),
                        ngram: gram,
                        context,
                        highlight,
                    };
                    if let Some(t) = tasks.get_mut(si as usize) {
                        t.documents_caught += 1;
                        if t.evidence.len() < EVIDENCE_PER_FILE {
                            t.evidence.push(evidence.clone());
                        }
                    }
                    // A document caught by two tasks of one file counts once for the file.
                    let f = file_of(si);
                    if seen_files.contains(&f) {
                        continue;
                    }
                    seen_files.push(f);
                    let fh = &mut files[f as usize];
                    fh.documents_caught += 1;
                    if fh.evidence.len() < EVIDENCE_PER_FILE {
                        fh.evidence.push(evidence);
                    }
                }
            }
            bar.add_docs(chunk.len() as u64);
            match rows {
                Some(rows) if opts.tag => {
                    let values: Vec<Option<&str>> = column.iter().map(Option::as_deref).collect();
                    out.write_rows(&rows, &[&values])
                }
                Some(rows) => out.write_rows(&rows, &[]),
                None => out.write_all(&buf),
            }
        },
    )?;
    out.finish()?;
    Ok(DecontamSummary {
        n: grams.n(),
        protect_short: grams.short_min(),
        join_fields: grams.join_fields,
        min_score: opts.min_score,
        tag: opts.tag,
        protected_ngrams: grams.ngram_keys() as u64,
        protected_whole: grams.whole_keys() as u64,
        documents,
        contaminated,
        documents_written: written,
        files,
        task_field: grams.task_field().map(str::to_string),
        tasks,
        load_seconds: 0.0,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

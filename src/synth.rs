//! Seeded synthetic text: the generator behind `fixtures/` (via `examples/make_fixtures.rs`),
//! `neardup bench --synthetic N` and the planted-cluster tests.
//!
//! Words are drawn with a Zipf-like law from a vocabulary whose most frequent entries are common
//! English words and whose tail is made of syllables, so texts look like text to the tokenizer
//! (word lengths, a heavy head) while accidental shared 5-word shingles stay rare. Near
//! duplicates are made by substituting words and are kept only when their exact shingle Jaccard
//! falls in the asked-for range, so every planted property is checked, not hoped for.

use crate::hash::Pcg32;
use crate::text::{jaccard, shingles};

const COMMON: &str = "the of and to in is was for on that with as by at from his her it an \
were are which this be or has had not but also first one their its after new who they two \
been more time would year other into all during only city some may over most world when there \
about many states both over made where between such later under can these them government \
used while through him part several system including well united population family known film \
like three same each because work during since out area before school then against series \
water long number early season team music around based use day being life work last high \
small large great light house market river island between early power free right public form \
history land line place point report road south north east west village church war book game \
public side area general country state order school party field court stone open human light \
letter paper story simple plain bright quiet green silver golden winter summer morning evening \
garden forest mountain valley ocean harbor bridge tower castle market station library museum \
theater kitchen window table chair lamp clock mirror carpet basket bottle candle pocket ribbon";

const SYLLABLES: [&str; 40] = [
    "ka", "lo", "mi", "ra", "te", "su", "no", "vi", "de", "po", "lan", "mar", "tor", "sen", "bel",
    "cor", "fin", "gal", "hes", "jun", "kel", "lum", "mor", "nex", "ost", "pra", "quin", "ros",
    "sal", "tav", "ul", "ven", "wis", "yar", "zel", "an", "er", "is", "on", "us",
];

/// A vocabulary of `size` distinct words: the common English words first, then syllable words.
pub fn vocabulary(size: usize, seed: u64) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    let mut v: Vec<String> = Vec::with_capacity(size);
    for w in COMMON.split_whitespace() {
        if v.len() < size && seen.insert(w.to_string()) {
            v.push(w.to_string());
        }
    }
    let mut rng = Pcg32::with_stream(seed, 0x5eed);
    while v.len() < size {
        let n = 2 + rng.below(3) as usize;
        let w: String = (0..n)
            .map(|_| SYLLABLES[rng.below(SYLLABLES.len() as u32) as usize])
            .collect();
        if seen.insert(w.clone()) {
            v.push(w);
        }
    }
    v
}

/// Draws words and texts from a vocabulary.
pub struct TextGen {
    vocab: Vec<String>,
    rng: Pcg32,
}

impl TextGen {
    /// A generator over a vocabulary of `vocab_size` words, seeded.
    pub fn new(vocab_size: usize, seed: u64) -> Self {
        TextGen {
            vocab: vocabulary(vocab_size, seed),
            rng: Pcg32::new(seed),
        }
    }

    pub fn rng(&mut self) -> &mut Pcg32 {
        &mut self.rng
    }

    /// A word index with a Zipf-like law (log-uniform rank).
    pub fn word_index(&mut self) -> usize {
        let v = self.vocab.len() as f64;
        let r = v.powf(self.rng.next_f64()) - 1.0;
        (r as usize).min(self.vocab.len() - 1)
    }

    pub fn word(&mut self) -> &str {
        let i = self.word_index();
        &self.vocab[i]
    }

    /// `n` words.
    pub fn words(&mut self, n: usize) -> Vec<String> {
        (0..n).map(|_| self.word().to_string()).collect()
    }

    /// Render words as text with sentence case, commas and full stops (which the tokenizer
    /// removes again).
    pub fn render(&mut self, words: &[String]) -> String {
        let mut s = String::with_capacity(words.len() * 7);
        let mut start = true;
        for (i, w) in words.iter().enumerate() {
            if i > 0 {
                s.push(' ');
            }
            if start {
                let mut c = w.chars();
                if let Some(f) = c.next() {
                    s.extend(f.to_uppercase());
                    s.push_str(c.as_str());
                }
                start = false;
            } else {
                s.push_str(w);
            }
            let r = self.rng.below(100);
            if i + 1 == words.len() || r < 7 {
                s.push('.');
                start = true;
            } else if r < 12 {
                s.push(',');
            }
        }
        s
    }

    /// A copy of `words` with `edits` random single-word substitutions.
    pub fn mutate(&mut self, words: &[String], edits: usize) -> Vec<String> {
        let mut out = words.to_vec();
        for _ in 0..edits {
            if out.is_empty() {
                break;
            }
            let p = self.rng.below(out.len() as u32) as usize;
            out[p] = self.word().to_string();
        }
        out
    }

    /// A mutation of `base` whose shingle Jaccard (width `k`) with it lies in `[lo, hi]`, found by
    /// rejection. Panics if none is found in 10,000 tries (the range is unreachable).
    pub fn near_copy(&mut self, base: &[String], k: usize, lo: f64, hi: f64) -> (Vec<String>, f64) {
        let base_set = shingles(&base.join(" "), k);
        let s = base_set.len().max(1) as f64;
        for _ in 0..10_000 {
            // Aim at a Jaccard in the range: each substitution changes about k shingles.
            let target = lo + (hi - lo) * self.rng.next_f64();
            let changed = s * (1.0 - target) / (1.0 + target);
            let edits = ((changed / k as f64).round() as usize).max(1);
            let cand = self.mutate(base, edits);
            let j = jaccard(&base_set, &shingles(&cand.join(" "), k));
            if j >= lo && j <= hi {
                return (cand, j);
            }
        }
        panic!("no near copy with Jaccard in [{lo}, {hi}] after 10000 tries");
    }
}

/// A generated corpus with what was planted in it.
#[derive(Debug, Clone, Default)]
pub struct Planted {
    /// `(id, text)` in corpus order.
    pub docs: Vec<(String, String)>,
    /// Planted near-duplicate clusters (ids, the original first); each must come out as one
    /// cluster.
    pub clusters: Vec<Vec<String>>,
    /// Exact copies (same words, other case and punctuation): `(copy, original)`.
    pub exact_copies: Vec<(String, String)>,
    /// Pairs with Jaccard in 0.5-0.6 that must stay apart.
    pub borderline: Vec<(String, String, f64)>,
    /// `x ~ y ~ z`, with `x` and `z` below the threshold; one cluster, root `x`.
    pub chain: Option<[String; 3]>,
    /// Wordless and very short documents: never clustered.
    pub loners: Vec<String>,
}

/// Options of [`planted_corpus`].
#[derive(Debug, Clone, Copy)]
pub struct PlantOptions {
    pub k: usize,
    /// Unrelated background documents.
    pub background: usize,
    pub clusters: usize,
    /// Near copies per cluster, 1 ..= this.
    pub max_copies: usize,
    pub exact_copies: usize,
    pub borderline: usize,
    pub words_per_doc: usize,
}

impl Default for PlantOptions {
    fn default() -> Self {
        PlantOptions {
            k: 5,
            background: 200,
            clusters: 20,
            max_copies: 3,
            exact_copies: 10,
            borderline: 10,
            words_per_doc: 120,
        }
    }
}

/// A corpus with planted near-duplicate clusters (Jaccard 0.85-0.98 to their original),
/// exact copies, borderline pairs (0.5-0.6), a chain `x ~ y ~ z` (0.82-0.86 each step, `x` and
/// `z` below 0.8), and wordless and short documents, in shuffled order with shuffled ids.
pub fn planted_corpus(seed: u64, opt: PlantOptions) -> Planted {
    let mut g = TextGen::new(20_000, seed);
    let k = opt.k;
    let mut groups: Vec<Vec<Vec<String>>> = Vec::new(); // word lists, per logical group
    let mut kinds: Vec<&'static str> = Vec::new();
    let len =
        |g: &mut TextGen| opt.words_per_doc / 2 + g.rng().below(opt.words_per_doc as u32) as usize;

    for _ in 0..opt.background {
        let n = len(&mut g);
        groups.push(vec![g.words(n)]);
        kinds.push("background");
    }
    for _ in 0..opt.clusters {
        let n = len(&mut g);
        let base = g.words(n);
        let copies = 1 + g.rng().below(opt.max_copies as u32) as usize;
        let mut members = vec![base.clone()];
        for _ in 0..copies {
            members.push(g.near_copy(&base, k, 0.85, 0.98).0);
        }
        groups.push(members);
        kinds.push("cluster");
    }
    let mut borderline_j = Vec::new();
    for _ in 0..opt.borderline {
        let n = len(&mut g);
        let a = g.words(n);
        let (b, j) = g.near_copy(&a, k, 0.5, 0.6);
        groups.push(vec![a, b]);
        kinds.push("borderline");
        borderline_j.push(j);
    }
    // The chain: y edits the first half of x, z edits the second half of y.
    let chain = loop {
        let n = opt.words_per_doc.max(60);
        let x = g.words(n);
        let half = n / 2;
        let (yh, _) = g.near_copy(&x[..half], k, 0.62, 0.72);
        let y: Vec<String> = yh.into_iter().chain(x[half..].iter().cloned()).collect();
        let (zt, _) = g.near_copy(&y[half..], k, 0.62, 0.72);
        let z: Vec<String> = y[..half].iter().cloned().chain(zt).collect();
        let sx = shingles(&x.join(" "), k);
        let sy = shingles(&y.join(" "), k);
        let sz = shingles(&z.join(" "), k);
        let (jxy, jyz, jxz) = (jaccard(&sx, &sy), jaccard(&sy, &sz), jaccard(&sx, &sz));
        if (0.82..=0.86).contains(&jxy) && (0.82..=0.86).contains(&jyz) && jxz < 0.75 {
            break vec![x, y, z];
        }
    };
    groups.push(chain);
    kinds.push("chain");

    // Ids: a random permutation of numbers, so roots are not simply the originals.
    let total_docs: usize = groups.iter().map(Vec::len).sum::<usize>() + opt.exact_copies + 6;
    let mut numbers: Vec<usize> = (0..total_docs).collect();
    shuffle(&mut numbers, g.rng());
    let mut next_id = numbers.into_iter().map(|n| format!("doc-{n:05}"));

    let mut planted = Planted::default();
    let mut docs: Vec<(String, String)> = Vec::new();
    let mut cluster_no = 0;
    for (members, kind) in groups.iter().zip(&kinds) {
        let ids: Vec<String> = members
            .iter()
            .map(|_| next_id.next().expect("enough ids"))
            .collect();
        for (id, w) in ids.iter().zip(members) {
            let text = g.render(w);
            docs.push((id.clone(), text));
        }
        match *kind {
            "cluster" => planted.clusters.push(ids.clone()),
            "borderline" => {
                planted
                    .borderline
                    .push((ids[0].clone(), ids[1].clone(), borderline_j[cluster_no]));
                cluster_no += 1;
            }
            "chain" => {
                // The root must be x: give x the smallest of the three ids.
                let mut sorted = ids.clone();
                sorted.sort();
                let n = docs.len();
                for (i, id) in sorted.iter().enumerate() {
                    docs[n - 3 + i].0 = id.clone();
                }
                planted.chain = Some([sorted[0].clone(), sorted[1].clone(), sorted[2].clone()]);
            }
            _ => {}
        }
    }
    // Exact copies of background documents: other case, other punctuation, same words.
    for i in 0..opt.exact_copies.min(opt.background) {
        let (orig_id, orig) = docs[i].clone();
        let copy_text = orig.to_uppercase().replace('.', "!").replace(',', " ;");
        let id = next_id.next().expect("enough ids");
        planted.exact_copies.push((id.clone(), orig_id));
        docs.push((id, copy_text));
    }
    // Loners: wordless and short documents (distinct, fewer than k words).
    for text in [
        "",
        "!!! ... ???",
        "Hello, World!",
        "one",
        "two words here",
        "   \n\t ",
    ] {
        let id = next_id.next().expect("enough ids");
        planted.loners.push(id.clone());
        docs.push((id, text.to_string()));
    }
    shuffle(&mut docs, g.rng());
    planted.docs = docs;
    planted
}

pub use crate::hash::shuffle;

/// `n` synthetic documents for benchmarks and scale tests, streamed: ids `syn-<i>`, about
/// `words` words each, 1 in 20 a near copy of an earlier one. Deterministic for a seed.
pub struct SyntheticDocs {
    gen: TextGen,
    n: usize,
    i: usize,
    words: usize,
    recent: Vec<Vec<String>>,
    /// Words that begin every document ([`SyntheticDocs::with_template`]).
    template: Vec<String>,
}

impl SyntheticDocs {
    pub fn new(n: usize, words: usize, seed: u64) -> Self {
        SyntheticDocs {
            gen: TextGen::new(50_000, seed),
            n,
            i: 0,
            words,
            recent: Vec::new(),
            template: Vec::new(),
        }
    }

    /// Every document begins with the same `words` words of boilerplate, as templated web
    /// pages do; the near copies vary only the words after it. The documents then share LSH
    /// buckets by the thousand while few pairs are near duplicates.
    pub fn with_template(mut self, words: usize) -> Self {
        if words == 0 {
            return self;
        }
        let mut gen = TextGen::new(50_000, self.gen.rng().next_u32() as u64);
        self.template = gen.words(words);
        self
    }
}

impl Iterator for SyntheticDocs {
    type Item = (String, String);

    fn next(&mut self) -> Option<Self::Item> {
        if self.i >= self.n {
            return None;
        }
        let id = format!("syn-{:09}", self.i);
        self.i += 1;
        let w = if !self.recent.is_empty() && self.gen.rng().below(20) == 0 {
            let j = self.gen.rng().below(self.recent.len() as u32) as usize;
            let base = self.recent[j].clone();
            let edits = 1 + base.len() / 100;
            self.gen.mutate(&base, edits)
        } else {
            let n = self.words / 2 + self.gen.rng().below(self.words as u32 + 1) as usize;
            self.gen.words(n)
        };
        if self.recent.len() < 256 {
            self.recent.push(w.clone());
        } else {
            let j = self.gen.rng().below(256) as usize;
            self.recent[j] = w.clone();
        }
        let text = if self.template.is_empty() {
            self.gen.render(&w)
        } else {
            let all: Vec<String> = self.template.iter().chain(&w).cloned().collect();
            self.gen.render(&all)
        };
        Some((id, text))
    }
}

/// The committed fixtures, generated: `(file name, contents)`. `examples/make_fixtures.rs`
/// writes them to `fixtures/`, and a test checks the committed files still equal this output.
pub mod fixtures {
    use serde_json::json;

    use super::{planted_corpus, PlantOptions, Planted, TextGen};

    /// Seed of the planted test corpus (`corpus.jsonl`).
    pub const CORPUS_SEED: u64 = 1;
    /// Seed of the README's example corpus (`example.jsonl`).
    pub const EXAMPLE_SEED: u64 = 7;

    /// The protected eval texts: questions and nested passages (protected), and id-like values
    /// that a protected JSONL file must not protect.
    pub struct EvalSet {
        pub questions: Vec<String>,
        pub passages: Vec<String>,
        pub case_ids: Vec<String>,
        pub tags: Vec<Vec<String>>,
        pub scorer_args: Vec<String>,
        pub plain_text: String,
    }

    /// The eval set, seeded.
    pub fn eval_set(seed: u64) -> EvalSet {
        let mut g = TextGen::new(20_000, seed ^ 0xe7a1);
        let words = |n: usize, g: &mut TextGen| g.words(n).join(" ");
        let questions = (0..6).map(|_| words(30, &mut g)).collect();
        let passages = (0..6).map(|_| words(40, &mut g)).collect();
        let case_ids = (0..6).map(|_| words(16, &mut g)).collect();
        let tags = (0..6)
            .map(|_| vec![words(15, &mut g), words(15, &mut g)])
            .collect();
        let scorer_args = (0..6).map(|_| words(20, &mut g)).collect();
        let plain_text = words(80, &mut g);
        EvalSet {
            questions,
            passages,
            case_ids,
            tags,
            scorer_args,
            plain_text,
        }
    }

    /// `protected.jsonl`: one record per item, id-like keys at the top and nested.
    pub fn protected_jsonl(e: &EvalSet) -> String {
        let mut s = String::new();
        for i in 0..e.questions.len() {
            let rec = json!({
                "id": format!("eval-{i}"),
                "case_id": e.case_ids[i],
                "tags": e.tags[i],
                "question": e.questions[i],
                "choices": ["yes", "no", "maybe so"],
                "scorer_args": { "reference": e.scorer_args[i], "weight": 1 },
                "context": { "passage": { "text": e.passages[i], "id": e.case_ids[i] } },
            });
            s.push_str(&rec.to_string());
            s.push('\n');
        }
        s
    }

    /// Documents that probe decontamination, with whether each must be caught.
    pub fn decontam_probes(e: &EvalSet, seed: u64) -> Vec<(String, String, bool)> {
        let mut g = TextGen::new(20_000, seed ^ 0xdec0);
        let w = |s: &str| s.split(' ').map(str::to_string).collect::<Vec<_>>();
        let pad = |n: usize, g: &mut TextGen| g.words(n).join(" ");
        let mut out = Vec::new();
        // 13 words of a question, shouted and punctuated, in the middle of other text.
        let q = w(&e.questions[0]);
        let leak = q[5..18].join(", ").to_uppercase();
        out.push((
            "leak-question".into(),
            format!("{} {leak}! {}", pad(20, &mut g), pad(20, &mut g)),
            true,
        ));
        // 13 words of a nested passage.
        let p = w(&e.passages[1]);
        out.push((
            "leak-passage".into(),
            format!(
                "{} {} {}",
                pad(10, &mut g),
                p[20..33].join(" "),
                pad(10, &mut g)
            ),
            true,
        ));
        // The very last window of the plain-text file, at the very end of the document.
        let t = w(&e.plain_text);
        out.push((
            "leak-last-window".into(),
            format!("{} {}", pad(15, &mut g), t[t.len() - 13..].join(" ")),
            true,
        ));
        // The whole document is exactly one protected 13-gram.
        out.push(("leak-exact".into(), q[0..13].join(" "), true));
        // Only 12 consecutive words: not contaminated.
        out.push((
            "near-miss-12".into(),
            format!(
                "{} {} {}",
                pad(10, &mut g),
                q[2..14].join(" "),
                pad(10, &mut g)
            ),
            false,
        ));
        // Values of id-like keys are not protected.
        out.push((
            "idlike-case-id".into(),
            format!("{} {} {}", pad(5, &mut g), e.case_ids[2], pad(5, &mut g)),
            false,
        ));
        out.push((
            "idlike-tags".into(),
            format!("{} {}", e.tags[3][0], e.tags[3][1]),
            false,
        ));
        out.push((
            "idlike-scorer-args".into(),
            format!("{} {}", pad(3, &mut g), e.scorer_args[4]),
            false,
        ));
        for i in 0..6 {
            out.push((format!("clean-{i}"), pad(60, &mut g), false));
        }
        out
    }

    fn jsonl(docs: &[(String, String)]) -> String {
        let mut s = String::new();
        for (id, text) in docs {
            s.push_str(&json!({ "id": id, "text": text }).to_string());
            s.push('\n');
        }
        s
    }

    /// What was planted, as JSON (`*.truth.json`).
    pub fn truth_json(p: &Planted) -> String {
        let v = json!({
            "clusters": p.clusters,
            "exact_copies": p.exact_copies,
            "borderline": p.borderline.iter().map(|(a, b, j)| json!({"a": a, "b": b, "jaccard": j})).collect::<Vec<_>>(),
            "chain": p.chain,
            "loners": p.loners,
        });
        format!("{v:#}\n")
    }

    /// The planted test corpus.
    pub fn corpus() -> Planted {
        planted_corpus(CORPUS_SEED, PlantOptions::default())
    }

    /// The README example: a planted corpus with a few documents that leak the eval set.
    pub fn example() -> (Planted, Vec<(String, String)>) {
        let opt = PlantOptions {
            background: 300,
            clusters: 40,
            exact_copies: 15,
            borderline: 15,
            ..PlantOptions::default()
        };
        let mut p = planted_corpus(EXAMPLE_SEED, opt);
        let e = eval_set(EXAMPLE_SEED);
        let leaks: Vec<(String, String)> = decontam_probes(&e, EXAMPLE_SEED)
            .into_iter()
            .map(|(id, text, _)| (format!("probe-{id}"), text))
            .collect();
        p.docs.extend(leaks.iter().cloned());
        (p, leaks)
    }

    /// Every fixture file: `(name, contents)`.
    pub fn files() -> Vec<(&'static str, String)> {
        let c = corpus();
        let e = eval_set(EXAMPLE_SEED);
        let (ex, _) = example();
        let probes: Vec<(String, String)> = decontam_probes(&e, EXAMPLE_SEED)
            .into_iter()
            .map(|(id, text, _)| (id, text))
            .collect();
        let probe_truth: Vec<serde_json::Value> = decontam_probes(&e, EXAMPLE_SEED)
            .into_iter()
            .map(|(id, _, caught)| json!({"id": id, "contaminated": caught}))
            .collect();
        vec![
            ("corpus.jsonl", jsonl(&c.docs)),
            ("corpus.truth.json", truth_json(&c)),
            ("example.jsonl", jsonl(&ex.docs)),
            ("example.truth.json", truth_json(&ex)),
            ("protected.jsonl", protected_jsonl(&e)),
            ("protected.txt", format!("{}\n", e.plain_text)),
            ("decontam_probes.jsonl", jsonl(&probes)),
            (
                "decontam_probes.truth.json",
                format!("{:#}\n", json!(probe_truth)),
            ),
        ]
    }
}

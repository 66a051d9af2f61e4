//! One thread's cost of the host stages in front of the permutations, on a JSONL corpus held
//! in memory: `jsonl::parse_record` (the record scanner, serde_json where it declines) over
//! every line, `text::push_words` (the tokenizer) over every text, and `sign::fnv::hash_docs`
//! (FNV-1a of every 5-word shingle) over batches of 1,024 documents. Best of 25 rounds; the
//! data is hot in cache, so this is the stages' own cost, not a run's (which also waits on
//! memory).
//!
//! ```sh
//! cargo run --release --example parse_tokenize -- corpus.jsonl
//! ```

use std::time::Instant;

fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: parse_tokenize CORPUS.jsonl");
    let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let lines: Vec<&[u8]> = data
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    let fields = neardup::jsonl::Fields::default();
    let texts: Vec<String> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            neardup::jsonl::parse_record(l, &fields, &path, i as u64 + 1)
                .unwrap_or_else(|e| panic!("{e}"))
                .text
                .into_owned()
        })
        .collect();
    let (mut out, mut starts) = (Vec::new(), Vec::new());
    let (mut parse, mut tokenize, mut words) = (f64::MAX, f64::MAX, 0);
    for _ in 0..25 {
        let t = Instant::now();
        let mut bytes = 0;
        for (i, l) in lines.iter().enumerate() {
            let r =
                neardup::jsonl::parse_record(l, &fields, &path, i as u64 + 1).expect("parsed once");
            bytes += r.text.len();
        }
        std::hint::black_box(bytes);
        parse = parse.min(t.elapsed().as_secs_f64());
        let t = Instant::now();
        words = 0;
        for text in &texts {
            out.clear();
            starts.clear();
            words += neardup::text::push_words(text, &mut out, &mut starts);
        }
        tokenize = tokenize.min(t.elapsed().as_secs_f64());
    }
    // Hashing, as the engine does it: batches of documents, each hashed whole.
    let batches: Vec<neardup::PackedBatch> = texts
        .chunks(1024)
        .map(neardup::PackedBatch::from_texts)
        .collect();
    let shingles: usize = batches.iter().map(|b| b.total_shingles(5)).sum();
    let mut xs = Vec::with_capacity(shingles);
    let mut hash = f64::MAX;
    for _ in 0..25 {
        let t = Instant::now();
        xs.clear();
        for b in &batches {
            neardup::sign::fnv::hash_docs(b, 0..b.num_docs(), 5, &mut xs);
        }
        hash = hash.min(t.elapsed().as_secs_f64());
    }
    println!(
        "parse {:.2} ms ({:.3} ns a byte of JSONL), tokenize {:.2} ms ({:.2} ns a word), hash {:.2} ms ({:.2} ns a shingle), {} lines, {} words, {} shingles",
        parse * 1e3,
        parse * 1e9 / data.len() as f64,
        tokenize * 1e3,
        tokenize * 1e9 / words as f64,
        hash * 1e3,
        hash * 1e9 / shingles as f64,
        lines.len(),
        words,
        shingles
    );
}

//! Any bytes as a JSONL input (plain, or gzip/zstd if they look like it): reading, record
//! parsing and the tagged copy of each record must never panic, and every tagged copy must be
//! valid JSON carrying the tag. The record parser's fast scanner must agree with serde_json
//! alone on every line: the same id and text, or the same error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use neardup::jsonl::{parse_record, parse_record_full, write_tagged, Fields};
use neardup::io::LineReader;

fuzz_target!(|data: &[u8]| {
    let Ok(mut reader) = LineReader::from_read("fuzz.jsonl", std::io::Cursor::new(data.to_vec())) else {
        return;
    };
    let fields = Fields::default();
    // Small chunks so chunk boundaries are exercised too.
    while let Ok(Some(chunk)) = reader.next_chunk(64) {
        for i in 0..chunk.len() {
            let line = chunk.line(i);
            let fast = parse_record(line, &fields, "fuzz.jsonl", chunk.line_no(i));
            let full = parse_record_full(line, &fields, "fuzz.jsonl", chunk.line_no(i));
            match (&fast, &full) {
                (Ok(a), Ok(b)) => assert_eq!(a, b),
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
                _ => panic!("fast {fast:?} but serde_json alone {full:?}"),
            }
            if let Ok(rec) = fast {
                assert!(!rec.id.is_empty());
                let mut out = Vec::new();
                if write_tagged(&mut out, line, "minhash_cluster", &rec.id, "fuzz.jsonl", 1).is_ok() {
                    let v: serde_json::Value = serde_json::from_slice(&out).expect("tagged output is JSON");
                    assert_eq!(v["meta"]["minhash_cluster"].as_str(), Some(rec.id.as_ref()));
                }
            }
        }
    }
});

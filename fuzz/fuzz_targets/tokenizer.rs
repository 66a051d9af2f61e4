//! Any text: the word tokenizer must equal the SPEC's regex `[\p{L}\p{N}_]+` over the
//! lower-cased text, and the packed batch's shingle hashes must equal FNV-1a of the shingle
//! strings reduced mod P.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use neardup::batch::PackedBatch;
use neardup::hash::shingle_hash;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    static RE: OnceLock<regex::Regex> = OnceLock::new();
    let re = RE.get_or_init(|| regex::Regex::new(r"[\p{L}\p{N}_]+").unwrap());
    let want: Vec<String> = re.find_iter(&text.to_lowercase()).map(|m| m.as_str().to_string()).collect();
    assert_eq!(neardup::words(text), want);
    let batch = PackedBatch::from_texts(&[text, text]);
    for k in [1, 3, 5] {
        let mut xs = Vec::new();
        neardup::sign::fnv::hash_shingles(&batch, 1, k, &mut xs);
        let naive: Vec<u32> = batch.shingles(1, k).map(shingle_hash).collect();
        assert_eq!(xs, naive);
    }
});

//! Every CPU kernel variant this machine can run (scalar, portable, AVX2, AVX-512) gives
//! the scalar reference's bits, and the SIMD shingle hasher gives `fnv1a64 mod P` for every
//! shingle, across the lane-group boundaries (8 and `HASH_BLOCK` shingles), across documents,
//! and at the end of a batch.

use neardup::batch::PackedBatch;
use neardup::hash::fnv1a64;
use neardup::hash::{shingle_hash, P};
use neardup::sign::fnv::{fnv64_shingles, hash_docs, hash_shingles, HASH_BLOCK};
use neardup::sign::permute::{permute_min_scalar, permute_min_with, Kernel};
use neardup::text::Words;
use proptest::prelude::*;

/// The kernels this machine runs besides the scalar reference (the portable one everywhere).
/// Without an explicit SIMD one (AVX2, AVX-512), the comparisons below miss those paths:
/// say so loudly, and fail when `NEARDUP_REQUIRE_SIMD=1` says the machine must have them
/// (or `NEARDUP_REQUIRE_AVX512=1` the AVX-512 one).
fn simd_kernels() -> Vec<Kernel> {
    let simd: Vec<Kernel> = Kernel::available()
        .into_iter()
        .filter(|&k| k != Kernel::Scalar)
        .collect();
    // The portable kernel runs everywhere; the explicit ones need the CPU's instructions.
    if !simd
        .iter()
        .any(|&k| k == Kernel::Avx2 || k == Kernel::Avx512)
    {
        assert!(
            std::env::var_os("NEARDUP_REQUIRE_SIMD").is_none(),
            "NEARDUP_REQUIRE_SIMD is set but this CPU has no SIMD kernel"
        );
        eprintln!(
            "!!! AVX2/AVX-512 KERNEL TESTS SKIPPED: this CPU has neither (the portable kernel is \
             still tested) !!!"
        );
    }
    if !simd.contains(&Kernel::Avx512) {
        assert!(
            std::env::var_os("NEARDUP_REQUIRE_AVX512").is_none(),
            "NEARDUP_REQUIRE_AVX512 is set but this CPU has no AVX-512 permutation kernel"
        );
        eprintln!("!!! the AVX-512 permutation kernel NOT TESTED: this CPU has no AVX-512 !!!");
    }
    simd
}

#[test]
fn the_machines_kernels_are_listed() {
    let k = Kernel::available();
    eprintln!(
        "kernels on this machine: {:?} (chosen: {:?})",
        k,
        Kernel::detect()
    );
    assert!(k.contains(&Kernel::detect()), "the chosen kernel runs here");
    simd_kernels();
}

fn check_all(xs: &[u32], a: &[u32], b: &[u32], init: &[u32]) {
    let mut want = init.to_vec();
    permute_min_scalar(xs, a, b, &mut want);
    for k in simd_kernels() {
        let mut got = init.to_vec();
        permute_min_with(k, xs, a, b, &mut got);
        assert_eq!(
            got,
            want,
            "{k:?} with {} permutations, {} values",
            a.len(),
            xs.len()
        );
    }
}

#[test]
fn every_kernel_equals_scalar_at_the_extremes() {
    // Parameters and values at the edges of their ranges: the largest products and sums.
    for n in [
        1usize, 7, 8, 15, 16, 17, 63, 64, 65, 100, 128, 129, 256, 512,
    ] {
        let a: Vec<u32> = (0..n)
            .map(|i| if i % 2 == 0 { P - 1 } else { 1 + i as u32 })
            .collect();
        let b: Vec<u32> = (0..n)
            .map(|i| if i % 3 == 0 { P - 1 } else { i as u32 })
            .collect();
        let xs = [0, 1, P - 1, P - 2, 1 << 30, (1 << 31) - 3, 12345];
        check_all(&xs, &a, &b, &vec![P; n]);
        // A row that is already low stays as low.
        check_all(&xs, &a, &b, &vec![3; n]);
        check_all(&[], &a, &b, &vec![P; n]);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn every_kernel_equals_scalar(
        n in 1usize..200,
        xs in proptest::collection::vec(0u32..P, 0..300),
        seed in any::<u64>(),
    ) {
        let p = neardup::perm_params(n, seed);
        check_all(&xs, &p.a, &p.b, &vec![P; n]);
    }

    #[test]
    fn simd_shingle_hashes_equal_fnv_mod_p(
        docs in proptest::collection::vec(proptest::collection::vec("[a-z]{1,12}", 0..90), 1..6),
        k in 1usize..8,
    ) {
        let texts: Vec<String> = docs.iter().map(|w| w.join(" ")).collect();
        let batch = PackedBatch::from_texts(&texts);
        for d in 0..batch.num_docs() {
            let mut xs = Vec::new();
            hash_shingles(&batch, d, k, &mut xs);
            let want: Vec<u32> = batch.shingles(d, k).map(shingle_hash).collect();
            prop_assert_eq!(xs, want);
        }
        // The full 64-bit values of each text alone (exact-Jaccard sets), from the same blocks.
        for t in &texts {
            let w = Words::new(t);
            let mut full = Vec::new();
            fnv64_shingles(&w.bytes, &w.starts, k, &mut full);
            let want: Vec<u64> = w.shingle_slices(k).map(fnv1a64).collect();
            prop_assert_eq!(full, want);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// The engine hashes runs of documents at once, its blocks straddling documents: any run
    /// gives each document's shingle hashes, in order, as if hashed alone.
    #[test]
    fn hashing_a_run_of_documents_equals_hashing_each(
        docs in proptest::collection::vec(proptest::collection::vec("[a-z]{1,9}", 0..70), 1..12),
        k in 1usize..7,
        from in 0usize..12,
    ) {
        let texts: Vec<String> = docs.iter().map(|w| w.join(" ")).collect();
        let batch = PackedBatch::from_texts(&texts);
        let from = from.min(batch.num_docs() - 1);
        let mut xs = Vec::new();
        hash_docs(&batch, from..batch.num_docs(), k, &mut xs);
        let want: Vec<u32> = (from..batch.num_docs())
            .flat_map(|d| batch.shingles(d, k).map(shingle_hash).collect::<Vec<_>>())
            .collect();
        prop_assert_eq!(xs, want);
    }
}

#[test]
fn shingle_hashing_across_lane_groups_and_the_batch_end() {
    // Word counts that give 7..9 shingles at k = 5 and one less than, exactly and one more
    // than one and two hasher blocks, each document the last of its batch (so the vector loads
    // meet the end of the bytes).
    let mut counts = vec![7, 8, 9, 296];
    // One and two blocks; four is where the hasher starts sorting shingles by length.
    for m in [1, 2, 4] {
        counts.extend([HASH_BLOCK * m - 1, HASH_BLOCK * m, HASH_BLOCK * m + 1]);
    }
    for words in counts.into_iter().map(|shingles| shingles + 4) {
        for long in [false, true] {
            let text: Vec<String> = (0..words)
                .map(|i| {
                    if long && i % 7 == 0 {
                        "x".repeat(40 + i % 13)
                    } else {
                        format!("w{i}")
                    }
                })
                .collect();
            let batch = PackedBatch::from_texts(&[text.join(" ")]);
            let mut xs = Vec::new();
            hash_shingles(&batch, 0, 5, &mut xs);
            let want: Vec<u32> = batch.shingles(0, 5).map(shingle_hash).collect();
            assert_eq!(xs, want, "{words} words, long = {long}");
            // The full 64-bit values (exact-Jaccard confirmation), from the same blocks.
            let w = Words::new(&text.join(" "));
            let mut full = Vec::new();
            fnv64_shingles(&w.bytes, &w.starts, 5, &mut full);
            let want: Vec<u64> = w.shingle_slices(5).map(fnv1a64).collect();
            assert_eq!(full, want, "{words} words, long = {long}");
            assert!(full
                .iter()
                .zip(&xs)
                .all(|(&f, &x)| (f % P as u64) as u32 == x));
        }
    }
}

#[test]
fn an_earlier_lane_that_rounds_up_further_than_the_last_stays_inside_the_batch() {
    // k = 2, one full block of shingles, the document last in its batch: the last lane but one
    // is "aa bbbbbb" (9 bytes, its word loads reach 16 bytes on, past the end), the last
    // "bbbbbb c" (8 bytes, exactly 8). Checking only the last lane's reach would let the one
    // before read past the end of the bytes; the kernel checks every lane's reach and leaves
    // the lanes that would pass the end to the scalar way.
    let filler: Vec<String> = (0..HASH_BLOCK - 2).map(|i| format!("f{i}")).collect();
    let text = format!("{} aa bbbbbb c", filler.join(" "));
    let batch = PackedBatch::from_texts(&[text]);
    let mut xs = Vec::new();
    hash_shingles(&batch, 0, 2, &mut xs);
    assert_eq!(xs.len(), HASH_BLOCK);
    let want: Vec<u32> = batch.shingles(0, 2).map(shingle_hash).collect();
    assert_eq!(xs, want);
}

/// Word starts that do not increase (a public caller's mistake) must meet a bounds check before
/// any load: here some shingles lie far past the bytes, or run backwards, while the list's
/// last start is small. The kernel refuses their lanes, and the scalar way's slicing panics.
#[test]
fn word_starts_that_do_not_increase_panic_instead_of_reading_out_of_bounds() {
    let bytes = vec![b'a'; 2000];
    // 51 starts, k = 3: 48 shingles, one block. Shingle j runs from starts[j] to
    // starts[j + 3] - 1, but every third start is 10,000 and up, so some shingles lie far past
    // the bytes and others run backwards (their lengths wrap), while the last shingle (47) ends
    // at 49. Then 251 starts: 248 shingles, enough that the hasher sorts them by length.
    for n in [51u32, 251] {
        let starts: Vec<u32> = (0..n)
            .map(|i| if i % 3 == 1 { 10_000 + 100 * i } else { i })
            .collect();
        let r = std::panic::catch_unwind(|| {
            let mut out = Vec::new();
            fnv64_shingles(&bytes, &starts, 3, &mut out);
            out
        });
        assert!(
            r.is_err(),
            "{n} starts: out-of-range shingles were hashed: {r:?}"
        );
    }
}

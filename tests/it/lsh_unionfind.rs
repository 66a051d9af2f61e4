//! LSH banding and union-find (SPEC §3).

use neardup::hash::P;
use neardup::index::lsh::{band_buckets, Lsh, LshParams};
use neardup::UnionFind;
use proptest::prelude::*;

fn lsh(b: usize, r: usize) -> Lsh {
    Lsh::new(LshParams::new(b, r).unwrap())
}

#[test]
fn a_shared_band_makes_a_candidate() {
    let mut l = lsh(4, 2);
    l.insert("x", &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
    l.insert("y", &[9, 9, 9, 9, 5, 6, 9, 9]).unwrap();
    assert_eq!(l.candidates(), [("x".to_string(), "y".to_string())]);
}

#[test]
fn equal_rows_in_different_bands_make_no_candidate() {
    let mut l = lsh(4, 2);
    // y's band 1 equals x's band 0, and so on: same values, other bands.
    l.insert("x", &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
    l.insert("y", &[7, 8, 1, 2, 3, 4, 5, 6]).unwrap();
    assert!(l.candidates().is_empty());
}

#[test]
fn r_minus_one_equal_rows_of_a_band_make_no_candidate() {
    let mut l = lsh(2, 4);
    l.insert("x", &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
    // Each band agrees in 3 of its 4 rows.
    l.insert("y", &[1, 2, 3, 0, 0, 6, 7, 8]).unwrap();
    assert!(l.candidates().is_empty());
}

#[test]
fn candidates_are_unique_sorted_and_smaller_id_first() {
    let mut l = lsh(3, 1);
    // All share every band: 3 bands would give each pair three times.
    for id in ["m", "b", "z", "a"] {
        l.insert(id, &[7, 7, 7]).unwrap();
    }
    let c = l.candidates();
    let want: Vec<(String, String)> = [
        ("a", "b"),
        ("a", "m"),
        ("a", "z"),
        ("b", "m"),
        ("b", "z"),
        ("m", "z"),
    ]
    .iter()
    .map(|(x, y)| (x.to_string(), y.to_string()))
    .collect();
    assert_eq!(c, want);
}

#[test]
fn ids_compare_as_strings_by_code_point() {
    let mut l = lsh(1, 2);
    l.insert("é", &[1, 1]).unwrap();
    l.insert("z", &[1, 1]).unwrap();
    l.insert("10", &[1, 1]).unwrap();
    l.insert("9", &[1, 1]).unwrap();
    let c = l.candidates();
    assert_eq!(c[0], ("10".to_string(), "9".to_string()));
    assert!(c.contains(&("z".to_string(), "é".to_string())));
}

#[test]
fn bad_inserts_are_errors() {
    let mut l = lsh(2, 2);
    assert!(l.insert("x", &[1, 2, 3]).is_err());
    l.insert("x", &[1, 2, 3, 4]).unwrap();
    let e = l.insert("x", &[5, 6, 7, 8]).unwrap_err();
    assert!(e.to_string().contains("\"x\""), "{e}");
    assert!(LshParams::new(0, 8).is_err());
    assert!(LshParams::new(16, 8).unwrap().check_num_perm(100).is_err());
}

#[test]
fn all_p_signatures_are_never_indexed() {
    let mut l = lsh(2, 2);
    l.insert("empty1", &[P; 4]).unwrap();
    l.insert("empty2", &[P; 4]).unwrap();
    assert!(l.candidates().is_empty());
    // ...but their ids are taken.
    assert!(l.insert("empty1", &[1, 2, 3, 4]).is_err());
}

#[test]
fn documents_with_different_bands_never_share_a_bucket() {
    // band_buckets groups by a 64-bit digest and then by the full band: documents whose bands
    // differ are never in one bucket, however many there are.
    let n = 5000;
    let mut sigs = Vec::new();
    for i in 0..n as u32 {
        sigs.extend_from_slice(&[i, i / 2]);
    }
    let b = band_buckets(&sigs, 2, LshParams::new(1, 2).unwrap(), |_| true);
    assert!(b.is_empty());
    let b = band_buckets(&sigs, 2, LshParams::new(2, 1).unwrap(), |_| true);
    // Band 1 (i / 2) pairs up 2j and 2j+1.
    assert_eq!(b.len(), n / 2);
    for bucket in b.iter() {
        assert_eq!(bucket.len(), 2);
        assert_eq!(bucket[0] / 2, bucket[1] / 2);
    }
}

proptest! {
    /// Whatever the order of the unions, every root is the smallest element of its set.
    #[test]
    fn union_find_roots_are_minimum_for_any_order(
        pairs in proptest::collection::vec((0u32..40, 0u32..40), 0..60),
        perm_seed in any::<u64>(),
    ) {
        let mut order = pairs.clone();
        let mut rng = neardup::Pcg32::new(perm_seed);
        neardup::synth::shuffle(&mut order, &mut rng);
        let mut a = UnionFind::new(40);
        let mut b = UnionFind::new(40);
        for &(x, y) in &pairs { a.union(x, y); }
        for &(x, y) in &order { b.union(y, x); }
        let ga = a.groups();
        prop_assert_eq!(&ga, &b.groups());
        for g in &ga {
            let min = *g.iter().min().unwrap();
            for &x in g {
                prop_assert_eq!(a.find(x), min);
            }
        }
    }
}

#[test]
fn union_find_every_permutation_of_a_small_union_set() {
    // Exhaustive over all 120 orders of 5 unions.
    let unions = [(4u32, 3u32), (3, 7), (7, 5), (1, 6), (6, 2)];
    let mut idx = [0usize, 1, 2, 3, 4];
    let mut count = 0;
    permute(&mut idx, 0, &mut |order| {
        let mut uf = UnionFind::new(8);
        for &i in order {
            uf.union(unions[i].0, unions[i].1);
        }
        assert_eq!(uf.roots(), [0, 1, 1, 3, 3, 3, 1, 3]);
        count += 1;
    });
    assert_eq!(count, 120);
}

fn permute(v: &mut [usize; 5], k: usize, f: &mut impl FnMut(&[usize; 5])) {
    if k == v.len() {
        f(v);
        return;
    }
    for i in k..v.len() {
        v.swap(k, i);
        permute(v, k + 1, f);
        v.swap(k, i);
    }
}

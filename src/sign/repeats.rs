//! Dropping a long document's repeated shingle values before the permutations: a repeat
//! cannot change a minimum.

/// Documents with fewer shingles are permuted whole by [`sign_docs`](crate::engine::cpu): in
/// real text, short documents repeat too few of their shingles to pay for the check, longer
/// ones repeat more, and the few huge ones (licence and changelog collections) are mostly
/// repeats and hold most of them (docs/BENCHMARKS.md).
pub const REPEAT_FILTER_MIN_SHINGLES: usize = 1024;

/// Most slots of a [`RepeatFilter`] (1 MiB: it stays in L2).
pub const REPEAT_FILTER_MAX_SLOTS: usize = 1 << 17;

/// A [`RepeatFilter`] slot that holds nothing: no key matches it, since every key's stamp (its
/// high half) is at least 1. Not zero, so that the table is not a zeroed allocation.
const REPEAT_FILTER_EMPTY: u64 = u32::MAX as u64;

/// A direct-mapped table of the shingle hashes seen in the current document, to drop repeats
/// before the permutations (a repeat cannot change a minimum; checking a shingle costs far less
/// than permuting it). It has a slot per shingle of the document, rounded up to a power of
/// two, up to [`REPEAT_FILTER_MAX_SLOTS`]. Each slot holds `stamp | x`, the stamp counting
/// documents in its high half, so a new document starts with one add instead of clearing the
/// table. Two hashes that share a slot evict each other: a repeat may then be kept, never a new
/// hash dropped.
#[derive(Default)]
pub struct RepeatFilter {
    slots: Vec<u64>,
    stamp: u64,
}

impl RepeatFilter {
    /// Move the hashes of one document's `xs` not seen earlier in it (as far as the table
    /// remembers) to its front, in order, and return how many there are.
    pub fn keep_first_seen(&mut self, xs: &mut [u32]) -> usize {
        let size = xs.len().next_power_of_two().min(REPEAT_FILTER_MAX_SLOTS);
        if self.slots.len() < size {
            // The table grows to the largest document seen so far, not to the most slots at
            // once: every fresh page costs a fault (dearer on a VM, where the host backs it
            // too), and most threads never see a document of 128k shingles (split
            // documents come in parts of about 32k). It is filled with a value that is not
            // zero: a zeroed allocation (`vec![0; n]`, or a fill with zeros, which the compiler
            // turns into `calloc`) maps the kernel's zero page, and the first store to each
            // page then copies it and flushes the other cores' TLBs (the flushes show in a
            // `signatures` profile: docs/BENCHMARKS.md). The old table (earlier documents'
            // values) is freed first, so that its memory can serve the new one.
            self.slots = Vec::new();
            self.slots = vec![REPEAT_FILTER_EMPTY; size];
        }
        self.stamp = self.stamp.wrapping_add(1 << 32);
        if self.stamp == 0 {
            // 2^32 documents on: stale slots could match again, so clear them once.
            self.slots.fill(REPEAT_FILTER_EMPTY);
            self.stamp = 1 << 32;
        }
        let slots = &mut self.slots[..size];
        let mask = size - 1;
        let mut n = 0;
        for i in 0..xs.len() {
            let x = xs[i];
            let key = self.stamp | x as u64;
            // x is FNV-1a mod P: its low bits are as mixed as any.
            let slot = &mut slots[x as usize & mask];
            let fresh = (*slot != key) as usize;
            *slot = key;
            // Branch-free compaction: always write, advance only past a fresh hash.
            xs[n] = x;
            n += fresh;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::P;

    #[test]
    fn repeat_filter_keeps_each_value_once_in_first_seen_order() {
        let mut f = RepeatFilter::default();
        let mut rng = crate::hash::Pcg32::new(9);
        for len in [0usize, 1, 2, 63, 64, 65, 1024, 5000, 300_000] {
            // Few distinct values (many repeats), drawn below P like shingle hashes.
            let distinct: Vec<u32> = (0..(len / 3).max(1)).map(|_| rng.below(P)).collect();
            let xs: Vec<u32> = (0..len)
                .map(|_| distinct[rng.below(distinct.len() as u32) as usize])
                .collect();
            let mut got = xs.clone();
            let n = f.keep_first_seen(&mut got);
            let kept = &got[..n];
            // Every value is kept at least once, nothing new appears, and the order is the
            // order of first appearance (a kept repeat comes after its first occurrence).
            let want: std::collections::BTreeSet<u32> = xs.iter().copied().collect();
            let have: std::collections::BTreeSet<u32> = kept.iter().copied().collect();
            assert_eq!(have, want, "len {len}");
            let mut it = xs.iter();
            assert!(
                kept.iter().all(|k| it.any(|x| x == k)),
                "a subsequence (len {len})"
            );
            // With a slot per value, only slot collisions leave repeats: few of them.
            if len <= REPEAT_FILTER_MAX_SLOTS {
                assert!(
                    n <= want.len() + want.len() / 2,
                    "len {len}: kept {n} of {}",
                    want.len()
                );
            }
        }
        // The table is as large as the largest document so far needs, no larger.
        let mut g = RepeatFilter::default();
        g.keep_first_seen(&mut vec![1; 1000]);
        assert_eq!(g.slots.len(), 1024);
        g.keep_first_seen(&mut [1; 10]);
        assert_eq!(g.slots.len(), 1024);
        g.keep_first_seen(&mut vec![1; 5000]);
        assert_eq!(g.slots.len(), 8192);
        g.keep_first_seen(&mut vec![1; 3 * REPEAT_FILTER_MAX_SLOTS]);
        assert_eq!(g.slots.len(), REPEAT_FILTER_MAX_SLOTS);
        // A new document forgets the last one's values, also when the stamp wraps around.
        for stamp in [
            f.stamp,
            0u64.wrapping_sub(2 << 32),
            0u64.wrapping_sub(1 << 32),
        ] {
            f.stamp = stamp;
            let mut a = vec![7, 7, 8];
            assert_eq!(f.keep_first_seen(&mut a), 2);
            let mut b = vec![8, 7];
            assert_eq!(f.keep_first_seen(&mut b), 2, "after stamp {stamp:#x}");
            assert_eq!(b, [8, 7]);
        }
        // An empty slot matches no value, whatever the stamp: in a fresh table and after the
        // wrap-around's refill, every u32 (the extremes too) is kept the first time.
        for stamp in [0, 0u64.wrapping_sub(1 << 32)] {
            let mut f = RepeatFilter {
                stamp,
                ..Default::default()
            };
            // (Four values in four different slots of the eight.)
            let mut xs = vec![u32::MAX, 0, 2, 1, u32::MAX, 0];
            assert_eq!(f.keep_first_seen(&mut xs), 4, "stamp {stamp:#x}");
            assert_eq!(xs[..4], [u32::MAX, 0, 2, 1]);
        }
    }
}

//! Document ids, the common layer of the index and the stages: ids stored in one arena, a set
//! that finds repeats while storing each id once, the check that ids are unique across inputs,
//! and the global order of ids (the cluster root is the smallest).

use std::collections::HashMap;

use rayon::prelude::*;

use crate::error::Error;

/// Where a document was read: input index and 1-based line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DocLoc {
    pub file: u32,
    pub line: u64,
}

/// Ids of a whole corpus in one arena (no allocation per id).
#[derive(Default, Clone)]
pub struct IdArena {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

/// The ids, as a list of strings.
impl std::fmt::Debug for IdArena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries((0..self.len()).map(|i| self.get(i)))
            .finish()
    }
}

impl IdArena {
    pub fn push(&mut self, id: &str) {
        self.bytes.extend_from_slice(id.as_bytes());
        self.ends.push(self.bytes.len());
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    pub fn get(&self, i: usize) -> &str {
        // Only whole `&str`s are pushed, so every range is valid UTF-8.
        std::str::from_utf8(self.get_bytes(i)).expect("ids are UTF-8")
    }

    /// Id `i` as bytes, without the UTF-8 check of [`IdArena::get`]: for hashing and ordering
    /// (byte order is `str` order) in hot loops.
    pub fn get_bytes(&self, i: usize) -> &[u8] {
        let s = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[s..self.ends[i]]
    }

    /// Bytes of the ids, all together.
    pub fn bytes_len(&self) -> usize {
        self.bytes.len()
    }

    /// Room for `ids` more ids of `bytes` bytes in all, where the system gives it (a hint:
    /// what it refuses grows as needed).
    pub fn try_reserve(&mut self, ids: usize, bytes: usize) {
        let _ = self.ends.try_reserve(ids);
        let _ = self.bytes.try_reserve(bytes);
    }

    /// Remove the last id, if any.
    pub fn pop(&mut self) {
        if self.ends.pop().is_some() {
            self.bytes.truncate(self.ends.last().copied().unwrap_or(0));
        }
    }

    pub fn extend_from(&mut self, other: &IdArena) {
        let off = self.bytes.len();
        self.bytes.extend_from_slice(&other.bytes);
        self.ends.extend(other.ends.iter().map(|e| e + off));
    }

    /// Bytes held (lengths, not capacities).
    pub fn heap_bytes(&self) -> usize {
        self.bytes.len() + self.ends.len() * std::mem::size_of::<usize>()
    }
}

/// Documents in id order (ids compare as UTF-8 bytes), or the error naming a repeated id with
/// two places it was read. Of several repeats it names the one [`UniqueIds`] names as the
/// documents arrive (so `dedup` and `signatures` name the same one): the repeat met first in
/// input order, with the earliest document that had its id.
pub fn id_order(
    ids: &IdArena,
    locs: &[DocLoc],
    place_of: &dyn Fn(DocLoc) -> String,
) -> Result<Vec<u32>, Error> {
    match sort_ids(ids) {
        (_, Some((a, b))) => Err(duplicate_id(ids, locs, place_of, a as usize, b as usize)),
        (order, None) => Ok(order),
    }
}

/// Indices of `ids` in id order, ties in index order, and the repeat [`id_order`] names: the
/// first two indices `(a, b)` of the id whose second index is smallest.
pub fn sort_ids(ids: &IdArena) -> (Vec<u32>, Option<(u32, u32)>) {
    sort_ids_by(ids.len(), |i| ids.get_bytes(i as usize))
}

/// [`sort_ids`] over `n` ids that `id` gives by index.
pub fn sort_ids_by<'a>(
    n: usize,
    id: impl Fn(u32) -> &'a [u8] + Sync,
) -> (Vec<u32>, Option<(u32, u32)>) {
    let n = u32::try_from(n).expect("at most 2^32 ids");
    let mut order: Vec<u32> = (0..n).collect();
    order.par_sort_unstable_by(|&a, &b| id(a).cmp(id(b)).then(a.cmp(&b)));
    // Equal ids sit together, in input order; a pair of neighbours is the first two
    // documents of its id only when the one before them has another id.
    let same = |x: u32, y: u32| id(x) == id(y);
    let mut first_repeat: Option<(u32, u32)> = None;
    for (i, w) in order.windows(2).enumerate() {
        let (a, b) = (w[0], w[1]);
        if same(a, b)
            && (i == 0 || !same(order[i - 1], a))
            && first_repeat.is_none_or(|(_, second)| b < second)
        {
            first_repeat = Some((a, b));
        }
    }
    (order, first_repeat)
}

/// The error for documents `a` and `b` sharing an id, naming where each was read.
fn duplicate_id(
    ids: &IdArena,
    locs: &[DocLoc],
    place_of: &dyn Fn(DocLoc) -> String,
    a: usize,
    b: usize,
) -> Error {
    let loc = |d: usize| place_of(locs[d]);
    Error::DuplicateId {
        id: ids.get(a).to_string(),
        first: loc(a),
        second: loc(b),
    }
}

/// Refuses a repeated id as the documents arrive, when no order of the ids is needed
/// (`signatures`): each id's 64-bit hash goes into a table, and only ids with equal hashes are
/// compared. The check runs on the thread that writes the rows, beside the workers signing the
/// next chunks; sorting all the hashes after the last chunk would add work at the end of the
/// run, with no chunk left to sign beside it (docs/BENCHMARKS.md). Of several repeats, the one
/// met first in input order is named, with the earliest document that had its id, and the run
/// stops there.
pub struct UniqueIds {
    ids: IdArena,
    locs: Vec<DocLoc>,
    set: IdSet,
}

impl Default for UniqueIds {
    fn default() -> Self {
        UniqueIds::with_set(IdSet::default())
    }
}

impl UniqueIds {
    fn with_set(set: IdSet) -> Self {
        UniqueIds {
            ids: IdArena::default(),
            locs: Vec::new(),
            set,
        }
    }

    /// Room for about `docs` more documents whose ids hold about `id_bytes` bytes in all (an
    /// estimate). The lists get a quarter more, since room never used is never touched; the
    /// table gets no more, since its entries land anywhere in it and touch every page. Room
    /// the system will not give is left to grow as needed.
    pub fn reserve(&mut self, docs: usize, id_bytes: usize) {
        let more = |n: usize| n.saturating_add(n / 4);
        self.ids.try_reserve(more(docs), more(id_bytes));
        let _ = self.locs.try_reserve(more(docs));
        self.set.try_reserve(docs);
    }

    /// No document yet.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The ids so far, in the order added.
    pub fn ids(&self) -> &IdArena {
        &self.ids
    }

    /// Add the next documents' ids and where each was read (as many as ids); an error names
    /// the first repeat among them and the earliest document with its id.
    pub fn extend(
        &mut self,
        ids: &IdArena,
        locs: impl IntoIterator<Item = DocLoc>,
        place_of: &dyn Fn(DocLoc) -> String,
    ) -> Result<(), Error> {
        let from = self.ids.len();
        self.ids.extend_from(ids);
        self.locs.extend(locs);
        assert_eq!(self.locs.len(), self.ids.len(), "a location per id");
        for b in from..self.ids.len() {
            if let Some(a) = self.set.insert(&self.ids, b) {
                return Err(duplicate_id(&self.ids, &self.locs, place_of, a, b));
            }
        }
        Ok(())
    }
}

/// The ids of an [`IdArena`] already seen, found by their bytes while each is stored only
/// once, in the arena: each id's 64-bit hash goes into a table with the first id that had it,
/// and only ids with equal hashes are compared.
#[derive(Clone)]
pub(crate) struct IdSet {
    /// The id hash, and its seed: drawn per set, so that no corpus can be made whose ids all
    /// land in a few slots of the table (what is found does not depend on it).
    hash: fn(&[u8], u64) -> u64,
    seed: u64,
    /// Each hash, and the first id with it.
    first: HashMap<u64, u32, std::hash::BuildHasherDefault<HashIsKey>>,
    /// Ids whose hash an earlier id with other bytes had, in the order added: a 64-bit
    /// collision, which real ids never show (the tests force it).
    clashes: Vec<u32>,
}

impl Default for IdSet {
    fn default() -> Self {
        use std::hash::BuildHasher;
        let seed = std::collections::hash_map::RandomState::new().hash_one(0u64);
        IdSet::with_hash(xxhash_rust::xxh3::xxh3_64_with_seed, seed)
    }
}

impl std::fmt::Debug for IdSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdSet")
            .field("hashes", &self.first.len())
            .field("clashes", &self.clashes.len())
            .finish()
    }
}

impl IdSet {
    /// A set hashing ids with `hash(bytes, seed)` (the tests pass one that collides).
    pub(crate) fn with_hash(hash: fn(&[u8], u64) -> u64, seed: u64) -> Self {
        IdSet {
            hash,
            seed,
            first: HashMap::default(),
            clashes: Vec::new(),
        }
    }

    /// Room for `ids` more, where the system gives it.
    pub(crate) fn try_reserve(&mut self, ids: usize) {
        let _ = self.first.try_reserve(ids);
    }

    /// Add id `b` of `ids`, unless an id added before has the same bytes: then that one's index,
    /// and `b` is not added. Every id added must stay in `ids` at its index.
    pub(crate) fn insert(&mut self, ids: &IdArena, b: usize) -> Option<usize> {
        let id = ids.get_bytes(b);
        let b = u32::try_from(b).expect("at most 2^32 ids");
        let a = match self.first.entry((self.hash)(id, self.seed)) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(b);
                return None;
            }
            std::collections::hash_map::Entry::Occupied(o) => *o.get() as usize,
        };
        let earlier = std::iter::once(a)
            .chain(self.clashes.iter().map(|&c| c as usize))
            .find(|&e| ids.get_bytes(e) == id);
        if earlier.is_none() {
            self.clashes.push(b);
        }
        earlier
    }
}

/// A hasher for keys that are already uniform (seeded) 64-bit hashes: the key is its own hash.
#[derive(Default)]
pub(crate) struct HashIsKey(u64);

impl std::hash::Hasher for HashIsKey {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, _: &[u8]) {
        unreachable!("only u64 keys are hashed");
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With a hash that collides on purpose (the id's length), ids that share a hash but
    /// differ pass, and a repeat is still found against the earliest document with its id,
    /// whether that is the first with the hash or a later one that clashed with it.
    #[test]
    fn colliding_hashes_neither_hide_a_repeat_nor_make_one_up() {
        let names = |l: DocLoc| format!("f{}:{}", l.file, l.line);
        let run = |ids: &[&str]| {
            let mut u = UniqueIds::with_set(IdSet::with_hash(|b, _| b.len() as u64, 0));
            let mut a = IdArena::default();
            ids.iter().for_each(|i| a.push(i));
            let locs = (1..=ids.len() as u64).map(|line| DocLoc { file: 0, line });
            u.extend(&a, locs, &names).map(|()| u.set.clashes.len())
        };
        assert_eq!(run(&["ab", "cd", "ef", "g"]).unwrap(), 2);
        for (ids, first, second) in [
            (&["ab", "cd", "ab"][..], 1, 3),
            (&["ab", "cd", "ef", "cd"], 2, 4),
            (&["x", "ab", "cd", "ef", "ef", "cd"], 4, 5),
        ] {
            match run(ids).unwrap_err() {
                Error::DuplicateId {
                    first: f,
                    second: s,
                    ..
                } => {
                    assert_eq!(
                        (f, s),
                        (format!("f0:{first}"), format!("f0:{second}")),
                        "{ids:?}"
                    )
                }
                other => panic!("{other}"),
            }
        }
    }

    /// An arena of these ids, and where each was read: one a line of file 0.
    fn ids_of(picks: &[&str]) -> (IdArena, Vec<DocLoc>) {
        let mut a = IdArena::default();
        picks.iter().for_each(|p| a.push(p));
        let locs = (1..=picks.len() as u64)
            .map(|line| DocLoc { file: 0, line })
            .collect();
        (a, locs)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// `id_order` (what `dedup` checks after its first pass) and `UniqueIds` (what
        /// `signatures` checks as the documents arrive) name the same repeat of the same ids,
        /// or pass both: ids drawn from a small alphabet, so that most lists repeat several
        /// ids, in any order.
        #[test]
        fn the_sorted_and_the_streaming_check_name_the_same_repeat(
            picks in proptest::collection::vec(0u8..8, 0..12)
        ) {
            let names = |l: DocLoc| format!("f{}:{}", l.file, l.line);
            let describe = |r: Result<(), Error>| r.map_err(|e| e.to_string());
            let picks: Vec<String> = picks.iter().map(|p| format!("id{p}")).collect();
            let (a, locs) = ids_of(&picks.iter().map(String::as_str).collect::<Vec<_>>());
            let sorted = describe(id_order(&a, &locs, &names).map(|_| ()));
            let mut u = UniqueIds::default();
            let streamed = describe(u.extend(&a, locs.iter().copied(), &names));
            proptest::prop_assert_eq!(&sorted, &streamed);
            // And through the hash-collision path: every id here has the same length, so with
            // the length as hash every repeat is found among the clashes.
            let mut u = UniqueIds::with_set(IdSet::with_hash(|b, _| b.len() as u64, 0));
            let clashing = describe(u.extend(&a, locs.iter().copied(), &names));
            proptest::prop_assert_eq!(&sorted, &clashing);
        }
    }

    /// The case that could tell them apart: "b" repeats before "a" does, and "a" sorts first.
    #[test]
    fn id_order_names_the_repeat_met_first_not_the_id_that_sorts_first() {
        let (a, locs) = ids_of(&["b", "a", "b", "a"]);
        let e = id_order(&a, &locs, &|l: DocLoc| format!("f{}:{}", l.file, l.line))
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"b\": at f0:1 and again at f0:3"), "{e}");
    }
}

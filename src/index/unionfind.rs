//! Union-find whose root is always the smallest element of its set (SPEC §3).
//!
//! Elements are `0 .. n`. Callers number documents in id order (the `dedup` pipeline sorts ids
//! first), so "smallest element" is "smallest id", and clusters, roots and survivors depend on
//! nothing but the set of merged pairs: not on input order, batch size, thread count or engine.

/// Disjoint sets over `0 .. n` with the minimum as root.
#[derive(Debug, Clone)]
pub struct UnionFind {
    parent: Vec<u32>,
}

impl UnionFind {
    /// `n` singletons.
    pub fn new(n: usize) -> Self {
        assert!(
            n <= u32::MAX as usize,
            "union-find is limited to 2^32 elements"
        );
        UnionFind {
            parent: (0..n as u32).collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.parent.len()
    }

    pub fn is_empty(&self) -> bool {
        self.parent.is_empty()
    }

    /// The root (smallest element) of `x`'s set. Halves the path as it goes.
    pub fn find(&mut self, mut x: u32) -> u32 {
        while self.parent[x as usize] != x {
            let p = self.parent[x as usize];
            let gp = self.parent[p as usize];
            self.parent[x as usize] = gp;
            x = gp;
        }
        x
    }

    /// Make `x` a singleton again. Only for a caller that resets every element of the sets
    /// it touched (path halving rewrites their parents, and theirs alone).
    pub fn reset(&mut self, x: u32) {
        self.parent[x as usize] = x;
    }

    /// The root of `x` without compressing (for shared references).
    pub fn find_const(&self, mut x: u32) -> u32 {
        while self.parent[x as usize] != x {
            x = self.parent[x as usize];
        }
        x
    }

    /// Merge the sets of `a` and `b`; the smaller root becomes the root of both. Returns
    /// whether they were apart.
    pub fn union(&mut self, a: u32, b: u32) -> bool {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra == rb {
            return false;
        }
        let (lo, hi) = if ra < rb { (ra, rb) } else { (rb, ra) };
        self.parent[hi as usize] = lo;
        true
    }

    /// Are `a` and `b` in one set?
    pub fn connected(&mut self, a: u32, b: u32) -> bool {
        self.find(a) == self.find(b)
    }

    /// The root of every element, in element order.
    pub fn roots(&mut self) -> Vec<u32> {
        (0..self.parent.len() as u32)
            .map(|x| self.find(x))
            .collect()
    }

    /// Every set, each ascending (so its first element is its root), the sets ordered by root.
    /// Singletons included.
    pub fn groups(&mut self) -> Vec<Vec<u32>> {
        let roots = self.roots();
        let mut index = vec![u32::MAX; roots.len()];
        let mut groups: Vec<Vec<u32>> = Vec::new();
        for (x, &r) in roots.iter().enumerate() {
            if index[r as usize] == u32::MAX {
                index[r as usize] = groups.len() as u32;
                groups.push(Vec::new());
            }
            groups[index[r as usize] as usize].push(x as u32);
        }
        groups
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_minimum() {
        let mut uf = UnionFind::new(6);
        uf.union(5, 3);
        uf.union(3, 4);
        uf.union(4, 1);
        assert_eq!(uf.find(5), 1);
        assert_eq!(uf.groups(), vec![vec![0], vec![1, 3, 4, 5], vec![2]]);
        assert!(!uf.union(1, 5));
    }
}

//! Signing: MinHash signatures and their parameters ([`minhash`]), and the CPU's hot loops
//! that compute them: FNV-1a shingle hashing ([`fnv`]), the permutation min-reduction
//! ([`permute`]), the repeat filter ([`repeats`]) and the document loop over a packed batch
//! ([`docs`]). Each hot loop has its scalar reference beside its SIMD variants, and tests run
//! every variant the machine has against it.

pub mod docs;
pub mod fnv;
pub mod minhash;
pub mod permute;
pub mod repeats;

//! Finding candidates and clusters from signatures: LSH banding ([`lsh`]), union-find whose
//! root is the smallest id ([`unionfind`]), the S-curve of a banding ([`scurve`]), and the exact
//! similarity join that lists a large bucket's candidates ([`simjoin`]), and the LSH index on
//! disk that new documents are checked against ([`store`]).

pub mod lsh;
pub mod scurve;
pub mod simjoin;
pub mod store;
pub mod unionfind;

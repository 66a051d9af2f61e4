//! Finding candidates and clusters from signatures: LSH banding ([`lsh`]), union-find whose
//! root is the smallest id ([`unionfind`]), and the S-curve of a banding ([`scurve`]).

pub mod lsh;
pub mod scurve;
pub mod unionfind;

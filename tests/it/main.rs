//! The integration tests, in one binary (one link of the library and its dependencies instead
//! of one per file). Each module is one suite.

mod common;

mod cli;
mod confirm;
mod conformance;
mod decontam;
mod dedup;
mod fixtures;
mod gpu_host;
mod gpu_startup;
mod greedy;
mod index;
mod kernels;
mod layers;
mod lsh_unionfind;
mod meeting;
mod options;
mod parquet;
mod policies;
mod ports;
mod python;
mod removed;
mod reports;
mod reproducibility;
mod robustness;
mod safety;
mod shaders;
mod sharded;
mod spec_vectors;
mod statistics;
mod tasks;
mod text;
mod text_options;

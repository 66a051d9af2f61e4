//! The front ends' entry points: what the command line and the Python package both call
//! beyond the stages themselves. Above every other module.

mod dedup;

pub use crate::options::ShardedOptions;
pub use dedup::{to_map, DedupOptions, FieldOptions, HashOptions};

/// Every shared option's default, by the name Python spells it with (the command line's flag
/// with `_` for `-`): what `neardup.defaults()` returns. The dedup options, the engine's, then
/// the sharded run's.
pub fn defaults() -> serde_json::Map<String, serde_json::Value> {
    use crate::engine::gpu::Kernels;
    use crate::engine::EngineChoice;
    use crate::options::defaults::THREADS;
    use serde_json::json;
    let mut table = DedupOptions::default().to_map();
    table.extend([
        (
            "engine".to_string(),
            json!(EngineChoice::default().to_string()),
        ),
        ("threads".to_string(), json!(THREADS)),
        (
            "gpu_kernels".to_string(),
            json!(Kernels::default().to_string()),
        ),
        ("gpu_int64".to_string(), json!(false)),
    ]);
    table.extend(to_map(&ShardedOptions::default()));
    table
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stages::dedup::{DedupConfig, Keep};

    #[test]
    fn the_table_is_the_library_defaults() {
        let t = defaults();
        let d = DedupConfig::default();
        assert_eq!(t["k"], d.params.k);
        assert_eq!(t["num_perm"], d.params.num_perm);
        assert_eq!(t["seed"], d.params.seed);
        assert_eq!(t["bands"], d.lsh.bands);
        assert_eq!(t["rows"], d.lsh.rows);
        assert_eq!(t["threshold"], d.threshold);
        assert_eq!(t["confirm"], d.confirm.to_string());
        assert_eq!(t["shingle"], d.params.shingle.to_string());
        assert_eq!(t["normalize"], d.params.normalize.to_string());
        assert_eq!(t["group_missing"], d.group_missing.to_string());
        assert_eq!(t["exact"], d.exact);
        assert_eq!(Keep::parse(t["keep"].as_str().unwrap()).unwrap().0, d.keep);
    }
}

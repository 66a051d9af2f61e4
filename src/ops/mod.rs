//! The front ends' entry points: what the command line and the Python package both call
//! beyond the stages themselves. Above every other module.

/// Every shared option's default, by the name Python spells it with (the command line's flag
/// with `_` for `-`): what `neardup.defaults()` returns.
pub fn defaults() -> serde_json::Map<String, serde_json::Value> {
    use crate::engine::gpu::Kernels;
    use crate::engine::EngineChoice;
    use crate::options::defaults::*;
    use crate::stages::dedup::{Confirm, GroupMissing};
    use crate::text::{Normalize, ShingleUnit};
    use serde_json::json;
    let table = [
        ("k", json!(K)),
        ("num_perm", json!(NUM_PERM)),
        ("seed", json!(SEED)),
        ("shingle", json!(ShingleUnit::default().to_string())),
        ("normalize", json!(Normalize::default().to_string())),
        ("bands", json!(BANDS)),
        ("rows", json!(ROWS)),
        ("threshold", json!(THRESHOLD)),
        ("confirm", json!(Confirm::default().to_string())),
        ("exact", json!(false)),
        ("keep", json!(KEEP)),
        ("group_missing", json!(GroupMissing::default().to_string())),
        ("id_field", json!(ID_FIELD)),
        ("text_field", json!(TEXT_FIELD)),
        ("engine", json!(EngineChoice::default().to_string())),
        ("threads", json!(THREADS)),
        ("gpu_kernels", json!(Kernels::default().to_string())),
        ("gpu_int64", json!(false)),
        ("partitions", json!(PARTITIONS)),
        ("sort_memory", json!(SORT_MEMORY_MIB)),
    ];
    table.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
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

//! A dedup run's options, as both front ends take them.

use crate::error::Error;
use crate::index::lsh::LshParams;
use crate::io::Fields;
use crate::options::defaults;
use crate::sign::minhash::MinHashParams;
use crate::stages::dedup::{ClusterRule, Confirm, DedupConfig, GroupMissing, KeepChoice};
use crate::text::{Normalize, ShingleUnit, TextRule};

/// The options of a dedup run, each with its one default: what the command line's `dedup` and
/// `stage init` flags and Python's `dedup`, `neardup.stages` and `neardup.ray` keyword
/// arguments set, under the same names (Python's; the flags spell `_` as `-`).
/// [`resolve`](DedupOptions::resolve) checks them together and gives what the stages read.
#[derive(Debug, Clone, PartialEq)]
pub struct DedupOptions {
    pub k: usize,
    pub num_perm: usize,
    pub seed: u64,
    pub shingle: ShingleUnit,
    pub normalize: Normalize,
    pub bands: usize,
    pub rows: usize,
    pub threshold: f64,
    pub confirm: Confirm,
    pub exact: bool,
    pub tag_only: bool,
    pub keep: KeepChoice,
    pub group_field: Option<String>,
    pub group_missing: GroupMissing,
    pub id_field: String,
    pub text_field: String,
    pub numeric_ids: bool,
    pub cluster: ClusterRule,
}

impl Default for DedupOptions {
    fn default() -> Self {
        DedupOptions {
            k: defaults::K,
            num_perm: defaults::NUM_PERM,
            seed: defaults::SEED,
            shingle: ShingleUnit::default(),
            normalize: Normalize::default(),
            bands: defaults::BANDS,
            rows: defaults::ROWS,
            threshold: defaults::THRESHOLD,
            confirm: Confirm::default(),
            exact: false,
            tag_only: false,
            keep: defaults::KEEP.parse().expect("the default policy parses"),
            group_field: None,
            group_missing: GroupMissing::default(),
            id_field: defaults::ID_FIELD.into(),
            text_field: defaults::TEXT_FIELD.into(),
            numeric_ids: false,
            cluster: ClusterRule::default(),
        }
    }
}

impl DedupOptions {
    /// The names of the options, as Python spells them (and `neardup.defaults()` lists them).
    pub const NAMES: [&'static str; 18] = [
        "k",
        "num_perm",
        "seed",
        "shingle",
        "normalize",
        "bands",
        "rows",
        "threshold",
        "confirm",
        "exact",
        "tag_only",
        "keep",
        "group_field",
        "group_missing",
        "id_field",
        "text_field",
        "numeric_ids",
        "cluster",
    ];

    /// Each option's value by its name, in [`NAMES`](DedupOptions::NAMES) order; enums and
    /// the policy as their names.
    pub fn to_map(&self) -> serde_json::Map<String, serde_json::Value> {
        use serde_json::json;
        let values = [
            json!(self.k),
            json!(self.num_perm),
            json!(self.seed),
            json!(self.shingle.to_string()),
            json!(self.normalize.to_string()),
            json!(self.bands),
            json!(self.rows),
            json!(self.threshold),
            json!(self.confirm.to_string()),
            json!(self.exact),
            json!(self.tag_only),
            json!(self.keep.to_string()),
            json!(self.group_field),
            json!(self.group_missing.to_string()),
            json!(self.id_field),
            json!(self.text_field),
            json!(self.numeric_ids),
            json!(self.cluster.to_string()),
        ];
        Self::NAMES
            .iter()
            .map(|n| n.to_string())
            .zip(values)
            .collect()
    }

    /// Check the options together: the dedup configuration and the fields records are read
    /// by (with the fields the policies read).
    pub fn resolve(&self) -> Result<(DedupConfig, Fields), Error> {
        let params = MinHashParams::new(self.k, self.num_perm, self.seed)?.with_rule(TextRule {
            shingle: self.shingle,
            normalize: self.normalize,
        });
        let cfg = DedupConfig {
            params,
            lsh: LshParams::new(self.bands, self.rows)?,
            threshold: self.threshold,
            confirm: self.confirm,
            exact: self.exact,
            drop: !self.tag_only,
            keep: self.keep.policy,
            group_missing: self.group_missing,
            cluster: self.cluster,
        };
        cfg.validate()?;
        let mut fields = Fields::new(&self.id_field, &self.text_field, self.numeric_ids)?;
        fields.keep = self.keep.field.clone();
        fields.group = self.group_field.clone();
        Ok((cfg, fields))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stages::dedup::Keep;

    #[test]
    fn the_defaults_resolve_to_the_library_defaults() {
        let (cfg, fields) = DedupOptions::default().resolve().unwrap();
        assert_eq!(cfg, DedupConfig::default());
        assert_eq!(fields, Fields::default());
    }

    #[test]
    fn every_option_reaches_the_configuration_or_the_fields() {
        let o = DedupOptions {
            k: 3,
            num_perm: 64,
            seed: 9,
            shingle: ShingleUnit::Char,
            normalize: Normalize::Nfkc,
            bands: 8,
            rows: 8,
            threshold: 0.5,
            confirm: Confirm::Estimate,
            exact: true,
            tag_only: true,
            keep: "field:score:min".parse().unwrap(),
            group_field: Some("dump".into()),
            group_missing: GroupMissing::Own,
            id_field: "doc".into(),
            text_field: "body".into(),
            numeric_ids: true,
            cluster: ClusterRule::Greedy,
        };
        let (cfg, fields) = o.resolve().unwrap();
        assert_eq!(
            (cfg.params.k, cfg.params.num_perm, cfg.params.seed),
            (3, 64, 9)
        );
        assert_eq!(
            (cfg.params.shingle, cfg.params.normalize),
            (ShingleUnit::Char, Normalize::Nfkc)
        );
        assert_eq!((cfg.lsh.bands, cfg.lsh.rows), (8, 8));
        assert_eq!(cfg.threshold, 0.5);
        assert_eq!(cfg.confirm, Confirm::Estimate);
        assert!(cfg.exact && !cfg.drop);
        assert_eq!(cfg.keep, Keep::FieldMin);
        assert_eq!(cfg.group_missing, GroupMissing::Own);
        assert_eq!(fields.keep.as_deref(), Some("score"));
        assert_eq!(fields.group.as_deref(), Some("dump"));
        assert_eq!((fields.id.as_str(), fields.text.as_str()), ("doc", "body"));
        assert!(fields.numeric_ids);
        assert_eq!(cfg.cluster, ClusterRule::Greedy);
        // Every option is in the map, under its name.
        let m = o.to_map();
        assert_eq!(m.len(), DedupOptions::NAMES.len());
        assert_eq!(m["keep"], "field:score:min");
        assert_eq!(m["group_field"], "dump");
    }

    #[test]
    fn bad_options_are_refused_together() {
        let bad = |f: fn(&mut DedupOptions)| {
            let mut o = DedupOptions::default();
            f(&mut o);
            o.resolve().unwrap_err().to_string()
        };
        assert!(bad(|o| o.k = 0).contains('k'));
        assert!(bad(|o| o.bands = 0).contains("band"));
        assert!(bad(|o| o.threshold = 1.5).contains("threshold"));
        assert!(bad(|o| o.text_field = "id".into()).contains("both \"id\""));
        assert!(bad(|o| o.id_field = String::new()).contains("must not be empty"));
    }

    #[test]
    fn a_policy_prints_as_it_parses() {
        for s in [
            "smallest-id",
            "first",
            "longest",
            "field:a:b:max",
            "field:x:min",
        ] {
            assert_eq!(s.parse::<KeepChoice>().unwrap().to_string(), s);
        }
        let by_value = KeepChoice {
            policy: Keep::FieldMax,
            field: None,
        };
        assert_eq!(by_value.to_string(), "max");
        assert!("field::max".parse::<KeepChoice>().is_err());
    }
}

//! A dedup run's options, as both front ends take them.

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::index::lsh::LshParams;
use crate::io::Fields;
use crate::options::{by_name, defaults};
use crate::sign::minhash::MinHashParams;
use crate::stages::dedup::{ClusterRule, Confirm, DedupConfig, GroupMissing, KeepChoice};
use crate::text::{Normalize, ShingleUnit, TextRule};

/// How texts become signatures: the shingles and the permutations (SPEC §1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HashOptions {
    pub k: usize,
    pub num_perm: usize,
    pub seed: u64,
    #[serde(with = "by_name")]
    pub shingle: ShingleUnit,
    #[serde(with = "by_name")]
    pub normalize: Normalize,
}

impl Default for HashOptions {
    fn default() -> Self {
        HashOptions {
            k: defaults::K,
            num_perm: defaults::NUM_PERM,
            seed: defaults::SEED,
            shingle: ShingleUnit::default(),
            normalize: Normalize::default(),
        }
    }
}

impl HashOptions {
    /// The signature parameters, checked.
    pub fn params(&self) -> Result<MinHashParams, Error> {
        Ok(
            MinHashParams::new(self.k, self.num_perm, self.seed)?.with_rule(TextRule {
                shingle: self.shingle,
                normalize: self.normalize,
            }),
        )
    }
}

/// Which fields of a record hold its id and its text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FieldOptions {
    pub id_field: String,
    pub text_field: String,
    pub numeric_ids: bool,
}

impl Default for FieldOptions {
    fn default() -> Self {
        FieldOptions {
            id_field: defaults::ID_FIELD.into(),
            text_field: defaults::TEXT_FIELD.into(),
            numeric_ids: false,
        }
    }
}

/// The options of a dedup run, each with its one default: what the command line's `dedup` and
/// `stage init` flags and Python's `dedup`, `neardup.stages` and `neardup.ray` keyword
/// arguments set, under the same names (the names their serde form has, flat: Python's; the
/// flags spell `_` as `-`). [`resolve`](DedupOptions::resolve) checks them together and gives
/// what the stages read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DedupOptions {
    #[serde(flatten)]
    pub hash: HashOptions,
    pub bands: usize,
    pub rows: usize,
    pub threshold: f64,
    #[serde(with = "by_name")]
    pub confirm: Confirm,
    pub exact: bool,
    pub tag_only: bool,
    pub keep: KeepChoice,
    pub group_field: Option<String>,
    #[serde(with = "by_name")]
    pub group_missing: GroupMissing,
    #[serde(flatten)]
    pub fields: FieldOptions,
    #[serde(with = "by_name")]
    pub cluster: ClusterRule,
}

impl Default for DedupOptions {
    fn default() -> Self {
        DedupOptions {
            hash: HashOptions::default(),
            bands: defaults::BANDS,
            rows: defaults::ROWS,
            threshold: defaults::THRESHOLD,
            confirm: Confirm::default(),
            exact: false,
            tag_only: false,
            keep: defaults::KEEP.parse().expect("the default policy parses"),
            group_field: None,
            group_missing: GroupMissing::default(),
            fields: FieldOptions::default(),
            cluster: ClusterRule::default(),
        }
    }
}

/// Each option of `T` by its name, in order: its serde form, enums and the policy by name.
pub fn to_map<T: Serialize>(options: &T) -> serde_json::Map<String, serde_json::Value> {
    match serde_json::to_value(options).expect("options are plain values") {
        serde_json::Value::Object(m) => m,
        _ => unreachable!("options are a struct"),
    }
}

impl DedupOptions {
    /// The names of the options, as Python spells them (and `neardup.defaults()` lists them),
    /// in order.
    pub fn names() -> Vec<String> {
        to_map(&DedupOptions::default())
            .into_iter()
            .map(|(k, _)| k)
            .collect()
    }

    /// Each option's value by its name, in [`names`](DedupOptions::names) order; enums and
    /// the policy as their names.
    pub fn to_map(&self) -> serde_json::Map<String, serde_json::Value> {
        to_map(self)
    }

    /// Check the options together: the dedup configuration and the fields records are read
    /// by (with the fields the policies read).
    pub fn resolve(&self) -> Result<(DedupConfig, Fields), Error> {
        let cfg = DedupConfig {
            params: self.hash.params()?,
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
        let f = &self.fields;
        let mut fields = Fields::new(&f.id_field, &f.text_field, f.numeric_ids)?;
        fields.keep = self.keep.field.clone();
        fields.group = self.group_field.clone();
        Ok((cfg, fields))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::ShardedOptions;
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
            hash: HashOptions {
                k: 3,
                num_perm: 64,
                seed: 9,
                shingle: ShingleUnit::Char,
                normalize: Normalize::Nfkc,
            },
            bands: 8,
            rows: 8,
            threshold: 0.5,
            confirm: Confirm::Estimate,
            exact: true,
            tag_only: true,
            keep: "field:score:min".parse().unwrap(),
            group_field: Some("dump".into()),
            group_missing: GroupMissing::Own,
            fields: FieldOptions {
                id_field: "doc".into(),
                text_field: "body".into(),
                numeric_ids: true,
            },
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
        assert_eq!(m.len(), DedupOptions::names().len());
        assert_eq!(m["keep"], "field:score:min");
        assert_eq!(m["group_field"], "dump");
        assert_eq!(
            (&m["shingle"], &m["cluster"]),
            (&"char".into(), &"greedy".into())
        );
        // And its map reads back as the same options.
        let back: DedupOptions = serde_json::from_value(m.into()).unwrap();
        assert_eq!(back, o);
    }

    #[test]
    fn the_names_are_flat_in_the_order_the_front_ends_list_them() {
        assert_eq!(
            DedupOptions::names(),
            [
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
            ]
        );
        assert_eq!(
            to_map(&ShardedOptions::default()),
            serde_json::json!({"partitions": 8, "sort_memory": 256, "task_memory": 1024})
                .as_object()
                .unwrap()
                .clone()
        );
    }

    #[test]
    fn options_read_from_a_map_keep_the_defaults_of_the_ones_missing() {
        let o: DedupOptions =
            serde_json::from_value(serde_json::json!({"k": 3, "confirm": "none", "keep": "max"}))
                .unwrap();
        let mut want = DedupOptions::default();
        want.hash.k = 3;
        want.confirm = Confirm::None;
        want.keep = KeepChoice {
            policy: Keep::FieldMax,
            field: None,
        };
        assert_eq!(o, want);
        let e = |v: serde_json::Value| {
            serde_json::from_value::<DedupOptions>(v)
                .unwrap_err()
                .to_string()
        };
        assert!(e(serde_json::json!({"confirm": "exact"})).contains("confirm \"exact\": jaccard"));
        assert!(e(serde_json::json!({"keep": "oldest"})).contains("not a policy"));
        assert!(e(serde_json::json!({"k": 2.5})).starts_with("invalid type"));
        assert!(e(serde_json::json!({"k": -1})).starts_with("invalid value"));
        assert!(e(serde_json::json!({"exact": 1})).starts_with("invalid type"));
    }

    #[test]
    fn bad_options_are_refused_together() {
        let bad = |f: fn(&mut DedupOptions)| {
            let mut o = DedupOptions::default();
            f(&mut o);
            o.resolve().unwrap_err().to_string()
        };
        assert!(bad(|o| o.hash.k = 0).contains('k'));
        assert!(bad(|o| o.bands = 0).contains("band"));
        assert!(bad(|o| o.threshold = 1.5).contains("threshold"));
        assert!(bad(|o| o.fields.text_field = "id".into()).contains("both \"id\""));
        assert!(bad(|o| o.fields.id_field = String::new()).contains("must not be empty"));
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

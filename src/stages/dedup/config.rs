//! What decides which documents are near duplicates: the parameters and the confirmation.

use crate::error::Error;
use crate::index::lsh::LshParams;
use crate::sign::minhash::MinHashParams;

/// How candidate pairs are confirmed (SPEC §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Confirm {
    /// Exact Jaccard of the shingle sets (full 64-bit FNV-1a values) `>= threshold`.
    #[default]
    Jaccard,
    /// MinHash estimate `>= threshold` (cheaper, looser).
    Estimate,
    /// Every LSH candidate is a duplicate (as FineWeb).
    None,
}

crate::named!(
    Confirm,
    "confirm",
    [
        (
            "jaccard",
            Confirm::Jaccard,
            "Exact Jaccard of the shingle sets (full 64-bit FNV-1a values) `>= threshold`"
        ),
        (
            "estimate",
            Confirm::Estimate,
            "MinHash estimate `>= threshold` (cheaper, looser)"
        ),
        (
            "none",
            Confirm::None,
            "Every LSH candidate is a duplicate (as FineWeb)"
        ),
    ]
);

/// Which document of a cluster survives a dropping run. Ties go to the smallest id, so the choice
/// never depends on input order, threads or engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Keep {
    /// The cluster's root.
    #[default]
    SmallestId,
    /// The earliest in input order.
    First,
    /// The most words.
    Longest,
    /// The largest value of a numeric field ([`Fields::keep`](crate::io::Fields::keep)).
    FieldMax,
    /// The smallest value of that field.
    FieldMin,
}

impl Keep {
    /// A policy as the command line spells it: `smallest-id`, `first`, `longest`,
    /// `field:NAME:max` or `field:NAME:min`; the field's name comes back with a field policy.
    pub fn parse(s: &str) -> Result<(Keep, Option<String>), String> {
        match s {
            "smallest-id" => Ok((Keep::SmallestId, None)),
            "first" => Ok((Keep::First, None)),
            "longest" => Ok((Keep::Longest, None)),
            _ => s
                .strip_prefix("field:")
                .and_then(|r| {
                    let (name, dir) = r.rsplit_once(':')?;
                    let policy = match dir {
                        "max" => Keep::FieldMax,
                        "min" => Keep::FieldMin,
                        _ => return None,
                    };
                    (!name.is_empty()).then(|| (policy, Some(name.to_string())))
                })
                .ok_or_else(|| {
                    format!(
                        "{s:?} is not a policy: smallest-id, first, longest, field:NAME:max or \
                         field:NAME:min"
                    )
                }),
        }
    }
}

/// A survivor policy as the front ends take it: the policy, and the field it reads (for
/// `field:NAME:max|min`; `None` with a policy by value, where the values come with the
/// documents, as in Python's `keep_values`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KeepChoice {
    pub policy: Keep,
    pub field: Option<String>,
}

impl std::str::FromStr for KeepChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (policy, field) = Keep::parse(s)?;
        Ok(KeepChoice { policy, field })
    }
}

/// A policy by its name, as it prints: `max` and `min` are the policies by value.
impl serde::Serialize for KeepChoice {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for KeepChoice {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <String as serde::Deserialize>::deserialize(d)?;
        let by_value = |policy| KeepChoice {
            policy,
            field: None,
        };
        match s.as_str() {
            "max" => Ok(by_value(Keep::FieldMax)),
            "min" => Ok(by_value(Keep::FieldMin)),
            _ => s.parse().map_err(serde::de::Error::custom),
        }
    }
}

impl std::fmt::Display for KeepChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dir = match self.policy {
            Keep::SmallestId => return f.write_str("smallest-id"),
            Keep::First => return f.write_str("first"),
            Keep::Longest => return f.write_str("longest"),
            Keep::FieldMax => "max",
            Keep::FieldMin => "min",
        };
        match &self.field {
            Some(name) => write!(f, "field:{name}:{dir}"),
            None => f.write_str(dir),
        }
    }
}

/// What a document without the group field ([`Fields::group`](crate::io::Fields::group)) is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GroupMissing {
    /// An error naming the document.
    #[default]
    Error,
    /// Such documents form a group of their own, deduplicated among themselves.
    Own,
}

crate::named!(
    GroupMissing,
    "group_missing",
    [
        ("error", GroupMissing::Error, ""),
        ("own", GroupMissing::Own, "")
    ]
);

/// How confirmed pairs become clusters and survivors (SPEC §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClusterRule {
    /// Connected components (union-find, the root the smallest id); each keeps one document.
    #[default]
    Components,
    /// In survivor-policy order, a document survives unless an already surviving document is
    /// its confirmed near duplicate; a dropped one joins the first such survivor.
    Greedy,
}

crate::named!(
    ClusterRule,
    "cluster",
    [
        (
            "components",
            ClusterRule::Components,
            "Connected components of the confirmed pairs, one survivor each (chains join)"
        ),
        (
            "greedy",
            ClusterRule::Greedy,
            "Drop only documents with a surviving confirmed near duplicate, in --keep order"
        ),
    ]
);

impl ClusterRule {
    fn is_default(&self) -> bool {
        *self == ClusterRule::Components
    }
}

/// Everything that decides which documents are near duplicates.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DedupConfig {
    pub params: MinHashParams,
    pub lsh: LshParams,
    pub threshold: f64,
    pub confirm: Confirm,
    /// Run the exact-dedup pre-pass (identical word sequences, keep the smallest id).
    pub exact: bool,
    /// Write only each cluster's survivor (otherwise everyone, tagged).
    pub drop: bool,
    /// Which document of a cluster survives.
    pub keep: Keep,
    /// With a group field: what a document without it is.
    pub group_missing: GroupMissing,
    /// Components or greedy survivors. Left out of the serialized form when it is the default,
    /// so the files of a default run keep their bytes.
    #[serde(default, skip_serializing_if = "ClusterRule::is_default")]
    pub cluster: ClusterRule,
}

impl Default for DedupConfig {
    fn default() -> Self {
        DedupConfig {
            params: MinHashParams::default(),
            lsh: LshParams::default(),
            threshold: crate::options::defaults::THRESHOLD,
            confirm: Confirm::Jaccard,
            exact: false,
            drop: true,
            keep: Keep::SmallestId,
            group_missing: GroupMissing::Error,
            cluster: ClusterRule::Components,
        }
    }
}

impl DedupConfig {
    /// Does a run write [`SURVIVOR_TAG`](super::SURVIVOR_TAG)? In a `--tag-only` run whose keep
    /// policy may choose another document than the root: there the cluster tag alone does not
    /// say which record a dropping run would keep.
    /// Under `greedy` the root is the survivor, so the tag says it already.
    pub fn tags_survivor(&self) -> bool {
        !self.drop && self.records_survivor()
    }

    /// Does a sharded run record each member's survivor beside its cluster tag? Wherever the
    /// root need not be the survivor (a keep policy other than the smallest id, under
    /// `components`), so that a shard's verdicts say which record was kept without reading the
    /// other shards'.
    pub fn records_survivor(&self) -> bool {
        self.keep != Keep::SmallestId && self.cluster == ClusterRule::Components
    }

    pub fn validate(&self) -> Result<(), Error> {
        self.params.validate()?;
        LshParams::new(self.lsh.bands, self.lsh.rows)?;
        self.lsh.check_num_perm(self.params.num_perm)?;
        if !(self.threshold > 0.0 && self.threshold <= 1.0) {
            return Err(Error::Param(format!(
                "threshold {} is outside (0, 1]",
                self.threshold
            )));
        }
        Ok(())
    }
}

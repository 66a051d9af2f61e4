//! The JSON reports of `dedup` and `decontam`, typed: each struct is one object of the file,
//! its fields in the order they are written. `docs/FORMATS.md` describes every key.

use serde::Serialize;

use crate::engine::EngineInfo;
use crate::jsonl::Fields;
use crate::stages::decontam::{DecontamSummary, FileHits, TaskHits};
use crate::stages::dedup::{
    AgainstSummary, Chaining, ClusterExample, ClusterRule, Confirm, DedupConfig, DedupSummary,
    GroupCounts, GroupMissing, Keep, SimilarityBucket,
};
use crate::sys::peak_rss_bytes;
use crate::text::{Normalize, ShingleUnit};
use crate::CONTRACT_VERSION;

use super::per_second;

/// The JSON report of `neardup dedup`.
#[derive(Debug, Serialize)]
pub struct DedupReport<'a> {
    pub command: &'static str,
    pub contract: &'static str,
    pub neardup_version: &'static str,
    pub inputs: &'a [String],
    pub output: &'a str,
    pub parameters: DedupParameters<'a>,
    pub engine: &'a EngineInfo,
    pub counts: DedupCounts<'a>,
    pub stages: DedupStages,
    pub seconds: f64,
    pub documents_per_second: f64,
    pub peak_rss_bytes: Option<u64>,
    pub table_bytes: u64,
    pub similarity_buckets: &'a [SimilarityBucket],
    pub largest_clusters: &'a [ClusterExample],
    /// What chaining did: documents dropped with no surviving near duplicate, the largest
    /// cluster's size and diameter (absent only where a run was not measured for a report).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chaining: Option<&'a Chaining>,
    /// With `--group-field`: each group's counts, in order of first appearance.
    pub groups: &'a [GroupCounts],
    /// With `--against`: the indexes, and what they matched (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub against: Option<&'a AgainstSummary>,
}

/// What decided the run's result.
#[derive(Debug, Serialize)]
pub struct DedupParameters<'a> {
    pub k: usize,
    pub num_perm: usize,
    pub seed: u64,
    /// The text options (SPEC §1.4).
    pub shingle: ShingleUnit,
    pub normalize: Normalize,
    pub bands: usize,
    pub rows: usize,
    pub threshold: f64,
    /// `(1/bands)^(1/rows)`.
    pub lsh_threshold: f64,
    pub confirm: Confirm,
    pub exact: bool,
    pub drop: bool,
    /// Which document of a cluster survives (`--keep`), and the field it reads.
    pub keep: Keep,
    pub keep_field: Option<&'a str>,
    /// `--group-field`, and what a document without it is.
    pub group_field: Option<&'a str>,
    pub group_missing: GroupMissing,
    /// Components or greedy survivors.
    pub cluster: ClusterRule,
    pub id_field: &'a str,
    pub text_field: &'a str,
}

/// What the run found and wrote.
#[derive(Debug, Serialize)]
pub struct DedupCounts<'a> {
    pub documents_read: u64,
    pub documents_written: u64,
    /// Dropped: 0 with `--tag-only`, which keeps everyone.
    pub exact_duplicates_dropped: u64,
    pub near_duplicates_dropped: u64,
    /// Found, whether dropped or tagged.
    pub exact_duplicates: u64,
    pub near_duplicates: u64,
    pub clusters: u64,
    pub documents_in_clusters: u64,
    pub wordless_documents: u64,
    /// Cluster size to the number of clusters of that size.
    pub cluster_sizes: &'a std::collections::BTreeMap<u64, u64>,
    pub lsh_buckets: u64,
    pub pairs_checked: u64,
    pub pairs_confirmed: u64,
    pub pairs_rejected: u64,
    pub pairs_already_joined: u64,
    /// Candidate pairs of two groups, never duplicates (`--group-field`).
    pub pairs_other_group: u64,
    /// Pairs of a bucket that the exact prefix filter proved below the threshold.
    pub pairs_filtered: u64,
    pub shingle_sets_loaded: u64,
    pub words: u64,
    pub shingles: u64,
    pub text_bytes: u64,
}

/// Seconds per stage.
#[derive(Debug, Serialize)]
pub struct DedupStages {
    pub signatures: SignatureStage,
    pub order: Seconds,
    pub lsh: Seconds,
    pub confirm: ConfirmStage,
    pub cluster: Seconds,
    pub write: Seconds,
}

/// Pass 1: reading, parsing, tokenizing and signing.
#[derive(Debug, Serialize)]
pub struct SignatureStage {
    pub seconds: f64,
    pub parse_seconds: f64,
    pub sign_seconds: f64,
    pub shingles_per_second: f64,
}

/// Confirmation, of which loading the shingle sets (a pass over the inputs, unless they were
/// kept from the signing pass).
#[derive(Debug, Serialize)]
pub struct ConfirmStage {
    pub seconds: f64,
    pub load_sets_seconds: f64,
    pub sets_from_signing: bool,
}

/// A stage's seconds.
#[derive(Debug, Serialize)]
pub struct Seconds {
    pub seconds: f64,
}

impl<'a> DedupReport<'a> {
    /// The report of a finished run that took `seconds` in all.
    pub fn new(
        s: &'a DedupSummary,
        cfg: &DedupConfig,
        fields: &'a Fields,
        inputs: &'a [String],
        output: &'a str,
        engine: &'a EngineInfo,
        seconds: f64,
    ) -> Self {
        let (c, scan) = (&s.cluster, &s.scan);
        let dropped = |n: u64| if cfg.drop { n } else { 0 };
        DedupReport {
            command: "dedup",
            contract: CONTRACT_VERSION,
            neardup_version: env!("CARGO_PKG_VERSION"),
            inputs,
            output,
            parameters: DedupParameters {
                k: cfg.params.k,
                num_perm: cfg.params.num_perm,
                seed: cfg.params.seed,
                shingle: cfg.params.shingle,
                normalize: cfg.params.normalize,
                bands: cfg.lsh.bands,
                rows: cfg.lsh.rows,
                threshold: cfg.threshold,
                lsh_threshold: cfg.lsh.threshold(),
                confirm: cfg.confirm,
                exact: cfg.exact,
                drop: cfg.drop,
                keep: cfg.keep,
                keep_field: fields.keep.as_deref(),
                group_field: fields.group.as_deref(),
                group_missing: cfg.group_missing,
                cluster: cfg.cluster,
                id_field: &fields.id,
                text_field: &fields.text,
            },
            engine,
            counts: DedupCounts {
                documents_read: scan.documents,
                documents_written: s.documents_written,
                exact_duplicates_dropped: dropped(c.exact_duplicates),
                near_duplicates_dropped: dropped(c.near_duplicates),
                exact_duplicates: c.exact_duplicates,
                near_duplicates: c.near_duplicates,
                clusters: c.clusters,
                documents_in_clusters: c.documents_in_clusters,
                wordless_documents: c.wordless,
                cluster_sizes: &c.cluster_sizes,
                lsh_buckets: c.buckets,
                pairs_checked: c.pairs_checked,
                pairs_confirmed: c.pairs_confirmed,
                pairs_rejected: c.pairs_rejected,
                pairs_already_joined: c.pairs_already_joined,
                pairs_other_group: c.pairs_other_group,
                pairs_filtered: c.pairs_filtered,
                shingle_sets_loaded: c.sets_loaded,
                words: scan.words,
                shingles: scan.shingles,
                text_bytes: scan.text_bytes,
            },
            stages: DedupStages {
                signatures: SignatureStage {
                    seconds: scan.seconds,
                    parse_seconds: scan.parse_seconds,
                    sign_seconds: scan.sign_seconds,
                    shingles_per_second: per_second(scan.shingles as f64, scan.seconds),
                },
                order: Seconds {
                    seconds: c.order_seconds,
                },
                lsh: Seconds {
                    seconds: c.lsh_seconds,
                },
                confirm: ConfirmStage {
                    seconds: c.confirm_seconds,
                    load_sets_seconds: c.sets_seconds,
                    sets_from_signing: c.sets_from_signing,
                },
                cluster: Seconds {
                    seconds: c.cluster_seconds,
                },
                write: Seconds {
                    seconds: s.write_seconds,
                },
            },
            seconds,
            documents_per_second: per_second(scan.documents as f64, seconds),
            peak_rss_bytes: peak_rss_bytes(),
            table_bytes: s.table_bytes,
            similarity_buckets: &s.similarity_buckets,
            largest_clusters: &s.examples,
            chaining: s.cluster.chaining.as_ref(),
            groups: &s.groups,
            against: s.against.as_ref(),
        }
    }
}

/// The JSON report of `neardup decontam`.
#[derive(Debug, Serialize)]
pub struct DecontamReport<'a> {
    pub command: &'static str,
    pub contract: &'static str,
    pub neardup_version: &'static str,
    pub inputs: &'a [String],
    pub output: &'a str,
    pub parameters: DecontamParameters<'a>,
    pub counts: DecontamCounts,
    /// Per protected file: its texts, n-grams, documents caught and evidence.
    pub protected_files: &'a [FileHits],
    /// With `--task-field`: the same per task of each protected file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protected_tasks: Option<&'a [TaskHits]>,
    pub stages: DecontamStages,
    pub seconds: f64,
    pub documents_per_second: f64,
    pub peak_rss_bytes: Option<u64>,
}

/// What decided the run's result.
#[derive(Debug, Serialize)]
pub struct DecontamParameters<'a> {
    pub n: usize,
    /// Texts of this many words or more, but fewer than `n`, are protected whole (0: off).
    pub protect_short: usize,
    /// Each protected item's string values were joined into one text.
    pub join_fields: bool,
    /// `--min-score` (null: any protected n-gram catches), and whether caught documents were
    /// tagged and kept (`--mode tag`) rather than dropped.
    pub min_score: Option<f64>,
    pub mode: &'static str,
    /// `--task-field` (absent without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_field: Option<&'a str>,
    pub id_field: &'a str,
    pub text_field: &'a str,
}

/// What the run found and wrote.
#[derive(Debug, Serialize)]
pub struct DecontamCounts {
    pub documents_read: u64,
    pub contaminated: u64,
    pub documents_written: u64,
    pub protected_ngrams: u64,
    /// Short texts protected whole beside the n-grams (absent when none is).
    #[serde(skip_serializing_if = "is_zero")]
    pub protected_whole: u64,
}

/// Seconds per stage.
#[derive(Debug, Serialize)]
pub struct DecontamStages {
    pub load_protected: Seconds,
    pub filter: Seconds,
}

impl<'a> DecontamReport<'a> {
    /// The report of a finished run that took `seconds` in all.
    pub fn new(
        s: &'a DecontamSummary,
        fields: &'a Fields,
        inputs: &'a [String],
        output: &'a str,
        seconds: f64,
    ) -> Self {
        DecontamReport {
            command: "decontam",
            contract: CONTRACT_VERSION,
            neardup_version: env!("CARGO_PKG_VERSION"),
            inputs,
            output,
            parameters: DecontamParameters {
                n: s.n,
                protect_short: s.protect_short,
                join_fields: s.join_fields,
                min_score: s.min_score,
                mode: if s.tag { "tag" } else { "drop" },
                task_field: s.task_field.as_deref(),
                id_field: &fields.id,
                text_field: &fields.text,
            },
            counts: DecontamCounts {
                documents_read: s.documents,
                contaminated: s.contaminated,
                documents_written: s.documents_written,
                protected_ngrams: s.protected_ngrams,
                protected_whole: s.protected_whole,
            },
            protected_files: &s.files,
            protected_tasks: s.task_field.as_ref().map(|_| s.tasks.as_slice()),
            stages: DecontamStages {
                load_protected: Seconds {
                    seconds: s.load_seconds,
                },
                filter: Seconds { seconds: s.seconds },
            },
            seconds,
            documents_per_second: per_second(s.documents as f64, seconds),
            peak_rss_bytes: peak_rss_bytes(),
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

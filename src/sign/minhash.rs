//! MinHash signatures of shingle sets and their comparison (SPEC §2), and the validated
//! parameter set that says which signatures are comparable.

use crate::error::Error;
use crate::hash::{perm_params, permute, shingle_hash, PermParams, P};
use crate::text::{Normalize, ShingleUnit, TextRule};

/// The version of the signature contract these signatures follow. It is written into every
/// signature file and report so that signatures made under another contract are never mixed in
/// silently.
pub const CONTRACT_VERSION: &str = "neardup-minhash-v1";

/// The parameters that decide a signature's bits: shingle width `k`, the number of permutations
/// and the seed of their parameters, and the text options (SPEC §1.4: what a shingle is made
/// of, and the normal form). Signatures made with different `MinHashParams` are not
/// comparable. The text options are written only where they are not the default, so files
/// of the default contract are what they always were.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MinHashParams {
    pub k: usize,
    pub num_perm: usize,
    pub seed: u64,
    #[serde(default, skip_serializing_if = "ShingleUnit::is_default")]
    pub shingle: ShingleUnit,
    #[serde(default, skip_serializing_if = "Normalize::is_default")]
    pub normalize: Normalize,
}

impl Default for MinHashParams {
    fn default() -> Self {
        MinHashParams {
            k: crate::options::defaults::K,
            num_perm: crate::options::defaults::NUM_PERM,
            seed: crate::options::defaults::SEED,
            shingle: ShingleUnit::Word,
            normalize: Normalize::None,
        }
    }
}

impl MinHashParams {
    /// Checked constructor: `k` and `num_perm` must be at least 1. Words of the text as given.
    pub fn new(k: usize, num_perm: usize, seed: u64) -> Result<Self, Error> {
        let p = MinHashParams {
            k,
            num_perm,
            seed,
            ..Default::default()
        };
        p.validate()?;
        Ok(p)
    }

    /// These parameters under the text rule `rule`.
    pub fn with_rule(self, rule: TextRule) -> Self {
        MinHashParams {
            shingle: rule.shingle,
            normalize: rule.normalize,
            ..self
        }
    }

    /// How texts become the units of shingles.
    pub fn rule(&self) -> TextRule {
        TextRule {
            shingle: self.shingle,
            normalize: self.normalize,
        }
    }

    /// The text options as `key=value` words after the others (`shingle=char normalize=nfkc`),
    /// empty for the default: for headers and messages.
    pub fn rule_words(&self) -> String {
        let mut s = String::new();
        if !self.shingle.is_default() {
            s.push_str(&format!(" shingle={}", self.shingle.name()));
        }
        if !self.normalize.is_default() {
            s.push_str(&format!(" normalize={}", self.normalize.name()));
        }
        s
    }

    pub fn validate(&self) -> Result<(), Error> {
        if self.k == 0 {
            return Err(Error::Param(
                "k (shingle width in words) must be at least 1".into(),
            ));
        }
        if self.num_perm == 0 {
            return Err(Error::Param("num_perm must be at least 1".into()));
        }
        if self.num_perm > 1 << 20 {
            return Err(Error::Param(format!(
                "num_perm {} is above the supported maximum of {}",
                self.num_perm,
                1 << 20
            )));
        }
        Ok(())
    }

    /// The permutation parameters these settings draw.
    pub fn perms(&self) -> PermParams {
        perm_params(self.num_perm, self.seed)
    }
}

/// The MinHash signature of a set of shingles (any iterator of shingle strings; repeats do not
/// matter): `sig[i] = min over s of h_i(x(s))`, all `P` for an empty set.
pub fn minhash<I, S>(shingles: I, params: &PermParams) -> Vec<u32>
where
    I: IntoIterator<Item = S>,
    S: AsRef<[u8]>,
{
    let mut sig = vec![P; params.len()];
    for s in shingles {
        let x = shingle_hash(s.as_ref());
        for (i, slot) in sig.iter_mut().enumerate() {
            let h = permute(params.a[i], params.b[i], x);
            if h < *slot {
                *slot = h;
            }
        }
    }
    sig
}

/// SPEC `estimate(sa, sb)`: the fraction of positions where the signatures agree. Signatures of
/// different length are not comparable and give an error.
pub fn estimate(sa: &[u32], sb: &[u32]) -> Result<f64, Error> {
    if sa.len() != sb.len() {
        return Err(Error::Incomparable(format!(
            "signatures have {} and {} entries",
            sa.len(),
            sb.len()
        )));
    }
    if sa.is_empty() {
        return Err(Error::Incomparable("signatures are empty".into()));
    }
    Ok(agreement(sa, sb) as f64 / sa.len() as f64)
}

/// Positions where two equal-length signatures agree.
#[inline]
pub fn agreement(sa: &[u32], sb: &[u32]) -> usize {
    sa.iter().zip(sb).filter(|(a, b)| a == b).count()
}

/// A signature bound to the parameters that made it, so comparing two is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    pub params: MinHashParams,
    pub values: Vec<u32>,
}

impl Signature {
    /// The estimate against another signature; an error when they were made with different
    /// `k`, `num_perm` or seed.
    pub fn estimate(&self, other: &Signature) -> Result<f64, Error> {
        if self.params != other.params {
            return Err(Error::Incomparable(format!(
                "signatures made with different parameters: {:?} vs {:?}",
                self.params, other.params
            )));
        }
        estimate(&self.values, &other.values)
    }

    /// Is this the signature of a text with no shingles (all `P`)?
    pub fn is_empty_text(&self) -> bool {
        is_empty_signature(&self.values)
    }
}

/// All entries `P`: the signature of a wordless text, never inserted into LSH.
pub fn is_empty_signature(sig: &[u32]) -> bool {
    sig.iter().all(|&v| v == P)
}

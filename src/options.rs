//! What both front ends share about options: each default, written once, and the names an
//! option's values are spelled by. The command line's clap parsers and the Python package both
//! read them from here, so `--help`, Python's signatures and the library agree.

use crate::error::Error;

/// Bytes from a budget in MiB (the unit every memory option is given in), saturating.
pub fn mib_bytes(mib: u64) -> usize {
    usize::try_from(mib.saturating_mul(1 << 20)).unwrap_or(usize::MAX)
}

/// A memory budget as every memory option is given: in MiB.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct Mib(pub u64);

impl Mib {
    /// The budget in bytes, saturating.
    pub fn bytes(self) -> usize {
        mib_bytes(self.0)
    }
}

impl std::fmt::Display for Mib {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// The knobs of a run through a work directory (`--work-dir`, `neardup stage`, Python's
/// `neardup.stages` and `neardup.ray`): they bound its memory and its parallelism, and never
/// change its output.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct ShardedOptions {
    /// Partitions of the band rows.
    pub partitions: usize,
    /// Id records `rank` sorts at once, in one job.
    pub sort_memory: Mib,
    /// What a task of `rank`, `confirm` or `cluster` holds at most.
    pub task_memory: Mib,
}

impl Default for ShardedOptions {
    fn default() -> Self {
        ShardedOptions {
            partitions: defaults::PARTITIONS,
            sort_memory: Mib(defaults::SORT_MEMORY_MIB),
            task_memory: Mib(defaults::TASK_MEMORY_MIB),
        }
    }
}

/// Serde of a [`Named`] option by its name, as the command line and Python spell it, whatever
/// the type's own serde form (`#[serde(with = "crate::options::by_name")]`).
pub mod by_name {
    use super::Named;
    use serde::Deserialize;

    pub fn serialize<T: Named, S: serde::Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(v.name())
    }

    pub fn deserialize<'de, T: Named, D: serde::Deserializer<'de>>(d: D) -> Result<T, D::Error> {
        T::from_name(&String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// The defaults of the options the command line and the Python package share.
pub mod defaults {
    /// Shingle width (`--k`).
    pub const K: usize = 5;
    /// Permutations, the signature's length (`--num-perm`).
    pub const NUM_PERM: usize = 128;
    /// The permutations' seed (`--seed`).
    pub const SEED: u64 = 0;
    /// LSH bands (`--bands`); `BANDS * ROWS == NUM_PERM`.
    pub const BANDS: usize = 16;
    /// Rows a band (`--rows`).
    pub const ROWS: usize = 8;
    /// The similarity a confirmed pair reaches (`--threshold`).
    pub const THRESHOLD: f64 = 0.8;
    /// The survivor policy (`--keep`), as it is spelled.
    pub const KEEP: &str = "smallest-id";
    /// The field holding a record's id (`--id-field`).
    pub const ID_FIELD: &str = "id";
    /// The field holding a record's text (`--text-field`).
    pub const TEXT_FIELD: &str = "text";
    /// Threads; 0 is one a core (`--threads`).
    pub const THREADS: usize = 0;
    /// Partitions of a work directory's band rows (`--partitions`).
    pub const PARTITIONS: usize = 8;
    /// MiB of id records `rank` sorts at once (`--sort-memory`).
    pub const SORT_MEMORY_MIB: u64 = 256;
    /// MiB a task of a stage split into parallel tasks holds at most (`--task-memory`,
    /// `task_memory=`): it decides how many tasks `rank` runs.
    pub const TASK_MEMORY_MIB: u64 = 1024;
}

/// An option whose values are names: `confirm` is `jaccard`, `estimate` or `none`. Its
/// `FromStr` and `Display` (from [`named!`](crate::named)) spell them so.
pub trait Named: Sized + Copy + PartialEq + 'static {
    /// The option, as messages name it.
    const OPTION: &'static str;
    /// Every value: its name, the value, and a line on what it means (`""`: none).
    const VALUES: &'static [(&'static str, Self, &'static str)];

    /// The value's name.
    fn name(self) -> &'static str {
        Self::VALUES
            .iter()
            .find(|v| v.1 == self)
            .map(|v| v.0)
            .expect("every value is listed")
    }

    /// The value named `s`; an error listing the names otherwise.
    fn from_name(s: &str) -> Result<Self, Error> {
        Self::VALUES
            .iter()
            .find(|v| v.0 == s)
            .map(|v| v.1)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::VALUES.iter().map(|v| v.0).collect();
                let list = match names.split_last() {
                    Some((last, [])) => last.to_string(),
                    Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
                    None => String::new(),
                };
                Error::Param(format!("{} {s:?}: {list}", Self::OPTION))
            })
    }
}

/// `named!(Type, "option", [("name", Type::Value, "what it means"), ...])`: [`Named`] for
/// `Type`, with `FromStr` and `Display` by those names.
#[macro_export]
#[doc(hidden)]
macro_rules! named {
    ($t:ty, $option:literal, [$(($name:literal, $value:expr, $help:literal)),+ $(,)?]) => {
        impl $crate::options::Named for $t {
            const OPTION: &'static str = $option;
            const VALUES: &'static [(&'static str, Self, &'static str)] =
                &[$(($name, $value, $help)),+];
        }

        impl std::str::FromStr for $t {
            type Err = $crate::Error;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                <Self as $crate::options::Named>::from_name(s)
            }
        }

        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str($crate::options::Named::name(*self))
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stages::dedup::{Confirm, GroupMissing};

    #[test]
    fn names_parse_back_and_errors_list_them() {
        for &(name, value, _) in Confirm::VALUES {
            assert_eq!(name.parse::<Confirm>().unwrap(), value);
            assert_eq!(value.to_string(), name);
        }
        let e = "exact".parse::<Confirm>().unwrap_err().to_string();
        assert!(
            e.contains("confirm \"exact\": jaccard, estimate or none"),
            "{e}"
        );
        let e = "x".parse::<GroupMissing>().unwrap_err().to_string();
        assert!(e.contains("error or own"), "{e}");
    }
}

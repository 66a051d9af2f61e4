//! One run at a time for each unit of work (a shard's `sign`, `bands` or `apply`, a partition's
//! `confirm`, the whole `rank` or `cluster`): a scheduler's retry or a double submit of the
//! same unit waits for the first run, then finds its files made and skips (`apply` writes its
//! output again, the same bytes). Different units take different locks and run in parallel; a
//! `confirm` of several partitions takes their locks in ascending order, holding those of the
//! group it is confirming.
//!
//! A lock is a [`FileLock`](crate::io::lock::FileLock) on a file under `lock/`, so a killed run
//! leaves no stale lock behind. Under its lock a unit also removes the temporary files that a
//! killed run of the same unit left (`.NAME.XXXX.partial`): no live run can own them.

use std::path::Path;

use super::WorkDir;
use crate::error::Error;

/// A held unit lock; dropping it releases the unit.
pub type UnitLock = crate::io::lock::FileLock;

impl WorkDir {
    /// Take the lock of the unit `unit` (`sign-00003`, `rank`), waiting while another run
    /// holds it.
    pub fn lock(&self, unit: &str) -> Result<UnitLock, Error> {
        let dir = self.root().join("lock");
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir.display().to_string(), e))?;
        UnitLock::take(&dir.join(unit))
    }

    /// Remove the temporary files a killed run left in the stage directory `stage` for the
    /// files whose names start with `prefix` (every one with an empty prefix). Call it under
    /// the lock of the unit that writes those files.
    pub(crate) fn remove_partials(&self, stage: &str, prefix: &str) -> Result<(), Error> {
        remove_partials_in(&self.root().join(stage), prefix)
    }
}

/// [`WorkDir::remove_partials`] in the directory `dir`.
fn remove_partials_in(dir: &Path, prefix: &str) -> Result<(), Error> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io(&dir.display().to_string(), e)),
    };
    let lead = format!(".{prefix}");
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(&lead) && name.ends_with(".partial") {
            let p = e.path();
            match std::fs::remove_file(&p) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(Error::io(&p.display().to_string(), e))
                }
                _ => {}
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partials_of_the_unit_go_and_everything_else_stays() {
        let d = tempfile::tempdir().unwrap();
        for f in [
            ".00003.parquet.AbC1.partial",
            ".00003.dig.x.partial",
            ".00004.parquet.AbC1.partial",
            "00003.parquet",
            "notes.partial",
        ] {
            std::fs::write(d.path().join(f), b"x").unwrap();
        }
        remove_partials_in(d.path(), "00003.").unwrap();
        let mut left: Vec<String> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                ".00004.parquet.AbC1.partial",
                "00003.parquet",
                "notes.partial"
            ]
        );
        remove_partials_in(&d.path().join("missing"), "").unwrap();
    }
}

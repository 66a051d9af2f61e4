//! Directories as inputs: a Hugging Face snapshot (`data/*/train-*.parquet`) or a datatrove
//! output folder (`00000.jsonl.gz`, ...) named once stands for the data files under it, in
//! one order on every machine.

use std::path::{Path, PathBuf};

use crate::error::Error;

/// The file names a directory contributes without `--glob`: the formats neardup reads.
pub const DATA_SUFFIXES: [&str; 5] = [".parquet", ".jsonl", ".jsonl.gz", ".jsonl.zst", ".ndjson"];

/// `inputs` with each directory replaced by the data files under it: recursively, sorted by
/// their path below the directory (bytewise, `/`-separated), skipping names that begin with a
/// dot (`.cache`, `.gitattributes`). A file is taken when its path below the directory matches
/// `glob` (`*` and `?` within one path segment, `**` any number of segments), or, without
/// one, when its name ends as a data file does ([`DATA_SUFFIXES`]). Files and `-` named
/// directly stay as given. A directory that yields no file is an error naming it.
pub fn expand_inputs(inputs: &[String], glob: Option<&str>) -> Result<Vec<String>, Error> {
    let mut out = Vec::with_capacity(inputs.len());
    for input in inputs {
        let dir = Path::new(input);
        if input == "-" || !dir.is_dir() {
            out.push(input.clone());
            continue;
        }
        let mut found = Vec::new();
        walk(dir, "", &mut found)?;
        found.sort();
        let before = out.len();
        for rel in found {
            let take = match glob {
                Some(g) => glob_match(g, &rel),
                None => DATA_SUFFIXES.iter().any(|s| rel.ends_with(s)),
            };
            if take {
                out.push(dir.join(&rel).display().to_string());
            }
        }
        if out.len() == before {
            let what = match glob {
                Some(g) => format!("no file whose path below it matches --glob {g:?}"),
                None => format!("no data file (names ending {})", DATA_SUFFIXES.join(", ")),
            };
            return Err(Error::Param(format!("input directory {input}: {what}")));
        }
    }
    Ok(out)
}

/// Every file under `dir` (`rel` below the directory named), as `/`-separated paths.
fn walk(dir: &Path, rel: &str, found: &mut Vec<String>) -> Result<(), Error> {
    let io = |e: std::io::Error, p: &Path| Error::Io {
        path: p.display().to_string(),
        source: e,
    };
    let at: PathBuf = if rel.is_empty() {
        dir.to_path_buf()
    } else {
        dir.join(rel)
    };
    for entry in std::fs::read_dir(&at).map_err(|e| io(e, &at))? {
        let entry = entry.map_err(|e| io(e, &at))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            return Err(Error::Param(format!(
                "{}: a file name that is not UTF-8 under an input directory",
                entry.path().display()
            )));
        };
        if name.starts_with('.') {
            continue;
        }
        let sub = if rel.is_empty() {
            name.to_string()
        } else {
            format!("{rel}/{name}")
        };
        // Follows links: a snapshot's files are links into a cache.
        let meta = std::fs::metadata(entry.path()).map_err(|e| io(e, &entry.path()))?;
        if meta.is_dir() {
            walk(dir, &sub, found)?;
        } else {
            found.push(sub);
        }
    }
    Ok(())
}

/// Whether `path` (`/`-separated) matches `pattern`: `**` matches any number of whole
/// segments, `*` any run of characters within a segment, `?` one character; the rest matches
/// itself.
pub fn glob_match(pattern: &str, path: &str) -> bool {
    let pat: Vec<&str> = pattern.split('/').collect();
    let segs: Vec<&str> = path.split('/').collect();
    match_segments(&pat, &segs)
}

fn match_segments(pat: &[&str], segs: &[&str]) -> bool {
    match pat.split_first() {
        None => segs.is_empty(),
        Some((&"**", rest)) => (0..=segs.len()).any(|skip| match_segments(rest, &segs[skip..])),
        Some((p, rest)) => match segs.split_first() {
            Some((s, more)) => match_segment(p, s) && match_segments(rest, more),
            None => false,
        },
    }
}

/// One segment, `*` backtracking to the last star only (linear in practice).
fn match_segment(p: &str, s: &str) -> bool {
    // Characters, not bytes, so that `?` is one character.
    let p: Vec<char> = p.chars().collect();
    let s: Vec<char> = s.chars().collect();
    let (mut pi, mut si) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while si < s.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == s[si]) {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = si;
            pi += 1;
        } else if let Some(st) = star {
            pi = st + 1;
            mark += 1;
            si = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_segments() {
        let yes = [
            ("*.parquet", "a.parquet"),
            (
                "data/*/train-*.parquet",
                "data/en/train-00000-of-00002.parquet",
            ),
            ("**/*.jsonl.gz", "00000.jsonl.gz"),
            ("**/*.jsonl.gz", "a/b/c/00001.jsonl.gz"),
            ("data/**", "data/x/y"),
            ("?.jsonl", "é.jsonl"),
            ("**", "x"),
            ("a*b*c", "abc"),
            ("a*b*c", "a-b-b-c"),
        ];
        for (p, s) in yes {
            assert!(glob_match(p, s), "{p} should match {s}");
        }
        let no = [
            ("*.parquet", "data/a.parquet"),
            ("data/*/train-*.parquet", "data/en/test-0.parquet"),
            ("data/*/train-*.parquet", "data/en/x/train-0.parquet"),
            ("?.jsonl", "ab.jsonl"),
            ("a*b*c", "a-b-b-"),
            ("", "x"),
        ];
        for (p, s) in no {
            assert!(!glob_match(p, s), "{p} should not match {s}");
        }
    }

    #[test]
    fn directories_expand_sorted_and_filtered() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("snap");
        for f in [
            "data/b/train-1.parquet",
            "data/a/train-0.parquet",
            "data/a/test-0.parquet",
            "00010.jsonl.gz",
            "00002.jsonl.gz",
            "README.md",
            ".cache/x.parquet",
            "sub/.hidden.jsonl",
        ] {
            let p = root.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, b"").unwrap();
        }
        let r = root.display().to_string();
        let rel = |v: Vec<String>| -> Vec<String> {
            v.into_iter()
                .map(|p| p.strip_prefix(&format!("{r}/")).unwrap_or(&p).to_string())
                .collect()
        };
        let all = expand_inputs(std::slice::from_ref(&r), None).unwrap();
        assert_eq!(
            rel(all),
            [
                "00002.jsonl.gz",
                "00010.jsonl.gz",
                "data/a/test-0.parquet",
                "data/a/train-0.parquet",
                "data/b/train-1.parquet"
            ]
        );
        let train = expand_inputs(
            &[r.clone(), "-".into(), "f.jsonl".into()],
            Some("data/*/train-*.parquet"),
        )
        .unwrap();
        assert_eq!(
            rel(train),
            [
                "data/a/train-0.parquet",
                "data/b/train-1.parquet",
                "-",
                "f.jsonl"
            ]
        );
        let e = expand_inputs(std::slice::from_ref(&r), Some("*.csv")).unwrap_err();
        assert!(e.to_string().contains("matches --glob \"*.csv\""), "{e}");
        let empty = d.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        let e = expand_inputs(&[empty.display().to_string()], None).unwrap_err();
        assert!(e.to_string().contains("no data file"), "{e}");
    }
}

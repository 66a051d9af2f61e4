//! Which names are the same file: outputs are refused before any work when they name an input
//! or each other.

use std::path::{Path, PathBuf};

use crate::Error;

/// A file a run reads or writes, with the option (or role) that named it, as the user wrote
/// both: `("input", "in.jsonl")`, `("-o", "out.jsonl")`, `("--clusters", "c.jsonl")`.
pub type NamedPath<'a> = (&'a str, &'a str);

/// What makes two names the same file: its device and inode when it exists (so another
/// spelling, a symbolic link or a hard link is the same file), else the place it would be
/// created at (its directory resolved, its name as given); standard output is one place.
#[derive(Debug, PartialEq, Eq)]
enum FileIdentity {
    Stdout,
    #[cfg(unix)]
    Inode(u64, u64),
    Location(PathBuf),
}

fn file_identity(path: &str) -> FileIdentity {
    if path == "-" {
        return FileIdentity::Stdout;
    }
    let p = Path::new(path);
    #[cfg(unix)]
    if let Ok(meta) = std::fs::metadata(p) {
        use std::os::unix::fs::MetadataExt;
        return FileIdentity::Inode(meta.dev(), meta.ino());
    }
    #[cfg(not(unix))]
    if let Ok(c) = std::fs::canonicalize(p) {
        return FileIdentity::Location(c);
    }
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    FileIdentity::Location(match p.file_name() {
        Some(f) => dir.join(f),
        None => dir,
    })
}

/// Refuse, before any work, an output that names one of the inputs or another output of the
/// same run. An output is written to a temporary file and renamed into place, so an output
/// naming an input replaces the input with the run's result, and two outputs naming one file
/// leave only the last one written. Files are compared by device and inode (another spelling,
/// a symbolic link or a hard link is the same file), not by their names. Standard input
/// (`-` among the inputs) is never a file here; standard output may be named once.
pub fn check_output_paths(inputs: &[NamedPath], outputs: &[NamedPath]) -> Result<(), Error> {
    let ins: Vec<(NamedPath, FileIdentity)> = inputs
        .iter()
        .filter(|(_, p)| *p != "-")
        .map(|&np| (np, file_identity(np.1)))
        .collect();
    let mut seen: Vec<(NamedPath, FileIdentity)> = Vec::new();
    for &(opt, path) in outputs {
        let id = file_identity(path);
        if let Some(((role, ip), _)) = ins.iter().find(|(_, i)| *i == id) {
            let what = if *role == "input" {
                "the input".to_string()
            } else {
                format!("the {role} file")
            };
            let same = if ip == &path {
                String::new()
            } else {
                format!(" ({path} and {ip} are the same file)")
            };
            return Err(Error::Output(format!(
                "{opt} {path} would overwrite {what} {ip}{same}: an output is never written \
                 over an input; give {opt} another path"
            )));
        }
        if let Some(((first_opt, first_path), _)) = seen.iter().find(|(_, s)| *s == id) {
            let what = if id == FileIdentity::Stdout {
                "both write to standard output".to_string()
            } else if first_path == &path {
                format!("both name {path}")
            } else {
                format!("{first_path} and {path} are the same file")
            };
            return Err(Error::Output(format!(
                "{first_opt} and {opt} {what}: each output needs a path of its own"
            )));
        }
        seen.push(((opt, path), id));
    }
    Ok(())
}

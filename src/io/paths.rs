//! Which names are the same file: outputs are refused before any work when they name an input
//! (standard input included), each other, or a file in a directory neardup owns (a work
//! directory, an index).

use std::path::{Path, PathBuf};

use crate::error::Error;

/// A file a run reads or writes, with the option (or role) that named it, as the user wrote
/// both: `("input", "in.jsonl")`, `("-o", "out.jsonl")`, `("--clusters", "c.jsonl")`.
pub type NamedPath<'a> = (&'a str, &'a str);

/// A directory whose contents neardup made and reads back, with what it is: `("the work
/// directory", W)`, `("the index", I)`. No output may land in it.
pub type OwnedDir<'a> = (&'a str, &'a Path);

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
    FileIdentity::Location(location(p))
}

/// Whether the paths `a` and `b` name one file ([`FileIdentity`]: one device and inode when
/// it exists, else one place it would be created at).
#[cfg_attr(not(feature = "parquet"), allow(dead_code))] // used by the sharded stages
pub(crate) fn same_file(a: &str, b: &str) -> bool {
    file_identity(a) == file_identity(b)
}

/// The file standard input reads when it is a regular file (`neardup dedup - < in.jsonl`):
/// the one input with no name on the command line.
fn stdin_identity() -> Option<FileIdentity> {
    #[cfg(unix)]
    {
        // SAFETY: fstat writes the status of descriptor 0 into a struct this frame owns.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(0, &mut st) } == 0 && (st.st_mode & libc::S_IFMT) == libc::S_IFREG {
            #[allow(clippy::unnecessary_cast)]
            return Some(FileIdentity::Inode(st.st_dev as u64, st.st_ino as u64));
        }
    }
    None
}

/// Where a file is, or would be created: its path with every link resolved where it exists,
/// else the location of its directory (made the same way, up to one that exists) and its name.
pub(crate) fn location(p: &Path) -> PathBuf {
    if let Ok(c) = std::fs::canonicalize(p) {
        return c;
    }
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => location(d),
        _ => std::fs::canonicalize(".").unwrap_or_else(|_| PathBuf::from(".")),
    };
    match p.file_name() {
        Some(f) => dir.join(f),
        None => dir,
    }
}

/// Refuse, before any work, an output that names one of the inputs or another output of the
/// same run. An output is written to a temporary file and renamed into place, so an output
/// naming an input replaces the input with the run's result, and two outputs naming one file
/// leave only the last one written. Files are compared by device and inode (another spelling,
/// a symbolic link or a hard link is the same file), not by their names. Standard input
/// (`-` among the inputs) counts as the file it reads when that is a regular file; standard
/// output may be named once.
pub fn check_output_paths(inputs: &[NamedPath], outputs: &[NamedPath]) -> Result<(), Error> {
    check_outputs(inputs, &[], outputs)
}

/// [`check_output_paths`], and no output inside any of the directories `owned` (after
/// resolving links), nor a hard link to a file in one: their files are neardup's own, read
/// back by later stages or runs, and an output written there would replace one.
pub fn check_outputs(
    inputs: &[NamedPath],
    owned: &[OwnedDir],
    outputs: &[NamedPath],
) -> Result<(), Error> {
    // A Parquet output a build cannot write is refused before any work, not at its end.
    if !cfg!(feature = "parquet") {
        if let Some(&(opt, p)) = outputs
            .iter()
            .find(|(_, p)| super::format::is_parquet_name(p))
        {
            return Err(Error::Feature {
                feature: "parquet",
                what: format!("{opt} {p}: a Parquet output"),
            });
        }
    }
    let ins: Vec<(NamedPath, FileIdentity)> = inputs
        .iter()
        .filter_map(|&np| {
            if np.1 == "-" {
                stdin_identity().map(|id| ((np.0, "standard input"), id))
            } else {
                Some((np, file_identity(np.1)))
            }
        })
        .collect();
    let mut seen: Vec<(NamedPath, FileIdentity)> = Vec::new();
    // Where each output is written: through its links, dangling ones too, as
    // [`super::Output::create`] writes.
    let resolved: Vec<String> = outputs
        .iter()
        .map(|&(_, p)| {
            if p == "-" {
                p.to_string()
            } else {
                super::output::through_links(Path::new(p))
                    .display()
                    .to_string()
            }
        })
        .collect();
    for (&(opt, path), target) in outputs.iter().zip(&resolved) {
        let id = file_identity(target);
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
        if path != "-" {
            check_not_owned(opt, path, target, &id, owned)?;
        }
        seen.push(((opt, path), id));
    }
    let paths: Vec<&str> = outputs.iter().map(|o| o.1).collect();
    super::output::probe_outputs(&paths)
}

/// Refuse an input (standard input included, when it reads a regular file) that lies in one
/// of the `owned` directories: it would be read while the run changes that directory.
pub fn check_inputs_outside(inputs: &[NamedPath], owned: &[OwnedDir]) -> Result<(), Error> {
    for &(role, path) in inputs {
        let (name, id) = if path == "-" {
            match stdin_identity() {
                Some(id) => ("standard input".to_string(), id),
                None => continue,
            }
        } else {
            (path.to_string(), file_identity(path))
        };
        for &(what, dir) in owned {
            let root = location(dir);
            #[cfg(unix)]
            let held = matches!(id, FileIdentity::Inode(..)) && holds_file(&root, &id);
            #[cfg(not(unix))]
            let held = false;
            if held || (path != "-" && location(Path::new(path)).starts_with(&root)) {
                return Err(Error::Output(format!(
                    "{role} {name} lies in {what} {}, which this run changes: read it from \
                     outside",
                    dir.display()
                )));
            }
        }
    }
    Ok(())
}

/// Refuse the output `path` (of option `opt`, written at `target`, its links followed) when it
/// lies in one of the `owned` directories or is a hard link to a file in one.
fn check_not_owned(
    opt: &str,
    path: &str,
    target: &str,
    id: &FileIdentity,
    owned: &[OwnedDir],
) -> Result<(), Error> {
    let at = location(Path::new(target));
    for &(what, dir) in owned {
        let refuse = || {
            Error::Output(format!(
                "{opt} {path} is in {what} {}, whose files neardup made and reads back: an \
                 output there would replace one of them; give {opt} a path outside it",
                dir.display()
            ))
        };
        let root = location(dir);
        if at.starts_with(&root) {
            return Err(refuse());
        }
        #[cfg(unix)]
        if matches!(id, FileIdentity::Inode(..)) && holds_file(&root, id) {
            return Err(refuse());
        }
    }
    let _ = id;
    Ok(())
}

/// Whether the tree under `dir` holds the file `id` (a hard link to it).
#[cfg(unix)]
fn holds_file(dir: &Path, id: &FileIdentity) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|e| match e.metadata() {
        Ok(m) if m.is_dir() => holds_file(&e.path(), id),
        Ok(m) => *id == FileIdentity::Inode(m.dev(), m.ino()),
        Err(_) => false,
    })
}

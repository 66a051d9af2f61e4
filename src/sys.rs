//! The machine's memory as a run sees it: this process's peak, what is available (the cgroup's
//! limits included), the default `--max-memory`, and what a document costs; and in
//! [`threads`], the CPU time of neardup's own threads.

pub mod threads;

/// Peak resident set size of this process in bytes (Linux `VmHWM`), if known.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Memory this process can count on: the smaller of the kernel's `MemAvailable` and what its
/// cgroup (container) limits leave, if either is known.
pub fn available_memory_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok();
    let avail = meminfo.as_deref().and_then(|m| {
        let line = m.lines().find(|l| l.starts_with("MemAvailable:"))?;
        Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? * 1024)
    });
    let cgroup = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|c| cgroup_headroom(std::path::Path::new("/sys/fs/cgroup"), &c));
    match (avail, cgroup) {
        (Some(a), Some(c)) => Some(a.min(c)),
        (a, c) => a.or(c),
    }
}

/// What the memory limits of this process's cgroup and of every cgroup above it leave (the
/// smallest), given the cgroup mount `root` and the text of `/proc/self/cgroup`; `None` when no
/// limit is set or none can be read.
///
/// Usage counts the page cache the cgroup has touched, and after reading a big input most of
/// that is inactive file pages that the kernel reclaims before it would kill anything: those
/// are left out (as `docker stats` and the kubelet do), else a default `--max-memory` taken from
/// this would refuse runs that fit. cgroup v2 (`memory.max`, `memory.current`, `inactive_file`)
/// and v1 (`memory.limit_in_bytes`, `memory.usage_in_bytes`, `total_inactive_file`) are read.
pub fn cgroup_headroom(root: &std::path::Path, proc_self_cgroup: &str) -> Option<u64> {
    // v2: "0::/path"; v1: "N:memory:/path" (or "N:memory,other:/path").
    let v2 = proc_self_cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| (root.to_path_buf(), p));
    let v1 = proc_self_cgroup.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, ctrl, path) = (parts.next()?, parts.next()?, parts.next()?);
        ctrl.split(',')
            .any(|c| c == "memory")
            .then(|| (root.join("memory"), path))
    });
    // A v1 memory controller wins over the v2 line of a hybrid mount (where v2 has no memory
    // controller); each layout names its own files.
    let (base, path, files) = match (v1, v2) {
        (Some((b, p)), _) if b.is_dir() => (b, p, V1_FILES),
        (_, Some((b, p))) => (b, p, V2_FILES),
        _ => return None,
    };
    // Inside a container the path is often that of the host's view and absent from this mount
    // (whose root is then the container's own cgroup): fall back to the mount root.
    let mut dir = base.join(path.trim_start_matches('/'));
    if !dir.is_dir() {
        dir = base.clone();
    }
    let mut best: Option<u64> = None;
    loop {
        if let Some(h) = headroom_of(&dir, files) {
            best = Some(best.map_or(h, |b| b.min(h)));
        }
        if dir == base || !dir.pop() || !dir.starts_with(&base) {
            break;
        }
    }
    best
}

/// The file names of one cgroup layout: limit, usage, and the `memory.stat` key of the
/// reclaimable page cache.
type CgroupFiles = (&'static str, &'static str, &'static str);
const V2_FILES: CgroupFiles = ("memory.max", "memory.current", "inactive_file");
const V1_FILES: CgroupFiles = (
    "memory.limit_in_bytes",
    "memory.usage_in_bytes",
    "total_inactive_file",
);

/// One cgroup's headroom: limit minus usage without its inactive page cache; `None` when it has
/// no limit ("max" in v2, a near-`i64::MAX` value in v1) or its files cannot be read.
fn headroom_of(dir: &std::path::Path, (limit, usage, cache): CgroupFiles) -> Option<u64> {
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
    let max: u64 = read(limit)?.trim().parse().ok()?;
    if max >= 1 << 60 {
        return None;
    }
    let used: u64 = read(usage)?.trim().parse().ok()?;
    let inactive: u64 = read("memory.stat")
        .and_then(|s| {
            s.lines().find_map(|l| {
                let (k, v) = l.split_once(' ')?;
                (k == cache).then(|| v.trim().parse().ok())?
            })
        })
        .unwrap_or(0);
    Some(max.saturating_sub(used.saturating_sub(inactive)))
}

/// The default `--max-memory` of `dedup`: three quarters of what is available, so the run stops
/// with a clear error well before the kernel's OOM killer would end it.
pub fn default_memory_limit() -> Option<u64> {
    available_memory_bytes().map(|b| b / 4 * 3)
}

/// Bytes `dedup` keeps per document in pass 1, without the id: the signature, word count,
/// location, and the exact key when asked for.
pub fn bytes_per_document(num_perm: usize, exact: bool) -> usize {
    num_perm * 4 + 4 + 16 + std::mem::size_of::<usize>() + if exact { 16 } else { 0 }
}

/// The most worker threads a run may ask for, and the cores it may use (as
/// [`std::thread::available_parallelism`] counts them: affinity and cgroup quotas included):
/// 8 threads per core, at least 16, so a small machine can still oversubscribe a little.
pub fn thread_limit() -> (usize, usize) {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cores.saturating_mul(8).max(16), cores)
}

/// File descriptors kept aside, besides one per partition, when [`partition_limit`] sizes the
/// partitions: the stage's inputs, standard streams, a run's own outputs, libraries.
pub const PARTITION_FD_MARGIN: u64 = 64;

/// What this process's open-file limit allows the partitions of a work directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionLimit {
    /// The most partitions: the soft limit less [`PARTITION_FD_MARGIN`] (at least 1).
    pub max_partitions: usize,
    /// The soft limit on open files (`ulimit -n`).
    pub open_files: u64,
    /// The hard limit, up to which `ulimit -n` raises the soft one (`None`: unlimited).
    pub hard: Option<u64>,
}

/// The most partitions the `bands` stage can write under this process's open-file limit
/// (`RLIMIT_NOFILE`): it holds one output file per partition open at once, besides a few
/// others ([`PARTITION_FD_MARGIN`]). `None` when the limit is unlimited or unknown.
pub fn partition_limit() -> Option<PartitionLimit> {
    let (soft, hard) = open_file_limits()?;
    let soft = soft?;
    Some(PartitionLimit {
        max_partitions: usize::try_from(soft.saturating_sub(PARTITION_FD_MARGIN).max(1))
            .unwrap_or(usize::MAX),
        open_files: soft,
        hard,
    })
}

/// Refuse `n` partitions where this process's open-file limit would stop `bands` midway
/// ([`partition_limit`]), saying how to raise it; `most` caps the count the message suggests.
pub fn check_partition_files(n: usize, most: usize) -> Result<(), crate::error::Error> {
    let Some(limit) = partition_limit() else {
        return Ok(());
    };
    if n <= limit.max_partitions {
        return Ok(());
    }
    let margin = PARTITION_FD_MARGIN;
    let needed = (n as u64).saturating_add(margin);
    let most = limit.max_partitions.min(most);
    let raise = match limit.hard {
        Some(h) if h < needed => format!(
            ", which `ulimit -n` raises only up to the hard limit, {h}: give at most {most} \
             partitions (or have the hard limit raised)"
        ),
        _ => format!(": raise it with `ulimit -n {needed}`, or give at most {most} partitions"),
    };
    Err(crate::error::Error::Param(format!(
        "--partitions {n} needs {needed} files open at once (`bands` writes one per partition, \
         and {margin} are kept for the rest), above this process's limit of {} open files{raise}",
        limit.open_files
    )))
}

/// This process's soft and hard limits on open files (`None` in either: unlimited); `None`
/// where they cannot be read.
#[cfg(unix)]
pub fn open_file_limits() -> Option<(Option<u64>, Option<u64>)> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit`, which `r` is, and reads nothing else.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return None;
    }
    // `rlim_t` is `u64` on Linux and macOS but signed on some BSDs: the cast is for those.
    #[allow(clippy::unnecessary_cast)]
    let finite = |x: libc::rlim_t| (x != libc::RLIM_INFINITY).then_some(x as u64);
    Some((finite(r.rlim_cur), finite(r.rlim_max)))
}

/// This process's soft and hard limits on open files: unknown off Unix.
#[cfg(not(unix))]
pub fn open_file_limits() -> Option<(Option<u64>, Option<u64>)> {
    None
}

#[cfg(test)]
mod tests {
    use super::cgroup_headroom;
    use std::path::Path;

    fn cgroup(dir: &Path, files: &[(&str, &str)]) {
        std::fs::create_dir_all(dir).unwrap();
        for (name, text) in files {
            std::fs::write(dir.join(name), text).unwrap();
        }
    }

    #[test]
    fn v2_leaves_out_inactive_page_cache_and_takes_the_tightest_ancestor() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        // The process's cgroup: 1000 allowed, 900 used of which 600 is inactive page cache.
        cgroup(
            &root.join("a/b"),
            &[
                ("memory.max", "1000\n"),
                ("memory.current", "900\n"),
                ("memory.stat", "anon 300\nfile 600\ninactive_file 600\n"),
            ],
        );
        assert_eq!(cgroup_headroom(root, "0::/a/b\n"), Some(700));
        // A parent with less room bounds it; the root (no files) is skipped.
        cgroup(
            &root.join("a"),
            &[
                ("memory.max", "2000\n"),
                ("memory.current", "1950\n"),
                ("memory.stat", "inactive_file 50\n"),
            ],
        );
        assert_eq!(cgroup_headroom(root, "0::/a/b\n"), Some(100));
    }

    #[test]
    fn no_limit_is_none() {
        let t = tempfile::tempdir().unwrap();
        cgroup(
            t.path(),
            &[("memory.max", "max\n"), ("memory.current", "5\n")],
        );
        assert_eq!(cgroup_headroom(t.path(), "0::/\n"), None);
        assert_eq!(cgroup_headroom(t.path(), ""), None);
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(cgroup_headroom(empty.path(), "0::/x\n"), None);
    }

    #[test]
    fn v1_memory_controller_of_a_hybrid_mount() {
        let t = tempfile::tempdir().unwrap();
        cgroup(
            &t.path().join("memory/job"),
            &[
                ("memory.limit_in_bytes", "4096\n"),
                ("memory.usage_in_bytes", "4000\n"),
                ("memory.stat", "cache 3000\ntotal_inactive_file 3000\n"),
            ],
        );
        // The v1 root's own limit is "unlimited" (a huge number): not a bound.
        cgroup(
            &t.path().join("memory"),
            &[
                ("memory.limit_in_bytes", "9223372036854771712\n"),
                ("memory.usage_in_bytes", "99999999\n"),
            ],
        );
        let proc = "5:cpu,cpuacct:/job\n4:memory:/job\n0::/\n";
        assert_eq!(cgroup_headroom(t.path(), proc), Some(3096));
    }

    #[test]
    fn a_path_missing_from_the_mount_falls_back_to_its_root() {
        // In a container the host's path is listed but the mount shows the container's own
        // cgroup at its root.
        let t = tempfile::tempdir().unwrap();
        cgroup(
            t.path(),
            &[
                ("memory.max", "500\n"),
                ("memory.current", "100\n"),
                ("memory.stat", "inactive_file 0\n"),
            ],
        );
        assert_eq!(cgroup_headroom(t.path(), "0::/docker/abc\n"), Some(400));
    }
}

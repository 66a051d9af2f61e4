//! Compiled pipelines kept on disk between runs, so that a warm start skips the driver's
//! shader compiler (wgpu's application pipeline cache; Vulkan has one).
//!
//! A kept file is named by everything that could make its contents wrong for this run: wgpu's
//! own key for the adapter (vendor and device), the adapter's name, driver and driver version,
//! the backend, a hash of the shaders' sources as composed, the kernels, and neardup's version.
//! Its bytes are sealed with a checksum: a damaged file is ignored and written anew, never
//! handed to the driver, and never fatal. A file the driver does not take (another driver
//! version with the same names) is dropped by wgpu, which then compiles as if cold.

use std::path::{Path, PathBuf};

use super::CacheUse;

/// The first bytes of every kept file.
const MAGIC: &[u8; 16] = b"neardup-pipes-v1";

/// The name of the file that keeps the pipelines of these shaders on this adapter, or `None`
/// where the backend has no application pipeline cache.
pub fn file_name(info: &wgpu::AdapterInfo, shaders: &[&str], what: &str) -> Option<String> {
    let wgpu_key = wgpu::util::pipeline_cache_key(info)?;
    let mut key = format!(
        "{wgpu_key}\0{}\0{}\0{}\0{:?}\0{what}\0{}",
        info.name,
        info.driver,
        info.driver_info,
        info.backend,
        env!("CARGO_PKG_VERSION")
    );
    for s in shaders {
        key.push('\0');
        key.push_str(&format!(
            "{:016x}",
            xxhash_rust::xxh3::xxh3_64(s.as_bytes())
        ));
    }
    Some(format!(
        "pipelines-{:016x}.bin",
        xxhash_rust::xxh3::xxh3_64(key.as_bytes())
    ))
}

/// `data` with the magic and its checksum in front.
pub fn seal(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(MAGIC.len() + 8 + data.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&xxhash_rust::xxh3::xxh3_64(data).to_le_bytes());
    out.extend_from_slice(data);
    out
}

/// The data [`seal`] sealed, or `None` when the bytes are not such a file or were changed.
pub fn unseal(bytes: &[u8]) -> Option<&[u8]> {
    let rest = bytes.strip_prefix(MAGIC.as_slice())?;
    if rest.len() < 8 {
        return None;
    }
    let (sum, data) = rest.split_at(8);
    let sum = u64::from_le_bytes(sum.try_into().expect("eight bytes"));
    (xxhash_rust::xxh3::xxh3_64(data) == sum && !data.is_empty()).then_some(data)
}

/// What a start-up found at `path`: the kept data, and what that means for the cache.
pub fn read(path: &Path) -> (Option<Vec<u8>>, CacheUse) {
    match std::fs::read(path) {
        Ok(bytes) => match unseal(&bytes) {
            Some(data) => (Some(data.to_vec()), CacheUse::Warm),
            None => (None, CacheUse::Damaged),
        },
        Err(_) => (None, CacheUse::Cold),
    }
}

/// Keep `data` at `path`: written beside it under a name of this process's, then renamed over
/// it, so a reader never sees half a file and two runs at once each leave a whole one.
pub fn write(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp: PathBuf = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        std::process::id()
    ));
    let r = std::fs::write(&tmp, seal(data)).and_then(|()| std::fs::rename(&tmp, path));
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_data_comes_back_and_any_change_is_refused() {
        let data: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
        let sealed = seal(&data);
        assert_eq!(unseal(&sealed), Some(data.as_slice()));
        for i in 0..sealed.len() {
            let mut bad = sealed.clone();
            bad[i] ^= 0x10;
            assert_eq!(unseal(&bad), None, "byte {i} flipped");
        }
        for n in 0..sealed.len() {
            assert_eq!(unseal(&sealed[..n]), None, "cut at {n}");
        }
        let mut longer = sealed.clone();
        longer.push(0);
        assert_eq!(unseal(&longer), None);
        assert_eq!(unseal(&seal(&[])), None, "nothing kept is nothing to read");
    }

    #[test]
    fn kept_files_are_read_back_and_damaged_ones_said_so() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("deeper/pipelines-x.bin");
        assert_eq!(read(&path), (None, CacheUse::Cold));
        write(&path, b"compiled").unwrap();
        assert_eq!(read(&path), (Some(b"compiled".to_vec()), CacheUse::Warm));
        std::fs::write(&path, b"neardup-pipes-v1 but not sealed").unwrap();
        assert_eq!(read(&path), (None, CacheUse::Damaged));
        write(&path, b"again").unwrap();
        assert_eq!(read(&path), (Some(b"again".to_vec()), CacheUse::Warm));
        let left: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 1, "no temporary file is left: {left:?}");
    }

    #[test]
    fn the_name_follows_the_shaders_and_the_adapter() {
        let info = wgpu::AdapterInfo {
            name: "llvmpipe".into(),
            vendor: 0x10005,
            device: 0,
            device_type: wgpu::DeviceType::Cpu,
            device_pci_bus_id: String::new(),
            driver: "llvmpipe".into(),
            driver_info: "Mesa 24".into(),
            backend: wgpu::Backend::Vulkan,
            subgroup_min_size: 4,
            subgroup_max_size: 64,
            transient_saves_memory: None,
            limit_bucket: None,
        };
        let a = file_name(&info, &["x", "y"], "split").unwrap();
        assert_eq!(a, file_name(&info, &["x", "y"], "split").unwrap());
        assert_ne!(a, file_name(&info, &["x", "z"], "split").unwrap());
        assert_ne!(a, file_name(&info, &["x", "y"], "fused").unwrap());
        let newer = wgpu::AdapterInfo {
            driver_info: "Mesa 25".into(),
            ..info.clone()
        };
        assert_ne!(a, file_name(&newer, &["x", "y"], "split").unwrap());
        let gl = wgpu::AdapterInfo {
            backend: wgpu::Backend::Gl,
            ..info
        };
        assert_eq!(
            file_name(&gl, &["x"], "split"),
            None,
            "GL has no such cache"
        );
    }
}

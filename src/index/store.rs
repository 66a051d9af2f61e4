//! An LSH index on disk (`neardup index`): the signatures and band tables of documents
//! already kept, so that new documents are checked against them without signing the old corpus
//! again.
//!
//! An index is a directory: `index.json` (the manifest: format, contract version, parameters,
//! segments) and one immutable segment file per `index build`, `index add` or
//! `dedup --update-index`. A segment is memory-mapped, never loaded: a query touches the band
//! keys it searches and the signatures of its candidates only. Every file appears atomically
//! (written beside its name, then renamed), and the manifest names a segment only once the
//! segment is complete, so a run killed midway leaves the index as it was.
//!
//! A segment, little-endian, every section starting on 8 bytes:
//!
//! | bytes | what |
//! |---|---|
//! | 96 | header: magic `NDXSEG01`, version, k, num_perm, bands, rows, the text options (u32 each), seed, documents, banded documents, id bytes (u64 each), the contract version (32 bytes, zero-padded) |
//! | 8 (n + 1) | id offsets: id `i` is bytes `off[i] .. off[i+1]` of the id bytes |
//! | id bytes | the ids, UTF-8, one after another |
//! | 4 n num_perm | the signatures, row `i` document `i` |
//! | per band: 8 m + 4 m | the band's digests ([`band_digest`]) ascending, then the documents in the same order (ties by document); `m` documents have a band (a wordless document has none) |

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::lsh::{band_digest, LshParams};
use crate::error::Error;
use crate::ids::IdArena;
use crate::io::Output;
use crate::sign::minhash::{is_empty_signature, MinHashParams, CONTRACT_VERSION};
use crate::text::{Normalize, ShingleUnit};

/// The manifest's `format`.
pub const INDEX_FORMAT: &str = "neardup-index-1";
/// The manifest's file name in an index directory.
pub const MANIFEST: &str = "index.json";
const MAGIC: &[u8; 8] = b"NDXSEG01";
const SEGMENT_VERSION: u32 = 1;
const HEADER_BYTES: usize = 96;
const CONTRACT_BYTES: usize = 32;

/// What an index holds and how its documents were signed and banded: a query with other
/// parameters is refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexManifest {
    pub format: String,
    pub contract: String,
    /// The parameter tuple (the text options written only when not the default), its fields
    /// in place in the file.
    #[serde(flatten)]
    pub params: MinHashParams,
    pub bands: usize,
    pub rows: usize,
    /// Documents in all segments.
    pub documents: u64,
    pub segments: Vec<SegmentEntry>,
}

/// One segment as the manifest lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentEntry {
    /// The file's name inside the index directory.
    pub file: String,
    pub documents: u64,
    pub bytes: u64,
    /// The checksum ([`crate::io::checksum`]) of the segment's bytes, checked when it is
    /// opened (absent in indexes made before segments carried one).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub checksum: String,
    /// The checksums of the input files `index build` or `index add` made the segment from:
    /// adding the same bytes again is refused, or skipped when every input is already in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<String>,
}

impl IndexManifest {
    /// An empty index for these parameters.
    pub fn new(params: MinHashParams, lsh: LshParams) -> Self {
        IndexManifest {
            format: INDEX_FORMAT.into(),
            contract: CONTRACT_VERSION.into(),
            params,
            bands: lsh.bands,
            rows: lsh.rows,
            documents: 0,
            segments: Vec::new(),
        }
    }

    pub fn params(&self) -> MinHashParams {
        self.params
    }

    pub fn lsh(&self) -> LshParams {
        LshParams {
            bands: self.bands,
            rows: self.rows,
        }
    }

    /// Refuse a query or an addition made with other parameters, naming each that differs.
    pub fn check(&self, dir: &Path, params: MinHashParams, lsh: LshParams) -> Result<(), Error> {
        let mut diff = Vec::new();
        if self.contract != CONTRACT_VERSION {
            diff.push(format!(
                "contract {} (this neardup: {CONTRACT_VERSION})",
                self.contract
            ));
        }
        for (name, have, want) in [
            ("k", self.params.k as u64, params.k as u64),
            (
                "num_perm",
                self.params.num_perm as u64,
                params.num_perm as u64,
            ),
            ("seed", self.params.seed, params.seed),
            ("bands", self.bands as u64, lsh.bands as u64),
            ("rows", self.rows as u64, lsh.rows as u64),
        ] {
            if have != want {
                diff.push(format!("{name} {have} (this run: {want})"));
            }
        }
        if self.params.shingle != params.shingle {
            diff.push(format!(
                "shingle {} (this run: {})",
                self.params.shingle.name(),
                params.shingle.name()
            ));
        }
        if self.params.normalize != params.normalize {
            diff.push(format!(
                "normalize {} (this run: {})",
                self.params.normalize.name(),
                params.normalize.name()
            ));
        }
        if diff.is_empty() {
            Ok(())
        } else {
            Err(index_error(
                dir,
                format!(
                    "the index was built with other parameters: {}; signatures made otherwise \
                     cannot be compared (build the index again, or run with its parameters)",
                    diff.join(", ")
                ),
            ))
        }
    }
}

fn index_error(dir: &Path, msg: String) -> Error {
    Error::Index {
        path: dir.display().to_string(),
        msg,
    }
}

/// Read an index's manifest, checking its format.
pub fn read_manifest(dir: &Path) -> Result<IndexManifest, Error> {
    let path = dir.join(MANIFEST);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(index_error(
                dir,
                format!(
                    "not an index (no {MANIFEST}; `neardup index build` makes one){}",
                    if dir.is_dir() {
                        ""
                    } else {
                        ": no such directory"
                    }
                ),
            ))
        }
        Err(e) => return Err(Error::io(&path.display().to_string(), e)),
    };
    let m: IndexManifest = serde_json::from_str(&text).map_err(|e| {
        index_error(
            dir,
            format!("{MANIFEST} is not an index manifest of this neardup: {e}"),
        )
    })?;
    if m.format != INDEX_FORMAT {
        return Err(index_error(
            dir,
            format!(
                "{MANIFEST} has format {:?}; this neardup reads {INDEX_FORMAT:?}",
                m.format
            ),
        ));
    }
    Ok(m)
}

/// Write `m` as the manifest of `dir`, atomically.
fn write_manifest(dir: &Path, m: &IndexManifest) -> Result<(), Error> {
    let path = dir.join(MANIFEST);
    let mut out = Output::internal(&path.display().to_string())?;
    let mut text = serde_json::to_string_pretty(m).expect("a manifest serializes");
    text.push('\n');
    out.write_all(text.as_bytes())?;
    out.finish()
}

/// Write one segment of the documents `docs` (indices into `ids` and the signature matrix
/// `sigs`, `num_perm` entries a row) to `path`, atomically; returns its size in bytes and its
/// checksum.
pub fn write_segment(
    path: &Path,
    params: MinHashParams,
    lsh: LshParams,
    ids: &IdArena,
    sigs: &[u32],
    docs: &[u32],
) -> Result<(u64, String), Error> {
    let name = path.display().to_string();
    let num_perm = params.num_perm;
    lsh.check_num_perm(num_perm)?;
    if docs.len() > u32::MAX as usize {
        return Err(index_error(
            path,
            format!(
                "{} documents in one segment; a segment holds at most {} (add them in parts)",
                docs.len(),
                u32::MAX
            ),
        ));
    }
    let sig = |i: usize| -> &[u32] {
        let d = docs[i] as usize;
        &sigs[d * num_perm..(d + 1) * num_perm]
    };
    let n = docs.len();
    // Only documents with shingles are banded: a wordless document is nobody's duplicate.
    let banded: Vec<u32> = (0..n as u32)
        .filter(|&i| !is_empty_signature(sig(i as usize)))
        .collect();
    let id_bytes: u64 = docs.iter().map(|&d| ids.get(d as usize).len() as u64).sum();

    let mut out = Output::with_checksum(&name)?;
    let mut written = 0u64;
    let mut put = |out: &mut Output, b: &[u8]| -> Result<(), Error> {
        written += b.len() as u64;
        out.write_all(b)
    };
    let mut header = Vec::with_capacity(HEADER_BYTES);
    header.extend_from_slice(MAGIC);
    for v in [
        SEGMENT_VERSION,
        params.k as u32,
        num_perm as u32,
        lsh.bands as u32,
        lsh.rows as u32,
        rule_code(params),
    ] {
        header.extend_from_slice(&v.to_le_bytes());
    }
    for v in [params.seed, n as u64, banded.len() as u64, id_bytes] {
        header.extend_from_slice(&v.to_le_bytes());
    }
    let mut contract = [0u8; CONTRACT_BYTES];
    contract[..CONTRACT_VERSION.len()].copy_from_slice(CONTRACT_VERSION.as_bytes());
    header.extend_from_slice(&contract);
    debug_assert_eq!(header.len(), HEADER_BYTES);
    put(&mut out, &header)?;

    let mut buf: Vec<u8> = Vec::with_capacity(1 << 20);
    let mut flush = |out: &mut Output, buf: &mut Vec<u8>, force: bool| -> Result<(), Error> {
        if force || buf.len() >= 1 << 20 {
            put(out, buf)?;
            buf.clear();
        }
        Ok(())
    };
    let mut off = 0u64;
    buf.extend_from_slice(&off.to_le_bytes());
    for &d in docs {
        off += ids.get(d as usize).len() as u64;
        buf.extend_from_slice(&off.to_le_bytes());
        flush(&mut out, &mut buf, false)?;
    }
    for &d in docs {
        buf.extend_from_slice(ids.get_bytes(d as usize));
        flush(&mut out, &mut buf, false)?;
    }
    pad8(&mut buf, id_bytes);
    for i in 0..n {
        buf.extend_from_slice(bytemuck::cast_slice(sig(i)));
        flush(&mut out, &mut buf, false)?;
    }
    pad8(&mut buf, (n * num_perm * 4) as u64);
    flush(&mut out, &mut buf, true)?;
    // The band tables, as many bands sorted at a time as there are threads.
    let step = rayon::current_num_threads().max(1);
    for first in (0..lsh.bands).step_by(step) {
        let tables: Vec<Vec<(u64, u32)>> = (first..(first + step).min(lsh.bands))
            .into_par_iter()
            .map(|j| {
                let mut t: Vec<(u64, u32)> = banded
                    .iter()
                    .map(|&i| {
                        let s = sig(i as usize);
                        (band_digest(&s[j * lsh.rows..(j + 1) * lsh.rows], j), i)
                    })
                    .collect();
                t.par_sort_unstable();
                t
            })
            .collect();
        for t in tables {
            for &(key, _) in &t {
                buf.extend_from_slice(&key.to_le_bytes());
                flush(&mut out, &mut buf, false)?;
            }
            for &(_, i) in &t {
                buf.extend_from_slice(&i.to_le_bytes());
                flush(&mut out, &mut buf, false)?;
            }
            pad8(&mut buf, t.len() as u64 * 4);
            flush(&mut out, &mut buf, true)?;
        }
    }
    let (checksum, _) = out.checksum().expect("kept");
    out.finish()?;
    debug_assert_eq!(
        written,
        Layout::new(n as u64, banded.len() as u64, id_bytes, num_perm, lsh.bands).total
    );
    Ok((written, checksum))
}

/// The text options in a segment's header: the shingle unit (0 word, 1 char) in the low byte,
/// the normal form (0 none, 1 NFC, 2 NFKC) in the next; 0 for the default contract.
fn rule_code(p: MinHashParams) -> u32 {
    let shingle = match p.shingle {
        ShingleUnit::Word => 0,
        ShingleUnit::Char => 1,
    };
    let normalize = match p.normalize {
        Normalize::None => 0,
        Normalize::Nfc => 1,
        Normalize::Nfkc => 2,
    };
    shingle | normalize << 8
}

fn pad8(buf: &mut Vec<u8>, len: u64) {
    buf.resize(buf.len() + ((8 - len % 8) % 8) as usize, 0);
}

fn up8(x: u64) -> u64 {
    x.div_ceil(8) * 8
}

/// Where each section of a segment starts.
#[derive(Debug, Clone, Copy)]
struct Layout {
    offsets: u64,
    id_bytes: u64,
    sigs: u64,
    bands: u64,
    /// Bytes of one band's table.
    band: u64,
    total: u64,
}

impl Layout {
    fn new(docs: u64, banded: u64, id_bytes: u64, num_perm: usize, bands: usize) -> Layout {
        let offsets = HEADER_BYTES as u64;
        let ids = offsets + 8 * (docs + 1);
        let sigs = ids + up8(id_bytes);
        let band_tables = sigs + up8(docs * num_perm as u64 * 4);
        let band = banded * 8 + up8(banded * 4);
        Layout {
            offsets,
            id_bytes: ids,
            sigs,
            bands: band_tables,
            band,
            total: band_tables + band * bands as u64,
        }
    }
}

/// A segment, mapped.
pub struct Segment {
    name: String,
    map: memmap2::Mmap,
    docs: usize,
    banded: usize,
    num_perm: usize,
    rows: usize,
    layout: Layout,
}

impl Segment {
    /// Map the segment at `path` and check that it holds what `m` says.
    pub fn open(path: &Path, m: &IndexManifest, entry: &SegmentEntry) -> Result<Segment, Error> {
        let name = path.display().to_string();
        let bad = |msg: String| index_error(path, msg);
        if cfg!(target_endian = "big") {
            return Err(bad(
                "index segments are little-endian; this machine is not".into()
            ));
        }
        let file = std::fs::File::open(path).map_err(|e| Error::io(&name, e))?;
        // SAFETY: segments are immutable once written (a new one is written beside, never
        // over); a segment truncated by another process while mapped would fault, as any
        // mapped input does.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(&name, e))?;
        if map.len() < HEADER_BYTES || &map[..8] != MAGIC {
            return Err(bad("not an index segment (bad magic)".into()));
        }
        let u32_at = |o: usize| u32::from_le_bytes(map[o..o + 4].try_into().unwrap());
        let u64_at = |o: usize| u64::from_le_bytes(map[o..o + 8].try_into().unwrap());
        let version = u32_at(8);
        if version != SEGMENT_VERSION {
            return Err(bad(format!(
                "segment version {version}; this neardup reads {SEGMENT_VERSION}"
            )));
        }
        let (k, num_perm, bands, rows) = (u32_at(12), u32_at(16), u32_at(20), u32_at(24));
        let (seed, docs, banded, id_bytes) = (u64_at(32), u64_at(40), u64_at(48), u64_at(56));
        let contract = &map[64..64 + CONTRACT_BYTES];
        let contract_len = contract
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(CONTRACT_BYTES);
        if &contract[..contract_len] != m.contract.as_bytes()
            || k as usize != m.params.k
            || num_perm as usize != m.params.num_perm
            || bands as usize != m.bands
            || rows as usize != m.rows
            || seed != m.params.seed
            || u32_at(28) != rule_code(m.params())
            || docs != entry.documents
        {
            return Err(bad(format!(
                "the segment does not match {MANIFEST} (other parameters or document count)"
            )));
        }
        if banded > docs || docs > u32::MAX as u64 {
            return Err(bad("damaged header".into()));
        }
        let layout = Layout::new(docs, banded, id_bytes, m.params.num_perm, m.bands);
        if map.len() as u64 != layout.total {
            return Err(bad(format!(
                "{} bytes where the header says {}: truncated or damaged",
                map.len(),
                layout.total
            )));
        }
        let seg = Segment {
            name,
            map,
            docs: docs as usize,
            banded: banded as usize,
            num_perm: m.params.num_perm,
            rows: m.rows,
            layout,
        };
        if seg.id_offsets().last().copied() != Some(id_bytes) {
            return Err(bad("damaged id table".into()));
        }
        // Once a process: `apply` opens the indexes for every shard.
        if !entry.checksum.is_empty() && !crate::io::checksum::is_checked(&file) {
            let mut sum = crate::io::checksum::Checksum::new();
            sum.update(&seg.map);
            if sum.hex() != entry.checksum {
                return Err(bad(format!(
                    "its contents do not match the checksum {MANIFEST} holds for it (edited or \
                     damaged since neardup wrote it)"
                )));
            }
            crate::io::checksum::mark_file_checked(&file);
        }
        Ok(seg)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn len(&self) -> usize {
        self.docs
    }

    pub fn is_empty(&self) -> bool {
        self.docs == 0
    }

    fn id_offsets(&self) -> &[u64] {
        let s = self.layout.offsets as usize;
        bytemuck::cast_slice(&self.map[s..s + 8 * (self.docs + 1)])
    }

    /// Document `i`'s id.
    pub fn id(&self, i: usize) -> Result<&str, Error> {
        let off = self.id_offsets();
        let (a, b) = (off[i], off[i + 1]);
        let base = self.layout.id_bytes;
        if a > b || base + b > self.layout.sigs {
            return Err(index_error(
                Path::new(&self.name),
                "damaged id table".into(),
            ));
        }
        std::str::from_utf8(&self.map[(base + a) as usize..(base + b) as usize])
            .map_err(|_| index_error(Path::new(&self.name), format!("id {i} is not UTF-8")))
    }

    /// Document `i`'s signature.
    pub fn sig(&self, i: usize) -> &[u32] {
        let s = self.layout.sigs as usize + i * self.num_perm * 4;
        bytemuck::cast_slice(&self.map[s..s + self.num_perm * 4])
    }

    /// Band `j`'s digests (ascending) and documents.
    fn band(&self, j: usize) -> (&[u64], &[u32]) {
        let s = (self.layout.bands + j as u64 * self.layout.band) as usize;
        let keys = &self.map[s..s + 8 * self.banded];
        let docs = &self.map[s + 8 * self.banded..s + 12 * self.banded];
        (bytemuck::cast_slice(keys), bytemuck::cast_slice(docs))
    }

    /// The documents of this segment whose band `j` equals that of a query: `queries` are
    /// `(digest, query)` ascending, `query_band(q)` the query's band `j`. Pushes
    /// `(query, document)` to `out`.
    pub fn probe<'q>(
        &self,
        j: usize,
        queries: &[(u64, u32)],
        query_band: impl Fn(u32) -> &'q [u32],
        out: &mut Vec<(u32, u32)>,
    ) -> Result<(), Error> {
        let (keys, docs) = self.band(j);
        let rows = self.rows;
        let mut lo = 0usize;
        for &(key, q) in queries {
            // Queries ascend, so each search starts where the last ended.
            lo += keys[lo..].partition_point(|&k| k < key);
            let mut i = lo;
            while i < keys.len() && keys[i] == key {
                let d = docs[i] as usize;
                if d >= self.docs {
                    return Err(index_error(
                        Path::new(&self.name),
                        "damaged band table".into(),
                    ));
                }
                // Equal digests are checked band against band: a digest collision is never a
                // candidate.
                if &self.sig(d)[j * rows..(j + 1) * rows] == query_band(q) {
                    out.push((q, d as u32));
                }
                i += 1;
            }
        }
        Ok(())
    }
}

/// An index, opened: its manifest and its segments, mapped.
pub struct Index {
    pub dir: PathBuf,
    pub manifest: IndexManifest,
    pub segments: Vec<Segment>,
}

/// A document of an index that a query found: which segment, which document in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IndexDoc {
    pub segment: u32,
    pub doc: u32,
}

impl Index {
    /// Open the index in `dir`.
    pub fn open(dir: &Path) -> Result<Index, Error> {
        Self::open_first(dir, None)
    }

    /// Open the index in `dir` as it was when it had its first `segments` segments (all of
    /// them with `None`): what a run recorded once sees the same documents, whatever was added
    /// since.
    pub fn open_first(dir: &Path, segments: Option<usize>) -> Result<Index, Error> {
        let mut manifest = read_manifest(dir)?;
        if let Some(n) = segments {
            if n > manifest.segments.len() {
                return Err(index_error(
                    dir,
                    format!(
                        "had {n} segments and has {} now: it is not the index this run was                          made for",
                        manifest.segments.len()
                    ),
                ));
            }
            manifest.segments.truncate(n);
            manifest.documents = manifest.segments.iter().map(|e| e.documents).sum();
        }
        let segments = manifest
            .segments
            .iter()
            .map(|e| Segment::open(&dir.join(&e.file), &manifest, e))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Index {
            dir: dir.to_path_buf(),
            manifest,
            segments,
        })
    }

    /// The id of a document a query found.
    pub fn id(&self, d: IndexDoc) -> Result<&str, Error> {
        self.segments[d.segment as usize].id(d.doc as usize)
    }

    pub fn sig(&self, d: IndexDoc) -> &[u32] {
        self.segments[d.segment as usize].sig(d.doc as usize)
    }

    /// Every `(query, indexed document)` pair that shares a band, each once, sorted. Row `q` of
    /// `sigs` (`num_perm` entries a row) is query `q`; only queries with `eligible(q)` are
    /// looked up.
    pub fn candidates(
        &self,
        sigs: &[u32],
        eligible: impl Fn(usize) -> bool + Sync,
    ) -> Result<Vec<(u32, IndexDoc)>, Error> {
        let (num_perm, rows) = (self.manifest.params.num_perm, self.manifest.rows);
        let n = sigs.len().checked_div(num_perm).unwrap_or(0);
        let band_of = |q: u32, j: usize| -> &[u32] {
            let o = q as usize * num_perm + j * rows;
            &sigs[o..o + rows]
        };
        let per_band: Vec<Vec<(u32, IndexDoc)>> = (0..self.manifest.bands)
            .into_par_iter()
            .map(|j| {
                let mut queries: Vec<(u64, u32)> = (0..n)
                    .filter(|&q| eligible(q))
                    .map(|q| (band_digest(band_of(q as u32, j), j), q as u32))
                    .collect();
                queries.sort_unstable();
                let mut found = Vec::new();
                let mut pairs = Vec::new();
                for (s, seg) in self.segments.iter().enumerate() {
                    pairs.clear();
                    seg.probe(j, &queries, |q| band_of(q, j), &mut pairs)?;
                    found.extend(pairs.iter().map(|&(q, d)| {
                        (
                            q,
                            IndexDoc {
                                segment: s as u32,
                                doc: d,
                            },
                        )
                    }));
                }
                Ok(found)
            })
            .collect::<Result<_, Error>>()?;
        let mut all: Vec<(u32, IndexDoc)> = per_band.into_iter().flatten().collect();
        all.par_sort_unstable();
        all.dedup();
        Ok(all)
    }
}

/// Whether every input file of `sources` (name, checksum) is in the index `m` (in `dir`)
/// already: true when all are (a rerun of an addition that landed), false when none is; some
/// but not all is an error naming one, since adding them would hold its documents twice.
pub fn check_sources(
    dir: &Path,
    m: &IndexManifest,
    sources: &[(String, String)],
) -> Result<bool, Error> {
    let segment_of = |sum: &str| {
        m.segments
            .iter()
            .find(|e| e.sources.iter().any(|s| s == sum))
    };
    let found: Vec<(&(String, String), &SegmentEntry)> = sources
        .iter()
        .filter_map(|s| segment_of(&s.1).map(|e| (s, e)))
        .collect();
    if found.is_empty() {
        return Ok(false);
    }
    if found.len() == sources.len() {
        return Ok(true);
    }
    let ((name, _), e) = found[0];
    Err(index_error(
        dir,
        format!(
            "{name} is in the index already ({}, added from the same bytes): adding it again \
             would hold its documents twice; add only the inputs not in it",
            e.file
        ),
    ))
}

/// The refusal of a new index in `dir`, which is one already.
fn already_an_index(dir: &Path) -> Error {
    index_error(
        dir,
        "already an index: `neardup index add` adds documents to it, and \
         `dedup --update-index` adds a run's survivors"
            .into(),
    )
}

/// Refuse `dir` as the place of a new index, changing nothing: one that is an index already,
/// or a directory holding other files. The temporary file of a manifest another run is
/// publishing right now is no other file: that run and this one race for the name in
/// [`create`].
pub fn check_new(dir: &Path) -> Result<(), Error> {
    if dir.join(MANIFEST).exists() {
        return Err(already_an_index(dir));
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io(&dir.display().to_string(), e)),
    };
    let partial = format!(".{MANIFEST}.");
    let foreign = entries.flatten().any(|e| {
        let n = e.file_name();
        let n = n.to_string_lossy();
        !(n.starts_with(&partial) && n.ends_with(".partial"))
    });
    if foreign {
        return Err(match dir.join(MANIFEST).exists() {
            true => already_an_index(dir),
            false => index_error(
                dir,
                "exists and is not empty; an index is made in a new or empty directory".into(),
            ),
        });
    }
    Ok(())
}

/// Make `dir` a new, empty index for these parameters. A directory that is already an index,
/// or holds other files, is refused ([`check_new`]); a missing one is made. Of several runs
/// making one index at once exactly one succeeds: the manifest is published without replacing
/// one, and the others are refused, naming `dir`. Returns whether this call made the directory
/// (so that a failed build removes only what it made).
pub fn create(dir: &Path, params: MinHashParams, lsh: LshParams) -> Result<bool, Error> {
    lsh.check_num_perm(params.num_perm)?;
    let name = dir.display().to_string();
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| Error::io(&name, e))?;
    }
    // `create_dir`, not `create_dir_all`: of several runs, one makes it.
    let made = match std::fs::create_dir(dir) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => false,
        Err(e) => return Err(Error::io(&name, e)),
    };
    if !made {
        check_new(dir)?;
    }
    let m = IndexManifest::new(params, lsh);
    let mut text = serde_json::to_string_pretty(&m).expect("a manifest serializes");
    text.push('\n');
    let path = dir.join(MANIFEST).display().to_string();
    if !crate::io::output::write_internal_new(&path, text.as_bytes())? {
        // Another run published its manifest first: that run builds this index.
        return Err(already_an_index(dir));
    }
    Ok(made)
}

/// Add the documents `docs` (indices into `ids` and `sigs`) to the index in `dir` as one new
/// segment, made from the input files `sources` (name, checksum); `None` adds nothing when
/// `docs` is empty, or when every source is in the index already ([`check_sources`]). Writers
/// take the index's lock, so two additions at once both land; queries read the segments the
/// manifest named when they opened it.
pub fn add_segment(
    dir: &Path,
    params: MinHashParams,
    lsh: LshParams,
    ids: &IdArena,
    sigs: &[u32],
    docs: &[u32],
    sources: &[(String, String)],
) -> Result<Option<SegmentEntry>, Error> {
    if docs.is_empty() {
        return Ok(None);
    }
    // The index's writer lock, held while the segment is added.
    let _lock = crate::io::lock::FileLock::take(&dir.join(".lock"))?;
    let mut m = read_manifest(dir)?;
    m.check(dir, params, lsh)?;
    if check_sources(dir, &m, sources)? {
        return Ok(None);
    }
    // The next number past every segment listed or on disk (a segment written by a run that
    // died before its manifest is left alone, never overwritten).
    let number = |name: &str| -> Option<u64> {
        name.strip_prefix("seg-")?
            .strip_suffix(".ndx")?
            .parse()
            .ok()
    };
    let mut next = m.segments.iter().filter_map(|e| number(&e.file)).max();
    for e in std::fs::read_dir(dir)
        .map_err(|e| Error::io(&dir.display().to_string(), e))?
        .flatten()
    {
        if let Some(n) = e.file_name().to_str().and_then(number) {
            next = next.max(Some(n));
        }
    }
    let file = format!("seg-{:06}.ndx", next.map_or(1, |n| n + 1));
    let (bytes, checksum) = write_segment(&dir.join(&file), params, lsh, ids, sigs, docs)?;
    let entry = SegmentEntry {
        file,
        documents: docs.len() as u64,
        bytes,
        checksum,
        sources: sources.iter().map(|(_, sum)| sum.clone()).collect(),
    };
    m.documents += entry.documents;
    m.segments.push(entry.clone());
    write_manifest(dir, &m)?;
    Ok(Some(entry))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The manifest's bytes, the parameter tuple flattened in place; and read back.
    #[test]
    fn the_manifest_json_is_fixed() {
        let mut m = IndexManifest::new(MinHashParams::default(), LshParams::default());
        let text = serde_json::to_string(&m).unwrap();
        assert_eq!(
            text,
            format!(
                r#"{{"format":"{INDEX_FORMAT}","contract":"neardup-minhash-v1","k":5,"num_perm":128,"seed":0,"bands":16,"rows":8,"documents":0,"segments":[]}}"#
            )
        );
        assert_eq!(serde_json::from_str::<IndexManifest>(&text).unwrap(), m);
        m.params.normalize = Normalize::Nfc;
        let text = serde_json::to_string(&m).unwrap();
        assert!(
            text.contains(r#""seed":0,"normalize":"nfc","bands":16"#),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<IndexManifest>(&text).unwrap(), m);
    }

    fn corpus(n: usize, num_perm: usize) -> (IdArena, Vec<u32>) {
        let mut ids = IdArena::default();
        let mut sigs = Vec::new();
        for d in 0..n {
            ids.push(&format!("doc-{d}"));
            for p in 0..num_perm {
                // Documents d and d ^ 1 share their first band; document 5 has no shingles.
                let v = if d == 5 {
                    crate::hash::P
                } else if p < 2 {
                    (d / 2) as u32
                } else {
                    (d * 1000 + p) as u32
                };
                sigs.push(v);
            }
        }
        (ids, sigs)
    }

    /// A segment reads back as written (every size of its sections, ids of every length), and
    /// a probe finds exactly the documents sharing a band.
    #[test]
    fn a_segment_reads_back_and_probes() {
        let params = MinHashParams::new(5, 4, 0).unwrap();
        let lsh = LshParams::new(2, 2).unwrap();
        for n in [0usize, 1, 2, 7, 8, 9] {
            let dir = tempfile::tempdir().unwrap();
            let (ids, sigs) = corpus(n, 4);
            let docs: Vec<u32> = (0..n as u32).collect();
            create(dir.path(), params, lsh).unwrap();
            let added = add_segment(dir.path(), params, lsh, &ids, &sigs, &docs, &[]).unwrap();
            assert_eq!(added.is_some(), n > 0);
            let ix = Index::open(dir.path()).unwrap();
            assert_eq!(ix.manifest.documents, n as u64);
            for d in 0..n {
                let doc = IndexDoc {
                    segment: 0,
                    doc: d as u32,
                };
                assert_eq!(ix.id(doc).unwrap(), ids.get(d));
                assert_eq!(ix.sig(doc), &sigs[d * 4..d * 4 + 4]);
            }
            // Each document queried against the index finds itself and its band twin; the
            // wordless one is not banded.
            let found = ix.candidates(&sigs, |_| true).unwrap();
            let mut want = Vec::new();
            for q in 0..n as u32 {
                for d in 0..n as u32 {
                    if q != 5 && d != 5 && q / 2 == d / 2 {
                        want.push((q, IndexDoc { segment: 0, doc: d }));
                    }
                }
            }
            assert_eq!(found, want, "n = {n}");
        }
    }

    /// A manifest of other parameters, a damaged or truncated segment, a missing index and a
    /// non-empty directory are refused, each with its reason.
    #[test]
    fn other_parameters_and_damage_are_refused() {
        let params = MinHashParams::new(5, 4, 0).unwrap();
        let lsh = LshParams::new(2, 2).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (ids, sigs) = corpus(4, 4);
        create(dir.path(), params, lsh).unwrap();
        add_segment(dir.path(), params, lsh, &ids, &sigs, &[0, 1, 2, 3], &[]).unwrap();
        let m = read_manifest(dir.path()).unwrap();
        let other = MinHashParams::new(5, 4, 1).unwrap();
        let e = m.check(dir.path(), other, lsh).unwrap_err().to_string();
        assert!(e.contains("seed 0 (this run: 1)"), "{e}");
        let e = create(dir.path(), params, lsh).unwrap_err().to_string();
        assert!(e.contains("already an index"), "{e}");
        let seg = dir.path().join(&m.segments[0].file);
        let bytes = std::fs::read(&seg).unwrap();
        std::fs::write(&seg, &bytes[..bytes.len() - 4]).unwrap();
        let e = Index::open(dir.path()).err().unwrap().to_string();
        assert!(e.contains("truncated or damaged"), "{e}");
        std::fs::write(&seg, b"not a segment at all").unwrap();
        let e = Index::open(dir.path()).err().unwrap().to_string();
        assert!(e.contains("bad magic"), "{e}");
        let e = Index::open(&dir.path().join("nope"))
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("not an index") && e.contains("no such directory"),
            "{e}"
        );
        let full = tempfile::tempdir().unwrap();
        std::fs::write(full.path().join("x"), b"x").unwrap();
        let e = create(full.path(), params, lsh).unwrap_err().to_string();
        assert!(e.contains("not empty"), "{e}");
    }

    /// Segment numbers go past every segment listed or left on disk.
    #[test]
    fn a_new_segment_never_overwrites_one_on_disk() {
        let params = MinHashParams::new(5, 4, 0).unwrap();
        let lsh = LshParams::new(2, 2).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (ids, sigs) = corpus(4, 4);
        create(dir.path(), params, lsh).unwrap();
        std::fs::write(dir.path().join("seg-000007.ndx"), b"left by a killed run").unwrap();
        let e = add_segment(dir.path(), params, lsh, &ids, &sigs, &[0, 1], &[])
            .unwrap()
            .unwrap();
        assert_eq!(e.file, "seg-000008.ndx");
        let e = add_segment(dir.path(), params, lsh, &ids, &sigs, &[2, 3], &[])
            .unwrap()
            .unwrap();
        assert_eq!(e.file, "seg-000009.ndx");
        let ix = Index::open(dir.path()).unwrap();
        assert_eq!(ix.segments.len(), 2);
        assert_eq!(ix.id(IndexDoc { segment: 1, doc: 1 }).unwrap(), "doc-3");
    }
}

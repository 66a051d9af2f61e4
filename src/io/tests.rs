use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use super::chunk::*;
use super::input::*;
use super::output::*;
use super::pool::*;
use proptest::prelude::*;

/// A byte source that answers each read with at most the next of `sizes` bytes (cycling),
/// the way pipes and decoders answer short; a size of 0 answers `Interrupted`.
struct Trickle {
    data: Vec<u8>,
    at: usize,
    sizes: Vec<usize>,
    turn: usize,
}

impl Read for Trickle {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let step = self.sizes[self.turn % self.sizes.len()];
        self.turn += 1;
        if step == 0 {
            return Err(io::ErrorKind::Interrupted.into());
        }
        let n = step.min(buf.len()).min(self.data.len() - self.at);
        buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// The oracle: lines split on `\n` (a last piece counts when it is not empty), one `\r`
/// cut from the end, blank ones skipped, numbered from 1.
fn naive_lines(input: &[u8]) -> Vec<(Vec<u8>, u64)> {
    let mut pieces: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
    if pieces.last().is_some_and(|p| p.is_empty()) {
        pieces.pop();
    }
    pieces
        .into_iter()
        .enumerate()
        .map(|(i, l)| (l.strip_suffix(b"\r").unwrap_or(l).to_vec(), i as u64 + 1))
        .filter(|(l, _)| !l.iter().all(|b| b.is_ascii_whitespace()))
        .collect()
}

/// Every chunk of `input` read with `target`-byte chunks from a source answering `sizes`
/// bytes a read: the chunks' lines in order, after checking that the chunks are the input
/// cut at line ends.
fn chunked_lines(input: &[u8], target: usize, sizes: Vec<usize>) -> Vec<(Vec<u8>, u64)> {
    let src = Trickle {
        data: input.to_vec(),
        at: 0,
        sizes,
        turn: 0,
    };
    let mut r = LineReader::from_read("t", src).expect("plain input");
    drain_checked(&mut r, input, target)
}

/// Every chunk of `r` (read with `target`-byte chunks): their lines in order, after checking
/// that no chunk is empty, that each ends at a line end (or the end), that the progress
/// counter of a mapped reader is where the chunks end, and that the chunks together are
/// `input`, whole and in order.
fn drain_checked(r: &mut LineReader, input: &[u8], target: usize) -> Vec<(Vec<u8>, u64)> {
    let mapped = r.map.is_some();
    let mut got = Vec::new();
    let mut joined = Vec::new();
    while let Some(c) = r.next_chunk(target).expect("reads") {
        assert!(!c.data.is_empty(), "an empty chunk");
        assert_eq!(matches!(c.data, ChunkBytes::Mapped { .. }), mapped);
        joined.extend_from_slice(&c.data);
        assert!(c.data.ends_with(b"\n") || joined.len() == input.len());
        if mapped {
            assert_eq!(r.raw_bytes_read(), joined.len() as u64);
        }
        for i in 0..c.len() {
            got.push((c.line(i).to_vec(), c.line_no(i)));
        }
    }
    assert_eq!(
        joined, input,
        "the chunks are the input, whole and in order"
    );
    got
}

/// [`chunked_lines`] for a plain file mapped into memory (the default way plain files are
/// read): the chunks' lines in order, after checking that the chunks are ranges of the map
/// that together are the input, cut at line ends.
fn mapped_lines(input: &[u8], target: usize) -> Vec<(Vec<u8>, u64)> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("in.jsonl");
    std::fs::write(&path, input).expect("writes");
    let inputs = Inputs::new(&[InputSpec::Path(path)], false).expect("exists");
    let mut r = inputs.open(0).expect("opens");
    // An empty file cannot be mapped; it is read.
    assert_eq!(r.map.is_some(), !input.is_empty(), "mapped unless empty");
    drain_checked(&mut r, input, target)
}

/// The lines of `input` that `keep` picks (cycled over the non-blank lines), found by a
/// [`LineCursor`] and read back by [`Inputs::read_spans`], each span running to the next
/// picked line's start (or the end), so that it holds other lines too.
fn spans_lines(input: &[u8], keep: &[bool]) -> Vec<(Vec<u8>, u64)> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("in.jsonl");
    std::fs::write(&path, input).expect("writes");
    let inputs = Inputs::new(&[InputSpec::Path(path)], false).expect("exists");
    let Some(mut cursor) = inputs.line_cursor(0).expect("opens") else {
        // An empty file cannot be mapped.
        assert!(input.is_empty());
        return Vec::new();
    };
    let want: Vec<u64> = naive_lines(input)
        .iter()
        .zip(keep.iter().cycle())
        .filter(|(_, &k)| k)
        .map(|((_, n), _)| *n)
        .collect();
    let starts: Vec<u64> = want.iter().map(|&l| cursor.offset_of(l).unwrap()).collect();
    let spans: Vec<(u64, u64, u64)> = (0..want.len())
        .map(|i| {
            let end = starts.get(i + 1).copied().unwrap_or(input.len() as u64);
            (starts[i], end, want[i])
        })
        .collect();
    let c = inputs.read_spans(0, &spans).expect("reads");
    (0..c.len())
        .map(|l| (c.line(l).to_vec(), c.line_no(l)))
        .collect()
}

/// A line a file does not have (it was changed since its lines were numbered) is an error,
/// not a wrong offset.
#[test]
fn a_line_the_file_does_not_have_is_an_error() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("in.jsonl");
    std::fs::write(&path, b"a\n\nb\n").expect("writes");
    let inputs = Inputs::new(&[InputSpec::Path(path)], false).expect("exists");
    let mut cursor = inputs.line_cursor(0).unwrap().expect("a plain file");
    assert_eq!(cursor.offset_of(3).unwrap(), 3);
    let e = cursor.offset_of(4).unwrap_err().to_string();
    assert!(e.contains("in.jsonl") && e.contains("changed"), "{e}");
}

/// Lines of a few shapes: empty, blank, CRLF, short, and longer than most chunk targets.
fn input_strategy() -> impl Strategy<Value = Vec<u8>> {
    let line = prop_oneof![
        Just(Vec::new()),
        Just(b" \t ".to_vec()),
        Just(b"\r".to_vec()),
        "[a-z {}\r]{1,12}".prop_map(String::into_bytes),
        (1usize..3000).prop_map(|n| vec![b'x'; n]),
    ];
    (prop::collection::vec(line, 0..40), any::<bool>()).prop_map(|(lines, last_nl)| {
        let mut v = lines.join(&b'\n');
        if last_nl && !v.is_empty() {
            v.push(b'\n');
        }
        v
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Reading in chunks, whatever the chunk size and however short the reads, gives the
    /// naive split's lines and line numbers.
    #[test]
    fn chunks_hold_every_line_once_in_order(
        input in input_strategy(),
        target in prop_oneof![1usize..64, 64usize..5000, Just(READ_BLOCK + 1)],
        sizes in prop::collection::vec(prop_oneof![1usize..17, 17usize..5000], 1..5)
            .prop_map(|mut s| { s.push(0); s }),
    ) {
        prop_assert_eq!(chunked_lines(&input, target, sizes), naive_lines(&input));
    }

    /// Any of the lines, found where they start and read alone, are the naive split's.
    #[test]
    fn lines_found_by_their_numbers_read_back_alone(
        input in input_strategy(),
        keep in prop::collection::vec(any::<bool>(), 1..7),
    ) {
        let want: Vec<(Vec<u8>, u64)> = naive_lines(&input)
            .into_iter()
            .zip(keep.iter().cycle())
            .filter(|(_, &k)| k)
            .map(|(l, _)| l)
            .collect();
        prop_assert_eq!(spans_lines(&input, &keep), want);
    }

    /// And so does a mapped file, whatever the chunk size.
    #[test]
    fn mapped_chunks_hold_every_line_once_in_order(
        input in input_strategy(),
        target in prop_oneof![1usize..64, 64usize..5000, Just(READ_BLOCK + 1)],
    ) {
        prop_assert_eq!(mapped_lines(&input, target), naive_lines(&input));
    }
}

/// Resident kilobytes of the mapping that starts at `addr`, from `/proc/self/smaps`.
#[cfg(target_os = "linux")]
fn mapping_rss_kb(addr: usize) -> u64 {
    let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
    let head = format!("{addr:x}-");
    let mut lines = smaps.lines().skip_while(|l| !l.starts_with(&head));
    assert!(lines.next().is_some(), "no mapping at {addr:#x}");
    let rss = lines.find(|l| l.starts_with("Rss:")).expect("an Rss line");
    rss.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[cfg(target_os = "linux")]
#[test]
fn a_mapped_chunk_unmaps_its_pages_when_dropped() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = lines_file(dir.path(), "big.jsonl", 80_000);
    let inputs = Inputs::new(&[InputSpec::Path(path)], false).expect("exists");
    let mut r = inputs.open(0).expect("opens");
    let addr = r.map.as_ref().expect("mapped").0.as_ptr() as usize;
    let mut chunks = Vec::new();
    while let Some(c) = r.next_chunk(256 << 10).expect("reads") {
        chunks.push(c);
    }
    assert_eq!(chunks.len(), 31);
    // Splitting the lines touched every page.
    let held = mapping_rss_kb(addr);
    assert!(
        held >= 7_000,
        "{held} kB resident while the chunks are held"
    );
    drop(chunks);
    // Left: at most the page each pair of neighbouring chunks shares, and the last one.
    let left = mapping_rss_kb(addr);
    let page_kb = (page_size() / 1024) as u64;
    assert!(
        left <= 32 * page_kb,
        "{left} kB still resident after the chunks went"
    );
    // The map goes with the reader.
    drop(r);
    assert!(!std::fs::read_to_string("/proc/self/smaps")
        .unwrap()
        .contains(&format!("{addr:x}-")));
}

/// A file `name` in `dir` of `n` lines of 100 bytes (newline included).
#[cfg(target_os = "linux")]
fn lines_file(dir: &Path, name: &str, n: usize) -> PathBuf {
    let path = dir.join(name);
    let line = format!("{}\n", "x".repeat(99));
    std::fs::write(&path, line.repeat(n)).expect("writes");
    path
}

/// Cut the file at `path` to `len` bytes, as another process might while it is being read.
#[cfg(target_os = "linux")]
fn truncate(path: &Path, len: u64) {
    File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_len(len))
        .expect("truncates");
}

/// A mapped file that shrinks under the reader is an error naming it, not a SIGBUS.
#[cfg(target_os = "linux")]
#[test]
fn a_mapped_file_truncated_while_read_is_an_error() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = lines_file(dir.path(), "shrinks.jsonl", 1000);
    let inputs = Inputs::new(&[InputSpec::Path(path.clone())], false).expect("exists");
    let mut r = inputs.open(0).expect("opens");
    let map = r.map.as_ref().expect("mapped").0.clone();
    if let Err(e) = map.advise_range(memmap2::Advice::PopulateRead, 0, 4096) {
        // Before Linux 5.14 a truncated map can only fault: this test would die of SIGBUS.
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{e}");
        eprintln!("SKIPPED: this kernel has no MADV_POPULATE_READ");
        return;
    }
    drop(map);
    let first = r.next_chunk(10_000).expect("reads").expect("a chunk");
    assert_eq!(first.len(), 100);
    truncate(&path, 20_000);
    let e = r.next_chunk(200_000).expect_err("the rest is gone");
    let msg = e.to_string();
    assert!(msg.contains("shrinks.jsonl"), "{msg}");
    assert!(msg.contains("shorter than when it was opened"), "{msg}");
    // A plain `read` of the mapped file meets the same error.
    let mut buf = vec![0; 50_000];
    let e = r
        .read_exact(&mut buf)
        .expect_err("the map is gone past 20 kB");
    assert!(
        e.to_string().contains("shorter than when it was opened"),
        "{e}"
    );
    // So does a line that runs on past the target into the lost part.
    std::fs::write(&path, "x".repeat(3 << 20)).expect("writes one line of 3 MB");
    let inputs = Inputs::new(&[InputSpec::Path(path.clone())], false).expect("exists");
    let mut r = inputs.open(0).expect("opens");
    truncate(&path, READ_BLOCK as u64 / 2);
    let msg = r.next_chunk(1000).expect_err("the line is cut").to_string();
    assert!(msg.contains("shorter than when it was opened"), "{msg}");
}

#[test]
fn mapped_and_read_inputs_agree_and_compressed_ones_are_read() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let plain = b"{\"id\":\"a\",\"text\":\"x\"}\n\n{\"id\":\"b\",\"text\":\"y\"}".to_vec();
    let p = dir.path().join("p.jsonl");
    std::fs::write(&p, &plain).unwrap();
    let gz = dir.path().join("p.jsonl.gz");
    let mut e = flate2::write::GzEncoder::new(File::create(&gz).unwrap(), Default::default());
    e.write_all(&plain).unwrap();
    e.finish().unwrap();
    let zst = dir.path().join("p.jsonl.zst");
    std::fs::write(&zst, zstd::encode_all(&plain[..], 3).unwrap()).unwrap();
    let specs = [
        InputSpec::Path(p),
        InputSpec::Path(gz),
        InputSpec::Path(zst),
    ];
    for mmap in [true, false] {
        let inputs = Inputs::new(&specs, false).unwrap().with_mmap(mmap);
        for i in 0..3 {
            let mut r = inputs.open(i).unwrap();
            // Only the plain file is mapped, and only when asked.
            assert_eq!(r.map.is_some(), mmap && i == 0, "input {i}, mmap {mmap}");
            let (mut bytes, mut lines) = (Vec::new(), Vec::new());
            while let Some(c) = r.next_chunk(1 << 20).unwrap() {
                bytes.extend_from_slice(&c.data);
                lines.extend((0..c.len()).map(|l| (c.line(l).to_vec(), c.line_no(l))));
            }
            assert_eq!(bytes, plain, "input {i}, mmap {mmap}");
            assert_eq!(lines.len(), 2);
            assert_eq!(lines[1], (b"{\"id\":\"b\",\"text\":\"y\"}".to_vec(), 3));
        }
    }
}

#[test]
fn writeback_file_asks_every_step_and_writes_every_byte() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut w = WritebackFile::new(tempfile::NamedTempFile::new_in(dir.path()).expect("file"));
    let mut want = Vec::new();
    let piece: Vec<u8> = (0..=255u8).cycle().take(1_000_003).collect();
    for i in 0..20 {
        w.write_all(&piece[i..]).expect("writes");
        want.extend_from_slice(&piece[i..]);
        // The request covers everything written up to the last whole step.
        assert_eq!(w.written, want.len() as u64);
        assert!(w.written - w.started < writeback_step(w.started));
        assert_eq!(w.started == 0, want.len() < WRITEBACK_MIN_STEP as usize);
    }
    // 19.07 MiB written in steps of 1 MiB (a sixteenth of 16 MiB is still 1 MiB).
    assert!(
        w.started >= 18 * WRITEBACK_MIN_STEP,
        "asked for {} bytes",
        w.started
    );
    // The step is a sixteenth of the bytes so far, from 1 MiB to 8 MiB.
    assert_eq!(writeback_step(0), WRITEBACK_MIN_STEP);
    assert_eq!(writeback_step(32 << 20), 2 << 20);
    assert_eq!(writeback_step(1 << 40), WRITEBACK_MAX_STEP);
    let f = w.into_inner();
    assert_eq!(std::fs::read(f.path()).expect("reads back"), want);
    // And through an `Output`, which writes by way of one.
    let target = dir.path().join("out.bin");
    let mut o = Output::create(target.to_str().expect("UTF-8")).expect("creates");
    o.write_all(&want).expect("writes");
    o.finish().expect("finishes");
    assert_eq!(std::fs::read(&target).expect("reads back"), want);
}

#[test]
fn chunk_edges_and_reading_on_after_a_chunk() {
    for input in [
        &b""[..],
        b"\n",
        b"\n\n \n",
        b"a",
        b"a\r\n",
        b"a\nb",
        b"a\n\r\nb\r",
    ] {
        for target in [1, 2, 3, 100] {
            assert_eq!(
                chunked_lines(input, target, vec![1, 0, 2, 7]),
                naive_lines(input),
                "{input:?} {target}"
            );
        }
    }
    // A line over several reads and a chunk target is one chunk.
    let long = [vec![b'y'; 10_000], b"\nz\n".to_vec()].concat();
    assert_eq!(chunked_lines(&long, 100, vec![999])[0].0.len(), 10_000);
    // What a chunk read past its last line is the start of what `read` gives next.
    let data = b"one\ntwo\nthree".to_vec();
    let src = Trickle {
        data: data.clone(),
        at: 0,
        sizes: vec![6],
        turn: 0,
    };
    let mut r = LineReader::from_read("t", src).expect("plain input");
    let c = r.next_chunk(1).expect("reads").expect("a chunk");
    assert_eq!(&c.data[..], b"one\n");
    let mut rest = Vec::new();
    r.read_to_end(&mut rest).expect("reads");
    assert_eq!(rest, b"two\nthree");
    // The same from a mapped file.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("in.jsonl");
    std::fs::write(&path, &data).expect("writes");
    let inputs = Inputs::new(&[InputSpec::Path(path)], false).expect("exists");
    let mut r = inputs.open(0).expect("opens");
    assert!(r.map.is_some());
    let c = r.next_chunk(1).expect("reads").expect("a chunk");
    assert_eq!(&c.data[..], b"one\n");
    let mut rest = Vec::new();
    r.read_to_end(&mut rest).expect("reads");
    assert_eq!(rest, b"two\nthree");
    assert_eq!(r.raw_bytes_read(), data.len() as u64);
    assert!(r.next_chunk(1).expect("reads").is_none());
}

#[test]
fn spare_buffers_come_back_empty_and_big_enough_and_hold_little() {
    // Other tests in this binary share the spares, so only what holds whatever they do
    // is asserted.
    let mut b = spare_buffer(1000);
    assert!(b.is_empty() && b.capacity() >= 1000);
    b.extend_from_slice(b"leftover bytes");
    recycle_buffer(b);
    for _ in 0..SPARE_BUFFERS_MAX + 1 {
        let b = spare_buffer(5000);
        assert!(b.is_empty(), "a recycled buffer comes back cleared");
        assert!(b.capacity() >= 5000);
    }
    recycle_buffer(Vec::with_capacity(SPARE_BYTES_MAX + 1));
    for _ in 0..SPARE_BUFFERS_MAX + 4 {
        recycle_buffer(Vec::with_capacity(4 << 20));
    }
    let (count, held) = SPARE_BUFFERS.held();
    assert!(count <= SPARE_BUFFERS_MAX);
    assert!(held <= SPARE_BYTES_MAX, "the spares hold {held} bytes");
}

#[test]
fn an_interrupt_names_the_outputs_already_complete() {
    assert_eq!(
        interrupt_message(&[]),
        "neardup: interrupted; no output was written"
    );
    let dir = tempfile::tempdir().unwrap();
    let done = dir.path().join("clusters.jsonl");
    let mut o = Output::create(done.to_str().unwrap()).unwrap();
    o.write_all(b"{}\n").unwrap();
    o.finish().unwrap();
    let unfinished = dir.path().join("out.jsonl");
    let mut u = Output::create(unfinished.to_str().unwrap()).unwrap();
    u.write_all(b"half").unwrap();
    // Other tests in this binary may complete outputs too: only this test's are asserted, and
    // only its own unfinished ones are removed (theirs are being written beside it).
    let completed = super::output::remove_partial_outputs_under(dir.path());
    assert!(completed.contains(&done), "{completed:?}");
    assert!(!completed.contains(&unfinished));
    let msg = interrupt_message(&completed);
    assert!(
        msg.contains("clusters.jsonl") && msg.contains("already complete"),
        "{msg}"
    );
    assert!(done.exists() && !unfinished.exists());
    drop(u);
}

/// Lines split on the pool in pieces give the one-thread split's lines and numbers, and the
/// pieces handed to `before` cover the chunk exactly once: sizes around multiples of the piece
/// size, lines shorter and longer than a piece, a newline on every nominal cut, blank and CRLF
/// lines, with and without a last newline, counting on from any line number.
#[test]
fn lines_split_on_the_pool_equal_the_one_thread_split() {
    let p = SPLIT_PIECE;
    let mut rng = crate::hash::Pcg32::new(3);
    for total in [
        2 * p - 1,
        2 * p,
        2 * p + 1,
        3 * p - 1,
        3 * p,
        3 * p + 1,
        5 * p + 7,
    ] {
        for shape in 0..6 {
            let mut v: Vec<u8> = Vec::with_capacity(total + 4 * p);
            while v.len() < total {
                let len = match shape {
                    0 => rng.below(200) as usize,
                    1 => p - 1,
                    2 => p,
                    3 => p + 1,
                    4 => rng.below(3 * p as u32) as usize,
                    _ => rng.below(40) as usize,
                };
                match rng.below(5) {
                    0 => v.extend_from_slice(b" \t"),
                    1 => v.extend(std::iter::repeat_n(b'a', len).chain(*b"\r")),
                    _ => v.extend(std::iter::repeat_n(b'b', len)),
                }
                v.push(b'\n');
            }
            v.truncate(total);
            if shape == 5 {
                for k in 1..=total / p {
                    v[k * p - 1] = b'\n';
                }
            }
            for from in [0u64, 41] {
                let (mut a, mut b) = (from, from);
                let want = split_lines(&v, &mut a);
                let seen = std::sync::Mutex::new(Vec::new());
                let got = split_lines_on_pool(&v, &mut b, |x, y| {
                    seen.lock().unwrap().push((x, y));
                    Ok(())
                })
                .unwrap();
                assert_eq!(got, want, "{total} bytes, shape {shape}");
                assert_eq!(a, b, "{total} bytes, shape {shape}: the next line number");
                let mut seen = seen.into_inner().unwrap();
                seen.sort_unstable();
                if shape == 0 {
                    assert_eq!(seen.len() >= 2, total >= 2 * p, "{total} bytes: in pieces");
                }
                assert_eq!(seen[0].0, 0);
                assert_eq!(seen.last().unwrap().1, v.len());
                assert!(seen.windows(2).all(|w| w[0].1 == w[1].0 && w[0].0 < w[0].1));
            }
            // An error from a piece is the split's error.
            let mut n = 0;
            if total < 2 * p || shape != 0 {
                continue;
            }
            let err = split_lines_on_pool(&v, &mut n, |x, _| {
                if x > 0 {
                    Err(crate::error::Error::Param("a piece failed".into()))
                } else {
                    Ok(())
                }
            });
            assert!(err.is_err());
        }
    }
}

/// Chunks big enough to be split on the pool, mapped and read: the naive split's lines.
#[test]
fn chunks_split_on_the_pool_hold_every_line_once_in_order() {
    let mut rng = crate::hash::Pcg32::new(5);
    let mut input = Vec::new();
    while input.len() < 9 * SPLIT_PIECE {
        let long = rng.below(50) == 0;
        let len = rng.below(if long { 600_000 } else { 300 }) as usize;
        input.extend(std::iter::repeat_n(b'x', len));
        input.extend_from_slice(if rng.below(7) == 0 { b"\r\n" } else { b"\n" });
    }
    let want = naive_lines(&input);
    for target in [2 * SPLIT_PIECE, 3 * SPLIT_PIECE + 1, 8 * SPLIT_PIECE] {
        assert_eq!(mapped_lines(&input, target), want, "mapped, {target}");
        assert_eq!(
            chunked_lines(&input, target, vec![1 << 20]),
            want,
            "read, {target}"
        );
    }
}

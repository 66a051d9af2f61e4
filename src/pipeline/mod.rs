//! Streaming over the inputs (JSONL or Parquet): chunks of lines are read on one thread, parsed and tokenized in
//! parallel on another, and consumed (signed, written) on the caller's, so reading, tokenizing
//! and hashing overlap. Order is kept: chunk after chunk, line after line.

pub mod fused;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::time::{Duration, Instant};

use crate::batch::SpareParts;
use crate::corpus::{parse_chunk_into, signature_rows, ScannedChunk, SPARE_SIGS};
use crate::engine::SignJob;
use crate::error::Error;
use crate::io::{Chunk, Inputs, ReadPlan};
use crate::jsonl::Fields;
use crate::progress::Progress;
use crate::sys::threads::{register_current_thread, this_thread_cpu_seconds};

/// Read every input in order as chunks, apply `prepare` to each on a second thread (it may use
/// rayon), and hand the results to `consume` on this thread, in order. The first error from any
/// stage stops everything and is returned. Returns the seconds `consume` waited for input.
pub fn pipelined<T, P, C>(
    inputs: &Inputs,
    plan: ReadPlan<'_>,
    chunk_bytes: usize,
    progress: &Progress,
    prepare: P,
    consume: C,
) -> Result<Duration, Error>
where
    T: Send,
    P: Fn(Chunk, &str) -> Result<T, Error> + Sync,
    C: FnMut(T) -> Result<(), Error>,
{
    pipelined_n(inputs, plan, chunk_bytes, progress, 1, prepare, consume)
}

/// [`pipelined`] with up to `in_flight` chunks prepared at once on the rayon pool (results are
/// put back in order before `consume` sees them), so that workers never wait at the end of one
/// chunk for the stragglers of the next.
pub fn pipelined_n<T, P, C>(
    inputs: &Inputs,
    plan: ReadPlan<'_>,
    chunk_bytes: usize,
    progress: &Progress,
    in_flight: usize,
    prepare: P,
    mut consume: C,
) -> Result<Duration, Error>
where
    T: Send,
    P: Fn(Chunk, &str) -> Result<T, Error> + Sync,
    C: FnMut(T) -> Result<(), Error>,
{
    if in_flight > 1 {
        return pipelined_concurrent(
            inputs,
            plan,
            chunk_bytes,
            progress,
            in_flight,
            &prepare,
            &mut consume,
        );
    }
    std::thread::scope(|s| {
        let (raw_tx, raw_rx) = sync_channel::<Result<Chunk, Error>>(2);
        let (done_tx, done_rx) = sync_channel::<Result<T, Error>>(1);
        // Reader: sequential over files.
        s.spawn(move || read_chunks(inputs, plan, chunk_bytes, progress, raw_tx));
        // Preparer: parse, tokenize, whatever the caller needs.
        let prepare = &prepare;
        s.spawn(move || {
            register_current_thread();
            for c in raw_rx {
                let r = c.and_then(|c| {
                    let name = inputs.name(c.file_index).to_string();
                    prepare(c, &name)
                });
                let stop = r.is_err();
                if done_tx.send(r).is_err() || stop {
                    return;
                }
            }
        });
        consume_all(done_rx, &mut consume)
    })
}

fn pipelined_concurrent<T, P, C>(
    inputs: &Inputs,
    plan: ReadPlan<'_>,
    chunk_bytes: usize,
    progress: &Progress,
    in_flight: usize,
    prepare: &P,
    consume: &mut C,
) -> Result<Duration, Error>
where
    T: Send,
    P: Fn(Chunk, &str) -> Result<T, Error> + Sync,
    C: FnMut(T) -> Result<(), Error>,
{
    std::thread::scope(|s| {
        let (raw_tx, raw_rx) = sync_channel::<Result<Chunk, Error>>(2);
        let (done_tx, done_rx) = std::sync::mpsc::channel::<(usize, Result<T, Error>)>();
        // One token per chunk being prepared: the consumer hands them back in order.
        let (token_tx, token_rx) = sync_channel::<()>(in_flight);
        s.spawn(move || read_chunks(inputs, plan, chunk_bytes, progress, raw_tx));
        s.spawn(move || {
            register_current_thread();
            rayon::in_place_scope(|rs| {
                for (seq, c) in raw_rx.into_iter().enumerate() {
                    if token_tx.send(()).is_err() {
                        return;
                    }
                    let done_tx = done_tx.clone();
                    rs.spawn(move |_| {
                        let r = c.and_then(|c| {
                            let name = inputs.name(c.file_index).to_string();
                            prepare(c, &name)
                        });
                        let _ = done_tx.send((seq, r));
                    });
                }
            });
        });
        let mut waited = Duration::ZERO;
        let mut next = 0usize;
        let mut ready: std::collections::BTreeMap<usize, Result<T, Error>> = Default::default();
        loop {
            while let Some(r) = ready.remove(&next) {
                consume(r?)?;
                next += 1;
                let _ = token_rx.recv();
            }
            let t = Instant::now();
            let Ok((seq, r)) = done_rx.recv() else { break };
            waited += t.elapsed();
            ready.insert(seq, r);
        }
        Ok(waited)
    })
}

/// The reader of [`pipelined`]: every input in order, as chunks, into `tx`.
fn read_chunks(
    inputs: &Inputs,
    plan: ReadPlan<'_>,
    chunk_bytes: usize,
    progress: &Progress,
    tx: std::sync::mpsc::SyncSender<Result<Chunk, Error>>,
) {
    register_current_thread();
    for i in 0..inputs.len() {
        let mut r = match inputs.reader(i, plan, chunk_bytes) {
            Ok(r) => r,
            Err(e) => {
                let _ = tx.send(Err(e));
                return;
            }
        };
        let mut base = 0u64;
        // The first chunks of the run are smaller (1/8, 1/4, 1/2 of the target, then the
        // target), so the workers start sooner: until the first chunk is cut they have
        // nothing to do, and cutting a whole one (mapping its pages, splitting its lines)
        // leaves the other core idle for a noticeable part of a short run
        // (docs/BENCHMARKS.md).
        let mut ramp: u32 = if i == 0 { 3 } else { 0 };
        loop {
            let target = (chunk_bytes >> ramp).max(1);
            ramp = ramp.saturating_sub(1);
            match r.next_chunk(target) {
                Ok(Some(c)) => {
                    let now = r.raw_bytes_read();
                    progress.add_bytes(now - base);
                    base = now;
                    if tx.send(Ok(c)).is_err() {
                        return;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            }
        }
    }
}

fn consume_all<T>(
    rx: Receiver<Result<T, Error>>,
    consume: &mut impl FnMut(T) -> Result<(), Error>,
) -> Result<Duration, Error> {
    let mut waited = Duration::ZERO;
    loop {
        let t = Instant::now();
        let Ok(item) = rx.recv() else { break };
        waited += t.elapsed();
        consume(item?)?;
    }
    Ok(waited)
}

/// Counts and timings of one pass 1 (read, parse, tokenize, sign).
#[derive(Debug, Default, Clone, serde::Serialize, serde::Deserialize)]
pub struct ScanStats {
    pub documents: u64,
    pub words: u64,
    pub shingles: u64,
    /// UTF-8 bytes of the text fields.
    pub text_bytes: u64,
    /// Bytes of the JSONL lines (after decompression).
    pub jsonl_bytes: u64,
    /// Wall seconds of parsing and tokenizing on the preparing thread (overlaps signing; zero
    /// for engines that parse as they sign).
    pub parse_seconds: f64,
    /// Wall seconds the engine spent signing (with parsing, for engines that fuse them).
    pub sign_seconds: f64,
    /// Wall seconds the signing thread waited for parsed input (the pipeline's stall).
    pub wait_seconds: f64,
    /// Wall seconds of the whole pass.
    pub seconds: f64,
    /// CPU seconds of the thread that prepares chunks for an engine that does not parse as
    /// it signs: the serial part of parsing (the parallel part runs on the pool meanwhile).
    /// For `bench`; not in reports.
    #[serde(skip)]
    pub prepare_thread_cpu: f64,
    /// CPU seconds of the calling thread, which drives such an engine. For `bench`.
    #[serde(skip)]
    pub drive_thread_cpu: f64,
}

/// Pass 1: read every input, tokenize, sign with `engine`, and hand each chunk to `on_chunk`
/// in input order. While `want_sets` holds (its holder may clear it at any chunk), chunks
/// carry their documents' shingle sets, hashed from the words as they are signed; a chunk
/// prepared after it is cleared carries none.
///
/// An engine that signs records itself (the CPU engine) gets several chunks at once on the
/// rayon pool; any other gets chunks parsed ahead on a second thread while it signs the
/// previous one.
pub fn scan(
    inputs: &Inputs,
    fields: &Fields,
    engine: &mut dyn crate::engine::Engine,
    want_exact_keys: bool,
    want_sets: Option<&AtomicBool>,
    progress: &Progress,
    mut on_chunk: impl FnMut(&mut ScannedChunk) -> Result<(), Error>,
) -> Result<ScanStats, Error> {
    let sets_now = || want_sets.is_some_and(|w| w.load(Ordering::Relaxed));
    let t0 = Instant::now();
    let cpu0 = this_thread_cpu_seconds();
    let num_perm = engine.params().num_perm;
    let k = engine.params().k;
    let rule = engine.params().rule();
    let chunk_bytes = engine.preferred_chunk_bytes();
    let mut stats = ScanStats::default();
    let parse_total = std::sync::Mutex::new(0f64);
    let mut account = |mut sc: ScannedChunk, stats: &mut ScanStats| -> Result<(), Error> {
        stats.documents += sc.len() as u64;
        stats.words += sc.words.iter().map(|&w| w as u64).sum::<u64>();
        stats.shingles += sc.shingles;
        stats.text_bytes += sc.text_bytes;
        stats.jsonl_bytes += sc.raw_bytes;
        progress.add_docs(sc.len() as u64);
        let r = on_chunk(&mut sc);
        // `on_chunk` has copied out what it keeps.
        SPARE_SIGS.give(sc.sigs);
        r
    };
    let params = *engine.params();
    let waited = if let Some(signer) = engine.piece_signer() {
        let in_flight = rayon::current_num_threads() * 2;
        let sign_total = std::sync::Mutex::new(0f64);
        let w = pipelined_n(
            inputs,
            ReadPlan::needed(fields),
            chunk_bytes,
            progress,
            in_flight,
            |chunk, name| {
                let t = Instant::now();
                let sc = fused::sign_records(
                    signer,
                    &params,
                    &chunk,
                    fields,
                    name,
                    want_exact_keys,
                    sets_now(),
                )?;
                *sign_total.lock().expect("not poisoned") += t.elapsed().as_secs_f64();
                Ok(sc)
            },
            |sc| account(sc, &mut stats),
        )?;
        stats.sign_seconds = sign_total.into_inner().expect("not poisoned");
        w
    } else {
        // Chunks go to the engine as the parts the workers tokenized; a streaming engine (the
        // GPU) hands them back signed a few chunks later, in order, so the scanned halves wait
        // here meanwhile.
        let mut sign_seconds = 0.0;
        let prepare_cpu = std::sync::Mutex::new(0f64);
        // Parts come back with their signatures and are parsed into again (cleared).
        let spare_parts = engine
            .streamer()
            .and_then(|s| s.spare_parts())
            .unwrap_or_else(|| {
                std::sync::Arc::new(SpareParts::new(crate::batch::pieces_per_chunk() * 2))
            });
        let new_part = || spare_parts.take(rule);
        let mut waiting: std::collections::VecDeque<ScannedChunk> = Default::default();
        let mut hand_back = |jobs: Vec<SignJob>,
                             waiting: &mut std::collections::VecDeque<ScannedChunk>,
                             stats: &mut ScanStats|
         -> Result<(), Error> {
            for job in jobs {
                let mut sc = waiting.pop_front().expect("a chunk for every job");
                sc.sigs = job.sigs;
                spare_parts.give(job.parts);
                account(sc, stats)?;
            }
            Ok(())
        };
        let w = pipelined(
            inputs,
            ReadPlan::needed(fields),
            chunk_bytes,
            progress,
            |chunk, name| {
                let t = Instant::now();
                let c = this_thread_cpu_seconds();
                let parsed = parse_chunk_into(&chunk, fields, name, &new_part)?;
                let (sc, parts) = ScannedChunk::from_parsed(parsed, k, want_exact_keys, sets_now());
                // The matrix is made here, off the thread that drives the engine.
                let sigs = signature_rows(sc.len() * num_perm);
                let out = (sc, parts, sigs);
                *parse_total.lock().expect("not poisoned") += t.elapsed().as_secs_f64();
                if let (Some(a), Some(b)) = (c, this_thread_cpu_seconds()) {
                    *prepare_cpu.lock().expect("not poisoned") += b - a;
                }
                Ok(out)
            },
            |(sc, parts, mut sigs)| {
                let t = Instant::now();
                waiting.push_back(sc);
                let done = match engine.streamer() {
                    Some(s) => s.submit(SignJob { parts, sigs })?,
                    None => {
                        engine.sign_parts(&parts, &mut sigs)?;
                        vec![SignJob { parts, sigs }]
                    }
                };
                sign_seconds += t.elapsed().as_secs_f64();
                hand_back(done, &mut waiting, &mut stats)
            },
        )?;
        if let Some(s) = engine.streamer() {
            let t = Instant::now();
            let done = s.finish()?;
            sign_seconds += t.elapsed().as_secs_f64();
            hand_back(done, &mut waiting, &mut stats)?;
        }
        stats.sign_seconds = sign_seconds;
        stats.prepare_thread_cpu = prepare_cpu.into_inner().expect("not poisoned");
        w
    };
    stats.parse_seconds = parse_total.into_inner().expect("not poisoned");
    stats.wait_seconds = waited.as_secs_f64();
    stats.seconds = t0.elapsed().as_secs_f64();
    if let (Some(a), Some(b)) = (cpu0, this_thread_cpu_seconds()) {
        stats.drive_thread_cpu = b - a;
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::InputSpec;

    /// A recycled signature matrix comes back zeroed and of the length asked for, whether it
    /// was longer or shorter than that (other tests share the spares, so every take is checked
    /// whichever buffer it gets).
    #[test]
    fn signature_rows_come_back_zeroed_whatever_was_handed_back() {
        for (given, asked) in [(1000, 10), (10, 1000), (512, 512), (0, 7)] {
            SPARE_SIGS.give(vec![0xdead_beef; given]);
            let rows = signature_rows(asked);
            assert_eq!(rows.len(), asked);
            assert!(
                rows.iter().all(|&v| v == 0),
                "stale values in a recycled matrix"
            );
        }
    }

    /// The first chunks of a run are 1/8, 1/4 and 1/2 of the target (the workers start sooner),
    /// then the target; a second input starts at the target; every line arrives once, in order.
    #[test]
    fn the_first_chunks_ramp_up_to_the_target() {
        let dir = tempfile::tempdir().unwrap();
        let line = format!("{}\n", "x".repeat(99));
        let (a, b) = (dir.path().join("a.jsonl"), dir.path().join("b.jsonl"));
        std::fs::write(&a, line.repeat(1000)).unwrap();
        std::fs::write(&b, line.repeat(500)).unwrap();
        for mmap in [true, false] {
            let inputs = Inputs::new(
                &[InputSpec::Path(a.clone()), InputSpec::Path(b.clone())],
                false,
            )
            .unwrap()
            .with_mmap(mmap);
            let mut got = Vec::new();
            pipelined(
                &inputs,
                ReadPlan::needed(&Fields::default()),
                16_000,
                &Progress::hidden(),
                |c, _| Ok((c.file_index, c.data.len(), c.len())),
                |x| {
                    got.push(x);
                    Ok(())
                },
            )
            .unwrap();
            let sizes: Vec<(usize, usize)> = got.iter().map(|&(f, n, _)| (f, n)).collect();
            assert_eq!(
                sizes[..5],
                [(0, 2000), (0, 4000), (0, 8000), (0, 16_000), (0, 16_000)],
                "mmap {mmap}"
            );
            let first_b = sizes.iter().position(|&(f, _)| f == 1).unwrap();
            assert_eq!(sizes[first_b], (1, 16_000), "mmap {mmap}");
            let lines: Vec<usize> = [0, 1]
                .map(|f| got.iter().filter(|x| x.0 == f).map(|x| x.2).sum())
                .to_vec();
            assert_eq!(lines, [1000, 500], "mmap {mmap}");
        }
    }
}

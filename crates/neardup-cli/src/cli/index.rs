//! `neardup index`: build, grow and show an index of documents already kept.

use super::*;
use neardup::index::store;
use neardup::stages::indexing::index_inputs;

pub(super) fn run(a: IndexArgs) -> Result<ExitCode> {
    match a.command {
        IndexCommand::Info { index } => {
            let m = store::read_manifest(&index)?;
            outln!("{}", serde_json::to_string_pretty(&m)?);
            Ok(ExitCode::SUCCESS)
        }
        IndexCommand::Build {
            input,
            output,
            hash,
            lsh,
            engine,
        } => {
            let lsh = lsh.params()?;
            add(&a.run, &output, true, &input, hash.params()?, lsh, &engine)
        }
        IndexCommand::Add {
            index,
            input,
            engine,
        } => {
            let m = store::read_manifest(&index)?;
            add(&a.run, &index, false, &input, m.params(), m.lsh(), &engine)
        }
    }
}

fn add(
    run: &RunArgs,
    dir: &std::path::Path,
    create: bool,
    input: &InputArgs,
    params: neardup::MinHashParams,
    lsh: neardup::LshParams,
    engine: &EngineArgs,
) -> Result<ExitCode> {
    lsh.check_num_perm(params.num_perm)?;
    let fields = input.fields()?;
    // An input inside the index directory would be read while the index changes.
    neardup::io::check_inputs_outside(&input.named(), &[("the index directory", dir)])?;
    let progress = setup(run)?;
    let t0 = Instant::now();
    let inputs = input.open(false)?;
    let gpu = engine.gpu_options_for(inputs.total_bytes())?;
    let mut engine = build_engine(engine.engine, params, 0, &gpu)?;
    let info = engine.info();
    warn_software(run, &info);
    let s = index_inputs(
        dir,
        create,
        &inputs,
        &fields,
        lsh,
        engine.as_mut(),
        &progress,
    )?;
    let secs = t0.elapsed().as_secs_f64();
    drop(progress);
    let segment = match &s.segment {
        Some(seg) => format!(
            "segment {} ({} bytes, {:.0} bytes a document)",
            seg.file,
            seg.bytes,
            seg.bytes as f64 / seg.documents.max(1) as f64
        ),
        None if s.already => "no segment (every input is in the index already)".into(),
        None => "no segment (no documents)".into(),
    };
    say(
        run,
        format!(
            "neardup index {}: {} documents signed into {}: {segment}; {} documents in the \
             index; {:.2} s, {} docs/s [{}]",
            if create { "build" } else { "add" },
            s.scan.documents,
            dir.display(),
            s.index_documents,
            secs,
            human_count(per_second(s.scan.documents as f64, secs)),
            info.summary()
        ),
    );
    Ok(ExitCode::SUCCESS)
}

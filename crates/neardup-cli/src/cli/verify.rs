//! `neardup verify`: both engines' signatures, compared entry by entry.

use super::*;

pub(super) fn run(a: VerifyArgs) -> Result<ExitCode> {
    let params = a.hash.params()?;
    let fields = a.input.fields()?;
    let progress = setup(&a.run)?;
    let inputs = a.input.open(false)?;
    let gpu_opts = a.gpu.options()?;
    let mut gpu = GpuEngine::new(params, &gpu_opts).map_err(|e| {
        e.with_hint(
            "verify compares the GPU engine with the CPU engine, so it needs an adapter; to \
             compute signatures on the CPU alone, run `neardup signatures IN... -o OUT \
             --engine cpu`",
        )
    })?;
    let mut cpu = CpuEngine::new(params, 0)?;
    let report = crate::bench::verify(&inputs, &fields, &mut cpu, &mut gpu, a.show, &progress)?;
    let np = params.num_perm;
    outln!(
        "documents checked: {}\nentries compared: {}\nmismatches: {} (in {} documents)",
        report.documents,
        report.documents * np as u64,
        report.mismatched_entries,
        report.mismatched_documents
    );
    for m in &report.examples {
        outln!(
            "  mismatch: id {:?} position {}: cpu {} gpu {}",
            m.id,
            m.position,
            m.cpu,
            m.gpu
        );
    }
    if gpu.adapter().software {
        outln!(
            "note: {} is a software adapter (it runs on the CPU): the comparison holds, but its \
             speed is not a GPU's",
            gpu.adapter().name
        );
    }
    outln!(
        "cpu: {} shingles/s ({:.3} s) [{}]\ngpu: {} shingles/s ({:.3} s) [{}]",
        human_count(per_second(report.shingles as f64, report.cpu_seconds)),
        report.cpu_seconds,
        cpu.info(),
        human_count(per_second(report.shingles as f64, report.gpu_seconds)),
        report.gpu_seconds,
        gpu.info()
    );
    Ok(if report.mismatched_entries == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

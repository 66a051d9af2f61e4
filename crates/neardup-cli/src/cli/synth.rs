//! `neardup synth`: a seeded synthetic corpus.

use super::*;

pub(super) fn run(a: SynthArgs) -> Result<ExitCode> {
    let t0 = Instant::now();
    let mut out = neardup::io::Output::create(&a.output)?;
    let mut buf = Vec::with_capacity(1 << 20);
    for (id, text) in
        neardup::synth::SyntheticDocs::new(a.docs, a.words, a.seed).with_template(a.template)
    {
        serde_json::to_writer(&mut buf, &json!({ "id": id, "text": text }))?;
        buf.push(b'\n');
        if buf.len() > 1 << 20 {
            out.write_all(&buf)?;
            buf.clear();
        }
    }
    out.write_all(&buf)?;
    out.finish()?;
    if !a.quiet {
        eprintln!(
            "neardup synth: {} documents written to {}; {:.2} s",
            a.docs,
            a.output,
            t0.elapsed().as_secs_f64()
        );
    }
    Ok(ExitCode::SUCCESS)
}

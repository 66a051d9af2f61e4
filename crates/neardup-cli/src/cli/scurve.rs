//! `neardup scurve`: the S-curve table of a banding, and its picture.

use super::*;

pub(super) fn run(a: ScurveArgs) -> Result<ExitCode> {
    let curves = a.params()?;
    if let Some(path) = &a.svg {
        let svg = neardup::report::html::scurve_svg(&curves, None, &[]);
        neardup::io::write_file_atomic(path, svg.as_bytes())?;
    }
    for (i, p) in curves.iter().enumerate() {
        if i > 0 {
            outln!();
        }
        out!("{}", neardup::index::scurve::scurve_table(*p));
    }
    Ok(ExitCode::SUCCESS)
}

//! Regenerate `fixtures/` from the seeded generators in `neardup::synth::fixtures`:
//!
//!     cargo run --example make_fixtures [DIR]
//!
//! The output is deterministic; `tests/it/fixtures.rs` checks the committed files equal it.

fn main() -> std::io::Result<()> {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "fixtures".into());
    std::fs::create_dir_all(&dir)?;
    for (name, contents) in neardup::synth::fixtures::files() {
        let path = std::path::Path::new(&dir).join(name);
        std::fs::write(&path, contents)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

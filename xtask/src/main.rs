//! `cargo xtask <task>`: project automation (conformance runs, benchmarks, fuzzing).
fn main() -> anyhow::Result<()> {
    let task = std::env::args().nth(1);
    match task.as_deref() {
        _ => {
            eprintln!("usage: cargo xtask <task>\n\ntasks: (none yet)");
            Ok(())
        }
    }
}

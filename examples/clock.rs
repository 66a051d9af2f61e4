//! The clock one core runs at, measured without hardware counters (a VM's `perf` often has
//! none): a chain of dependent register-to-register 64-bit adds runs one add a cycle, so adds
//! per second is cycles per second. (Not adds of an immediate: Golden Cove and later Intel
//! cores fold small ones at rename, several a cycle.) docs/BENCHMARKS.md turns the criterion
//! kernels' nanoseconds a shingle into cycles with it, to compare them with their instruction
//! counts.
//!
//! ```sh
//! cargo run --release --example clock
//! ```

use std::time::Instant;

fn main() {
    #[cfg(target_arch = "x86_64")]
    {
        const ROUNDS: u64 = 500_000_000;
        for _ in 0..5 {
            let mut x = 0u64;
            let t = Instant::now();
            for _ in 0..ROUNDS {
                // Four adds, each waiting on the one before; the loop's own counter and branch
                // run beside them on other ports.
                // SAFETY: register arithmetic only.
                unsafe {
                    std::arch::asm!(
                        "add {x}, {one}",
                        "add {x}, {one}",
                        "add {x}, {one}",
                        "add {x}, {one}",
                        x = inout(reg) x,
                        one = in(reg) 1u64,
                        options(nomem, nostack, pure),
                    );
                }
            }
            let s = t.elapsed().as_secs_f64();
            assert_eq!(x, 4 * ROUNDS);
            println!("{:.3} GHz", 4.0 * ROUNDS as f64 / s / 1e9);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    eprintln!("clock: only written for x86_64");
}

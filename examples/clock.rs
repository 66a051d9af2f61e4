//! The clock one core runs at, measured without hardware counters (a VM's `perf` often has
//! none): a chain of dependent 64-bit adds retires one add a cycle on every x86 core of the
//! last decade, so adds per second is cycles per second. BENCHMARKS.md turns the criterion
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
                        "add {x}, 1",
                        "add {x}, 1",
                        "add {x}, 1",
                        "add {x}, 1",
                        x = inout(reg) x,
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

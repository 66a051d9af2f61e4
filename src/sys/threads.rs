//! CPU time spent in neardup's own threads, apart from any thread a GPU driver starts in the
//! process (Mesa's llvmpipe runs the "GPU" on CPU threads of its own, and some of them carry the
//! name of the thread that made them, so names cannot tell them apart).
//!
//! Every thread of ours registers itself ([`register_current_thread`]): the main thread, the
//! rayon pools' threads (from their start handler) and the pipeline's reader and preparer. A
//! registered thread's CPU clock is read while it lives; what it spent is added to a running sum
//! when it ends, under the same lock, so a reading never counts a thread twice or not at all.
//!
//! Linux only (per-thread CPU clocks of other threads); elsewhere nothing is counted and the
//! readings are `None`.

#[cfg(target_os = "linux")]
mod imp {
    use std::cell::RefCell;
    use std::sync::Mutex;

    struct Registry {
        /// The CPU clocks of the registered threads alive now.
        alive: Vec<(u64, libc::clockid_t)>,
        /// Seconds spent by registered threads that have ended.
        ended: f64,
        next: u64,
    }

    static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
        alive: Vec::new(),
        ended: 0.0,
        next: 0,
    });

    fn seconds(clock: libc::clockid_t) -> Option<f64> {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid timespec to write into; a clock that is gone is an error return.
        let r = unsafe { libc::clock_gettime(clock, &mut ts) };
        (r == 0).then_some(ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9)
    }

    /// Unregisters its thread when the thread ends (a thread-local's destructor).
    struct Registration(u64);

    impl Drop for Registration {
        fn drop(&mut self) {
            let spent = seconds(libc::CLOCK_THREAD_CPUTIME_ID).unwrap_or(0.0);
            let mut r = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(i) = r.alive.iter().position(|&(id, _)| id == self.0) {
                r.alive.swap_remove(i);
                r.ended += spent;
            }
        }
    }

    thread_local! {
        static THIS: RefCell<Option<Registration>> = const { RefCell::new(None) };
    }

    /// Count this thread's CPU time as neardup's, from now until it ends (again: no effect).
    pub fn register_current_thread() {
        THIS.with(|t| {
            let mut t = t.borrow_mut();
            if t.is_some() {
                return;
            }
            let mut clock: libc::clockid_t = 0;
            // SAFETY: `pthread_self` is this thread; `clock` is a valid place for its clock id.
            if unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) } != 0 {
                return;
            }
            let mut r = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
            let id = r.next;
            r.next += 1;
            r.alive.push((id, clock));
            *t = Some(Registration(id));
        });
    }

    /// CPU seconds spent so far by the registered threads, ended ones included.
    pub fn own_cpu_seconds() -> Option<f64> {
        let r = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
        Some(r.ended + r.alive.iter().filter_map(|&(_, c)| seconds(c)).sum::<f64>())
    }

    /// CPU seconds spent so far by the calling thread.
    pub fn this_thread_cpu_seconds() -> Option<f64> {
        seconds(libc::CLOCK_THREAD_CPUTIME_ID)
    }

    /// CPU seconds spent so far by the whole process (user and system), every thread included.
    pub fn process_cpu_seconds() -> Option<f64> {
        seconds(libc::CLOCK_PROCESS_CPUTIME_ID)
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    pub fn register_current_thread() {}

    pub fn own_cpu_seconds() -> Option<f64> {
        None
    }

    pub fn process_cpu_seconds() -> Option<f64> {
        None
    }

    pub fn this_thread_cpu_seconds() -> Option<f64> {
        None
    }
}

pub use imp::{
    own_cpu_seconds, process_cpu_seconds, register_current_thread, this_thread_cpu_seconds,
};

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// Spend `secs` of this thread's CPU time (of wall time where there is no thread clock):
    /// on a loaded machine a thread given a wall-clock span gets less of the CPU than that.
    fn spin(secs: f64) {
        let t = std::time::Instant::now();
        let cpu0 = this_thread_cpu_seconds();
        let mut x = 0u64;
        loop {
            for _ in 0..10_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
            }
            let spent = match (cpu0, this_thread_cpu_seconds()) {
                (Some(a), Some(b)) => b - a,
                _ => t.elapsed().as_secs_f64(),
            };
            if spent >= secs {
                break;
            }
        }
    }

    /// A registered thread's time counts, while it runs and after it ends; an unregistered
    /// thread's does not (though the process's total has it). The counts are the process's,
    /// so the checks run in a process of their own: the test binary's own, running this test
    /// alone, where no other test's registered threads (engine pools) can spin meanwhile.
    #[test]
    fn registered_threads_count_and_others_do_not() {
        const ALONE: &str = "NEARDUP_TEST_THREADS_ALONE";
        if std::env::var_os(ALONE).is_none() {
            let name = "registered_threads_count_and_others_do_not";
            let path = module_path!().split_once("::").expect("a crate path").1;
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .args([&format!("{path}::{name}"), "--exact", "--test-threads=1"])
                .env(ALONE, "1")
                .output()
                .unwrap();
            let log = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(out.status.success(), "{log}");
            assert!(
                log.contains("1 passed"),
                "the test did not run alone: {log}"
            );
            return;
        }
        register_current_thread();
        let (own0, all0) = (own_cpu_seconds().unwrap(), process_cpu_seconds().unwrap());
        std::thread::spawn(|| spin(0.15)).join().unwrap();
        let (own1, all1) = (own_cpu_seconds().unwrap(), process_cpu_seconds().unwrap());
        assert!(all1 - all0 >= 0.1, "the process spent {}", all1 - all0);
        // Other tests' registered threads may run meanwhile, so the bound is half the spin,
        // not zero.
        assert!(
            own1 - own0 < 0.075,
            "an unregistered thread counted: {}",
            own1 - own0
        );
        let own2 = own_cpu_seconds().unwrap();
        std::thread::spawn(|| {
            register_current_thread();
            register_current_thread();
            spin(0.15);
        })
        .join()
        .unwrap();
        let own3 = own_cpu_seconds().unwrap();
        assert!(
            own3 - own2 >= 0.1,
            "a registered thread's time went missing"
        );
        assert!(own3 - own2 < 0.5, "counted twice: {}", own3 - own2);
    }
}

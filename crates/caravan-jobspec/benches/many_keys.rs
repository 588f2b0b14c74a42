//! `cargo bench -p caravan-jobspec --bench many_keys`: CPU time to parse a job file whose
//! `meta` object holds n keys, for growing n. A parser that is linear in the number of keys
//! shows a constant cost per key down the table. `MANY_KEYS_MAX=30000` stops the table
//! there (to time a quadratic parser without waiting for it).

use caravan_jobspec::{ParseOptions, parse_hcl};

/// The allocator every Caravan binary uses, so the figures are the api-gateway's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// CPU time this thread has run, from the scheduler's own accounting, so a shared
/// machine's waiting time is not counted.
fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

fn job_with_meta_keys(n: usize) -> String {
    let mut text = String::from("job \"many\" {\n  meta = {\n");
    for i in 0..n {
        text.push_str(&format!("    k{i} = \"v{i}\"\n"));
    }
    text.push_str("  }\n  group \"g\" {\n    task \"t\" {\n      driver = \"raw_exec\"\n");
    text.push_str("      config { command = \"/bin/true\" }\n    }\n  }\n}\n");
    text
}

fn main() {
    let options = ParseOptions {
        max_bytes: usize::MAX,
    };
    println!(
        "{:>8} {:>10} {:>12} {:>12}",
        "keys", "bytes", "CPU ms", "ns per key"
    );
    let max: usize = std::env::var("MANY_KEYS_MAX")
        .ok()
        .and_then(|m| m.parse().ok())
        .unwrap_or(300_000);
    for n in [10_000, 20_000, 30_000, 100_000, 300_000]
        .into_iter()
        .filter(|n| *n <= max)
    {
        let text = job_with_meta_keys(n);
        // The fastest of three: on a shared machine other work only ever adds time.
        let mut best = u64::MAX;
        for _ in 0..3 {
            let Some(t0) = thread_cpu_ns() else {
                println!("no schedstat on this system");
                return;
            };
            let parsed = parse_hcl(&text, &options).expect("the generated job parses");
            let cpu = thread_cpu_ns().unwrap_or(t0) - t0;
            assert_eq!(parsed.job.meta.len(), n, "every key is kept");
            best = best.min(cpu);
        }
        println!(
            "{n:>8} {:>10} {:>12.1} {:>12.0}",
            text.len(),
            best as f64 / 1e6,
            best as f64 / n as f64
        );
    }
}

//! etcd's floor on this machine: what one txn-put of a value of the sizes
//! Caravan writes costs etcd in CPU, WAL bytes and watch traffic with 1, 3
//! and 5 watchers of the prefix, on a throwaway etcd of the bench's own.
//! Every later change to the data flow is held to this floor
//! (docs/benchmarks.md, "Where the bytes go").

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use caravan_integration_tests::etcd_traffic;
use caravan_integration_tests::{EtcdProcess, ProcessCost};
use clap::Parser;
use etcd_client::{Client, Compare, CompareOp, Txn, TxnOp, WatchOptions};
use tokio::task::JoinSet;

/// Flags of `etcd-floor`.
#[derive(Debug, Parser)]
#[command(
    name = "etcd-floor",
    about = "etcd's own cost per txn-put, by value size and watchers"
)]
struct Args {
    /// Puts per case.
    #[arg(long, default_value_t = 20_000)]
    puts: usize,
    /// Puts in flight at once.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Value sizes in bytes (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = [650usize, 2700])]
    sizes: Vec<usize>,
    /// Watcher counts (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 3, 5])]
    watchers: Vec<usize>,
}

/// One case's figures.
struct Case {
    size: usize,
    watchers: usize,
    secs: f64,
    cpu_us_per_put: f64,
    traffic: etcd_traffic::EtcdTraffic,
}

/// Runs `puts` compare-and-put txns of `size` bytes on fresh keys under
/// `prefix` while `watchers` watches of the prefix drain their events.
async fn case(
    etcd: &EtcdProcess,
    args: &Args,
    size: usize,
    watchers: usize,
) -> anyhow::Result<Case> {
    let client = Client::connect([etcd.endpoint()], None).await?;
    let prefix = format!("/floor/{size}/{watchers}/");
    let mut watching = JoinSet::new();
    for _ in 0..watchers {
        let mut c = client.clone();
        let stream = c
            .watch(prefix.as_str(), Some(WatchOptions::new().with_prefix()))
            .await?;
        let (requests, mut answers) = stream.split();
        watching.spawn(async move {
            let _open = requests;
            let mut events = 0usize;
            while let Ok(Some(r)) = answers.message().await {
                events += r.events().len();
            }
            events
        });
    }
    let pid = etcd.pid().context("etcd's pid")?;
    let before = etcd_traffic::read(etcd.endpoint()).await?;
    let cpu0 = ProcessCost::read(pid)?.cpu;
    let started = Instant::now();
    let value = Arc::new(vec![b'x'; size]);
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut putting = JoinSet::new();
    for _ in 0..args.concurrency {
        let (mut c, value, next, prefix, total) = (
            client.clone(),
            value.clone(),
            next.clone(),
            prefix.clone(),
            args.puts,
        );
        putting.spawn(async move {
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= total {
                    return anyhow::Ok(());
                }
                let key = format!("{prefix}{i:08}");
                // As Caravan's writes: a create guarded by a compare.
                let txn = Txn::new()
                    .when([Compare::mod_revision(key.as_str(), CompareOp::Equal, 0)])
                    .and_then([TxnOp::put(key.as_str(), value.as_slice(), None)]);
                c.txn(txn).await?;
            }
        });
    }
    while let Some(r) = putting.join_next().await {
        r??;
    }
    let secs = started.elapsed().as_secs_f64();
    // Watchers drain what was sent before the reading.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let cpu = ProcessCost::read(pid)?.cpu - cpu0;
    let after = etcd_traffic::read(etcd.endpoint()).await?;
    watching.abort_all();
    let mut c = client.clone();
    c.delete(
        prefix.as_str(),
        Some(etcd_client::DeleteOptions::new().with_prefix()),
    )
    .await?;
    Ok(Case {
        size,
        watchers,
        secs,
        cpu_us_per_put: cpu.as_secs_f64() * 1e6 / args.puts as f64,
        traffic: after.since(&before, args.puts),
    })
}

async fn run(args: Args) -> anyhow::Result<()> {
    let etcd = EtcdProcess::start().await?;
    println!(
        "{:>7}{:>10}{:>9}{:>12}{:>12}{:>14}{:>16}",
        "bytes", "watchers", "puts/s", "CPU µs/put", "WAL B/put", "events/put", "sent B/put"
    );
    for &size in &args.sizes {
        for &watchers in &args.watchers {
            let c = case(&etcd, &args, size, watchers).await?;
            let per = |name: &str| {
                c.traffic
                    .counters
                    .iter()
                    .find(|x| x.0 == name)
                    .map_or(0.0, |x| x.2)
            };
            println!(
                "{:>7}{:>10}{:>9.0}{:>12.1}{:>12.0}{:>14.2}{:>16.0}",
                c.size,
                c.watchers,
                args.puts as f64 / c.secs,
                c.cpu_us_per_put,
                per("WAL bytes"),
                per("watch events sent"),
                per("gRPC bytes sent"),
            );
        }
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run(args))
}

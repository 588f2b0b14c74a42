//! Prints the cluster's events as they happen, one line each:
//!
//!     cargo run -p caravan-client --example watch -- Job Allocation
//!
//! The gateway is `$CARAVAN_ADDR` (default `127.0.0.1:4647`), the token
//! `$CARAVAN_TOKEN` or `$NOMAD_TOKEN`; the arguments are topics (`Job`,
//! `Job:<id>`, `Evaluation`, `Allocation`, `Deployment`, `Node`), none for all.

use std::process::ExitCode;

use caravan_client::proto::event::Payload;
use caravan_client::{Client, DEFAULT_ADDRESS};
use futures::StreamExt;

#[tokio::main]
async fn main() -> ExitCode {
    match watch().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("watch: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn watch() -> caravan_client::Result<()> {
    let address = std::env::var("CARAVAN_ADDR").unwrap_or_else(|_| DEFAULT_ADDRESS.into());
    let token = std::env::var("CARAVAN_TOKEN")
        .or_else(|_| std::env::var("NOMAD_TOKEN"))
        .unwrap_or_default();
    let topics: Vec<String> = std::env::args().skip(1).collect();
    let client = Client::builder()
        .address(address)
        .token(token)
        .namespace("*")
        .connect()
        .await?;
    let mut events = client.events().stream(topics).await?;
    while let Some(event) = events.next().await {
        let event = event?;
        println!(
            "{:>8} {:<12} {:<24} {}{}",
            event.index,
            event.topic,
            event.r#type,
            event.key,
            describe(event.payload.as_ref())
        );
    }
    Ok(())
}

/// A few words on the object after the change.
fn describe(payload: Option<&Payload>) -> String {
    match payload {
        Some(Payload::Job(j)) => format!(" v{} {:?}", j.version, j.status()),
        Some(Payload::Evaluation(e)) => format!(" {:?} ({})", e.status(), e.triggered_by),
        Some(Payload::Allocation(a)) => format!(" {} {:?}", a.name, a.client_status()),
        Some(Payload::Deployment(d)) => format!(" {:?}", d.status()),
        Some(Payload::Node(n)) => format!(" {} {:?}", n.name, n.status()),
        Some(Payload::Service(s)) => format!(" {} {}:{}", s.service_name, s.address, s.port),
        None => String::new(),
    }
}

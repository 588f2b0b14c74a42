//! Graceful shutdown: the first SIGTERM or SIGINT cancels a token every task
//! watches; a second one exits at once.

use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio_util::sync::CancellationToken;

/// Exit code when a second signal cuts the graceful shutdown short.
pub const FORCED_EXIT_CODE: i32 = 130;

/// Returns a token cancelled on the first SIGTERM or SIGINT. A second signal
/// exits the process immediately. Must be called inside a tokio runtime.
pub fn on_signals() -> std::io::Result<CancellationToken> {
    // Registered before returning so no signal slips through a startup window.
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let token = CancellationToken::new();
    let trigger = token.clone();
    tokio::spawn(async move {
        next(&mut term, &mut int).await;
        tracing::info!("shutting down; a second signal exits at once");
        trigger.cancel();
        next(&mut term, &mut int).await;
        tracing::warn!("second signal, exiting now");
        std::process::exit(FORCED_EXIT_CODE);
    });
    Ok(token)
}

async fn next(term: &mut Signal, int: &mut Signal) {
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

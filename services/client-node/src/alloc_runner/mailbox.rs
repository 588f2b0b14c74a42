//! Where an alloc's commands wait for its runner: an unbounded queue with
//! strong and weak senders, like tokio's unbounded channel, but about a
//! tenth of its size (that channel allocates room for 32 messages and
//! cache-line-padded counters up front; a simulated node keeps one mailbox
//! per alloc, hundreds of thousands of them).

use std::collections::VecDeque;
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use tokio::sync::Notify;

use super::AllocCommand;

#[derive(Debug, Default)]
struct Mailbox {
    state: Mutex<State>,
    /// Holds a permit when something arrived while nobody waited.
    arrived: Notify,
}

#[derive(Debug, Default)]
struct State {
    commands: VecDeque<AllocCommand>,
    /// Strong senders alive; with none left, the runner hears `None`.
    senders: usize,
    /// The runner is gone: nothing more is taken.
    closed: bool,
}

/// A new mailbox: its one strong sender and its receiver.
pub fn mailbox() -> (CommandSender, CommandReceiver) {
    let inner = Arc::new(Mailbox::default());
    inner.state.lock().senders = 1;
    (CommandSender(Arc::clone(&inner)), CommandReceiver(inner))
}

/// Sends commands to an alloc's runner; the runner hears `None` once every
/// strong sender is dropped.
#[derive(Debug)]
pub struct CommandSender(Arc<Mailbox>);

/// A sender that does not keep the runner's mailbox open.
#[derive(Debug, Clone)]
pub struct WeakCommandSender(Weak<Mailbox>);

/// The runner's end.
#[derive(Debug)]
pub struct CommandReceiver(Arc<Mailbox>);

impl CommandSender {
    /// Queues `cmd`; gives it back when the runner is gone.
    pub fn send(&self, cmd: AllocCommand) -> Result<(), AllocCommand> {
        let mut state = self.0.state.lock();
        if state.closed {
            return Err(cmd);
        }
        state.commands.push_back(cmd);
        drop(state);
        self.0.arrived.notify_one();
        Ok(())
    }

    /// A weak sender to the same mailbox.
    pub fn downgrade(&self) -> WeakCommandSender {
        WeakCommandSender(Arc::downgrade(&self.0))
    }
}

impl Clone for CommandSender {
    fn clone(&self) -> Self {
        self.0.state.lock().senders += 1;
        CommandSender(Arc::clone(&self.0))
    }
}

impl Drop for CommandSender {
    fn drop(&mut self) {
        let mut state = self.0.state.lock();
        state.senders -= 1;
        if state.senders == 0 {
            drop(state);
            self.0.arrived.notify_one();
        }
    }
}

impl WeakCommandSender {
    /// A strong sender, unless every strong one is gone.
    pub fn upgrade(&self) -> Option<CommandSender> {
        let inner = self.0.upgrade()?;
        let mut state = inner.state.lock();
        if state.senders == 0 {
            return None;
        }
        state.senders += 1;
        drop(state);
        Some(CommandSender(inner))
    }
}

impl CommandReceiver {
    /// The next command; `None` once every strong sender is gone and
    /// nothing is left. Cancel-safe: a command is taken only when returned.
    pub async fn recv(&mut self) -> Option<AllocCommand> {
        loop {
            {
                let mut state = self.0.state.lock();
                if let Some(cmd) = state.commands.pop_front() {
                    return Some(cmd);
                }
                if state.senders == 0 {
                    return None;
                }
            }
            self.0.arrived.notified().await;
        }
    }
}

impl Drop for CommandReceiver {
    fn drop(&mut self) {
        let mut state = self.0.state.lock();
        state.closed = true;
        state.commands.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn commands_arrive_in_order_and_none_once_the_senders_are_gone() {
        let (tx, mut rx) = mailbox();
        let weak = tx.downgrade();
        let second = weak.upgrade().unwrap();
        tx.send(AllocCommand::Destroy).unwrap();
        second.send(AllocCommand::Destroy).unwrap();
        assert!(matches!(rx.recv().await, Some(AllocCommand::Destroy)));
        drop(tx);
        assert!(matches!(rx.recv().await, Some(AllocCommand::Destroy)));
        // Still one strong sender: a wait, woken by its drop.
        let waiting = tokio::spawn(async move { rx.recv().await.is_none() });
        tokio::task::yield_now().await;
        drop(second);
        assert!(waiting.await.unwrap());
        assert!(weak.upgrade().is_none(), "no strong sender left");
    }

    #[tokio::test]
    async fn sends_fail_once_the_runner_is_gone() {
        let (tx, rx) = mailbox();
        drop(rx);
        assert!(tx.send(AllocCommand::Destroy).is_err());
    }
}

//! Where commands write: standard output and error, or buffers in tests.

use std::io::Write;
use std::sync::{Arc, Mutex};

/// The output sink of a command. Write errors (a closed pipe) are ignored:
/// there is nobody left to tell.
pub struct Ui {
    out: Box<dyn Write + Send>,
    err: Box<dyn Write + Send>,
}

impl std::fmt::Debug for Ui {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ui")
    }
}

/// Text a captured [`Ui`] received.
#[derive(Debug, Clone, Default)]
pub struct Captured {
    out: Arc<Mutex<Vec<u8>>>,
    err: Arc<Mutex<Vec<u8>>>,
}

impl Captured {
    /// Everything written to standard output so far.
    pub fn stdout(&self) -> String {
        read(&self.out)
    }

    /// Everything written to standard error so far.
    pub fn stderr(&self) -> String {
        read(&self.err)
    }
}

fn read(buf: &Arc<Mutex<Vec<u8>>>) -> String {
    let bytes = buf.lock().map(|b| b.clone()).unwrap_or_default();
    String::from_utf8_lossy(&bytes).into_owned()
}

struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut b) = self.0.lock() {
            b.extend_from_slice(data);
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Ui {
    /// The process's standard output and error.
    pub fn stdio() -> Ui {
        Ui {
            out: Box::new(std::io::stdout()),
            err: Box::new(std::io::stderr()),
        }
    }

    /// A UI writing into buffers, and the handle to read them.
    pub fn captured() -> (Ui, Captured) {
        let captured = Captured::default();
        let ui = Ui {
            out: Box::new(Shared(captured.out.clone())),
            err: Box::new(Shared(captured.err.clone())),
        };
        (ui, captured)
    }

    /// Writes a line to standard output.
    pub fn output(&mut self, text: impl AsRef<str>) {
        let _ = writeln!(self.out, "{}", text.as_ref());
        let _ = self.out.flush();
    }

    /// Writes a line to standard error.
    pub fn error(&mut self, text: impl AsRef<str>) {
        let _ = writeln!(self.err, "{}", text.as_ref());
        let _ = self.err.flush();
    }

    /// Writes bytes as they are to standard output or error (task logs).
    pub fn raw(&mut self, stderr: bool, data: &[u8]) {
        let sink = if stderr { &mut self.err } else { &mut self.out };
        let _ = sink.write_all(data);
        let _ = sink.flush();
    }
}

//! `alloc exec`: a command run in an allocation's task over Nomad's
//! WebSocket endpoint. Stdin goes up as `stdin` frames (then `close`), the
//! terminal's size as `tty_size` frames, a `{}` heartbeat every 10 s; stdout
//! and stderr come back as frames, and the command's exit code, sent last,
//! is the CLI's. With `-t` the local terminal is put in raw mode for the
//! session (restored however it ends), and the escape character at the
//! start of a line followed by `.` disconnects.

use std::io::{IsTerminal, Read, Write};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

use crate::api::Api;
use crate::args::ExecArgs;
use crate::error::CliError;
use crate::lookup;
use crate::views;

type Result<T> = std::result::Result<T, CliError>;

/// How often an idle session says it is alive.
const HEARTBEAT: Duration = Duration::from_secs(10);

/// What the session's input side sends.
enum Up {
    Stdin(Vec<u8>),
    StdinClose,
    Resize(u16, u16),
    /// `~.`: the user ends the session.
    Disconnect,
}

/// Runs the command; its exit code.
pub(super) async fn exec(api: &Api, args: ExecArgs) -> Result<u8> {
    let escape = match args.escape.as_str() {
        "none" => None,
        e if e.len() == 1 => Some(e.as_bytes()[0]),
        _ => {
            return Err(CliError::Usage(
                "-e requires 'none' or a single character".into(),
            ));
        }
    };
    let stdin_on = args.stdin.unwrap_or(true);
    let tty = args
        .tty
        .unwrap_or_else(|| std::io::stdin().is_terminal() && std::io::stdout().is_terminal());
    if tty && !stdin_on {
        return Err(CliError::Usage(
            "-i must be enabled if running with tty".into(),
        ));
    }
    let alloc = lookup::alloc(api, &args.alloc).await?;
    let job = api.job(&alloc.job_id).await.ok();
    let tasks = views::task_names(&alloc, job.as_ref());
    let task = match args.task {
        Some(t) if tasks.contains(&t) => t,
        Some(t) => {
            return Err(CliError::Usage(format!("Could not find task named: {t}")));
        }
        None => match tasks.as_slice() {
            [one] => one.clone(),
            _ => {
                return Err(CliError::Usage(
                    "Allocation has multiple tasks. Please specify the task with -task".into(),
                ));
            }
        },
    };
    let command = serde_json::to_string(&args.command)
        .map_err(|e| CliError::Other(format!("cannot encode the command: {e}")))?;
    let query = vec![
        ("task".to_string(), task),
        ("command".to_string(), command),
        ("tty".to_string(), tty.to_string()),
    ];
    let socket = api.exec_socket(&alloc.id, &query).await?;
    let raw = if tty && std::io::stdin().is_terminal() {
        Some(RawTerminal::enter()?)
    } else {
        None
    };
    let ended = session(socket, stdin_on, tty, escape.filter(|_| tty)).await;
    drop(raw);
    let code = ended.map_err(|why| CliError::Other(format!("failed to exec into task: {why}")))?;
    Ok(u8::try_from(code.rem_euclid(256)).unwrap_or(1))
}

/// Relays the session until the command's exit code arrives.
async fn session(
    socket: crate::backend::ExecSocket,
    stdin_on: bool,
    tty: bool,
    escape: Option<u8>,
) -> std::result::Result<i32, String> {
    let (mut sink, mut stream) = socket.split();
    let (up, mut ups) = mpsc::channel::<Up>(16);
    if stdin_on {
        read_stdin(up.clone(), escape);
    } else {
        let _ = up.send(Up::StdinClose).await;
    }
    if tty {
        watch_size(up.clone());
    }
    drop(up);
    let mut heartbeat = tokio::time::interval(HEARTBEAT);
    heartbeat.tick().await;
    // Written as they come: a terminal shows output as the command makes it.
    let (mut stdout, mut stderr) = (std::io::stdout(), std::io::stderr());
    loop {
        tokio::select! {
            sent = ups.recv() => {
                let frame = match sent {
                    Some(Up::Stdin(data)) => json!({"stdin": {"data": STANDARD.encode(data)}}),
                    Some(Up::StdinClose) => json!({"stdin": {"close": true}}),
                    Some(Up::Resize(height, width)) => {
                        json!({"tty_size": {"height": height, "width": width}})
                    }
                    Some(Up::Disconnect) => {
                        let _ = sink.send(Message::Close(None)).await;
                        return Err("the session was closed with the escape sequence".into());
                    }
                    // Nothing more to send: keep reading the answers.
                    None => {
                        ups = mpsc::channel(1).1;
                        continue;
                    }
                };
                if let Err(e) = sink.send(Message::Text(frame.to_string().into())).await {
                    return Err(format!("failed to send input: {e}"));
                }
            }
            _ = heartbeat.tick() => {
                let _ = sink.send(Message::Text("{}".into())).await;
            }
            received = stream.next() => {
                let text = match received {
                    Some(Ok(Message::Text(text))) => text.as_str().to_owned(),
                    Some(Ok(Message::Binary(bytes))) => String::from_utf8_lossy(&bytes).into_owned(),
                    Some(Ok(Message::Close(Some(frame)))) if !frame.reason.is_empty() => {
                        return Err(frame.reason.to_string());
                    }
                    Some(Ok(Message::Close(_))) | None => {
                        return Err("websocket closed before receiving exit code".into());
                    }
                    Some(Ok(_)) => continue,
                    Some(Err(e)) => return Err(e.to_string()),
                };
                match output_of(&text)? {
                    Down::Stdout(data) => {
                        let _ = stdout.write_all(&data);
                        let _ = stdout.flush();
                    }
                    Down::Stderr(data) => {
                        let _ = stderr.write_all(&data);
                        let _ = stderr.flush();
                    }
                    Down::Exited(code) => {
                        let _ = sink.send(Message::Close(None)).await;
                        return Ok(code);
                    }
                    Down::Nothing => {}
                }
            }
        }
    }
}

/// What a frame from the gateway says.
#[derive(Debug, PartialEq, Eq)]
enum Down {
    Stdout(Vec<u8>),
    Stderr(Vec<u8>),
    Exited(i32),
    Nothing,
}

/// Reads a frame from the gateway.
fn output_of(text: &str) -> std::result::Result<Down, String> {
    let frame: Value =
        serde_json::from_str(text).map_err(|e| format!("invalid frame from the server: {e}"))?;
    if frame.get("exited").and_then(Value::as_bool) == Some(true) {
        let code = frame
            .pointer("/result/exit_code")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        return Ok(Down::Exited(i32::try_from(code).unwrap_or(1)));
    }
    let data = |name: &str| -> std::result::Result<Option<Vec<u8>>, String> {
        match frame
            .get(name)
            .and_then(|s| s.get("data"))
            .and_then(Value::as_str)
        {
            None => Ok(None),
            Some(b64) => STANDARD
                .decode(b64)
                .map(Some)
                .map_err(|e| format!("{name}.data: not base64: {e}")),
        }
    };
    if let Some(bytes) = data("stdout")? {
        return Ok(Down::Stdout(bytes));
    }
    if let Some(bytes) = data("stderr")? {
        return Ok(Down::Stderr(bytes));
    }
    Ok(Down::Nothing)
}

/// Reads stdin on a thread of its own (a blocking read must not hold the
/// runtime's exit), through the escape filter, until its end.
fn read_stdin(up: mpsc::Sender<Up>, escape: Option<u8>) {
    std::thread::spawn(move || {
        let mut filter = escape.map(EscapeFilter::new);
        let mut buf = [0u8; 8192];
        let mut input = std::io::stdin().lock();
        loop {
            let n = match input.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let (data, disconnect) = match filter.as_mut() {
                Some(f) => f.feed(&buf[..n]),
                None => (buf[..n].to_vec(), false),
            };
            if !data.is_empty() && up.blocking_send(Up::Stdin(data)).is_err() {
                return;
            }
            if disconnect {
                let _ = up.blocking_send(Up::Disconnect);
                return;
            }
        }
        let _ = up.blocking_send(Up::StdinClose);
    });
}

/// Sends the terminal's size now and each time it changes.
fn watch_size(up: mpsc::Sender<Up>) {
    tokio::spawn(async move {
        let mut changes =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change()).ok();
        loop {
            if let Ok(size) = rustix::termios::tcgetwinsize(std::io::stdout())
                .or_else(|_| rustix::termios::tcgetwinsize(std::io::stdin()))
                && up.send(Up::Resize(size.ws_row, size.ws_col)).await.is_err()
            {
                return;
            }
            match changes.as_mut() {
                Some(c) => {
                    if c.recv().await.is_none() {
                        return;
                    }
                }
                None => return,
            }
        }
    });
}

/// The escape character at the start of a line: followed by `.` it ends
/// the session, followed by itself it sends one, followed by anything else
/// it is sent as typed.
#[derive(Debug)]
struct EscapeFilter {
    escape: u8,
    line_start: bool,
    pending: bool,
}

impl EscapeFilter {
    fn new(escape: u8) -> Self {
        EscapeFilter {
            escape,
            line_start: true,
            pending: false,
        }
    }

    /// The bytes to send of `input`, and whether the session ends.
    fn feed(&mut self, input: &[u8]) -> (Vec<u8>, bool) {
        let mut out = Vec::with_capacity(input.len());
        for &b in input {
            if self.pending {
                self.pending = false;
                if b == b'.' {
                    return (out, true);
                }
                out.push(self.escape);
                if b == self.escape {
                    self.line_start = false;
                    continue;
                }
            } else if self.line_start && b == self.escape {
                self.pending = true;
                continue;
            }
            out.push(b);
            self.line_start = b == b'\r' || b == b'\n';
        }
        (out, false)
    }
}

/// The local terminal in raw mode until dropped.
struct RawTerminal {
    saved: nix::sys::termios::Termios,
}

impl RawTerminal {
    fn enter() -> Result<RawTerminal> {
        use nix::sys::termios::{SetArg, cfmakeraw, tcgetattr, tcsetattr};
        let fail =
            |e: nix::Error| CliError::Other(format!("cannot set the terminal to raw mode: {e}"));
        let saved = tcgetattr(std::io::stdin()).map_err(fail)?;
        let mut raw = saved.clone();
        cfmakeraw(&mut raw);
        tcsetattr(std::io::stdin(), SetArg::TCSANOW, &raw).map_err(fail)?;
        Ok(RawTerminal { saved })
    }
}

impl Drop for RawTerminal {
    fn drop(&mut self) {
        use nix::sys::termios::{SetArg, tcsetattr};
        let _ = tcsetattr(std::io::stdin(), SetArg::TCSANOW, &self.saved);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_escape_works_only_at_a_line_start() {
        let mut f = EscapeFilter::new(b'~');
        assert_eq!(f.feed(b"a~b\r"), (b"a~b\r".to_vec(), false));
        assert_eq!(f.feed(b"~~x"), (b"~x".to_vec(), false));
        let mut f = EscapeFilter::new(b'~');
        assert_eq!(f.feed(b"~"), (Vec::new(), false), "held until the next key");
        assert_eq!(f.feed(b"q"), (b"~q".to_vec(), false));
        let mut f = EscapeFilter::new(b'~');
        assert_eq!(f.feed(b"ls\n~."), (b"ls\n".to_vec(), true));
    }

    #[test]
    fn frames_from_the_gateway_are_read_as_nomad_writes_them() {
        assert_eq!(
            output_of(r#"{"stdout":{"data":"aGk="}}"#).unwrap(),
            Down::Stdout(b"hi".to_vec())
        );
        assert_eq!(
            output_of(r#"{"stderr":{"data":"aGk="}}"#).unwrap(),
            Down::Stderr(b"hi".to_vec())
        );
        assert_eq!(
            output_of(r#"{"stdout":{"close":true}}"#).unwrap(),
            Down::Nothing
        );
        assert_eq!(
            output_of(r#"{"exited":true,"result":{"exit_code":3}}"#).unwrap(),
            Down::Exited(3)
        );
        assert!(output_of("nope").is_err());
    }
}

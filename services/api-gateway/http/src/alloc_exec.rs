//! `GET /v1/client/allocation/:alloc_id/exec`: Nomad's WebSocket endpoint
//! of `alloc exec`. The query names the task, the command (a JSON array) and
//! whether it gets a terminal; frames carry JSON both ways, as Nomad's CLI
//! and UI speak it: in, `{"stdin":{"data":<base64>}}`,
//! `{"stdin":{"close":true}}` and `{"tty_size":{"height":h,"width":w}}`
//! (anything else, such as the CLI's `{}` heartbeat, is ignored); out,
//! `{"stdout":{"data":…}}`, `{"stderr":{…}}`, their `close`, and last
//! `{"exited":true,"result":{"exit_code":n}}`. With `?ws_handshake=true` the
//! first frame is `{"version":1,"auth_token":"…"}`, how a browser, which
//! cannot set headers on a WebSocket, presents its token.

use std::time::Duration;

use axum::Router;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query as QueryString, State};
use axum::http::HeaderMap;
use axum::response::IntoResponse;
use axum::routing::get;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use caravan_proto::exec_input::Input;
use caravan_proto::exec_output::Output;
use caravan_proto::{ExecInput, ExecOutput, ExecSetup, ExecTtySize};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Code;

use crate::{ApiError, ApiResult, Http, Params, params};
use caravan_gateway_core::acl::{Caller, token_from_headers};
use caravan_gateway_core::alloc_exec::{self, ExecTarget};
use caravan_gateway_core::error::GatewayError;

/// WebSocket close codes (RFC 6455): a normal end, a refusal, a failure.
const CLOSE_NORMAL: u16 = 1000;
const CLOSE_POLICY: u16 = 1008;
const CLOSE_INTERNAL: u16 = 1011;

/// How long the caller has to answer the close frame.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// The routes of this module.
pub(crate) fn routes() -> Router<Http> {
    Router::new().route("/v1/client/allocation/{alloc_id}/exec", get(exec))
}

/// Whether the request asks for the handshake frame (`?ws_handshake=true`).
pub(crate) fn wants_handshake(query: Option<&str>) -> bool {
    params::pairs(query.unwrap_or_default())
        .into_iter()
        .any(|(k, v)| k == "ws_handshake" && params::parse_bool(&v) == Some(true))
}

/// Who the caller is, or how it will say so.
enum Auth {
    /// Decided before the upgrade: may it exec outside isolation?
    Decided(bool),
    /// The token comes in the first frame; a header token must agree.
    Handshake(Option<String>),
}

/// Upgrades to the exec session, once the request is checked.
async fn exec(
    State(http): State<Http>,
    Path(alloc_id): Path<String>,
    QueryString(p): QueryString<Params>,
    headers: HeaderMap,
    caller: Option<axum::Extension<Caller>>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> ApiResult {
    let task = p.get("task").cloned().unwrap_or_default();
    let command: Vec<String> = match p.get("command").map(String::as_str) {
        None | Some("") => Vec::new(),
        Some(text) => serde_json::from_str(text).map_err(|e| {
            ApiError::field("command", format!("must be a JSON array of strings: {e}"))
        })?,
    };
    let tty = params::flag(&p, "tty")?;
    let handshake = params::flag(&p, "ws_handshake")?;
    let setup = alloc_exec::setup(&alloc_id, &task, command, tty)?;
    let upgrade = upgrade.map_err(|e| {
        ApiError::field(
            "connection",
            format!("the exec endpoint takes a WebSocket connection: {e}"),
        )
    })?;
    let target = alloc_exec::target(&http.gw, &alloc_id)?;
    let auth = match (&http.gw.acl, handshake) {
        (Some(_), true) => Auth::Handshake(token_from_headers(&headers)),
        (Some(_), false) => {
            let caller = caller.ok_or_else(|| {
                ApiError::from(GatewayError::PermissionDenied("Permission denied".into()))
            })?;
            Auth::Decided(alloc_exec::rights(Some(&caller.acl), &target.namespace)?)
        }
        (None, _) => Auth::Decided(true),
    };
    Ok(upgrade
        .on_upgrade(move |socket| async move {
            session(socket, http, target, setup, auth, handshake).await;
        })
        .into_response())
}

/// A frame the caller sends.
#[derive(Debug, Default, Deserialize)]
struct InFrame {
    stdin: Option<StdinFrame>,
    tty_size: Option<TtySizeFrame>,
}

#[derive(Debug, Default, Deserialize)]
struct StdinFrame {
    #[serde(default)]
    data: Option<String>,
    #[serde(default)]
    close: bool,
}

#[derive(Debug, Deserialize)]
struct TtySizeFrame {
    height: u32,
    width: u32,
}

/// The handshake frame.
#[derive(Debug, Deserialize)]
struct Handshake {
    #[serde(default)]
    version: i64,
    #[serde(default)]
    auth_token: String,
}

/// The message a frame carries for the node; `None` for a heartbeat.
fn input_of(text: &str) -> Result<Option<ExecInput>, String> {
    let frame: InFrame =
        serde_json::from_str(text).map_err(|e| format!("invalid exec frame: {e}"))?;
    let input = match (frame.stdin, frame.tty_size) {
        (Some(stdin), _) if stdin.close => Input::StdinClose(true),
        (Some(stdin), _) => {
            let data = STANDARD
                .decode(stdin.data.unwrap_or_default())
                .map_err(|e| format!("stdin.data: not base64: {e}"))?;
            Input::Stdin(data)
        }
        (None, Some(size)) => Input::TtySize(ExecTtySize {
            height: size.height,
            width: size.width,
        }),
        (None, None) => return Ok(None),
    };
    Ok(Some(ExecInput { input: Some(input) }))
}

/// The frame an answer of the node becomes, and whether it is the last.
fn frame_of(output: Output) -> (Value, bool) {
    let data = |bytes: &[u8]| json!({ "data": STANDARD.encode(bytes) });
    match output {
        Output::Stdout(bytes) => (json!({ "stdout": data(&bytes) }), false),
        Output::Stderr(bytes) => (json!({ "stderr": data(&bytes) }), false),
        Output::StdoutClose(_) => (json!({ "stdout": { "close": true } }), false),
        Output::StderrClose(_) => (json!({ "stderr": { "close": true } }), false),
        Output::ExitCode(code) => (
            json!({ "exited": true, "result": { "exit_code": code } }),
            true,
        ),
    }
}

/// The close frame of an error, coded as Nomad codes it: 1011 for a
/// failure of the server, 1008 for a refusal.
fn close_of(code: Code, reason: &str) -> Message {
    let code = match code {
        Code::Internal | Code::Unknown | Code::Unavailable | Code::DataLoss => CLOSE_INTERNAL,
        _ => CLOSE_POLICY,
    };
    close_with(code, reason)
}

fn close_with(code: u16, reason: &str) -> Message {
    // A close frame's reason is at most 123 bytes.
    let mut end = reason.len().min(123);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    Message::Close(Some(CloseFrame {
        code,
        reason: reason[..end].into(),
    }))
}

/// Sends the close frame `close` and reads what the caller still sends
/// until it closes too (for a short while at most): a connection closed
/// with unread input is reset, and a reset can cost the caller the last
/// frames it had not read yet (the exit code).
async fn end(socket: &mut WebSocket, close: Message) {
    if socket.send(close).await.is_err() {
        return;
    }
    let _ = tokio::time::timeout(CLOSE_WAIT, async {
        while let Some(Ok(msg)) = socket.recv().await {
            if matches!(msg, Message::Close(_)) {
                break;
            }
        }
    })
    .await;
}

/// Reads the handshake frame; the node-exec right of the token it names.
async fn authenticate(
    socket: &mut WebSocket,
    http: &Http,
    target: &ExecTarget,
    header_token: Option<String>,
) -> Result<bool, (Code, String)> {
    let refused = |why: String| (Code::InvalidArgument, why);
    let text = match socket.recv().await {
        Some(Ok(Message::Text(text))) => text,
        _ => return Err(refused("expected the handshake frame".into())),
    };
    let hello: Handshake = serde_json::from_str(text.as_str())
        .map_err(|e| refused(format!("invalid handshake frame: {e}")))?;
    if let Some(header) = header_token
        && header != hello.auth_token
    {
        return Err(refused(
            "handshake auth token mismatched auth header token".into(),
        ));
    }
    if hello.version != 1 {
        return Err(refused(format!(
            "unexpected handshake value: {}",
            hello.version
        )));
    }
    let Some(cache) = &http.gw.acl else {
        return Ok(true);
    };
    let secret = Some(hello.auth_token.as_str()).filter(|s| !s.is_empty());
    let caller = caravan_gateway_core::acl::workload::resolve(&http.gw, cache, secret)
        .await
        .map_err(|e| (Code::PermissionDenied, e.message()))?;
    alloc_exec::rights(Some(&caller.acl), &target.namespace)
        .map_err(|e| (Code::PermissionDenied, e.to_string()))
}

/// Runs one exec over the upgraded connection.
async fn session(
    mut socket: WebSocket,
    http: Http,
    target: ExecTarget,
    setup: ExecSetup,
    auth: Auth,
    handshake: bool,
) {
    let node_exec = match auth {
        Auth::Decided(node_exec) => {
            // With ACLs off the handshake frame is read and not needed.
            if handshake && !matches!(socket.recv().await, Some(Ok(Message::Text(_)))) {
                return;
            }
            node_exec
        }
        Auth::Handshake(header) => match authenticate(&mut socket, &http, &target, header).await {
            Ok(node_exec) => node_exec,
            Err((code, why)) => {
                end(&mut socket, close_of(code, &why)).await;
                return;
            }
        },
    };
    let (inputs, rx) = mpsc::channel(16);
    let started = alloc_exec::start(target, setup, node_exec, ReceiverStream::new(rx)).await;
    let mut outputs = match started {
        Ok(outputs) => outputs,
        Err(e) => {
            let code = e.code();
            end(&mut socket, close_of(code, &e.to_string())).await;
            return;
        }
    };
    loop {
        tokio::select! {
            received = socket.recv() => {
                let text = match received {
                    Some(Ok(Message::Text(text))) => text.as_str().to_owned(),
                    Some(Ok(Message::Binary(bytes))) => String::from_utf8_lossy(&bytes).into_owned(),
                    Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                    // The caller went away: so does the command's stream.
                    Some(Ok(Message::Close(_)) | Err(_)) | None => return,
                };
                match input_of(&text) {
                    // Refused once the node has ended the command: its
                    // last answers may still be on their way.
                    Ok(Some(input)) => {
                        let _ = inputs.send(input).await;
                    }
                    Ok(None) => {}
                    Err(why) => {
                        end(&mut socket, close_with(CLOSE_POLICY, &why)).await;
                        return;
                    }
                }
            }
            answered = outputs.message() => {
                let output = match answered {
                    Ok(Some(ExecOutput { output: Some(output) })) => output,
                    Ok(Some(ExecOutput { output: None })) => continue,
                    Ok(None) => {
                        let why = "the node ended the exec without an exit code";
                        end(&mut socket, close_with(CLOSE_INTERNAL, why)).await;
                        return;
                    }
                    Err(status) => {
                        end(&mut socket, close_of(status.code(), status.message())).await;
                        return;
                    }
                };
                let (frame, last) = frame_of(output);
                if socket.send(Message::Text(frame.to_string().into())).await.is_err() {
                    return;
                }
                if last {
                    end(&mut socket, close_with(CLOSE_NORMAL, "")).await;
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_in_become_messages_for_the_node() {
        let stdin = input_of(r#"{"stdin":{"data":"aGkK"}}"#).unwrap().unwrap();
        assert_eq!(stdin.input, Some(Input::Stdin(b"hi\n".to_vec())));
        let close = input_of(r#"{"stdin":{"close":true}}"#).unwrap().unwrap();
        assert_eq!(close.input, Some(Input::StdinClose(true)));
        let size = input_of(r#"{"tty_size":{"height":40,"width":120}}"#)
            .unwrap()
            .unwrap();
        assert_eq!(
            size.input,
            Some(Input::TtySize(ExecTtySize {
                height: 40,
                width: 120
            }))
        );
        assert_eq!(input_of("{}").unwrap(), None, "a heartbeat");
        assert!(
            input_of(r#"{"stdin":{"data":"%%"}}"#)
                .unwrap_err()
                .contains("base64")
        );
        assert!(input_of("nope").is_err());
    }

    #[test]
    fn answers_become_nomads_frames() {
        let (out, last) = frame_of(Output::Stdout(b"hi".to_vec()));
        assert_eq!(out, json!({"stdout": {"data": "aGk="}}));
        assert!(!last);
        let (exited, last) = frame_of(Output::ExitCode(3));
        assert_eq!(exited, json!({"exited": true, "result": {"exit_code": 3}}));
        assert!(last);
        assert!(wants_handshake(Some("task=t&ws_handshake=true")));
        assert!(!wants_handshake(Some("task=t")));
    }
}

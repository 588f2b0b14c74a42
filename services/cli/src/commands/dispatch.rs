//! `job dispatch`: a child of a parameterized job, with a payload from a
//! file or standard input and `-meta key=value` pairs.

use std::collections::BTreeMap;
use std::io::Read;

use caravan_proto::DispatchJobRequest;

use crate::api::Api;
use crate::error::CliError;
use crate::format::{SHORT_ID, kv, limit};
use crate::lookup;
use crate::monitor::monitor;
use crate::ui::Ui;

type Result<T> = std::result::Result<T, CliError>;

/// `key=value` pairs as a map; the value may itself hold `=`.
pub(crate) fn parse_meta(pairs: &[String]) -> Result<BTreeMap<String, String>> {
    let mut meta = BTreeMap::new();
    for pair in pairs {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(CliError::Usage(format!("Error parsing meta value: {pair}")));
        };
        meta.insert(key.to_string(), value.to_string());
    }
    Ok(meta)
}

/// The payload: none without an input, `stdin` for `-`, else the file.
pub(crate) fn read_payload(input: Option<&str>, stdin: impl Read) -> Result<Vec<u8>> {
    let read = match input {
        None => return Ok(Vec::new()),
        Some("-") => {
            let mut buf = Vec::new();
            let mut stdin = stdin;
            stdin.read_to_end(&mut buf).map(|_| buf)
        }
        Some(path) => std::fs::read(path),
    };
    read.map_err(|e| CliError::Other(format!("Error reading input data: {e}")))
}

/// What `job dispatch` was asked for beside the job and its input.
#[derive(Debug, Default)]
pub(super) struct DispatchFlags<'a> {
    /// `-meta k=v`, repeated.
    pub meta: &'a [String],
    /// `-idempotency-token`: a second dispatch with the token of a child
    /// that still exists answers that child.
    pub idempotency_token: Option<String>,
    /// `-id-prefix-template`: put into the child's id.
    pub id_prefix_template: Option<String>,
    /// `-detach`.
    pub detach: bool,
    /// `-verbose`: full evaluation ids.
    pub verbose: bool,
}

/// `job dispatch [-meta k=v]... [-idempotency-token t] [-id-prefix-template p]
/// [-detach] <job> [input|-]`.
pub(super) async fn dispatch(
    api: &Api,
    ui: &mut Ui,
    id: &str,
    input: Option<&str>,
    flags: DispatchFlags<'_>,
) -> Result<u8> {
    let meta = parse_meta(flags.meta)?;
    let payload = read_payload(input, std::io::stdin().lock())?;
    let job = lookup::job(api, id).await?;
    let request = DispatchJobRequest {
        job_id: job.id.clone(),
        payload,
        meta,
        id_prefix_template: flags.id_prefix_template.unwrap_or_default(),
        idempotency_token: flags.idempotency_token.unwrap_or_default(),
        ..Default::default()
    };
    let resp = api.dispatch_job(request).await?;
    let (detach, verbose) = (flags.detach, flags.verbose);
    let n = if verbose { usize::MAX } else { SHORT_ID };
    let mut pairs = vec![("Dispatched Job ID", resp.dispatched_job_id.clone())];
    if !resp.eval_id.is_empty() {
        pairs.push(("Evaluation ID", limit(&resp.eval_id, n).to_string()));
    }
    ui.output(kv(&pairs));
    if detach || resp.eval_id.is_empty() {
        return Ok(0);
    }
    ui.output("");
    monitor(api, ui, &resp.eval_id).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_pairs_split_on_the_first_equals_sign() {
        let meta = parse_meta(&["a=1".into(), "b=x=y".into(), "c=".into()]).unwrap();
        assert_eq!(meta.get("a").map(String::as_str), Some("1"));
        assert_eq!(meta.get("b").map(String::as_str), Some("x=y"));
        assert_eq!(meta.get("c").map(String::as_str), Some(""));
        let err = parse_meta(&["novalue".into()]).unwrap_err();
        assert_eq!(err.to_string(), "Error parsing meta value: novalue");
    }

    #[test]
    fn payloads_come_from_stdin_or_a_file() {
        assert!(read_payload(None, &b"ignored"[..]).unwrap().is_empty());
        assert_eq!(
            read_payload(Some("-"), &b"from stdin"[..]).unwrap(),
            b"from stdin"
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("input.txt");
        std::fs::write(&file, b"from a file").unwrap();
        let path = file.display().to_string();
        assert_eq!(read_payload(Some(&path), &b""[..]).unwrap(), b"from a file");
        let missing = dir.path().join("missing").display().to_string();
        let err = read_payload(Some(&missing), &b""[..]).unwrap_err();
        assert!(
            err.to_string().starts_with("Error reading input data: "),
            "{err}"
        );
    }
}

//! `alloc fs`, `alloc signal`, `alloc restart`, and the `-tail` of
//! `alloc logs`: what the client node running an allocation answers,
//! reached through the api-gateway by the SDK's alloc calls.

use std::time::Duration;

use caravan_proto::{AllocFileInfo, ReadAllocFileRequest};
use futures::StreamExt;

use crate::api::Api;
use crate::backend::ByteStream;
use crate::error::CliError;
use crate::format::{ibytes, rfc3339, table};
use crate::lookup;
use crate::ui::Ui;

type Result<T> = std::result::Result<T, CliError>;

/// Nomad's guess of a line's length, to turn `-n` lines into bytes to read.
const BYTES_PER_LINE: i64 = 120;
/// Lines `-tail` prints without `-n` or `-c`.
const DEFAULT_TAIL_LINES: i64 = 10;
/// How long the start of a tail is gathered before it is cut to its lines.
const TAIL_GATHER: Duration = Duration::from_secs(1);

/// `-tail`'s `-n` and `-c`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Tail {
    /// Lines to print.
    pub lines: Option<i64>,
    /// Bytes to print.
    pub bytes: Option<i64>,
}

impl Tail {
    /// How far back from the end to read, and how many lines of that to
    /// keep (none: all of it).
    pub(super) fn window(self) -> Result<(i64, Option<usize>)> {
        match (self.lines, self.bytes) {
            (Some(_), Some(_)) => Err(CliError::Usage("Both -n and -c are not allowed".into())),
            (Some(n), _) | (_, Some(n)) if n < 0 => {
                Err(CliError::Usage("Invalid size is specified".into()))
            }
            (Some(n), None) => Ok((
                n.saturating_mul(BYTES_PER_LINE),
                Some(usize::try_from(n).unwrap_or(usize::MAX)),
            )),
            (None, Some(c)) => Ok((c, None)),
            (None, None) => Ok((
                DEFAULT_TAIL_LINES * BYTES_PER_LINE,
                Some(DEFAULT_TAIL_LINES as usize),
            )),
        }
    }
}

/// The last `n` lines of `data` (a final newline ends the last line).
pub(super) fn last_lines(data: &[u8], n: usize) -> &[u8] {
    if n == 0 {
        return &data[data.len()..];
    }
    let body = data.strip_suffix(b"\n").unwrap_or(data);
    let mut seen = 0;
    for (i, b) in body.iter().enumerate().rev() {
        if *b == b'\n' {
            seen += 1;
            if seen == n {
                return &data[i + 1..];
            }
        }
    }
    data
}

/// Prints a stream of bytes; with `keep_lines`, what arrives first (within
/// a second, or all of it if the stream ends sooner) is cut to its last
/// lines before it is printed, as Nomad's tail does.
pub(super) async fn print_stream(
    ui: &mut Ui,
    mut stream: ByteStream,
    keep_lines: Option<usize>,
) -> Result<()> {
    let on_error = |e: caravan_client::Error| CliError::sdk("Error reading file", e);
    if let Some(n) = keep_lines {
        let deadline = tokio::time::Instant::now() + TAIL_GATHER;
        let mut head = Vec::new();
        loop {
            match tokio::time::timeout_at(deadline, stream.next()).await {
                Ok(Some(chunk)) => head.extend(chunk.map_err(&on_error)?),
                Ok(None) => {
                    ui.raw(false, last_lines(&head, n));
                    return Ok(());
                }
                Err(_) => break,
            }
        }
        ui.raw(false, last_lines(&head, n));
    }
    while let Some(chunk) = stream.next().await {
        ui.raw(false, &chunk.map_err(&on_error)?);
    }
    Ok(())
}

/// What `alloc fs` was asked.
#[derive(Debug, Clone, Default)]
pub(super) struct FsArgs {
    pub alloc: String,
    pub path: Option<String>,
    pub stat: bool,
    pub follow: bool,
    pub tail: Option<Tail>,
    pub machine: bool,
}

fn size(f: &AllocFileInfo, machine: bool) -> String {
    let bytes = u64::try_from(f.size).unwrap_or(0);
    if machine {
        bytes.to_string()
    } else {
        ibytes(bytes)
    }
}

fn name(f: &AllocFileInfo) -> String {
    if f.is_dir {
        format!("{}/", f.name)
    } else {
        f.name.clone()
    }
}

/// The table `alloc fs` prints for a directory.
pub(super) fn listing(files: &[AllocFileInfo], machine: bool) -> String {
    let mut rows = vec![vec![
        "Mode".to_string(),
        "Size".into(),
        "Modified Time".into(),
        "Name".into(),
    ]];
    for f in files {
        rows.push(vec![
            f.file_mode.clone(),
            size(f, machine),
            rfc3339(f.mod_time_unix_ns),
            name(f),
        ]);
    }
    table(rows)
}

/// The table `alloc fs -stat` prints.
pub(super) fn stat_table(f: &AllocFileInfo, machine: bool) -> String {
    table(vec![
        vec![
            "Mode".to_string(),
            "Size".into(),
            "Modified Time".into(),
            "Content Type".into(),
            "Name".into(),
        ],
        vec![
            f.file_mode.clone(),
            size(f, machine),
            rfc3339(f.mod_time_unix_ns),
            f.content_type.clone(),
            name(f),
        ],
    ])
}

/// `alloc fs`: a directory's listing, a file's details or its contents.
pub(super) async fn fs(api: &Api, ui: &mut Ui, args: FsArgs) -> Result<u8> {
    let window = args.tail.map(Tail::window).transpose()?;
    let alloc = lookup::alloc(api, &args.alloc).await?;
    let path = args.path.unwrap_or_else(|| "/".into());
    let file = api.stat_file(&alloc.id, &path).await?;
    if args.stat {
        ui.output(stat_table(&file, args.machine));
        return Ok(0);
    }
    if file.is_dir {
        let files = api.list_files(&alloc.id, &path).await?;
        ui.output(listing(&files, args.machine));
        return Ok(0);
    }
    let (offset, from_end, keep_lines) = match window {
        Some((back, lines)) => (back, true, lines),
        None => (0, false, None),
    };
    let req = ReadAllocFileRequest {
        alloc_id: alloc.id.clone(),
        path,
        offset,
        from_end,
        limit: 0,
        follow: args.follow,
    };
    let stream = api.read_file(req).await?;
    print_stream(ui, stream, keep_lines).await?;
    Ok(0)
}

/// The task named by `-task` or by the second argument (not both, unless
/// they agree).
pub(super) fn one_task(flag: Option<String>, arg: Option<String>) -> Result<Option<String>> {
    match (flag, arg) {
        (Some(f), Some(a)) if f != a => Err(CliError::Usage(format!(
            "The task is given twice: -task {f:?} and {a:?}"
        ))),
        (f, a) => Ok(f.or(a)),
    }
}

/// `alloc signal`: Nomad prints nothing when the signal is sent.
pub(super) async fn signal(
    api: &Api,
    id: &str,
    signal: Option<String>,
    task: Option<String>,
) -> Result<u8> {
    let alloc = lookup::alloc(api, id).await?;
    api.signal_allocation(&alloc.id, task.as_deref(), &signal.unwrap_or_default())
        .await?;
    Ok(0)
}

/// `alloc restart`: returns once the tasks run again.
pub(super) async fn restart(
    api: &Api,
    id: &str,
    task: Option<String>,
    all_tasks: bool,
) -> Result<u8> {
    if all_tasks && task.is_some() {
        return Err(CliError::Usage(
            "The -all-tasks option is not allowed when restarting a specific task.".into(),
        ));
    }
    let alloc = lookup::alloc(api, id).await?;
    api.restart_allocation(&alloc.id, task.as_deref(), all_tasks)
        .await?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_task_is_a_flag_or_an_argument() {
        assert_eq!(
            one_task(Some("a".into()), None).unwrap().as_deref(),
            Some("a")
        );
        assert_eq!(
            one_task(None, Some("b".into())).unwrap().as_deref(),
            Some("b")
        );
        assert_eq!(one_task(None, None).unwrap(), None);
        assert!(one_task(Some("a".into()), Some("b".into())).is_err());
    }

    #[test]
    fn tails_are_cut_to_lines() {
        assert_eq!(last_lines(b"a\nb\nc\n", 2), b"b\nc\n");
        assert_eq!(last_lines(b"a\nb\nc", 2), b"b\nc");
        assert_eq!(last_lines(b"a\nb\n", 5), b"a\nb\n");
        assert_eq!(last_lines(b"a\nb\n", 0), b"");
    }

    #[test]
    fn tail_windows_follow_nomad() {
        let t = |lines, bytes| Tail { lines, bytes }.window();
        assert_eq!(t(None, None).unwrap(), (1200, Some(10)));
        assert_eq!(t(Some(3), None).unwrap(), (360, Some(3)));
        assert_eq!(t(None, Some(7)).unwrap(), (7, None));
        assert!(t(Some(1), Some(1)).is_err());
        assert!(t(Some(-2), None).is_err());
    }

    #[test]
    fn listings_mark_directories() {
        let files = vec![
            AllocFileInfo {
                name: "alloc".into(),
                is_dir: true,
                size: 4096,
                file_mode: "drwxr-xr-x".into(),
                mod_time_unix_ns: 1_700_000_000_000_000_000,
                ..Default::default()
            },
            AllocFileInfo {
                name: "x.txt".into(),
                size: 6,
                file_mode: "-rw-r--r--".into(),
                mod_time_unix_ns: 1_700_000_000_000_000_000,
                ..Default::default()
            },
        ];
        let out = listing(&files, false);
        assert!(out.starts_with("Mode"), "{out}");
        assert!(
            out.contains("drwxr-xr-x  4.0 KiB  2023-11-14T22:13:20Z  alloc/"),
            "{out}"
        );
        assert!(out.contains("6 B"), "{out}");
        assert!(listing(&files, true).contains("  4096  "));
    }
}

//! A task's artifacts, with Nomad's validation texts (`TaskArtifact.Validate`), and the
//! sources and options Caravan's clients cannot fetch, refused by name.

use super::Errors;
use crate::error::join_path as join;
use caravan_proto::Task;

const MODES: &[&str] = &["any", "file", "dir"];
/// The go-getter options Caravan's clients honour.
const OPTIONS: &[&str] = &["checksum", "archive"];
/// The getters (URL schemes) Caravan's clients fetch with.
const GETTERS: &[&str] = &["http", "https", "file"];
/// Hosts go-getter fetches with another getter than http when no scheme is written.
const DETECTED: &[(&str, &str)] = &[
    ("github.com/", "git"),
    ("gitlab.com/", "git"),
    ("bitbucket.org/", "git"),
    ("git@", "git"),
    (".amazonaws.com/", "s3"),
    ("storage.googleapis.com/", "gcs"),
    ("www.googleapis.com/storage/", "gcs"),
];

/// Checks every artifact of a task.
pub(super) fn check(t: &Task, tbase: &str, e: &mut Errors) {
    for (i, a) in t.artifacts.iter().enumerate() {
        let path = join(tbase, &format!("artifact[{i}]"));
        if a.source.is_empty() {
            e.on(&path, "source", "source must be specified");
        } else if let Some(getter) = refused_getter(&a.source) {
            e.on(
                &path,
                "source",
                format!(
                    "the {getter:?} getter is not supported by Caravan: its clients fetch artifacts over http(s) and from local files only"
                ),
            );
        }
        if !MODES.contains(&a.mode.as_str()) {
            e.on(
                &path,
                "mode",
                format!(
                    "invalid artifact mode {:?}; must be one of: any, file, dir",
                    a.mode
                ),
            );
        }
        if super::paths::escapes_alloc_dir(&a.destination) {
            e.on(
                &path,
                "destination",
                "destination escapes allocation directory",
            );
        }
        for name in a.options.keys() {
            if !OPTIONS.contains(&name.as_str()) {
                e.on(
                    &path,
                    &format!("options.{name}"),
                    format!(
                        "artifact option {name:?} is not supported by Caravan: its clients honour only checksum and archive"
                    ),
                );
            }
        }
        if let Some(sum) = a.options.get("checksum")
            && let Err(message) = checksum(sum)
        {
            e.on(&path, "options.checksum", message);
        }
    }
}

/// The getter a source names (`git::…`, `s3://…`) or go-getter would pick for it
/// (`github.com/…`), when Caravan's clients have no such getter.
fn refused_getter(source: &str) -> Option<String> {
    if let Some((forced, _)) = source.split_once("::") {
        let forced = forced.to_ascii_lowercase();
        return (!GETTERS.contains(&forced.as_str())).then_some(forced);
    }
    if let Some((scheme, _)) = source.split_once("://") {
        let scheme = scheme.to_ascii_lowercase();
        return (!GETTERS.contains(&scheme.as_str())).then_some(scheme);
    }
    DETECTED
        .iter()
        .find(|(marker, _)| source.starts_with(marker) || source.contains(marker))
        .map(|(_, getter)| (*getter).to_string())
}

/// A `type:hex` checksum, as Nomad checks it; one naming an env variable is left for
/// the client, which interpolates it.
fn checksum(value: &str) -> Result<(), String> {
    if value.contains("${") {
        return Ok(());
    }
    let check = value.trim();
    if check.is_empty() {
        return Err("checksum value cannot be empty".into());
    }
    let parts: Vec<&str> = check.split(':').collect();
    let [kind, hex] = parts.as_slice() else {
        return Err(format!(
            "checksum must be given as \"type:value\"; got {check:?}"
        ));
    };
    if hex.len() % 2 != 0 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("invalid checksum: {hex:?} is not hexadecimal"));
    }
    let expected = match *kind {
        "md5" => 16,
        "sha1" => 20,
        "sha256" => 32,
        "sha512" => 64,
        other => return Err(format!("unsupported checksum type: {other}")),
    };
    if hex.len() / 2 != expected {
        return Err(format!("invalid {kind} checksum: {hex}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn getters_are_found_forced_by_scheme_and_by_host() {
        assert_eq!(refused_getter("https://example.com/a.tgz"), None);
        assert_eq!(refused_getter("file:///tmp/a"), None);
        assert_eq!(refused_getter("local/a.txt"), None);
        assert_eq!(refused_getter("http::example.com/a"), None);
        assert_eq!(
            refused_getter("git::https://x/y.git").as_deref(),
            Some("git")
        );
        assert_eq!(refused_getter("s3://bucket/key").as_deref(), Some("s3"));
        assert_eq!(
            refused_getter("github.com/hashicorp/nomad").as_deref(),
            Some("git")
        );
        assert_eq!(
            refused_getter("bucket.s3.amazonaws.com/key").as_deref(),
            Some("s3")
        );
    }

    #[test]
    fn checksums_are_checked_for_type_and_length() {
        assert!(checksum(&format!("sha256:{}", "ab".repeat(32))).is_ok());
        assert!(checksum(&format!("md5:{}", "0f".repeat(16))).is_ok());
        assert!(checksum("${NOMAD_META_sum}").is_ok());
        assert_eq!(
            checksum("sha256:abcd").unwrap_err(),
            "invalid sha256 checksum: abcd"
        );
        assert_eq!(
            checksum("crc32:abcd").unwrap_err(),
            "unsupported checksum type: crc32"
        );
        assert!(
            checksum("abcd")
                .unwrap_err()
                .starts_with("checksum must be given")
        );
        assert!(
            checksum("sha1:zz")
                .unwrap_err()
                .starts_with("invalid checksum")
        );
        assert_eq!(checksum(" ").unwrap_err(), "checksum value cannot be empty");
    }
}

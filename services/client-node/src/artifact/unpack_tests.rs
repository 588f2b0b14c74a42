use std::io::Write;
use std::os::unix::fs::PermissionsExt;

use super::*;

fn tar_bytes(entries: &[(&str, &[u8], u32)]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (path, data, mode) in entries {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(*mode);
        h.set_entry_type(tar::EntryType::Regular);
        b.append_data(&mut h, path, *data).unwrap();
    }
    b.into_inner().unwrap()
}

/// A tar whose one entry has a raw name the builder itself would refuse.
fn tar_raw(name: &str, kind: tar::EntryType, link: &str) -> Vec<u8> {
    let mut h = tar::Header::new_old();
    h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
    h.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
    h.set_entry_type(kind);
    h.set_size(0);
    h.set_mode(0o644);
    h.set_cksum();
    let mut out = h.as_bytes().to_vec();
    out.extend_from_slice(&[0u8; 1024]);
    out
}

fn gz(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn bz2(data: &[u8]) -> Vec<u8> {
    let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn xz(data: &[u8]) -> Vec<u8> {
    let mut e = lzma_rust2::XzWriter::new(Vec::new(), lzma_rust2::XzOptions::default()).unwrap();
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn zip_bytes(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, data) in entries {
        let opts = zip::write::SimpleFileOptions::default().unix_permissions(0o755);
        w.start_file(*name, opts).unwrap();
        w.write_all(data).unwrap();
    }
    w.finish().unwrap().into_inner()
}

struct Case {
    _dir: tempfile::TempDir,
    archive: std::path::PathBuf,
    dst: std::path::PathBuf,
}

fn case(bytes: &[u8]) -> Case {
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("archive");
    std::fs::write(&archive, bytes).unwrap();
    let dst = dir.path().join("out");
    Case {
        _dir: dir,
        archive,
        dst,
    }
}

fn run(c: &Case, kind: ArchiveKind, into_dir: bool) -> Result<(), ArtifactError> {
    unpack(
        kind,
        &c.archive,
        &c.dst,
        into_dir,
        &ArtifactLimits::default(),
    )
}

#[test]
fn kinds_follow_the_extension_or_the_archive_option() {
    let d = |p: &str, o: Option<&str>| ArchiveKind::detect(p, o).unwrap();
    assert_eq!(d("/a/app.tar.gz", None), Some(ArchiveKind::TarGz));
    assert_eq!(d("/a/app.TGZ", None), Some(ArchiveKind::TarGz));
    assert_eq!(d("/a/app.tbz2", None), Some(ArchiveKind::TarBz2));
    assert_eq!(d("/a/app.tar.xz", None), Some(ArchiveKind::TarXz));
    assert_eq!(d("/a/app.txz", None), Some(ArchiveKind::TarXz));
    assert_eq!(d("/a/app.tar", None), Some(ArchiveKind::Tar));
    assert_eq!(d("/a/app.zip", None), Some(ArchiveKind::Zip));
    assert_eq!(d("/a/app.gz", None), Some(ArchiveKind::Gz));
    assert_eq!(d("/a/app.bz2", None), Some(ArchiveKind::Bz2));
    assert_eq!(d("/a/app.xz", None), Some(ArchiveKind::Xz));
    assert_eq!(d("/a/app.bin", None), None);
    assert_eq!(d("/a/app.tar.gz", Some("false")), None);
    assert_eq!(d("/a/download", Some("zip")), Some(ArchiveKind::Zip));
    assert!(ArchiveKind::detect("/a", Some("rar")).is_err());
}

#[test]
fn tar_gz_unpacks_with_contents_and_modes() {
    let c = case(&gz(&tar_bytes(&[
        ("bin/run.sh", b"#!/bin/sh\necho hi\n", 0o755),
        ("conf/app.conf", b"port=1\n", 0o644),
    ])));
    run(&c, ArchiveKind::TarGz, true).unwrap();
    assert_eq!(
        std::fs::read(c.dst.join("conf/app.conf")).unwrap(),
        b"port=1\n"
    );
    let mode = std::fs::metadata(c.dst.join("bin/run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);
}

#[test]
fn tar_bz2_and_tar_xz_unpack() {
    let t = tar_bytes(&[("a.txt", b"A", 0o644)]);
    let c = case(&bz2(&t));
    run(&c, ArchiveKind::TarBz2, true).unwrap();
    assert_eq!(std::fs::read(c.dst.join("a.txt")).unwrap(), b"A");
    let c = case(&xz(&t));
    run(&c, ArchiveKind::TarXz, true).unwrap();
    assert_eq!(std::fs::read(c.dst.join("a.txt")).unwrap(), b"A");
    let c = case(&t);
    run(&c, ArchiveKind::Tar, true).unwrap();
    assert_eq!(std::fs::read(c.dst.join("a.txt")).unwrap(), b"A");
}

#[test]
fn single_file_compression_needs_file_mode() {
    for (kind, bytes, name) in [
        (ArchiveKind::Gz, gz(b"payload"), "gzip"),
        (ArchiveKind::Bz2, bz2(b"payload"), "bzip2"),
        (ArchiveKind::Xz, xz(b"payload"), "xz"),
    ] {
        let c = case(&bytes);
        let err = run(&c, kind, true).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("{name}-compressed files can only")),
            "{err}"
        );
        run(&c, kind, false).unwrap();
        assert_eq!(std::fs::read(&c.dst).unwrap(), b"payload");
    }
}

#[test]
fn file_mode_takes_the_one_file_of_an_archive() {
    let c = case(&gz(&tar_bytes(&[("only.txt", b"x", 0o644)])));
    run(&c, ArchiveKind::TarGz, false).unwrap();
    assert_eq!(std::fs::read(&c.dst).unwrap(), b"x");
    let c = case(&tar_bytes(&[("a", b"1", 0o644), ("b", b"2", 0o644)]));
    let err = run(&c, ArchiveKind::Tar, false).unwrap_err().to_string();
    assert!(err.contains("expected a single file"), "{err}");
    let c = case(&zip_bytes(&[("a", b"1"), ("b", b"2")]));
    assert!(run(&c, ArchiveKind::Zip, false).is_err());
}

#[test]
fn entries_climbing_out_are_refused() {
    let c = case(&tar_raw("../evil.txt", tar::EntryType::Regular, ""));
    let err = run(&c, ArchiveKind::Tar, true).unwrap_err().to_string();
    assert!(err.contains("outside the destination"), "{err}");
    assert!(!c.dst.parent().unwrap().join("evil.txt").exists());
    let c = case(&zip_bytes(&[("../evil.txt", b"x")]));
    let err = run(&c, ArchiveKind::Zip, true).unwrap_err().to_string();
    assert!(err.contains("outside the destination"), "{err}");
}

#[test]
fn symlinks_pointing_outside_are_refused() {
    for target in ["/etc/passwd", "../../etc", "a/../../x"] {
        let c = case(&tar_raw("link", tar::EntryType::Symlink, target));
        let err = run(&c, ArchiveKind::Tar, true).unwrap_err().to_string();
        assert!(
            err.contains("points outside the destination"),
            "{target}: {err}"
        );
    }
    let c = case(&tar_raw("sub/link", tar::EntryType::Symlink, "../peer"));
    run(&c, ArchiveKind::Tar, true).unwrap();
    assert_eq!(
        std::fs::read_link(c.dst.join("sub/link")).unwrap(),
        std::path::Path::new("../peer")
    );
    let c = case(&tar_raw("hard", tar::EntryType::Link, "../../etc/passwd"));
    assert!(run(&c, ArchiveKind::Tar, true).is_err());
}

#[test]
fn entries_under_an_unpacked_symlink_are_refused() {
    let mut bytes = tar_raw("d", tar::EntryType::Symlink, ".");
    bytes.truncate(512);
    bytes.extend(tar_raw("d/z", tar::EntryType::Symlink, ".."));
    let c = case(&bytes);
    let err = run(&c, ArchiveKind::Tar, true).unwrap_err().to_string();
    assert!(err.contains("lies under the symlink"), "{err}");
}

#[test]
fn limits_stop_large_and_crowded_archives() {
    let big = vec![7u8; 10_000];
    let c = case(&gz(&tar_bytes(&[("big", &big, 0o644)])));
    let small = ArtifactLimits {
        decompression_size_limit: Some(1_000),
        ..ArtifactLimits::default()
    };
    let err = unpack(ArchiveKind::TarGz, &c.archive, &c.dst, true, &small)
        .unwrap_err()
        .to_string();
    assert!(err.contains("decompression_size_limit"), "{err}");
    let c = case(&gz(&big));
    let err = unpack(ArchiveKind::Gz, &c.archive, &c.dst, false, &small)
        .unwrap_err()
        .to_string();
    assert!(err.contains("decompression_size_limit"), "{err}");
    let few = ArtifactLimits {
        decompression_file_count_limit: Some(2),
        ..ArtifactLimits::default()
    };
    let c = case(&tar_bytes(&[
        ("a", b"", 0o644),
        ("b", b"", 0o644),
        ("c", b"", 0o644),
    ]));
    let err = unpack(ArchiveKind::Tar, &c.archive, &c.dst, true, &few)
        .unwrap_err()
        .to_string();
    assert!(err.contains("more than 2 files"), "{err}");
    let c = case(&zip_bytes(&[("a", b""), ("b", b""), ("c", b"")]));
    assert!(unpack(ArchiveKind::Zip, &c.archive, &c.dst, true, &few).is_err());
}

#[test]
fn zip_unpacks_with_modes() {
    let c = case(&zip_bytes(&[
        ("bin/tool", b"#!/bin/sh\n"),
        ("README", b"hi"),
    ]));
    run(&c, ArchiveKind::Zip, true).unwrap();
    assert_eq!(std::fs::read(c.dst.join("README")).unwrap(), b"hi");
    let mode = std::fs::metadata(c.dst.join("bin/tool"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);
}

//! An artifact's `checksum` option (`<type>:<hex>`) and its check against
//! the downloaded file.

use std::io::Read;
use std::path::Path;

use md5::Digest as _;

use super::ArtifactError;

/// The hash functions a checksum may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChecksumKind {
    /// `md5`
    Md5,
    /// `sha1`
    Sha1,
    /// `sha256`
    Sha256,
    /// `sha512`
    Sha512,
}

impl ChecksumKind {
    /// How the hash is named on the last line of a mismatch message (the
    /// wording jobs and operators already match on).
    fn type_name(self) -> &'static str {
        match self {
            ChecksumKind::Md5 => "*md5.digest",
            ChecksumKind::Sha1 => "*sha1.digest",
            ChecksumKind::Sha256 => "*sha256.digest",
            ChecksumKind::Sha512 => "*sha512.digest",
        }
    }

    fn digest_len(self) -> usize {
        match self {
            ChecksumKind::Md5 => 16,
            ChecksumKind::Sha1 => 20,
            ChecksumKind::Sha256 => 32,
            ChecksumKind::Sha512 => 64,
        }
    }
}

/// An expected checksum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checksum {
    /// The hash function.
    pub kind: ChecksumKind,
    /// The expected digest.
    pub expected: Vec<u8>,
}

impl Checksum {
    /// Parses `<type>:<hex>`; `file:<url>` (a checksum file) is refused.
    pub fn parse(value: &str) -> Result<Checksum, ArtifactError> {
        let bad = |why: String| ArtifactError::Checksum(why);
        let (kind, hex) = value
            .trim()
            .split_once(':')
            .ok_or_else(|| bad(format!("{value:?} is not <type>:<value>")))?;
        let kind = match kind.to_ascii_lowercase().as_str() {
            "md5" => ChecksumKind::Md5,
            "sha1" => ChecksumKind::Sha1,
            "sha256" => ChecksumKind::Sha256,
            "sha512" => ChecksumKind::Sha512,
            "file" => {
                return Err(bad(
                    "checksum files (file:<url>) are not supported; give <type>:<value>".into(),
                ));
            }
            other => {
                return Err(bad(format!(
                    "unsupported checksum type {other:?} (md5, sha1, sha256, sha512)"
                )));
            }
        };
        let expected = decode_hex(hex.trim())
            .ok_or_else(|| bad(format!("checksum value {hex:?} is not hexadecimal")))?;
        if expected.len() != kind.digest_len() {
            return Err(bad(format!(
                "a {} checksum is {} hex digits, got {}",
                kind.type_name()
                    .trim_start_matches('*')
                    .trim_end_matches(".digest"),
                kind.digest_len() * 2,
                hex.trim().len()
            )));
        }
        Ok(Checksum { kind, expected })
    }

    /// Hashes `file` (blocking) and compares; a mismatch names the artifact
    /// as `shown` and both digests.
    pub fn verify(&self, file: &Path, shown: &str) -> Result<(), ArtifactError> {
        let actual = hash_file(self.kind, file)
            .map_err(|e| ArtifactError::io("read for checksum", file, e))?;
        if actual == self.expected {
            return Ok(());
        }
        Err(ArtifactError::Checksum(format!(
            "Checksums did not match for {shown}.\nExpected: {}\nGot: {}\n{}",
            encode_hex(&self.expected),
            encode_hex(&actual),
            self.kind.type_name()
        )))
    }
}

fn hash_file(kind: ChecksumKind, file: &Path) -> std::io::Result<Vec<u8>> {
    let mut f = std::fs::File::open(file)?;
    let mut buf = vec![0u8; 64 * 1024];
    macro_rules! digest {
        ($h:expr, $update:ident, $finish:expr) => {{
            let mut h = $h;
            loop {
                let n = f.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                h.$update(&buf[..n]);
            }
            Ok($finish(h))
        }};
    }
    match kind {
        ChecksumKind::Md5 => digest!(md5::Md5::new(), update, |h: md5::Md5| h.finalize().to_vec()),
        ChecksumKind::Sha1 => digest!(sha1_smol::Sha1::new(), update, |h: sha1_smol::Sha1| h
            .digest()
            .bytes()
            .to_vec()),
        ChecksumKind::Sha256 => digest!(sha2::Sha256::new(), update, |h: sha2::Sha256| h
            .finalize()
            .to_vec()),
        ChecksumKind::Sha512 => digest!(sha2::Sha512::new(), update, |h: sha2::Sha512| h
            .finalize()
            .to_vec()),
    }
}

fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !s.is_ascii() {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}

fn encode_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HELLO_SHA256: &str = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";

    fn file(content: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, content).unwrap();
        (dir, p)
    }

    #[test]
    fn every_kind_verifies_a_matching_file() {
        let (_d, p) = file(b"hello");
        for c in [
            "md5:5d41402abc4b2a76b9719d911017c592",
            "sha1:aaf4c61ddcc5e8a2dabede0f3b482cd9aea9434d",
            &format!("sha256:{HELLO_SHA256}"),
            "SHA512:9b71d224bd62f3785d96d46ad3ea3d73319bfbc2890caadae2dff72519673ca72323c3d99ba5c11d7c7acc6e14b8c5da0c4663475c2e5c3adef46f73bcdec043",
        ] {
            Checksum::parse(c).unwrap().verify(&p, "f").unwrap();
        }
    }

    #[test]
    fn a_mismatch_names_the_file_and_both_digests() {
        let (_d, p) = file(b"hello!");
        let want = format!("sha256:{HELLO_SHA256}");
        let err = Checksum::parse(&want)
            .unwrap()
            .verify(&p, "app.bin")
            .unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains(&format!(
                "Checksums did not match for app.bin.\nExpected: {HELLO_SHA256}\nGot: "
            )),
            "{msg}"
        );
        assert!(msg.ends_with("\n*sha256.digest"), "{msg}");
    }

    #[test]
    fn bad_checksums_are_refused() {
        for (c, why) in [
            ("nocolon", "not <type>:<value>"),
            ("crc32:abcd", "unsupported checksum type"),
            ("file:https://example.com/SHASUMS", "not supported"),
            ("md5:zz", "not hexadecimal"),
            ("sha256:abcd", "64 hex digits"),
        ] {
            let e = Checksum::parse(c).unwrap_err().to_string();
            assert!(e.contains(why), "{c}: {e}");
        }
    }
}

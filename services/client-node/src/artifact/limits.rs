//! The client's `[artifact]` settings: how long and how large a download and
//! an unpacked archive may be, so one job cannot fill or stall the node.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The `[artifact]` table of the client's configuration, in the units an
/// operator writes (`"30m"`, `"100GB"`); [`ArtifactConfig::limits`] parses it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ArtifactConfig {
    /// Longest an HTTP download may take, start to end; `0` for no limit.
    pub http_read_timeout: String,
    /// Largest HTTP download (`100GB`, `512MiB`, bytes); `0` for no limit.
    pub http_max_size: String,
    /// Largest total size an archive may unpack to; `0` for no limit.
    pub decompression_size_limit: String,
    /// Most files an archive may unpack; `0` for no limit.
    pub decompression_file_count_limit: u64,
}

impl Default for ArtifactConfig {
    fn default() -> Self {
        ArtifactConfig {
            http_read_timeout: "30m".into(),
            http_max_size: "100GB".into(),
            decompression_size_limit: "100GB".into(),
            decompression_file_count_limit: 4096,
        }
    }
}

/// The parsed limits a fetch enforces; `None` means unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArtifactLimits {
    /// Longest an HTTP download may take.
    pub http_read_timeout: Option<Duration>,
    /// Largest HTTP body in bytes.
    pub http_max_size: Option<u64>,
    /// Largest total unpacked size in bytes.
    pub decompression_size_limit: Option<u64>,
    /// Most files unpacked from one archive.
    pub decompression_file_count_limit: Option<u64>,
}

impl Default for ArtifactLimits {
    fn default() -> Self {
        ArtifactConfig::default()
            .limits()
            .unwrap_or(ArtifactLimits::UNLIMITED)
    }
}

impl ArtifactLimits {
    /// No limit at all.
    pub const UNLIMITED: ArtifactLimits = ArtifactLimits {
        http_read_timeout: None,
        http_max_size: None,
        decompression_size_limit: None,
        decompression_file_count_limit: None,
    };
}

impl ArtifactConfig {
    /// Parses the settings, naming the first bad key (`artifact.<key>`).
    pub fn limits(&self) -> Result<ArtifactLimits, (String, String)> {
        let timeout = match self.http_read_timeout.trim() {
            "0" => None,
            t => Some(humantime::parse_duration(t).map_err(|e| {
                (
                    "artifact.http_read_timeout".to_string(),
                    format!("expected a duration like 30m: {e}"),
                )
            })?),
        };
        let size = |key: &str, v: &str| {
            parse_bytes(v)
                .map(|n| (n > 0).then_some(n))
                .map_err(|e| (format!("artifact.{key}"), e))
        };
        let count = self.decompression_file_count_limit;
        Ok(ArtifactLimits {
            http_read_timeout: timeout.filter(|d| !d.is_zero()),
            http_max_size: size("http_max_size", &self.http_max_size)?,
            decompression_size_limit: size(
                "decompression_size_limit",
                &self.decompression_size_limit,
            )?,
            decompression_file_count_limit: (count > 0).then_some(count),
        })
    }
}

/// Parses a byte size: a number with an optional SI (`KB`, `MB`, `GB`, `TB`,
/// powers of 1000) or IEC (`KiB`, `MiB`, `GiB`, `TiB`, powers of 1024) unit.
pub fn parse_bytes(input: &str) -> Result<u64, String> {
    let s = input.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("expected a size like 100GB or 512MiB, got {input:?}"))?;
    let factor: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1_000,
        "m" | "mb" => 1_000_000,
        "g" | "gb" => 1_000_000_000,
        "t" | "tb" => 1_000_000_000_000,
        "ki" | "kib" => 1 << 10,
        "mi" | "mib" => 1 << 20,
        "gi" | "gib" => 1 << 30,
        "ti" | "tib" => 1 << 40,
        other => return Err(format!("unknown size unit {other:?} in {input:?}")),
    };
    let bytes = value * factor as f64;
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(format!("size {input:?} is too large"));
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_documented_limits() {
        let l = ArtifactConfig::default().limits().unwrap();
        assert_eq!(l.http_read_timeout, Some(Duration::from_secs(30 * 60)));
        assert_eq!(l.http_max_size, Some(100_000_000_000));
        assert_eq!(l.decompression_size_limit, Some(100_000_000_000));
        assert_eq!(l.decompression_file_count_limit, Some(4096));
    }

    #[test]
    fn sizes_parse_in_si_and_iec_units() {
        assert_eq!(parse_bytes("512").unwrap(), 512);
        assert_eq!(parse_bytes("1KB").unwrap(), 1000);
        assert_eq!(parse_bytes("1 KiB").unwrap(), 1024);
        assert_eq!(parse_bytes("1.5mb").unwrap(), 1_500_000);
        assert_eq!(parse_bytes("2GiB").unwrap(), 2 << 30);
        assert!(parse_bytes("ten").is_err());
        assert!(parse_bytes("5 parsecs").is_err());
    }

    #[test]
    fn zero_means_unlimited_and_bad_values_name_the_key() {
        let c = ArtifactConfig {
            http_read_timeout: "0".into(),
            http_max_size: "0".into(),
            decompression_size_limit: "0".into(),
            decompression_file_count_limit: 0,
        };
        assert_eq!(c.limits().unwrap(), ArtifactLimits::UNLIMITED);
        let c = ArtifactConfig {
            http_max_size: "lots".into(),
            ..Default::default()
        };
        assert_eq!(c.limits().unwrap_err().0, "artifact.http_max_size");
        let c = ArtifactConfig {
            http_read_timeout: "soon".into(),
            ..Default::default()
        };
        assert_eq!(c.limits().unwrap_err().0, "artifact.http_read_timeout");
    }
}

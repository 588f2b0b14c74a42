//! Byte sizes in binary units (`300 MiB`, `3.7 GiB`).

/// `bytes` in the largest binary unit below it, with one decimal under 10.
pub fn ibytes(bytes: u64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 10 {
        return format!("{bytes} B");
    }
    let exp = ((bytes as f64).ln() / 1024f64.ln()).floor() as usize;
    let exp = exp.min(UNITS.len() - 1);
    let value = bytes as f64 / 1024f64.powi(exp as i32);
    // Rounded to one decimal first, so 9.96 shows as 10 rather than 10.0.
    let rounded = (value * 10.0).round() / 10.0;
    if rounded < 10.0 {
        format!("{rounded:.1} {}", UNITS[exp])
    } else {
        format!("{rounded:.0} {}", UNITS[exp])
    }
}

/// Megabytes (as resources are counted) to bytes.
pub fn mb(mb: u64) -> u64 {
    mb.saturating_mul(1024 * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_use_binary_units() {
        assert_eq!(ibytes(0), "0 B");
        assert_eq!(ibytes(512), "512 B");
        assert_eq!(ibytes(mb(300)), "300 MiB");
        assert_eq!(ibytes(mb(32)), "32 MiB");
        assert_eq!(ibytes(mb(3790)), "3.7 GiB");
        assert_eq!(ibytes(mb(1024)), "1.0 GiB");
    }
}

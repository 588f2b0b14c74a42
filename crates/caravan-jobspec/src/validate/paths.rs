//! Paths inside a task's directory that must stay inside its allocation's directory.

/// Whether `path`, taken relative to the task's directory (an absolute path is taken
/// from there too), climbs out of the allocation's directory with `..`. The task's
/// directory sits one level below the allocation's, so `../alloc/data` stays inside.
pub(super) fn escapes_alloc_dir(path: &str) -> bool {
    let mut depth: i64 = 1;
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                depth -= 1;
                if depth < 0 {
                    return true;
                }
            }
            _ => depth += 1,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::escapes_alloc_dir;

    #[test]
    fn only_climbing_out_of_the_alloc_dir_escapes() {
        for ok in [
            "local/",
            "local/a.txt",
            "/etc/x",
            "../alloc/data",
            "a/../../alloc",
            "",
        ] {
            assert!(!escapes_alloc_dir(ok), "{ok}");
        }
        for bad in ["../../etc", "../..", "local/../../../x", "/../../x"] {
            assert!(escapes_alloc_dir(bad), "{bad}");
        }
    }
}

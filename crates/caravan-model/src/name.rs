//! Allocation names: `<job>.<group>[<index>]`, the index a group's
//! allocations are counted by.

/// `<job>.<group>[<index>]`.
pub fn alloc_name(job_id: &str, group: &str, index: u32) -> String {
    let index = index.to_string();
    let mut s = String::with_capacity(job_id.len() + group.len() + index.len() + 3);
    s.push_str(job_id);
    s.push('.');
    s.push_str(group);
    s.push('[');
    s.push_str(&index);
    s.push(']');
    s
}

/// The host volume an allocation of index `index` mounts for a `per_alloc`
/// volume of `source`: `source[index]`.
pub fn per_alloc_source(source: &str, index: u32) -> String {
    format!("{source}[{index}]")
}

/// The index in an allocation name: the number between its last `[` and
/// the first `]` after it. What follows that `]` is ignored; see
/// [`trailing_alloc_index`] for the strict reading.
pub fn alloc_index(name: &str) -> Option<u32> {
    let open = name.rfind('[')?;
    let close = name[open..].find(']')? + open;
    name[open + 1..close].parse().ok()
}

/// The index in an allocation name that ends in `[<index>]`: `None` when
/// anything follows the `]`, where [`alloc_index`] would still read the
/// number. The client node exports it as `NOMAD_ALLOC_INDEX`.
pub fn trailing_alloc_index(name: &str) -> Option<u32> {
    let open = name.rfind('[')?;
    let inner = name.get(open + 1..)?.strip_suffix(']')?;
    inner.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let n = alloc_name("web", "api", 12);
        assert_eq!(n, "web.api[12]");
        assert_eq!(alloc_index(&n), Some(12));
        assert_eq!(trailing_alloc_index(&n), Some(12));
        assert_eq!(alloc_name("a.b", "c", 0), "a.b.c[0]");
    }

    #[test]
    fn malformed_names_have_no_index() {
        for read in [alloc_index, trailing_alloc_index] {
            assert_eq!(read("weird"), None);
            assert_eq!(read("a.b"), None);
            assert_eq!(read("a.b[x]"), None);
            assert_eq!(read("a.b[-1]"), None);
            assert_eq!(read("a.b[3"), None);
            assert_eq!(read("a[1].b[12]"), Some(12));
            assert_eq!(read("a.b[0]"), Some(0));
        }
    }

    #[test]
    fn only_the_strict_reading_refuses_a_suffix() {
        assert_eq!(alloc_index("a.b[3]x"), Some(3));
        assert_eq!(trailing_alloc_index("a.b[3]x"), None);
    }
}

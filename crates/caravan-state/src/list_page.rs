//! How many keys the informer asks for per list page. Pages are sized by
//! bytes, not only by count: the values under one prefix range from a 40-byte
//! heartbeat to a multi-megabyte job, and a page of big values can outgrow
//! what the client accepts in one reply.

/// Reply size a page aims at: a fraction of a reply limit, large enough that
/// pages of small objects stay at the configured key count.
pub(crate) const TARGET_PAGE_BYTES: usize = 4 * 1024 * 1024;

/// The key limit of the next list page.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PageSize {
    limit: i64,
    max: i64,
}

impl PageSize {
    /// Starts at `max` keys per page (at least one).
    pub(crate) fn new(max: i64) -> Self {
        let max = max.max(1);
        PageSize { limit: max, max }
    }

    /// The key limit for the next request.
    pub(crate) fn limit(&self) -> i64 {
        self.limit
    }

    /// Sizes the next page from the values just read: as many keys as fit
    /// [`TARGET_PAGE_BYTES`] at this page's mean size, up to the configured
    /// count.
    pub(crate) fn after_page(&mut self, keys: usize, bytes: usize) {
        if keys == 0 {
            return;
        }
        let per_key = (bytes / keys).max(1);
        let fits = i64::try_from(TARGET_PAGE_BYTES / per_key).unwrap_or(i64::MAX);
        self.limit = fits.clamp(1, self.max);
    }

    /// Halves the limit after a reply too large to receive, and keeps later
    /// pages of this list at most that long. False when a page is already a
    /// single key, so the error is the store's to report.
    pub(crate) fn shrink(&mut self) -> bool {
        if self.limit <= 1 {
            return false;
        }
        self.limit = (self.limit / 2).max(1);
        self.max = self.limit;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_values_keep_the_configured_count() {
        let mut p = PageSize::new(1000);
        p.after_page(1000, 1000 * 700);
        assert_eq!(p.limit(), 1000);
    }

    #[test]
    fn big_values_make_short_pages() {
        let mut p = PageSize::new(1000);
        p.after_page(10, 10 * 1024 * 1024);
        assert_eq!(p.limit(), 4, "4 MiB at 1 MiB a key");
        p.after_page(4, 4 * 16 * 1024 * 1024);
        assert_eq!(p.limit(), 1, "never below one key");
        p.after_page(1, 100);
        assert_eq!(p.limit(), 1000, "grows back, up to the configured count");
    }

    #[test]
    fn shrinking_halves_down_to_one_key() {
        let mut p = PageSize::new(5);
        assert!(p.shrink());
        assert_eq!(p.limit(), 2);
        assert!(p.shrink());
        assert_eq!(p.limit(), 1);
        assert!(!p.shrink());
        p.after_page(1, 100);
        assert_eq!(p.limit(), 1, "no longer than the page that fitted");
        assert_eq!(PageSize::new(0).limit(), 1);
    }
}

//! The names a type's resources were removed under, kept longer than the change log's
//! entries: an incremental stream in step with the store whose log ran past it still
//! learns which resources it must tell its client are gone (see `known.rs`). Removals are
//! rare next to updates, so a full republication of a large type (more changes than the
//! log holds, every one an update) leaves every stream able to recover.

use alloc::boxed::Box;
use alloc::collections::VecDeque;

use super::publication::{LogTruncated, Revision};

/// A type's removed names, oldest first, bounded.
#[derive(Clone, Debug, Default)]
pub(crate) struct Graves {
    list: VecDeque<(Revision, Box<str>)>,
    /// The newest revision of a removal dropped for room: the list answers for later ones.
    floor: Revision,
}

impl Graves {
    /// `name` was removed at `revision`; at most `capacity` removals are kept.
    pub(crate) fn bury(&mut self, revision: Revision, name: &str, capacity: usize) {
        if capacity == 0 {
            self.floor = revision;
            return;
        }
        while self.list.len() >= capacity {
            if let Some((dropped, _)) = self.list.pop_front() {
                self.floor = dropped;
            }
        }
        self.list.push_back((revision, Box::from(name)));
    }

    /// The names removed after `since` (some may have come back since); `Err` when the
    /// list no longer reaches back that far.
    pub(crate) fn since(
        &self,
        since: Revision,
    ) -> Result<impl Iterator<Item = &str>, LogTruncated> {
        if since < self.floor {
            return Err(LogTruncated);
        }
        let skip = self.list.partition_point(|(r, _)| *r <= since);
        Ok(self.list.range(skip..).map(|(_, n)| &**n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_only_as_far_back_as_it_reaches() {
        let mut g = Graves::default();
        for (r, n) in [(1, "a"), (2, "b"), (3, "c")] {
            g.bury(Revision(r), n, 2);
        }
        assert!(g.since(Revision(0)).is_err());
        assert!(g.since(Revision(1)).is_ok_and(|n| n.eq(["b", "c"])));
        assert!(g.since(Revision(2)).is_ok_and(|n| n.eq(["c"])));
        assert!(g.since(Revision(3)).is_ok_and(|mut n| n.next().is_none()));
    }
}

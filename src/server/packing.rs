//! Trees rebuilt packed once they have grown: names inserted in order (a first load, a
//! full answer) leave a B-tree's nodes about half full, which costs a pointer-slotted tree
//! about 8 bytes a key. Rebuilding from its sorted contents fills every node; doing it only
//! once the tree more than doubled keeps the cost at O(1) per key inserted.

/// Below this many new keys a tree is not rebuilt (small trees gain little).
const PACK_AFTER: usize = 32;

/// Rebuilds `tree` (of `len` keys) packed when it more than doubled since it had `since`
/// keys; whether it did.
pub(crate) fn pack_if_grown<C>(tree: &mut C, len: usize, since: usize) -> bool
where
    C: Default + IntoIterator + FromIterator<<C as IntoIterator>::Item>,
{
    if len > since.saturating_mul(2).saturating_add(PACK_AFTER) {
        *tree = core::mem::take(tree).into_iter().collect();
        true
    } else {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::collections::BTreeSet;

    #[test]
    fn rebuilds_only_past_double_and_keeps_every_key() {
        let mut tree: BTreeSet<u32> = (0..100).collect();
        assert!(!pack_if_grown(&mut tree, 100, 50));
        assert!(pack_if_grown(&mut tree, 100, 30));
        assert_eq!(tree, (0..100).collect());
        assert!(!pack_if_grown(&mut tree, 20, 0));
    }
}

//! The seam of the streaming CPU strategies: a [`GroupIndex`] maps key words to dense group ids,
//! the one thing `perfect` and `thread_local` do differently (as DataFusion's `GroupValues` and
//! Polars' `Grouper` separate it from the accumulators). Everything else — folding values into
//! accumulators, rekeying when the key codec widens, memory accounting, the merge — is written
//! once in [`super::streaming`] over this trait.
//!
//! A new streaming strategy is a type implementing it plus one row in
//! [`super::DESCRIPTORS`] (docs/ARCHITECTURE.md, "Seams").

/// A worker's groups as key word → group id.
pub trait GroupIndex: Send {
    /// Writes the group id of every word into `gids` (cleared first), adding a group for each
    /// word not seen before. Ids are dense: below [`GroupIndex::len`].
    fn intern(&mut self, words: &[u64], gids: &mut Vec<u32>);

    /// Group ids handed out so far: the accumulators hold this many states.
    fn len(&self) -> usize;

    /// Whether no group id was handed out.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The key word of each group with rows, in the order [`GroupIndex::into_groups`] lists them.
    fn words(&self) -> Vec<u64>;

    /// The groups with rows: their key words and, when not every id below `len` has rows, the
    /// ids that do (in the same order).
    fn into_groups(self: Box<Self>) -> Groups;

    /// Bytes the index holds, aggregate states not counted (for memory accounting).
    fn memory_bytes(&self) -> usize;

    /// For a direct index (group ids are the key words themselves, over the key domain), the
    /// flag of each id that has rows; `None` for other indexes. Workers whose indexes are all
    /// direct merge their states position by position, with no lookup.
    fn into_presence(self: Box<Self>) -> Option<Vec<bool>> {
        None
    }

    /// Whether [`GroupIndex::into_presence`] gives flags.
    fn is_direct(&self) -> bool {
        false
    }
}

/// The groups of an index, as [`GroupIndex::into_groups`] hands them over.
pub struct Groups {
    /// The key word of each group with rows.
    pub words: Vec<u64>,
    /// The group id of each, when not all ids `0..words.len()` are groups with rows.
    pub ids: Option<Vec<u32>>,
}

//! A morsel's rows grouped by group when it holds few groups ([`crate::agg::Runs`]), so that
//! each aggregate folds a group's rows as one reduction in registers.
//!
//! With a handful of groups (TPC-H Q1's four, whose dictionary-coded flags span a direct domain
//! of 4,096 ids: too many for [`super::streaming::LANES`]' copies), the row loop updates the
//! same few states row after row, and each update waits for the previous one's store (~4
//! cycles a row and aggregate on the 2-core machine). Grouping the rows costs two passes over
//! the group ids, once for all aggregates; each aggregate then reads its values at the grouped
//! rows with no store between them.

/// Most groups a morsel may hold to be grouped (local ids are bytes).
const MAX_GROUPS: usize = 255;

/// Fewest rows per group, on average, for grouping to pay: a run of a few rows costs a call
/// and a state load and store, as the row loop's update does.
const MIN_ROWS_PER_GROUP: usize = 16;

/// Parts of a morsel counted and placed side by side (independent chains of stores).
const QUARTERS: usize = 4;

/// Largest group-id range mapped to local ids (the per-worker map holds one byte per id).
const MAX_MAPPED_IDS: usize = 1 << 16;

/// A worker's buffers for grouping morsels (kept between morsels: no allocation per morsel).
#[derive(Debug, Default)]
pub struct RunBuilder {
    /// Per group id: 1 + its local id in the current morsel, 0 where it has none.
    local: Vec<u8>,
    /// Group id of each local id.
    ids: Vec<u32>,
    /// Local id of each row.
    row_local: Vec<u8>,
    /// Rows per local id and quarter of the morsel, then where they go next.
    counts: Vec<[u32; QUARTERS]>,
    /// Row indices, group after group.
    order: Vec<u32>,
    /// `(group id, end)` per group.
    runs: Vec<(u32, u32)>,
    /// Morsels still to skip after one held too many groups (the input likely holds many).
    skip: u32,
}

/// Morsels passed over after one held too many groups to be grouped: a failed try reads a few
/// hundred rows' group ids, cheap but not free when every morsel fails.
const SKIP_AFTER_FAILURE: u32 = 15;

impl RunBuilder {
    /// Groups the rows whose group ids (below `groups`) are `gids`; `None` when the morsel has
    /// too many groups for grouping to pay (the caller runs the row loop).
    pub fn group(&mut self, gids: &[u32], groups: usize) -> Option<crate::agg::Runs<'_>> {
        self.group_at(gids, groups, None)
    }

    /// [`RunBuilder::group`], the runs holding `places[i]` for row `i` where `places` is given:
    /// the places in a morsel of the rows a filter kept, whose group ids `gids` are.
    pub fn group_at(
        &mut self,
        gids: &[u32],
        groups: usize,
        places: Option<&[u32]>,
    ) -> Option<crate::agg::Runs<'_>> {
        let most = MAX_GROUPS.min(gids.len() / MIN_ROWS_PER_GROUP);
        if groups > MAX_MAPPED_IDS || most == 0 {
            return None;
        }
        if self.skip > 0 {
            self.skip -= 1;
            return None;
        }
        if self.local.len() < groups {
            self.local.resize(groups, 0);
        }
        // Each row's local id, and the rows of each per quarter of the morsel: the quarters
        // are read side by side, each with its own counts and (below) positions, since one
        // counter bumped row after row waits for its own store every time.
        let rows = gids.len();
        let q = rows / QUARTERS;
        self.ids.clear();
        self.row_local.clear();
        self.row_local.resize(rows, 0);
        self.counts.clear();
        self.counts.resize(most, [0; QUARTERS]);
        let mut at = Visit {
            local: &mut self.local,
            ids: &mut self.ids,
            most,
            counts: &mut self.counts,
            row_local: &mut self.row_local,
        };
        let mut fits = true;
        'rows: for i in 0..q {
            for k in 0..QUARTERS {
                let row = k * q + i;
                if !at.visit(gids[row], row, k) {
                    fits = false;
                    break 'rows;
                }
            }
        }
        // The rows past the last whole quarter belong to the last.
        if fits {
            fits = (QUARTERS * q..rows).all(|row| at.visit(gids[row], row, QUARTERS - 1));
        }
        for &g in &self.ids {
            self.local[g as usize] = 0;
        }
        if !fits {
            self.skip = SKIP_AFTER_FAILURE;
            return None;
        }
        let locals = &self.row_local;
        self.runs.clear();
        let mut end = 0u32;
        for (c, &g) in self.counts.iter_mut().zip(&self.ids) {
            for k in c.iter_mut() {
                let start = end;
                end += *k;
                *k = start;
            }
            self.runs.push((g, end));
        }
        self.order.clear();
        self.order.resize(rows, 0);
        for i in 0..q {
            for k in 0..QUARTERS {
                let row = k * q + i;
                let at = &mut self.counts[locals[row] as usize][k];
                self.order[*at as usize] = row as u32;
                *at += 1;
            }
        }
        // The rows past the last whole quarter belong to the last.
        for (row, &l) in locals.iter().enumerate().skip(QUARTERS * q) {
            let at = &mut self.counts[l as usize][QUARTERS - 1];
            self.order[*at as usize] = row as u32;
            *at += 1;
        }
        if let Some(places) = places {
            for o in self.order.iter_mut() {
                *o = places.get(*o as usize).copied()?;
            }
        }
        Some(crate::agg::Runs {
            order: &self.order,
            runs: &self.runs,
        })
    }
}

/// One row's step of [`RunBuilder::group`]'s first pass.
struct Visit<'a> {
    local: &'a mut [u8],
    ids: &'a mut Vec<u32>,
    most: usize,
    counts: &'a mut [[u32; QUARTERS]],
    row_local: &'a mut [u8],
}

impl Visit<'_> {
    /// Gives row `row` (group `g`, in quarter `k`) its local id and counts it; false when it
    /// would be one group too many.
    #[inline(always)]
    fn visit(&mut self, g: u32, row: usize, k: usize) -> bool {
        let slot = &mut self.local[g as usize];
        if *slot == 0 {
            if self.ids.len() == self.most {
                return false;
            }
            self.ids.push(g);
            *slot = self.ids.len() as u8;
        }
        let l = *slot - 1;
        self.row_local[row] = l;
        self.counts[l as usize][k] += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Every row lands in its group's run exactly once, in row order within the run, and
        /// grouping declines only past its bounds on groups.
        #[test]
        fn runs_hold_each_row_once_in_its_group_in_order(
            gids in proptest::collection::vec(0u32..40, 0..2000),
        ) {
            let mut b = RunBuilder::default();
            let distinct = gids.iter().collect::<std::collections::BTreeSet<_>>().len();
            let most = MAX_GROUPS.min(gids.len() / MIN_ROWS_PER_GROUP);
            let Some(runs) = b.group(&gids, 40) else {
                // Declined: too few rows to group at all, or more groups than they allow.
                proptest::prop_assert!(most == 0 || distinct > most);
                return Ok(());
            };
            let mut seen = vec![false; gids.len()];
            let mut groups = 0;
            for (g, rows) in runs.groups() {
                groups += 1;
                proptest::prop_assert!(rows.windows(2).all(|w| w[0] < w[1]));
                for &r in rows {
                    proptest::prop_assert_eq!(gids[r as usize], g as u32);
                    proptest::prop_assert!(!std::mem::replace(&mut seen[r as usize], true));
                }
            }
            proptest::prop_assert_eq!(groups, distinct);
            proptest::prop_assert!(seen.iter().all(|&s| s));
            // The map is clean for the next morsel.
            proptest::prop_assert!(b.local.iter().all(|&l| l == 0));
        }
    }

    #[test]
    fn a_morsel_of_too_many_groups_skips_the_next_ones() {
        let mut b = RunBuilder::default();
        let many: Vec<u32> = (0..8192).map(|i| i % 1000).collect();
        let few: Vec<u32> = (0..8192).map(|i| i % 4).collect();
        assert!(b.group(&many, 1000).is_none());
        for _ in 0..SKIP_AFTER_FAILURE {
            assert!(b.group(&few, 1000).is_none());
        }
        assert_eq!(b.group(&few, 1000).map(|r| r.runs.len()), Some(4));
    }
}

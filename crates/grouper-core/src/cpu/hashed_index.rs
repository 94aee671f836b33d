//! The hashed [`GroupIndex`]es: one per hashing scheme and bucket mapping of [`crate::table`],
//! and [`private_table`], which builds a worker's table from [`Params`] (the probing-scheme
//! axis of the CPU strategies, as `grouper_gpu::Probing` is of the GPU's).

use super::group_index::{GroupIndex, Groups};
use super::Params;
use crate::table::{
    BucketMap, Buckets, ByHighBits, ByModulo, ChainedPlusTable, ChainedTable, CuckooTable,
    KeyTable, LinearTable, Probing,
};

/// A worker's private table of `params.probing`'s scheme and `params.buckets`' mapping, sized
/// for [`Params::private_groups`]. Linear tables start in key order, unhashed while the keys
/// arrive sorted ([`LinearTable::in_key_order`]).
pub fn private_table(params: &Params) -> Box<dyn GroupIndex> {
    match params.buckets {
        BucketMap::HighBits => scheme::<ByHighBits>(params),
        BucketMap::Modulo => scheme::<ByModulo>(params),
    }
}

fn scheme<M: Buckets>(p: &Params) -> Box<dyn GroupIndex> {
    let (groups, hash, fill) = (p.private_groups, p.hash, p.fill_factor);
    match p.probing {
        Probing::Linear => {
            Box::new(LinearTable::<M>::with_buckets(groups, hash, fill).in_key_order())
        }
        Probing::Chained => Box::new(ChainedTable::<M>::new(groups, hash, fill)),
        Probing::ChainedPlus => Box::new(ChainedPlusTable::<M>::new(groups, hash, fill)),
        Probing::Cuckoo2 => Box::new(CuckooTable::<2, M>::new(groups, hash, fill)),
        Probing::Cuckoo4 => Box::new(CuckooTable::<4, M>::new(groups, hash, fill)),
    }
}

/// Every scheme's table is a [`GroupIndex`]: each hands out dense ids in insertion order and
/// keeps the key word of each group ([`KeyTable`]).
impl<T: KeyTable + Send> GroupIndex for T {
    fn intern(&mut self, words: &[u64], gids: &mut Vec<u32>) {
        KeyTable::map(self, words, gids);
    }

    fn len(&self) -> usize {
        KeyTable::len(self)
    }

    fn words(&self) -> Vec<u64> {
        KeyTable::keys(self).to_vec()
    }

    fn into_groups(self: Box<Self>) -> Groups {
        Groups {
            words: KeyTable::into_keys(*self),
            ids: None,
        }
    }

    fn memory_bytes(&self) -> usize {
        KeyTable::memory_bytes(self)
    }
}

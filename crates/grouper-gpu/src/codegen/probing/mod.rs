//! The hashing schemes of hashed indexes as CUDA C (Luan's schemes; the CPU's are
//! `grouper_core::table`). Every kernel's source has linear probing's functions, which every
//! shared-memory, partition and private table calls ([`linear`]), and `global_find_or_insert`
//! (`gt, gcap, glimit, key, count`), which every row, flush and merge into the global table
//! calls: linear probing, or chained hashing ([`chained`]) where the probing scheme says so,
//! laid out as [`GlobalScheme`] sizes it. Cuckoo hashing runs in `thread_private`'s per-thread
//! tables ([`cuckoo`]); [`crate::GpuQuery::check`] refuses it elsewhere.

use std::fmt::Write;

use crate::codegen::spec::KernelSpec;
use crate::strategy::{BucketMap, Placement, Probing};
use crate::table::GlobalScheme;

mod chained;
mod cuckoo;
mod linear;

/// The source of `spec`'s hashed tables' functions.
pub fn source(spec: &KernelSpec) -> String {
    let mut s = String::from(linear::LINEAR);
    let gmap = match spec.buckets {
        BucketMap::HighBits => "HIGH",
        BucketMap::Modulo => "MOD",
    };
    let _ = writeln!(s, "#define GMAP {gmap}");
    match GlobalScheme::of(spec.probing, spec.strategy.is_perfect()) {
        GlobalScheme::Slots => s.push_str(linear::GLOBAL_LINEAR),
        GlobalScheme::Chained => s.push_str(&chained::source(false)),
        GlobalScheme::ChainedPlus => s.push_str(&chained::source(true)),
    }
    if let Some(ways) = private_cuckoo(spec) {
        s.push_str(&cuckoo::source(ways));
    }
    s
}

/// The sub-tables of `spec`'s private tables where they are cuckoo tables.
pub(crate) fn private_cuckoo(spec: &KernelSpec) -> Option<u32> {
    match (spec.strategy.placement(), spec.probing) {
        (Placement::Private, Probing::Cuckoo2) => Some(2),
        (Placement::Private, Probing::Cuckoo4) => Some(4),
        _ => None,
    }
}

//! One table in device memory for all threads, updated with atomics (Rosenfeld's SHARED,
//! Karnagel §2): indexed directly by the key word for dense keys, else a hash table that grows
//! when it fills (the rows it could not take are listed and run again: Karnagel's trap).

use super::{Room, Sizing};
use crate::codegen::rows::{GLOBAL_UPDATE, ROW_LOOP_HEAD, ROW_LOOP_TAIL};
use crate::codegen::spec::KernelSpec;
use crate::strategy::Index;

/// A direct table fits while it takes at most the room for direct tables; a hash table always
/// fits (it grows).
pub(super) fn size(index: Index, room: &Room) -> Option<Sizing> {
    let fits = match index {
        Index::Direct => {
            room.single() && room.domain.saturating_mul(8 * room.words) <= room.direct_room
        }
        Index::Hashed => true,
    };
    fits.then_some(Sizing {
        threads: room.default_threads,
        copies: 0,
        local_slots: 0,
    })
}

pub(super) fn body(spec: &KernelSpec) -> String {
    let update = match spec.strategy.index() {
        Index::Direct => "      update_slot<true>(gt + key[0] * GS, 1, 0, in, mask);\n",
        Index::Hashed => GLOBAL_UPDATE,
    };
    [ROW_LOOP_HEAD, update, ROW_LOOP_TAIL].concat()
}

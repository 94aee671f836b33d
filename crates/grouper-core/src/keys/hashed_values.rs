//! Byte strings kept one after another in one buffer, each with its hash: a dictionary shard's
//! values ([`super::Dictionary`]) and the interned rows a partition reads
//! (`cpu::partitioned`). One buffer, where a box per value cost an allocation each:
//! db-benchmark q10's 3e7 interned rows spent a fifth of the query in the kernel clearing the
//! pages the boxes took.

/// Values `0..len()`, value `i` being `data[ends[i - 1]..ends[i]]`, with their hashes.
#[derive(Debug, Default)]
pub struct HashedValues {
    data: Vec<u8>,
    ends: Vec<usize>,
    /// Each value's hash, so that an index over the values grows (and a probe compares) without
    /// hashing their bytes again.
    hashes: Vec<u64>,
}

impl HashedValues {
    /// Room for `values` values of `bytes` bytes in all.
    pub fn with_capacity(values: usize, bytes: usize) -> Self {
        Self {
            data: Vec::with_capacity(bytes),
            ends: Vec::with_capacity(values),
            hashes: Vec::with_capacity(values),
        }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there is no value.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Value `i`.
    pub fn get(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.data[start..self.ends[i]]
    }

    /// The hash value `i` was pushed with.
    pub fn hash(&self, i: usize) -> u64 {
        self.hashes[i]
    }

    /// Appends `v` with hash `h`; its index.
    pub fn push(&mut self, h: u64, v: &[u8]) -> u32 {
        let i = self.ends.len() as u32;
        self.data.extend_from_slice(v);
        self.ends.push(self.data.len());
        self.hashes.push(h);
        i
    }

    /// Bytes held (capacities).
    pub fn memory_bytes(&self) -> usize {
        self.data.capacity()
            + self.ends.capacity() * std::mem::size_of::<usize>()
            + self.hashes.capacity() * std::mem::size_of::<u64>()
    }
}

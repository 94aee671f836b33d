//! Hash functions of key words as CUDA C: the same functions as [`HashFn::hash`] on the CPU
//! (a table planned on one side probes alike on the other), and `hash_key`, which folds a key's
//! words.

use grouper_core::hash::HashFn;

/// `hash_word(u64)` for `hash`, and `hash_key(const u64* key)` over the `K` words of a key.
pub fn source(hash: HashFn) -> String {
    format!("{}{HASH_KEY}", hash_word(hash))
}

const HASH_KEY: &str = r#"
__device__ __forceinline__ u64 hash_key(const u64* key) {
  u64 h = hash_word(key[0]);
#pragma unroll
  for (int w = 1; w < K; w++) h = hash_word(h ^ key[w]);
  return h;
}
"#;

/// The key-word hash function `hash` as CUDA C: `__device__ u64 hash_word(u64)`.
fn hash_word(hash: HashFn) -> String {
    let body: String = match hash {
            HashFn::Murmur3 => {
                "k ^= k >> 33; k *= 0xff51afd7ed558ccdULL; k ^= k >> 33; \
                 k *= 0xc4ceb9fe1a85ec53ULL; return k ^ (k >> 33);"
                    .into()
            }
            HashFn::MultiplyShift => "return k * 0x9e3779b97f4a7c15ULL;".into(),
            HashFn::MultiplyShiftBy(a) => format!("return k * {a:#x}ULL;"),
            HashFn::Fnv1a => {
                "u64 h = 0xcbf29ce484222325ULL; \
                 for (int i = 0; i < 8; i++) { h ^= (k >> (8 * i)) & 0xff; h *= 0x100000001b3ULL; } \
                 return h;"
                    .into()
            }
            HashFn::Identity => "return __brevll(k);".into(),
        };
    format!("__device__ __forceinline__ u64 hash_word(u64 k) {{ {body} }}\n")
}

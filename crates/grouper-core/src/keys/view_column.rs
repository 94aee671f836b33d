//! A string key column read through 16-byte views ([`super::views::view_codes`]): a Utf8View
//! column's own, or views made here over a Utf8 or LargeUtf8 column's bytes, with no array
//! built around them.
//!
//! Why: an in-memory Utf8 key (db-benchmark's id1–id3, a CSV scan's strings) was converted to
//! a `StringViewArray` batch by batch through arrow's builder (a call making each view, a
//! capacity check and a validity bit appended per row): ~20% of grouper's own time on q3's
//! 1e5 string keys. A short string's view is its length and its bytes, taken here from one
//! 16-byte load and a mask.

use std::borrow::Cow;

use arrow::array::builder::make_view;
use arrow::array::{Array, ArrayRef, OffsetSizeTrait, StringViewArray};
use arrow::buffer::NullBuffer;

use crate::strings::ByteColumn;

/// Longest string a view holds inline.
const INLINE: usize = 12;

/// A string column's views, validity and bytes.
pub(super) struct ViewColumn<'a> {
    views: Cow<'a, [u128]>,
    nulls: Option<&'a NullBuffer>,
    bytes: ByteColumn<'a>,
}

impl<'a> ViewColumn<'a> {
    /// The column's views; `None` for a column of no strings.
    pub(super) fn new(array: &'a ArrayRef) -> Option<Self> {
        let bytes = ByteColumn::new(array, "string key").ok()?;
        let views = match &bytes {
            ByteColumn::View(a) => Cow::Borrowed(a.views().as_ref()),
            ByteColumn::Utf8(a) => Cow::Owned(views_of(a.value_offsets(), a.value_data())),
            ByteColumn::Large(a) => Cow::Owned(views_of(a.value_offsets(), a.value_data())),
        };
        Some(Self {
            views,
            nulls: array.nulls(),
            bytes,
        })
    }

    /// A Utf8View column's own views.
    pub(super) fn of_views(a: &'a StringViewArray) -> Self {
        Self {
            views: Cow::Borrowed(a.views().as_ref()),
            nulls: a.nulls(),
            bytes: ByteColumn::View(a),
        }
    }

    /// One view a row (a NULL row's is not read).
    pub(super) fn views(&self) -> &[u128] {
        &self.views
    }

    /// Which rows are valid.
    pub(super) fn nulls(&self) -> Option<&NullBuffer> {
        self.nulls
    }

    /// The bytes of row `r` (empty for a NULL).
    pub(super) fn value(&self, r: usize) -> &[u8] {
        self.bytes.get(r).unwrap_or_default()
    }
}

/// The views of the strings between consecutive `offsets` of `data`: a short string's as arrow
/// makes it (its length and bytes); a long string's names it by where it starts, its buffer
/// index and offset fields holding that position's high and low 32 bits (arrow's, for a buffer
/// under 4 GiB). No one reads a long string's bytes through its view: [`ViewColumn::value`]
/// reads them from the column, and a view only has to differ from every other string's.
fn views_of<O: OffsetSizeTrait>(offsets: &[O], data: &[u8]) -> Vec<u128> {
    offsets
        .windows(2)
        .map(|w| {
            let (start, end) = (w[0].as_usize(), w[1].as_usize());
            let len = end.saturating_sub(start);
            let wide = data
                .get(start..start + 16)
                .and_then(|b| <[u8; 16]>::try_from(b).ok());
            match wide {
                // The string's bytes above its length, the bytes past it masked off.
                Some(b) if len <= INLINE => {
                    let bytes = u128::from_le_bytes(b) & ((1u128 << (8 * len)) - 1);
                    (bytes << 32) | len as u128
                }
                // Long strings, and short ones within 16 bytes of the buffer's end.
                _ => long_view(data.get(start..end).unwrap_or_default(), start),
            }
        })
        .collect()
}

/// The view of `bytes` starting at byte `start` of their buffer (a long string's: its length,
/// prefix and where it starts, the high 32 bits of that in the buffer index).
fn long_view(bytes: &[u8], start: usize) -> u128 {
    make_view(bytes, (start >> 32) as u32, start as u32)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{LargeStringArray, StringArray};

    use super::*;

    proptest::proptest! {
        /// The views made here are arrow's: each row's as arrow's conversion to Utf8View
        /// makes it (a NULL row's aside), short strings at the buffer's end included.
        #[test]
        fn views_are_arrows(
            strings in proptest::collection::vec(
                proptest::option::weighted(0.9, "[a-zé\\x00]{0,20}"), 0..300),
        ) {
            let utf8: ArrayRef = Arc::new(StringArray::from(strings.clone()));
            let large: ArrayRef = Arc::new(LargeStringArray::from(strings.clone()));
            let arrow = StringViewArray::from(utf8.as_any().downcast_ref::<StringArray>().unwrap());
            for array in [&utf8, &large] {
                let ours = ViewColumn::new(array).unwrap();
                for (r, s) in strings.iter().enumerate() {
                    let Some(s) = s else { continue };
                    proptest::prop_assert_eq!(ours.views()[r], arrow.views()[r]);
                    proptest::prop_assert_eq!(ours.value(r), s.as_bytes());
                }
                proptest::prop_assert_eq!(ours.nulls(), array.nulls());
            }
        }
    }

    #[test]
    fn long_strings_4_gib_apart_keep_distinct_views() {
        // One long string at offsets 0 and 2^32: only the offset tells them apart.
        let s = b"a long string past twelve bytes";
        assert_ne!(long_view(s, 0), long_view(s, 1 << 32));
        assert_eq!(
            long_view(s, 7),
            make_view(s, 0, 7),
            "arrow's view under 4 GiB"
        );
    }
}

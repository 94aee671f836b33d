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
    /// The column's views; `None` for a column of no strings, or a Utf8 column of more than
    /// 4 GiB of bytes (a view holds 32 bits of an offset).
    pub(super) fn new(array: &'a ArrayRef) -> Option<Self> {
        let bytes = ByteColumn::new(array, "string key").ok()?;
        let views = match &bytes {
            ByteColumn::View(a) => Cow::Borrowed(a.views().as_ref()),
            ByteColumn::Utf8(a) => Cow::Owned(views_of(a.value_offsets(), a.value_data())?),
            ByteColumn::Large(a) => Cow::Owned(views_of(a.value_offsets(), a.value_data())?),
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

/// The views of the strings between consecutive `offsets` of `data`, as arrow makes them over
/// the array's own buffer (buffer 0, each string's offset); `None` when `data` passes 32 bits.
fn views_of<O: OffsetSizeTrait>(offsets: &[O], data: &[u8]) -> Option<Vec<u128>> {
    u32::try_from(data.len()).ok()?;
    Some(
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
                    _ => make_view(data.get(start..end).unwrap_or_default(), 0, start as u32),
                }
            })
            .collect(),
    )
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
}

//! The one encoding of the records stages and tasks pass each other through files: `rank`'s
//! sort records and shuffles, `cluster`'s edges, places and runs, the greedy rounds' events,
//! `ship`'s texts, and the raw row files beside `sign`'s tables. Each record is fixed-width
//! little-endian fields in order (a string: its `u32` length, then its bytes), whatever the
//! machine, so a work directory on shared storage reads the same everywhere. Files are sealed
//! with a checksum before a record is read, so a reader may trust the lengths it finds.
//!
//! The stage tables a user or another tool reads (`sign`'s, `rank`'s, `cluster`'s) are Parquet
//! instead (`table.rs`): they are an interface, these records are not.

/// A field of fixed width: its little-endian bytes.
pub(crate) trait Le: Copy + 'static {
    /// Bytes of the field.
    const BYTES: usize;
    /// Write the field to the first [`BYTES`](Le::BYTES) bytes of `out`.
    fn write_to(self, out: &mut [u8]);
    /// The field in the first [`BYTES`](Le::BYTES) bytes of `b`.
    fn read_from(b: &[u8]) -> Self;
}

macro_rules! le_int {
    ($($t:ty),+) => {$(
        impl Le for $t {
            const BYTES: usize = std::mem::size_of::<$t>();
            #[inline]
            fn write_to(self, out: &mut [u8]) {
                out[..Self::BYTES].copy_from_slice(&self.to_le_bytes());
            }
            #[inline]
            fn read_from(b: &[u8]) -> Self {
                <$t>::from_le_bytes(b[..Self::BYTES].try_into().expect("the field's bytes"))
            }
        }
    )+};
}

le_int!(u8, u32, u64, u128);

/// A float by its bits: read back bit for bit.
impl Le for f64 {
    const BYTES: usize = 8;
    #[inline]
    fn write_to(self, out: &mut [u8]) {
        self.to_bits().write_to(out)
    }
    #[inline]
    fn read_from(b: &[u8]) -> Self {
        f64::from_bits(u64::read_from(b))
    }
}

/// Append field `v` to the record in `out`.
#[inline]
pub(crate) fn put<T: Le>(out: &mut Vec<u8>, v: T) {
    let at = out.len();
    out.resize(at + T::BYTES, 0);
    v.write_to(&mut out[at..]);
}

/// Append a string field: its `u32` length, then its bytes.
#[inline]
pub(crate) fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put(out, b.len() as u32);
    out.extend_from_slice(b);
}

/// `values`, each a field, in order: the slice itself on a little-endian machine.
pub(crate) fn as_fields<T: Le + bytemuck::Pod>(values: &[T]) -> std::borrow::Cow<'_, [u8]> {
    if cfg!(target_endian = "little") {
        std::borrow::Cow::Borrowed(bytemuck::cast_slice(values))
    } else {
        let mut out = Vec::with_capacity(std::mem::size_of_val(values));
        for &v in values {
            put(&mut out, v);
        }
        std::borrow::Cow::Owned(out)
    }
}

/// The fields of `bytes`, each `T::BYTES` wide, in order (a partial field at the end is
/// left out).
pub(crate) fn fields<T: Le>(bytes: &[u8]) -> impl Iterator<Item = T> + '_ {
    bytes.chunks_exact(T::BYTES).map(T::read_from)
}

/// A record of exactly `N` bytes, filled field by field without an allocation (for records
/// held by the million).
pub(crate) struct Fill<const N: usize> {
    out: [u8; N],
    at: usize,
}

impl<const N: usize> Fill<N> {
    #[inline]
    #[allow(clippy::new_without_default)]
    pub(crate) fn new() -> Self {
        Fill { out: [0; N], at: 0 }
    }

    /// The next field.
    #[inline]
    pub(crate) fn le<T: Le>(mut self, v: T) -> Self {
        v.write_to(&mut self.out[self.at..self.at + T::BYTES]);
        self.at += T::BYTES;
        self
    }

    /// The record; every byte of it filled.
    #[inline]
    pub(crate) fn done(self) -> [u8; N] {
        debug_assert_eq!(self.at, N, "a record's fields fill it");
        self.out
    }
}

/// A record's fields, read in the order they were put.
pub(crate) struct Take<'a>(&'a [u8]);

impl<'a> Take<'a> {
    #[inline]
    pub(crate) fn new(record: &'a [u8]) -> Self {
        Take(record)
    }

    /// The next field.
    #[inline]
    pub(crate) fn le<T: Le>(&mut self) -> T {
        let (a, b) = self.0.split_at(T::BYTES);
        self.0 = b;
        T::read_from(a)
    }

    /// The next string field's bytes ([`put_bytes`]).
    #[inline]
    pub(crate) fn bytes(&mut self) -> &'a [u8] {
        let n = self.le::<u32>() as usize;
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }

    /// The next string field, which was put from a `str`.
    #[inline]
    pub(crate) fn str(&mut self) -> &'a str {
        std::str::from_utf8(self.bytes()).expect("a string field holds UTF-8")
    }

    /// Whether every field was read.
    #[inline]
    pub(crate) fn done(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_little_endian_whatever_the_machine() {
        let mut out = Vec::new();
        put(&mut out, 0x0102_0304u32);
        put(&mut out, 0x05u8);
        put(&mut out, 0x0a0b_0c0d_0e0f_1011u64);
        assert_eq!(
            out,
            [4, 3, 2, 1, 5, 0x11, 0x10, 0x0f, 0x0e, 0x0d, 0x0c, 0x0b, 0x0a]
        );
        let mut wide = Vec::new();
        put(&mut wide, 1u128 << 120 | 2);
        assert_eq!(wide[0], 2);
        assert_eq!(wide[15], 1);
        assert_eq!(wide.len(), 16);
        let mut f = Vec::new();
        put(&mut f, 1.0f64);
        assert_eq!(f, 1.0f64.to_bits().to_le_bytes());
    }

    #[test]
    fn records_read_back_as_they_were_put_at_every_boundary() {
        let u64s = [
            0,
            1,
            255,
            256,
            u32::MAX as u64,
            1 << 32,
            u64::MAX - 1,
            u64::MAX,
        ];
        let floats = [0.0, -0.0, 1.5, f64::MIN_POSITIVE, f64::INFINITY, f64::NAN];
        for (i, &a) in u64s.iter().enumerate() {
            let s = "ü".repeat(i);
            let (b, x) = (a as u32, floats[i % floats.len()]);
            let mut out = Vec::new();
            put(&mut out, a);
            put(&mut out, b);
            put_bytes(&mut out, s.as_bytes());
            put(&mut out, x);
            put(&mut out, a as u128 * 3);
            put(&mut out, i as u8);
            let mut t = Take::new(&out);
            assert_eq!(t.le::<u64>(), a);
            assert_eq!(t.le::<u32>(), b);
            assert_eq!(t.str(), s);
            assert_eq!(t.le::<f64>().to_bits(), x.to_bits());
            assert_eq!(t.le::<u128>(), a as u128 * 3);
            assert!(!t.done());
            assert_eq!(t.le::<u8>(), i as u8);
            assert!(t.done());
            // A fixed record is the same bytes as one put field by field.
            let fixed = Fill::<29>::new()
                .le(a)
                .le(b)
                .le(x)
                .le(i as u64)
                .le(1u8)
                .done();
            let mut same = Vec::new();
            put(&mut same, a);
            put(&mut same, b);
            put(&mut same, x);
            put(&mut same, i as u64);
            put(&mut same, 1u8);
            assert_eq!(fixed[..], same[..]);
        }
    }

    #[test]
    fn runs_of_fields_are_the_fields_in_order() {
        let values: Vec<u64> = (0..9).map(|i| i * 0x0101_0101_0101).collect();
        let mut out = as_fields(&values).into_owned();
        let mut one_by_one = Vec::new();
        values.iter().for_each(|&v| put(&mut one_by_one, v));
        assert_eq!(out, one_by_one);
        assert_eq!(fields::<u64>(&out).collect::<Vec<_>>(), values);
        // A partial field at the end is not a field.
        out.push(7);
        assert_eq!(fields::<u64>(&out).count(), 9);
        assert_eq!(
            fields::<u32>(&out[..12]).collect::<Vec<_>>(),
            [0, 0, 0x0101_0101]
        );
    }

    #[test]
    #[should_panic(expected = "fill")]
    #[cfg(debug_assertions)]
    fn a_record_with_bytes_left_unfilled_is_refused() {
        let _ = Fill::<12>::new().le(1u64).done();
    }
}

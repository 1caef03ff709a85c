//! A CDR decoder (serde `Deserializer`) for bytes from another process.
//!
//! Encoding is done by the `cdr` crate; decoding is ours because the bytes
//! are untrusted: every length prefix is checked against the bytes that
//! remain *before* anything is allocated (a corrupt string length must be an
//! error, not a 4 GB allocation, which the `wire` fuzz target found in the
//! `cdr` crate's decoder), and nothing is self-describing, so there is no
//! recursion the input controls beyond the type's own shape.
//!
//! Format (OMG CDR as the `cdr` crate writes it): a 4-byte encapsulation
//! header (`00 01` little endian, `00 00` big endian, then two option
//! bytes); primitives aligned to their size relative to the end of the
//! header; `bool` and `char` one byte; strings as `u32` length (including a
//! terminating NUL) + bytes; byte arrays and sequences as `u32` count +
//! elements; structs and tuples as their fields in order; enums as a `u32`
//! variant index + the variant's fields. Options and maps are not CDR.

use serde::de::{self, DeserializeSeed, IntoDeserializer, Visitor};

/// A decoding error (becomes a `WireError::Decode`).
#[derive(Debug)]
pub(crate) struct DeError(String);

impl std::fmt::Display for DeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DeError {}

impl de::Error for DeError {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        DeError(msg.to_string())
    }
}

type Result<T> = std::result::Result<T, DeError>;

fn fail<T>(msg: impl Into<String>) -> Result<T> {
    Err(DeError(msg.into()))
}

/// Decode a CDR message (with its encapsulation header).
pub(crate) fn from_bytes<T: de::DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    decode(Slice {
        data: bytes,
        pos: 0,
    })
}

/// [`from_bytes`] of a message that arrived in `parts` (the fragments of
/// one message, in order, as a transport reassembled them), read where
/// they are: a field inside one part is borrowed as from one slice; one
/// that spans parts (a camera frame's pixels) is gathered once into the
/// vector the message keeps.
pub(crate) fn from_parts<T: de::DeserializeOwned>(parts: &[&[u8]]) -> Result<T> {
    decode(Parts::new(parts))
}

fn decode<'de, T: de::Deserialize<'de>, S: Input<'de>>(mut src: S) -> Result<T> {
    if src.remaining() < 4 {
        return fail(format!(
            "{} bytes: shorter than the CDR header",
            src.remaining()
        ));
    }
    let mut head = [0u8; 4];
    src.read(&mut head);
    let le = match (head[0], head[1]) {
        (0, 1) => true,
        (0, 0) => false,
        (a, b) => return fail(format!("unknown CDR encapsulation {a:02x} {b:02x}")),
    };
    // Alignment counts from the end of the header.
    src.restart_offset();
    let mut d = De { src, le };
    T::deserialize(&mut d)
}

/// Bytes read from where they lie, or gathered from several parts.
enum Piece<'de> {
    Borrowed(&'de [u8]),
    Owned(Vec<u8>),
}

/// Where the decoder reads: one slice, or the parts of one message. The
/// decoder checks every length against [`remaining`](Input::remaining)
/// before it asks for the bytes, so the reads below never run short.
trait Input<'de> {
    /// Bytes read since the header (alignment is relative to this).
    fn offset(&self) -> usize;
    /// Bytes left.
    fn remaining(&self) -> usize;
    /// Count the bytes read so far as the header: offsets start at 0 again.
    fn restart_offset(&mut self);
    /// The next `n <= remaining()` bytes.
    fn bytes(&mut self, n: usize) -> Piece<'de>;
    /// Fill `out` (`out.len() <= remaining()`) with the next bytes.
    fn read(&mut self, out: &mut [u8]);
    /// Pass over the next `n <= remaining()` bytes.
    fn skip(&mut self, n: usize);
}

/// One contiguous slice: every piece is borrowed.
struct Slice<'de> {
    data: &'de [u8],
    pos: usize,
}

impl<'de> Input<'de> for Slice<'de> {
    #[inline]
    fn offset(&self) -> usize {
        self.pos
    }
    #[inline]
    fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }
    fn restart_offset(&mut self) {
        self.data = &self.data[self.pos..];
        self.pos = 0;
    }
    #[inline]
    fn bytes(&mut self, n: usize) -> Piece<'de> {
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Piece::Borrowed(s)
    }
    #[inline]
    fn read(&mut self, out: &mut [u8]) {
        out.copy_from_slice(&self.data[self.pos..self.pos + out.len()]);
        self.pos += out.len();
    }
    #[inline]
    fn skip(&mut self, n: usize) {
        self.pos += n;
    }
}

/// The parts of one message, read in order; empty parts are passed over.
struct Parts<'de> {
    /// The parts not yet finished; the first is being read.
    parts: &'de [&'de [u8]],
    /// Bytes read of `parts[0]`.
    at: usize,
    /// Bytes read since the header.
    pos: usize,
    /// Bytes left in all.
    left: usize,
}

impl<'de> Parts<'de> {
    fn new(parts: &'de [&'de [u8]]) -> Parts<'de> {
        let mut p = Parts {
            parts,
            at: 0,
            pos: 0,
            left: parts.iter().map(|p| p.len()).sum(),
        };
        p.next_part_if_done();
        p
    }

    /// What is left of the part being read.
    fn current(&self) -> &'de [u8] {
        self.parts.first().map_or(&[], |p| &p[self.at..])
    }

    /// Move past finished (and empty) parts.
    fn next_part_if_done(&mut self) {
        while let Some((first, rest)) = self.parts.split_first()
            && self.at == first.len()
        {
            self.parts = rest;
            self.at = 0;
        }
    }

    /// Advance by `n` bytes, at most what is left of the current part.
    fn advance(&mut self, n: usize) {
        self.at += n;
        self.pos += n;
        self.left -= n;
        self.next_part_if_done();
    }
}

impl<'de> Parts<'de> {
    /// Pass over the next `n <= remaining()` bytes, handing each piece
    /// (the part of them in one part) to `each`.
    fn walk(&mut self, n: usize, mut each: impl FnMut(&'de [u8])) {
        let mut left = n;
        while left > 0 {
            let cur = self.current();
            let k = cur.len().min(left);
            // Only reachable if a caller broke `n <= remaining()`: fail
            // loudly rather than loop for ever.
            assert!(k > 0, "cdr_de: read past the message's end");
            each(&cur[..k]);
            self.advance(k);
            left -= k;
        }
    }
}

impl<'de> Input<'de> for Parts<'de> {
    fn offset(&self) -> usize {
        self.pos
    }
    fn remaining(&self) -> usize {
        self.left
    }
    fn restart_offset(&mut self) {
        self.pos = 0;
    }
    fn bytes(&mut self, n: usize) -> Piece<'de> {
        let cur = self.current();
        if n <= cur.len() {
            self.advance(n);
            return Piece::Borrowed(&cur[..n]);
        }
        // Spans parts: gathered once (the length was checked against the
        // bytes left, so this allocation is bounded by the message).
        let mut v = Vec::with_capacity(n);
        self.walk(n, |piece| v.extend_from_slice(piece));
        Piece::Owned(v)
    }
    fn read(&mut self, out: &mut [u8]) {
        let mut done = 0;
        self.walk(out.len(), |piece| {
            out[done..done + piece.len()].copy_from_slice(piece);
            done += piece.len();
        });
    }
    fn skip(&mut self, n: usize) {
        self.walk(n, |_| {});
    }
}

struct De<S> {
    src: S,
    le: bool,
}

impl<'de, S: Input<'de>> De<S> {
    #[inline]
    fn remaining(&self) -> usize {
        self.src.remaining()
    }

    /// Fail unless `n` bytes are left.
    #[inline]
    fn need(&self, n: usize) -> Result<()> {
        if n > self.remaining() {
            return fail(format!(
                "needs {n} bytes at offset {}, {} left",
                self.src.offset(),
                self.remaining()
            ));
        }
        Ok(())
    }

    #[inline]
    fn take(&mut self, n: usize) -> Result<Piece<'de>> {
        self.need(n)?;
        Ok(self.src.bytes(n))
    }

    #[inline]
    fn byte(&mut self) -> Result<u8> {
        Ok(self.array::<1>()?[0])
    }

    #[inline]
    fn align(&mut self, n: usize) -> Result<()> {
        let pad = (n - self.src.offset() % n) % n;
        self.need(pad)?;
        self.src.skip(pad);
        Ok(())
    }

    #[inline]
    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        self.align(N)?;
        self.need(N)?;
        let mut a = [0u8; N];
        self.src.read(&mut a);
        if !self.le {
            a.reverse();
        }
        Ok(a)
    }

    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array::<4>()?))
    }

    /// A `u32` count of items (checked against the bytes that remain: a
    /// corrupt count cannot make us loop or allocate beyond the message;
    /// CDR has no zero-sized elements, so a true count never exceeds it).
    fn count(&mut self) -> Result<usize> {
        let n = self.u32()? as usize;
        if n > self.remaining() {
            return fail(format!(
                "length {n} at offset {} exceeds the {} bytes left",
                self.src.offset(),
                self.remaining()
            ));
        }
        Ok(n)
    }

    /// A string's bytes without their terminating NUL.
    fn string(&mut self) -> Result<Piece<'de>> {
        let n = self.count()?;
        let piece = self.take(n)?;
        let nul = match &piece {
            Piece::Borrowed(b) => b.last().copied(),
            Piece::Owned(v) => v.last().copied(),
        };
        match (nul, piece) {
            (Some(0), Piece::Borrowed(b)) => Ok(Piece::Borrowed(&b[..n - 1])),
            (Some(0), Piece::Owned(mut v)) => {
                v.pop();
                Ok(Piece::Owned(v))
            }
            (Some(_), _) => fail("string without its terminating NUL"),
            (None, p) => Ok(p),
        }
    }

    fn visit_string<V: Visitor<'de>>(&mut self, v: V) -> Result<V::Value> {
        match self.string()? {
            Piece::Borrowed(b) => match std::str::from_utf8(b) {
                Ok(s) => v.visit_borrowed_str(s),
                Err(_) => fail("string is not UTF-8"),
            },
            Piece::Owned(b) => match String::from_utf8(b) {
                Ok(s) => v.visit_string(s),
                Err(_) => fail("string is not UTF-8"),
            },
        }
    }
}

macro_rules! prim {
    ($($method:ident $visit:ident $t:ty),* $(,)?) => {
        $(
            fn $method<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
                const N: usize = std::mem::size_of::<$t>();
                v.$visit(<$t>::from_le_bytes(self.array::<N>()?))
            }
        )*
    };
}

impl<'de, S: Input<'de>> de::Deserializer<'de> for &mut De<S> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, _v: V) -> Result<V::Value> {
        fail("CDR is not self-describing")
    }

    fn deserialize_bool<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        match self.byte()? {
            0 => v.visit_bool(false),
            1 => v.visit_bool(true),
            b => fail(format!("bool byte {b}")),
        }
    }

    fn deserialize_i8<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        v.visit_i8(self.byte()? as i8)
    }

    fn deserialize_u8<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        v.visit_u8(self.byte()?)
    }

    prim! {
        deserialize_i16 visit_i16 i16, deserialize_u16 visit_u16 u16,
        deserialize_i32 visit_i32 i32, deserialize_u32 visit_u32 u32,
        deserialize_i64 visit_i64 i64, deserialize_u64 visit_u64 u64,
        deserialize_f32 visit_f32 f32, deserialize_f64 visit_f64 f64,
    }

    fn deserialize_char<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        v.visit_char(char::from(self.byte()?))
    }

    fn deserialize_str<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        self.visit_string(v)
    }

    fn deserialize_string<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        self.visit_string(v)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        let n = self.count()?;
        match self.take(n)? {
            Piece::Borrowed(b) => v.visit_borrowed_bytes(b),
            // Handed over: a `serde_bytes` field keeps this vector.
            Piece::Owned(b) => v.visit_byte_buf(b),
        }
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        self.deserialize_bytes(v)
    }

    fn deserialize_option<V: Visitor<'de>>(self, _v: V) -> Result<V::Value> {
        fail("Option is not CDR")
    }

    fn deserialize_unit<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        v.visit_unit()
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        v: V,
    ) -> Result<V::Value> {
        v.visit_unit()
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        v: V,
    ) -> Result<V::Value> {
        v.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        let n = self.count()?;
        v.visit_seq(Items { de: self, left: n })
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, v: V) -> Result<V::Value> {
        v.visit_seq(Items {
            de: self,
            left: len,
        })
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        len: usize,
        v: V,
    ) -> Result<V::Value> {
        v.visit_seq(Items {
            de: self,
            left: len,
        })
    }

    fn deserialize_map<V: Visitor<'de>>(self, _v: V) -> Result<V::Value> {
        fail("maps are not CDR")
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value> {
        v.visit_seq(Items {
            de: self,
            left: fields.len(),
        })
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        v: V,
    ) -> Result<V::Value> {
        v.visit_enum(self)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, _v: V) -> Result<V::Value> {
        fail("CDR has no identifiers")
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, _v: V) -> Result<V::Value> {
        fail("CDR cannot skip unknown data")
    }

    fn is_human_readable(&self) -> bool {
        false
    }
}

struct Items<'a, S> {
    de: &'a mut De<S>,
    left: usize,
}

impl<'de, S: Input<'de>> de::SeqAccess<'de> for Items<'_, S> {
    type Error = DeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        seed.deserialize(&mut *self.de).map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        // Bounded by the bytes left (`count`), so safe to preallocate.
        Some(self.left.min(self.de.remaining()))
    }
}

impl<'de, S: Input<'de>> de::EnumAccess<'de> for &mut De<S> {
    type Error = DeError;
    type Variant = Self;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Self)> {
        let idx = self.u32()?;
        let v = seed.deserialize(idx.into_deserializer())?;
        Ok((v, self))
    }
}

impl<'de, S: Input<'de>> de::VariantAccess<'de> for &mut De<S> {
    type Error = DeError;

    fn unit_variant(self) -> Result<()> {
        Ok(())
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value> {
        seed.deserialize(self)
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, v: V) -> Result<V::Value> {
        v.visit_seq(Items {
            de: self,
            left: len,
        })
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value> {
        v.visit_seq(Items {
            de: self,
            left: fields.len(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde::{Deserialize, Serialize};

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    enum Mode {
        Idle,
        Drive(f32),
        Arm { joint: u8, angle: f64 },
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Sample {
        flag: bool,
        a: u8,
        b: i16,
        c: u32,
        d: i64,
        e: f32,
        f: f64,
        name: String,
        data: Vec<u8>,
        points: Vec<(f32, f64)>,
        nested: Vec<String>,
        mode: Mode,
        fixed: [u16; 3],
    }

    fn mode() -> impl Strategy<Value = Mode> {
        prop_oneof![
            Just(Mode::Idle),
            any::<f32>()
                .prop_filter("not NaN", |x| !x.is_nan())
                .prop_map(Mode::Drive),
            (any::<u8>(), -1e9f64..1e9).prop_map(|(joint, angle)| Mode::Arm { joint, angle }),
        ]
    }

    proptest! {
        #[test]
        fn decodes_what_the_cdr_crate_encodes(
            flag in any::<bool>(), a in any::<u8>(), b in any::<i16>(), c in any::<u32>(),
            d in any::<i64>(), e in -1e6f32..1e6, f in -1e12f64..1e12,
            name in "\\PC{0,20}", data in proptest::collection::vec(any::<u8>(), 0..40),
            points in proptest::collection::vec((-1e3f32..1e3, -1e3f64..1e3), 0..5),
            nested in proptest::collection::vec("[a-z]{0,6}", 0..4),
            mode in mode(), fixed in any::<[u16; 3]>(),
        ) {
            let s = Sample { flag, a, b, c, d, e, f, name, data, points, nested, mode, fixed };
            for bytes in [
                cdr::serialize::<_, _, cdr::CdrLe>(&s, cdr::Infinite).unwrap(),
                cdr::serialize::<_, _, cdr::CdrBe>(&s, cdr::Infinite).unwrap(),
            ] {
                prop_assert_eq!(from_bytes::<Sample>(&bytes).unwrap(), s.clone());
            }
        }

        #[test]
        fn random_bytes_never_panic_or_overallocate(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = from_bytes::<Sample>(&bytes);
            let _ = from_bytes::<String>(&bytes);
            let _ = from_bytes::<Vec<u8>>(&bytes);
        }

        #[test]
        fn parts_cut_anywhere_decode_as_the_whole(
            name in "\\PC{0,20}", data in proptest::collection::vec(any::<u8>(), 0..300),
            nested in proptest::collection::vec("[a-z]{0,6}", 0..4),
            mode in mode(), d in any::<i64>(), f in -1e12f64..1e12,
            cuts in proptest::collection::vec(0usize..400, 0..12),
            big_endian in any::<bool>(),
        ) {
            let s = Sample {
                flag: true, a: 7, b: -3, c: 9, d, e: 0.5, f, name, data,
                points: vec![(1.0, 2.0)], nested, mode, fixed: [1, 2, 3],
            };
            let bytes = if big_endian {
                cdr::serialize::<_, _, cdr::CdrBe>(&s, cdr::Infinite).unwrap()
            } else {
                cdr::serialize::<_, _, cdr::CdrLe>(&s, cdr::Infinite).unwrap()
            };
            let parts = split(&bytes, &cuts);
            prop_assert_eq!(from_parts::<Sample>(&parts).unwrap(), s);
        }

        #[test]
        fn random_parts_decode_as_their_join_and_never_panic(
            bytes in proptest::collection::vec(any::<u8>(), 0..80),
            cuts in proptest::collection::vec(0usize..80, 0..8),
        ) {
            let parts = split(&bytes, &cuts);
            prop_assert_eq!(
                from_parts::<Sample>(&parts).ok(),
                from_bytes::<Sample>(&bytes).ok()
            );
            prop_assert_eq!(
                from_parts::<String>(&parts).ok(),
                from_bytes::<String>(&bytes).ok()
            );
            prop_assert_eq!(
                from_parts::<Vec<u8>>(&parts).ok(),
                from_bytes::<Vec<u8>>(&bytes).ok()
            );
        }
    }

    /// `bytes` cut at `cuts` (clamped, in any order; empty parts kept).
    fn split<'a>(bytes: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
        let mut at: Vec<usize> = cuts.iter().map(|&c| c.min(bytes.len())).collect();
        at.sort_unstable();
        let mut parts = Vec::new();
        let mut from = 0;
        for c in at.into_iter().chain([bytes.len()]) {
            parts.push(&bytes[from..c]);
            from = c;
        }
        parts
    }

    #[test]
    fn a_frame_across_fragments_is_gathered_into_the_vector_it_keeps() {
        #[derive(Debug, PartialEq, Serialize, Deserialize)]
        struct Frame {
            id: String,
            #[serde(with = "serde_bytes")]
            data: Vec<u8>,
        }
        let f = Frame {
            id: "camera".into(),
            data: (0..200_000u32).map(|i| i as u8).collect(),
        };
        let bytes = cdr::serialize::<_, _, cdr::CdrLe>(&f, cdr::Infinite).unwrap();
        // zenoh's fragments on TCP: one batch each.
        let parts: Vec<&[u8]> = bytes.chunks(65_000).collect();
        assert_eq!(from_parts::<Frame>(&parts).unwrap(), f);
        // A string cut inside, and the header itself cut.
        let parts = [&bytes[..2], &bytes[2..9], &bytes[9..]];
        assert_eq!(from_parts::<Frame>(&parts).unwrap(), f);
        // Cut short: an error, whatever the parts.
        let short = [&bytes[..5000], &bytes[5000..100_000]];
        assert!(from_parts::<Frame>(&short).is_err());
        assert!(from_parts::<Frame>(&[]).is_err());
    }

    #[test]
    fn a_huge_length_prefix_is_an_error_not_an_allocation() {
        // From the `wire` fuzz target: a string claiming 2.7 GB.
        let bytes = [0, 1, 0, 0, 0x2d, 0, 0, 0xa6];
        assert!(from_bytes::<String>(&[0, 1, 0, 0, 0xff, 0xff, 0xff, 0xff]).is_err());
        assert!(from_bytes::<String>(&bytes).is_err());
        assert!(from_bytes::<Vec<u8>>(&[0, 1, 0, 0, 0xff, 0xff, 0xff, 0x7f, 1]).is_err());
    }
}

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
    if bytes.len() < 4 {
        return fail(format!(
            "{} bytes: shorter than the CDR header",
            bytes.len()
        ));
    }
    let le = match (bytes[0], bytes[1]) {
        (0, 1) => true,
        (0, 0) => false,
        (a, b) => return fail(format!("unknown CDR encapsulation {a:02x} {b:02x}")),
    };
    let mut d = De {
        data: &bytes[4..],
        pos: 0,
        le,
    };
    T::deserialize(&mut d)
}

struct De<'a> {
    data: &'a [u8],
    pos: usize,
    le: bool,
}

impl<'a> De<'a> {
    fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return fail(format!(
                "needs {n} bytes at offset {}, {} left",
                self.pos,
                self.remaining()
            ));
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn align(&mut self, n: usize) -> Result<()> {
        let pad = (n - self.pos % n) % n;
        self.take(pad).map(|_| ())
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        self.align(N)?;
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        if !self.le {
            a.reverse();
        }
        Ok(a)
    }

    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array::<4>()?))
    }

    /// A `u32` count of items of at least one byte each (checked against
    /// what remains, so a corrupt count cannot make us loop or allocate).
    fn count(&mut self) -> Result<usize> {
        let n = self.u32()? as usize;
        if n > self.remaining() {
            return fail(format!(
                "length {n} at offset {} exceeds the {} bytes left",
                self.pos,
                self.remaining()
            ));
        }
        Ok(n)
    }

    fn string(&mut self) -> Result<&'a str> {
        let n = self.count()?;
        let b = self.take(n)?;
        let b = match b.split_last() {
            Some((0, s)) => s,
            Some(_) => return fail("string without its terminating NUL"),
            None => b,
        };
        std::str::from_utf8(b).or_else(|_| fail("string is not UTF-8"))
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

impl<'de> de::Deserializer<'de> for &mut De<'de> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, _v: V) -> Result<V::Value> {
        fail("CDR is not self-describing")
    }

    fn deserialize_bool<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        match self.take(1)?[0] {
            0 => v.visit_bool(false),
            1 => v.visit_bool(true),
            b => fail(format!("bool byte {b}")),
        }
    }

    fn deserialize_i8<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        v.visit_i8(self.take(1)?[0] as i8)
    }

    fn deserialize_u8<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        v.visit_u8(self.take(1)?[0])
    }

    prim! {
        deserialize_i16 visit_i16 i16, deserialize_u16 visit_u16 u16,
        deserialize_i32 visit_i32 i32, deserialize_u32 visit_u32 u32,
        deserialize_i64 visit_i64 i64, deserialize_u64 visit_u64 u64,
        deserialize_f32 visit_f32 f32, deserialize_f64 visit_f64 f64,
    }

    fn deserialize_char<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        v.visit_char(char::from(self.take(1)?[0]))
    }

    fn deserialize_str<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        v.visit_borrowed_str(self.string()?)
    }

    fn deserialize_string<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        v.visit_borrowed_str(self.string()?)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        let n = self.count()?;
        v.visit_borrowed_bytes(self.take(n)?)
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

struct Items<'a, 'de> {
    de: &'a mut De<'de>,
    left: usize,
}

impl<'de> de::SeqAccess<'de> for Items<'_, 'de> {
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

impl<'de> de::EnumAccess<'de> for &mut De<'de> {
    type Error = DeError;
    type Variant = Self;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Self)> {
        let idx = self.u32()?;
        let v = seed.deserialize(idx.into_deserializer())?;
        Ok((v, self))
    }
}

impl<'de> de::VariantAccess<'de> for &mut De<'de> {
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

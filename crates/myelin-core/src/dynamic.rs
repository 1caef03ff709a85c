//! Messages known only by their type description (REP 2016): CDR decoded
//! into a [`Value`] tree, field by field, and a tree encoded back, at any
//! place in a larger message.
//!
//! What it is for: a message embedded in another starts wherever the
//! outer one puts it, and CDR aligns each value to its size *from the
//! start of the outer message*, so the bytes of an embedded message are
//! not the bytes it has alone (an `int64` at offset 8 alone lies at 48,
//! not 44, inside a service event). Service introspection re-encodes
//! requests and responses this way ([`crate::introspection`]), and tools
//! print messages of types they were not compiled with (`myelin service
//! echo`).
//!
//! The input is untrusted: every length is checked against the bytes that
//! remain before anything is allocated, nesting is bounded by the type
//! (and by [`MAX_DEPTH`]), and a bad message is an error, never a panic.
//!
//! ```
//! use myelin_core::dynamic::{decode, Value};
//! use myelin_core::type_description::{Field, FieldType, IndividualTypeDescription, TypeDescription};
//!
//! let field = |name: &str, type_id| Field {
//!     name: name.into(),
//!     r#type: FieldType { type_id, ..Default::default() },
//!     ..Default::default()
//! };
//! let d = TypeDescription {
//!     type_description: IndividualTypeDescription {
//!         type_name: "pkg/msg/Pair".into(),
//!         fields: vec![field("flag", 15), field("n", 8)], // bool, int64
//!     },
//!     referenced_type_descriptions: vec![],
//! };
//! let cdr = [0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0];
//! let v = decode(&d, "pkg/msg/Pair", &cdr).unwrap();
//! assert_eq!(v.field("n"), Some(&Value::Int64(7)));
//! // Encoded again four bytes into a message, `n` moves to stay aligned.
//! let mut out = vec![0; 4];
//! v.encode(&mut out, 0);
//! assert_eq!(out.len(), 4 + 12);
//! ```

use std::collections::HashMap;

use crate::type_description::{IndividualTypeDescription, TypeDescription};

/// How deep messages may nest (a description that refers to itself
/// through a sequence could otherwise recurse as deep as the input says).
pub const MAX_DEPTH: usize = 64;

/// One value of a message.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `bool`.
    Bool(bool),
    /// `int8`.
    Int8(i8),
    /// `uint8`, `byte` and `char`.
    UInt8(u8),
    /// `int16`.
    Int16(i16),
    /// `uint16`.
    UInt16(u16),
    /// `int32`.
    Int32(i32),
    /// `uint32`.
    UInt32(u32),
    /// `int64`.
    Int64(i64),
    /// `uint64`.
    UInt64(u64),
    /// `float32`.
    Float32(f32),
    /// `float64`.
    Float64(f64),
    /// `string` (its bytes as sent, without the terminating NUL).
    String(Vec<u8>),
    /// A fixed-size array (`T[N]`: no count on the wire).
    Array(Vec<Value>),
    /// A sequence (`T[]`, `T[<=N]`: a count, then the elements).
    Sequence(Vec<Value>),
    /// A fixed-size array of `uint8`, `byte` or `char` (an image's pixels
    /// stay one buffer, not a value per byte).
    ByteArray(Vec<u8>),
    /// A sequence of `uint8`, `byte` or `char`.
    ByteSequence(Vec<u8>),
    /// A message: its fields in order.
    Struct(Vec<(String, Value)>),
}

/// Why a message does not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DynamicError {
    /// The description does not have a type the message refers to.
    #[error("the description has no type {0:?}")]
    UnknownType(String),
    /// A field of a type this module does not handle (wide strings, long
    /// double, fixed-size strings).
    #[error("{type_name}.{field}: field type {type_id} is not supported")]
    Unsupported {
        /// The message type.
        type_name: String,
        /// The field.
        field: String,
        /// Its `FIELD_TYPE_*` number.
        type_id: u8,
    },
    /// The bytes end too early or hold an impossible count.
    #[error("at byte {offset}: {what}")]
    Malformed {
        /// Where, from the start of the message (after its 4-byte header).
        offset: usize,
        /// What is wrong.
        what: String,
    },
    /// Not little- or big-endian plain CDR.
    #[error("unknown CDR encapsulation {0:02x} {1:02x}")]
    Encapsulation(u8, u8),
    /// Nested deeper than [`MAX_DEPTH`].
    #[error("messages nested deeper than {MAX_DEPTH}")]
    TooDeep,
}

/// Decode `cdr` (a whole message, with its 4-byte encapsulation header)
/// as the type `type_name`, which `d` describes (as its root or one it
/// refers to).
pub fn decode(d: &TypeDescription, type_name: &str, cdr: &[u8]) -> Result<Value, DynamicError> {
    let types = Types::new(d);
    let (le, body) = match cdr {
        [0, 1, _, _, rest @ ..] => (true, rest),
        [0, 0, _, _, rest @ ..] => (false, rest),
        [a, b, _, _, ..] => return Err(DynamicError::Encapsulation(*a, *b)),
        _ => {
            return Err(DynamicError::Malformed {
                offset: 0,
                what: format!("{} bytes: shorter than the CDR header", cdr.len()),
            });
        }
    };
    let mut r = Reader {
        data: body,
        pos: 0,
        le,
    };
    r.message(&types, type_name, 0)
}

/// The types of a description by name.
struct Types<'a>(HashMap<&'a str, &'a IndividualTypeDescription>);

impl<'a> Types<'a> {
    fn new(d: &'a TypeDescription) -> Self {
        let mut m = HashMap::new();
        m.insert(d.type_description.type_name.as_str(), &d.type_description);
        for t in &d.referenced_type_descriptions {
            m.insert(t.type_name.as_str(), t);
        }
        Types(m)
    }
}

/// `FIELD_TYPE_*` numbers of the base types (type_description_interfaces).
mod id {
    pub const NESTED: u8 = 1;
    pub const INT8: u8 = 2;
    pub const UINT8: u8 = 3;
    pub const INT16: u8 = 4;
    pub const UINT16: u8 = 5;
    pub const INT32: u8 = 6;
    pub const UINT32: u8 = 7;
    pub const INT64: u8 = 8;
    pub const UINT64: u8 = 9;
    pub const FLOAT: u8 = 10;
    pub const DOUBLE: u8 = 11;
    pub const CHAR: u8 = 13;
    pub const BOOLEAN: u8 = 15;
    pub const BYTE: u8 = 16;
    pub const STRING: u8 = 17;
    pub const BOUNDED_STRING: u8 = 21;
    pub const ARRAY: u8 = 48;
    pub const BOUNDED_SEQUENCE: u8 = 96;
    pub const UNBOUNDED_SEQUENCE: u8 = 144;
}

/// Whether a base type is one byte that arrays keep packed.
fn is_byte(base: u8) -> bool {
    matches!(base, id::UINT8 | id::BYTE | id::CHAR)
}

/// Append the message `cdr` (whole, with its 4-byte header) of type
/// `type_name` to `out` as it lies inside a larger message whose body
/// starts at `out[origin]`. Where the move keeps every value aligned (its
/// distance is a multiple of the largest alignment the type uses: 4 for
/// most messages, 8 with 64-bit fields) the body is copied as is;
/// otherwise it is decoded and encoded again at its new place.
///
/// ```
/// use myelin_core::dynamic::embed;
/// # use myelin_core::type_description::{Field, FieldType, IndividualTypeDescription, TypeDescription};
/// # let field = |name: &str, type_id| Field { name: name.into(), r#type: FieldType { type_id, ..Default::default() }, ..Default::default() };
/// # let d = TypeDescription { type_description: IndividualTypeDescription { type_name: "p/msg/N".into(), fields: vec![field("n", 8)] }, referenced_type_descriptions: vec![] };
/// // One int64, embedded 4 bytes into a message: 4 bytes of padding first.
/// let cdr = [0, 1, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0];
/// let mut out = vec![0, 1, 0, 0, 9, 9, 9, 9];
/// embed(&d, "p/msg/N", &cdr, &mut out, 4).unwrap();
/// assert_eq!(out[8..], [0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0]);
/// ```
pub fn embed(
    d: &TypeDescription,
    type_name: &str,
    cdr: &[u8],
    out: &mut Vec<u8>,
    origin: usize,
) -> Result<(), DynamicError> {
    let types = Types::new(d);
    let shift = out.len() - origin;
    if let [0, 1, _, _, body @ ..] = cdr
        && shift.is_multiple_of(types.alignment(type_name, 0)?)
    {
        out.extend_from_slice(body);
        return Ok(());
    }
    decode(d, type_name, cdr)?.encode(out, origin);
    Ok(())
}

impl Types<'_> {
    /// The largest alignment a value of `name` has (1, 2, 4 or 8).
    fn alignment(&self, name: &str, depth: usize) -> Result<usize, DynamicError> {
        if depth >= MAX_DEPTH {
            return Err(DynamicError::TooDeep);
        }
        let t = self
            .0
            .get(name)
            .ok_or_else(|| DynamicError::UnknownType(name.to_string()))?;
        let mut most = 1;
        for f in &t.fields {
            let ft = &f.r#type;
            let base = ft.type_id % id::ARRAY;
            let own = match base {
                id::NESTED => self.alignment(&ft.nested_type_name, depth + 1)?,
                id::INT16 | id::UINT16 => 2,
                id::INT32 | id::UINT32 | id::FLOAT | id::STRING | id::BOUNDED_STRING => 4,
                id::INT64 | id::UINT64 | id::DOUBLE => 8,
                _ => 1,
            };
            // A sequence's count is a uint32.
            let counted = if ft.type_id >= id::BOUNDED_SEQUENCE {
                4
            } else {
                1
            };
            most = most.max(own).max(counted);
        }
        Ok(most)
    }
}

struct Reader<'b> {
    data: &'b [u8],
    pos: usize,
    le: bool,
}

impl Reader<'_> {
    fn malformed(&self, what: impl Into<String>) -> DynamicError {
        DynamicError::Malformed {
            offset: self.pos,
            what: what.into(),
        }
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N], DynamicError> {
        // Aligned to the value's size from the start of the body.
        let start = self.pos.next_multiple_of(N.clamp(1, 8));
        let end = start
            .checked_add(N)
            .filter(|&e| e <= self.data.len())
            .ok_or_else(|| self.malformed(format!("{N} more bytes expected")))?;
        let mut b = [0; N];
        b.copy_from_slice(&self.data[start..end]);
        if !self.le {
            b.reverse();
        }
        self.pos = end;
        Ok(b)
    }

    /// `n` bytes (checked to be there).
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let b = self.data[self.pos..self.pos + n].to_vec();
        self.pos += n;
        b
    }

    fn count(&mut self, min_size: usize) -> Result<usize, DynamicError> {
        let n = u32::from_le_bytes(self.take::<4>()?) as usize;
        // Every element takes at least `min_size` bytes: a count the rest
        // of the message cannot hold is refused before allocating.
        if n.saturating_mul(min_size) > self.data.len() - self.pos {
            return Err(self.malformed(format!(
                "a count of {n} with {} bytes left",
                self.data.len() - self.pos
            )));
        }
        Ok(n)
    }

    fn message(
        &mut self,
        types: &Types<'_>,
        name: &str,
        depth: usize,
    ) -> Result<Value, DynamicError> {
        if depth >= MAX_DEPTH {
            return Err(DynamicError::TooDeep);
        }
        let t = types
            .0
            .get(name)
            .ok_or_else(|| DynamicError::UnknownType(name.to_string()))?;
        let mut fields = Vec::with_capacity(t.fields.len());
        for f in &t.fields {
            let ft = &f.r#type;
            let (base, kind) = (ft.type_id % id::ARRAY, ft.type_id / id::ARRAY);
            let one = |r: &mut Self| r.single(types, t, &f.name, base, &ft.nested_type_name, depth);
            let v = match kind {
                0 => one(self)?,
                1 => {
                    let n = usize::try_from(ft.capacity).unwrap_or(usize::MAX);
                    if n > self.data.len() - self.pos {
                        return Err(
                            self.malformed(format!("{}.{}: an array of {n}", t.type_name, f.name))
                        );
                    }
                    if is_byte(base) {
                        Value::ByteArray(self.bytes(n))
                    } else {
                        Value::Array((0..n).map(|_| one(self)).collect::<Result<_, _>>()?)
                    }
                }
                2 | 3 => {
                    let n = self.count(1)?;
                    if ft.type_id >= id::BOUNDED_SEQUENCE
                        && ft.type_id < id::UNBOUNDED_SEQUENCE
                        && n as u64 > ft.capacity
                    {
                        return Err(self.malformed(format!(
                            "{}.{}: {n} elements in a sequence bounded to {}",
                            t.type_name, f.name, ft.capacity
                        )));
                    }
                    if is_byte(base) {
                        Value::ByteSequence(self.bytes(n))
                    } else {
                        Value::Sequence((0..n).map(|_| one(self)).collect::<Result<_, _>>()?)
                    }
                }
                _ => {
                    return Err(DynamicError::Unsupported {
                        type_name: t.type_name.clone(),
                        field: f.name.clone(),
                        type_id: ft.type_id,
                    });
                }
            };
            fields.push((f.name.clone(), v));
        }
        Ok(Value::Struct(fields))
    }

    fn single(
        &mut self,
        types: &Types<'_>,
        t: &IndividualTypeDescription,
        field: &str,
        base: u8,
        nested: &str,
        depth: usize,
    ) -> Result<Value, DynamicError> {
        Ok(match base {
            id::NESTED => self.message(types, nested, depth + 1)?,
            id::BOOLEAN => Value::Bool(self.take::<1>()?[0] != 0),
            id::INT8 => Value::Int8(self.take::<1>()?[0] as i8),
            id::UINT8 | id::BYTE | id::CHAR => Value::UInt8(self.take::<1>()?[0]),
            id::INT16 => Value::Int16(i16::from_le_bytes(self.take()?)),
            id::UINT16 => Value::UInt16(u16::from_le_bytes(self.take()?)),
            id::INT32 => Value::Int32(i32::from_le_bytes(self.take()?)),
            id::UINT32 => Value::UInt32(u32::from_le_bytes(self.take()?)),
            id::INT64 => Value::Int64(i64::from_le_bytes(self.take()?)),
            id::UINT64 => Value::UInt64(u64::from_le_bytes(self.take()?)),
            id::FLOAT => Value::Float32(f32::from_le_bytes(self.take()?)),
            id::DOUBLE => Value::Float64(f64::from_le_bytes(self.take()?)),
            id::STRING | id::BOUNDED_STRING => {
                let n = self.count(1)?;
                let bytes = &self.data[self.pos..self.pos + n];
                self.pos += n;
                // The length counts a terminating NUL (absent in some
                // writers' empty strings: a zero length).
                let text = bytes.strip_suffix(&[0]).unwrap_or(bytes);
                Value::String(text.to_vec())
            }
            other => {
                return Err(DynamicError::Unsupported {
                    type_name: t.type_name.clone(),
                    field: field.to_string(),
                    type_id: other,
                });
            }
        })
    }
}

impl Value {
    /// The field `name` of a message value.
    pub fn field(&self, name: &str) -> Option<&Value> {
        match self {
            Value::Struct(fields) => fields.iter().find(|(n, _)| n == name).map(|(_, v)| v),
            _ => None,
        }
    }

    /// Append this value's little-endian CDR to `out`, aligning each
    /// primitive to its size counted from `out[origin]` (the byte after
    /// the outer message's 4-byte header).
    pub fn encode(&self, out: &mut Vec<u8>, origin: usize) {
        fn put(out: &mut Vec<u8>, origin: usize, bytes: &[u8]) {
            let size = bytes.len();
            while !(out.len() - origin).is_multiple_of(size) {
                out.push(0);
            }
            out.extend_from_slice(bytes);
        }
        match self {
            Value::Bool(b) => out.push(u8::from(*b)),
            Value::Int8(v) => out.push(*v as u8),
            Value::UInt8(v) => out.push(*v),
            Value::Int16(v) => put(out, origin, &v.to_le_bytes()),
            Value::UInt16(v) => put(out, origin, &v.to_le_bytes()),
            Value::Int32(v) => put(out, origin, &v.to_le_bytes()),
            Value::UInt32(v) => put(out, origin, &v.to_le_bytes()),
            Value::Int64(v) => put(out, origin, &v.to_le_bytes()),
            Value::UInt64(v) => put(out, origin, &v.to_le_bytes()),
            Value::Float32(v) => put(out, origin, &v.to_le_bytes()),
            Value::Float64(v) => put(out, origin, &v.to_le_bytes()),
            Value::String(s) => {
                put(out, origin, &(s.len() as u32 + 1).to_le_bytes());
                out.extend_from_slice(s);
                out.push(0);
            }
            Value::Array(items) => items.iter().for_each(|v| v.encode(out, origin)),
            Value::ByteArray(b) => out.extend_from_slice(b),
            Value::ByteSequence(b) => {
                put(out, origin, &(b.len() as u32).to_le_bytes());
                out.extend_from_slice(b);
            }
            Value::Sequence(items) => {
                put(out, origin, &(items.len() as u32).to_le_bytes());
                items.iter().for_each(|v| v.encode(out, origin));
            }
            Value::Struct(fields) => fields.iter().for_each(|(_, v)| v.encode(out, origin)),
        }
    }

    /// The value as YAML, as `ros2 topic echo` prints a message: fields in
    /// order, strings as text.
    pub fn to_yaml(&self) -> serde_yaml::Value {
        use serde_yaml::Value as Y;
        match self {
            Value::Bool(b) => Y::Bool(*b),
            Value::Int8(v) => Y::from(*v),
            Value::UInt8(v) => Y::from(*v),
            Value::Int16(v) => Y::from(*v),
            Value::UInt16(v) => Y::from(*v),
            Value::Int32(v) => Y::from(*v),
            Value::UInt32(v) => Y::from(*v),
            Value::Int64(v) => Y::from(*v),
            Value::UInt64(v) => Y::from(*v),
            // As the f32 prints (0.1, not 0.10000000149011612).
            Value::Float32(v) => Y::from(v.to_string().parse::<f64>().unwrap_or(f64::NAN)),
            Value::Float64(v) => Y::from(*v),
            Value::String(s) => Y::String(String::from_utf8_lossy(s).into_owned()),
            Value::Array(items) | Value::Sequence(items) => {
                Y::Sequence(items.iter().map(Value::to_yaml).collect())
            }
            Value::ByteArray(b) | Value::ByteSequence(b) => {
                Y::Sequence(b.iter().map(|&x| Y::from(x)).collect())
            }
            Value::Struct(fields) => Y::Mapping(
                fields
                    .iter()
                    .map(|(n, v)| (Y::String(n.clone()), v.to_yaml()))
                    .collect(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::type_description::{Field, FieldType};

    fn field(name: &str, type_id: u8, capacity: u64, nested: &str) -> Field {
        Field {
            name: name.into(),
            r#type: FieldType {
                type_id,
                capacity,
                string_capacity: 0,
                nested_type_name: nested.into(),
            },
            default_value: String::new(),
        }
    }

    fn desc(
        root: IndividualTypeDescription,
        refs: Vec<IndividualTypeDescription>,
    ) -> TypeDescription {
        TypeDescription {
            type_description: root,
            referenced_type_descriptions: refs,
        }
    }

    fn ty(name: &str, fields: Vec<Field>) -> IndividualTypeDescription {
        IndividualTypeDescription {
            type_name: name.into(),
            fields,
        }
    }

    /// What the `cdr` crate writes for a serde struct is what `decode`
    /// reads and `encode` (at origin 0) writes back, byte for byte.
    #[test]
    fn decode_then_encode_is_the_identity_at_the_same_alignment() {
        #[derive(serde::Serialize)]
        struct Inner {
            x: f64,
            tag: String,
        }
        #[derive(serde::Serialize)]
        struct Outer {
            a: u8,
            inner: Inner,
            many: Vec<Inner>,
            fixed: [i16; 3],
            bounded: Vec<u64>,
            done: bool,
            pixels: Vec<u8>,
            tag: [u8; 3],
        }
        let msg = Outer {
            a: 7,
            inner: Inner {
                x: 1.5,
                tag: "hi".into(),
            },
            many: vec![
                Inner {
                    x: -2.0,
                    tag: String::new(),
                },
                Inner {
                    x: 3.0,
                    tag: "abc".into(),
                },
            ],
            fixed: [1, -2, 3],
            bounded: vec![9],
            done: true,
            pixels: vec![1, 2, 3, 4, 5],
            tag: [7, 8, 9],
        };
        let cdr = cdr::serialize::<_, _, cdr::CdrLe>(&msg, cdr::Infinite).unwrap();
        let d = desc(
            ty(
                "p/msg/Outer",
                vec![
                    field("a", id::UINT8, 0, ""),
                    field("inner", id::NESTED, 0, "p/msg/Inner"),
                    field(
                        "many",
                        id::NESTED + id::UNBOUNDED_SEQUENCE,
                        0,
                        "p/msg/Inner",
                    ),
                    field("fixed", id::INT16 + id::ARRAY, 3, ""),
                    field("bounded", id::UINT64 + id::BOUNDED_SEQUENCE, 2, ""),
                    field("done", id::BOOLEAN, 0, ""),
                    field("pixels", id::UINT8 + id::UNBOUNDED_SEQUENCE, 0, ""),
                    field("tag", id::BYTE + id::ARRAY, 3, ""),
                ],
            ),
            vec![ty(
                "p/msg/Inner",
                vec![
                    field("x", id::DOUBLE, 0, ""),
                    field("tag", id::STRING, 0, ""),
                ],
            )],
        );
        let v = decode(&d, "p/msg/Outer", &cdr).unwrap();
        assert_eq!(
            v.field("inner").and_then(|i| i.field("x")),
            Some(&Value::Float64(1.5))
        );
        assert_eq!(
            v.field("pixels"),
            Some(&Value::ByteSequence(vec![1, 2, 3, 4, 5]))
        );
        assert_eq!(v.field("tag"), Some(&Value::ByteArray(vec![7, 8, 9])));
        let mut out = cdr[..4].to_vec();
        v.encode(&mut out, 4);
        assert_eq!(out, cdr);
    }

    /// `embed` copies a body whose alignment the move keeps and
    /// re-encodes one it would break: either way, the bytes are the
    /// value's encoding at its new place.
    #[test]
    fn embed_copies_when_aligned_and_moves_values_when_not() {
        #[derive(serde::Serialize)]
        struct Narrow {
            a: u32,
            data: Vec<u8>,
        }
        #[derive(serde::Serialize)]
        struct Wide {
            a: u32,
            b: i64,
        }
        let narrow = desc(
            ty(
                "p/msg/Narrow",
                vec![
                    field("a", id::UINT32, 0, ""),
                    field("data", id::UINT8 + id::UNBOUNDED_SEQUENCE, 0, ""),
                ],
            ),
            vec![],
        );
        let wide = desc(
            ty(
                "p/msg/Wide",
                vec![field("a", id::UINT32, 0, ""), field("b", id::INT64, 0, "")],
            ),
            vec![],
        );
        let ser = |m: &dyn erased::Ser| m.cdr();
        let n = ser(&Narrow {
            a: 1,
            data: vec![5; 9],
        });
        let w = ser(&Wide { a: 1, b: -2 });
        for (d, name, msg) in [(&narrow, "p/msg/Narrow", &n), (&wide, "p/msg/Wide", &w)] {
            for shift in [0usize, 4, 8, 12] {
                let mut out = vec![0, 1, 0, 0];
                out.resize(4 + shift, 0xee);
                embed(d, name, msg, &mut out, 4).unwrap();
                let mut moved = vec![0, 1, 0, 0];
                moved.resize(4 + shift, 0xee);
                decode(d, name, msg).unwrap().encode(&mut moved, 4);
                assert_eq!(out, moved, "{name} at {shift}");
                if shift % 8 == 0 || name == "p/msg/Narrow" {
                    assert_eq!(out[4 + shift..], msg[4..], "{name} at {shift}: copied");
                } else {
                    // The padding before the int64 went: a copy would
                    // have put it 4 bytes off its alignment.
                    assert_eq!(
                        out.len() - 4 - shift,
                        msg.len() - 4 - 4,
                        "{name} at {shift}"
                    );
                }
            }
        }
    }

    /// Serialize with the `cdr` crate, whatever the type.
    mod erased {
        pub(super) trait Ser {
            fn cdr(&self) -> Vec<u8>;
        }
        impl<T: serde::Serialize> Ser for T {
            fn cdr(&self) -> Vec<u8> {
                cdr::serialize::<_, _, cdr::CdrLe>(self, cdr::Infinite).unwrap()
            }
        }
    }

    /// Truncations and absurd counts are errors at every length, never a
    /// panic or a large allocation.
    #[test]
    fn every_truncation_and_a_huge_count_is_an_error() {
        let d = desc(
            ty(
                "p/msg/S",
                vec![
                    field("s", id::STRING, 0, ""),
                    field("v", id::INT64 + id::UNBOUNDED_SEQUENCE, 0, ""),
                ],
            ),
            vec![],
        );
        // "hi", pad, one int64 (aligned to 8 after its count).
        let whole = [
            0, 1, 0, 0, 3, 0, 0, 0, b'h', b'i', 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0,
            0,
        ];
        assert!(decode(&d, "p/msg/S", &whole).is_ok());
        for n in 0..whole.len() {
            assert!(
                decode(&d, "p/msg/S", &whole[..n]).is_err(),
                "{n} bytes decoded"
            );
        }
        let huge = [0, 1, 0, 0, 0xff, 0xff, 0xff, 0xff];
        assert!(matches!(
            decode(&d, "p/msg/S", &huge),
            Err(DynamicError::Malformed { .. })
        ));
    }

    /// A type that contains itself through a sequence stops at the depth
    /// limit whatever the input claims.
    #[test]
    fn self_reference_stops_at_the_depth_limit() {
        let d = desc(
            ty(
                "p/msg/Tree",
                vec![field(
                    "kids",
                    id::NESTED + id::UNBOUNDED_SEQUENCE,
                    0,
                    "p/msg/Tree",
                )],
            ),
            vec![],
        );
        let mut cdr = vec![0, 1, 0, 0];
        for _ in 0..100 {
            cdr.extend_from_slice(&1u32.to_le_bytes());
        }
        assert_eq!(decode(&d, "p/msg/Tree", &cdr), Err(DynamicError::TooDeep));
    }
}

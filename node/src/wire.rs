//! One bounds-checked cursor for the node's own little-endian binary formats: log entries
//! (`entry::decode`), replication frames (`replication::protocol::codec`), Raft proposals
//! (`root::proposal`), the quota ledger they carry (`root::quota`) and memory-store dumps
//! (`store::mem`).
//!
//! Guarantees: a read never panics and never reads past the input; a short input is a
//! [`Truncated`] naming the field being read, the byte it started at, and how many bytes it
//! needed and found. Each format maps that into its own error (a malformed entry, a protocol
//! violation, a damaged proposal), so every decoder reports truncation the same way.
//!
//! Not `bytes::Buf`: its getters panic on short input, and its `try_get_*` errors do not say
//! which field was short, which is what an operator reading "malformed entry" needs.

use std::fmt;

/// A read past the end of the input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Truncated {
    /// What was being read.
    pub field: String,
    /// The byte it starts at.
    pub at: usize,
    /// The bytes it needs.
    pub needed: usize,
    /// The bytes that were left.
    pub left: usize,
}

impl fmt::Display for Truncated {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "truncated in {} at byte {}: needs {} bytes, {} left", self.field, self.at, self.needed, self.left)
    }
}

impl std::error::Error for Truncated {}

/// A cursor over `bytes`, reading little-endian integers and length-prefixed fields.
#[derive(Clone, Debug)]
pub struct LeReader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> LeReader<'a> {
    pub fn new(bytes: &'a [u8]) -> LeReader<'a> {
        LeReader { bytes, pos: 0 }
    }

    /// The byte the next read starts at.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// The bytes not read yet.
    pub fn left(&self) -> usize {
        self.bytes.len() - self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.left() == 0
    }

    /// The bytes not read yet, without taking them.
    pub fn rest(&self) -> &'a [u8] {
        &self.bytes[self.pos..]
    }

    /// Checks that `n` more bytes are there, without taking them.
    pub fn need(&self, n: usize, field: &str) -> Result<(), Truncated> {
        if self.left() < n {
            return Err(Truncated { field: field.to_string(), at: self.pos, needed: n, left: self.left() });
        }
        Ok(())
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize, field: &str) -> Result<&'a [u8], Truncated> {
        self.need(n, field)?;
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    pub fn array<const N: usize>(&mut self, field: &str) -> Result<[u8; N], Truncated> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N, field)?);
        Ok(out)
    }

    pub fn u8(&mut self, field: &str) -> Result<u8, Truncated> {
        Ok(self.array::<1>(field)?[0])
    }

    pub fn u16(&mut self, field: &str) -> Result<u16, Truncated> {
        Ok(u16::from_le_bytes(self.array(field)?))
    }

    pub fn u32(&mut self, field: &str) -> Result<u32, Truncated> {
        Ok(u32::from_le_bytes(self.array(field)?))
    }

    pub fn u64(&mut self, field: &str) -> Result<u64, Truncated> {
        Ok(u64::from_le_bytes(self.array(field)?))
    }

    pub fn u128(&mut self, field: &str) -> Result<u128, Truncated> {
        Ok(u128::from_le_bytes(self.array(field)?))
    }

    /// An `f64` stored as its IEEE 754 bits.
    pub fn f64(&mut self, field: &str) -> Result<f64, Truncated> {
        Ok(f64::from_bits(self.u64(field)?))
    }

    /// A field of `u32` length then that many bytes (the length's own shortness named
    /// `field` too).
    pub fn u32_prefixed(&mut self, field: &str) -> Result<&'a [u8], Truncated> {
        let len = self.u32(field)? as usize;
        self.take(len, field)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_little_endian_and_names_what_was_short() {
        let mut bytes = vec![7];
        bytes.extend(0x0102_u16.to_le_bytes());
        bytes.extend(3_u32.to_le_bytes());
        bytes.extend(b"abc");
        bytes.extend(1.5_f64.to_bits().to_le_bytes());
        bytes.extend([1, 2]);
        let mut r = LeReader::new(&bytes);
        assert_eq!(r.u8("tag"), Ok(7));
        assert_eq!(r.u16("port"), Ok(0x0102));
        assert_eq!(r.u32_prefixed("name"), Ok(&b"abc"[..]));
        assert_eq!(r.f64("tokens"), Ok(1.5));
        assert_eq!((r.position(), r.left(), r.rest()), (18, 2, &[1_u8, 2][..]));
        let short = r.u32("count").expect_err("two bytes left");
        assert_eq!(short, Truncated { field: "count".into(), at: 18, needed: 4, left: 2 });
        assert_eq!(short.to_string(), "truncated in count at byte 18: needs 4 bytes, 2 left");
        // A failed read takes nothing.
        assert_eq!((r.position(), r.u16("tail")), (18, Ok(0x0201)));
        assert!(r.is_empty());
        // A length past the end is refused before anything is allocated for it.
        let mut r = LeReader::new(&[0xff, 0xff, 0xff, 0xff]);
        assert_eq!(r.u32_prefixed("value").expect_err("4 GiB claimed").needed, u32::MAX as usize);
    }
}

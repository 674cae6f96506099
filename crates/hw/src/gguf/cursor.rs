//! A little-endian cursor over a prefix of a file that knows the file's length:
//! a read past the prefix but within the file asks for more bytes
//! ([`GgufError::NeedMore`]); a read past the file is an error
//! ([`GgufError::PastEnd`]). Nothing is allocated from a length before the bytes
//! it counts are known to be in the file.

use super::GgufError;

pub(super) struct Cursor<'a> {
    buf: &'a [u8],
    pos: u64,
    file_len: u64,
}

impl<'a> Cursor<'a> {
    pub(super) fn new(buf: &'a [u8], file_len: u64) -> Self {
        Cursor {
            buf,
            pos: 0,
            file_len: file_len.max(buf.len() as u64),
        }
    }

    /// The offset of the next byte to read.
    pub(super) fn pos(&self) -> u64 {
        self.pos
    }

    pub(super) fn file_len(&self) -> u64 {
        self.file_len
    }

    /// Bytes of the file after the cursor.
    pub(super) fn left_in_file(&self) -> u64 {
        self.file_len - self.pos
    }

    /// Fails with [`GgufError::PastEnd`] unless `len_bytes` more bytes fit in the file
    /// (without reading them).
    pub(super) fn ensure_fits(
        &self,
        len_bytes: u64,
        what: impl FnOnce() -> String,
    ) -> Result<(), GgufError> {
        if len_bytes > self.left_in_file() {
            return Err(GgufError::PastEnd {
                offset: self.pos,
                what: what(),
                len_bytes,
                left_bytes: self.left_in_file(),
                file_len_bytes: self.file_len,
            });
        }
        Ok(())
    }

    /// The next `len_bytes` bytes.
    pub(super) fn take(
        &mut self,
        len_bytes: u64,
        what: impl FnOnce() -> String,
    ) -> Result<&'a [u8], GgufError> {
        self.ensure_fits(len_bytes, what)?;
        let end = self.pos + len_bytes;
        if end > self.buf.len() as u64 {
            return Err(GgufError::NeedMore {
                at_offset: self.pos,
                needed_bytes: end,
                have_bytes: self.buf.len() as u64,
            });
        }
        // Both bounds are within `buf`, whose length fits in usize.
        let out = &self.buf[self.pos as usize..end as usize];
        self.pos = end;
        Ok(out)
    }

    pub(super) fn array<const N: usize>(
        &mut self,
        what: impl FnOnce() -> String,
    ) -> Result<[u8; N], GgufError> {
        let bytes = self.take(N as u64, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    pub(super) fn u32(&mut self, what: impl FnOnce() -> String) -> Result<u32, GgufError> {
        self.array(what).map(u32::from_le_bytes)
    }

    pub(super) fn u64(&mut self, what: impl FnOnce() -> String) -> Result<u64, GgufError> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// A GGUF string: u64 length, then that many bytes (lossily decoded as UTF-8).
    pub(super) fn string(&mut self, what: impl Fn() -> String) -> Result<String, GgufError> {
        let len = self.u64(|| format!("the length of {}", what()))?;
        let bytes = self.take(len, || format!("{} ({len} bytes)", what()))?;
        Ok(String::from_utf8_lossy(bytes).into_owned())
    }

    /// Skips a GGUF string.
    pub(super) fn skip_string(&mut self, what: impl Fn() -> String) -> Result<(), GgufError> {
        let len = self.u64(|| format!("the length of {}", what()))?;
        self.take(len, || format!("{} ({len} bytes)", what()))?;
        Ok(())
    }
}

//! What can go wrong reading a GGUF header or the model it describes, with the
//! offset where it went wrong.

/// Errors reading a GGUF header or the model it describes.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GgufError {
    /// The prefix ends inside the header: read at least `needed_bytes` of the file
    /// and parse again.
    #[error(
        "offset {at_offset}: the header continues past the {have_bytes} bytes read; read at least {needed_bytes} bytes and parse again"
    )]
    NeedMore {
        /// Where the read that ran out starts.
        at_offset: u64,
        /// The prefix length that read needs.
        needed_bytes: u64,
        /// The prefix length given.
        have_bytes: u64,
    },
    /// The first four bytes are not `GGUF`.
    #[error("not a GGUF file: magic at offset 0 is '{found}', expected 'GGUF'")]
    NotGguf {
        /// The bytes found, non-printable ones as `.`.
        found: String,
    },
    /// The version reads as 2 or 3 only byte-swapped: a big-endian file.
    #[error(
        "offset 4: version field reads {little_endian} little-endian but {version} byte-swapped: a big-endian GGUF file, which this reader does not read (convert it to little-endian with gguf-py)"
    )]
    BigEndian {
        /// The version read little-endian.
        little_endian: u32,
        /// The version read big-endian.
        version: u32,
    },
    /// GGUF v1 (32-bit counts and lengths).
    #[error(
        "offset 4: GGUF version 1 is not supported (it used 32-bit counts); convert the model again with a current llama.cpp"
    )]
    VersionOne,
    /// A version this reader does not know.
    #[error(
        "offset 4: GGUF version {version} is not supported (this reader reads versions 2 and 3)"
    )]
    UnsupportedVersion {
        /// The version read.
        version: u32,
    },
    /// A length or count that reaches past the end of the file (a corrupt length,
    /// or a truncated file).
    #[error(
        "offset {offset}: {what} takes {len_bytes} bytes, more than the {left_bytes} left in the file ({file_len_bytes} bytes)"
    )]
    PastEnd {
        /// Where the item starts.
        offset: u64,
        /// What was being read.
        what: String,
        /// The bytes it needs.
        len_bytes: u64,
        /// The bytes after `offset`.
        left_bytes: u64,
        /// The file's length.
        file_len_bytes: u64,
    },
    /// A value in the header that is not valid where it is.
    #[error("offset {offset}: {reason}")]
    Invalid {
        /// Where the value starts.
        offset: u64,
        /// What is wrong, naming what was expected.
        reason: String,
    },
    /// A tensor whose ggml type id ggml does not define.
    #[error(
        "offset {offset}: tensor `{tensor}` has ggml type id {type_id}, which is not a ggml type (known ids: 0-3, 6-30, 34, 35, 39-41)"
    )]
    UnknownTensorType {
        /// Where the type id is.
        offset: u64,
        /// The tensor.
        tensor: String,
        /// The id read.
        type_id: u32,
    },
    /// Tensor infos that do not describe a consistent data section.
    #[error("tensor `{tensor}`: {reason}")]
    TensorLayout {
        /// The tensor.
        tensor: String,
        /// What is inconsistent.
        reason: String,
    },
    /// A metadata key the model needs is missing.
    #[error("GGUF metadata has no `{0}` (needed for the model's shape)")]
    MissingKey(String),
    /// A metadata key the model needs has a value it cannot use.
    #[error("offset {offset}: metadata `{key}` {reason}")]
    InvalidKey {
        /// The key.
        key: String,
        /// Where its entry starts.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// The file's model does not fit a [`crate::floor::ModelShape`].
    #[error("the file's model does not fit one ModelShape: {0}")]
    NotAModelShape(String),
}

//! The library's errors: [`Error`], and the engines' own [`EngineError`] within it.

/// Everything the library can fail with. Messages name the file, line and field where there
/// is one.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A parameter is out of range or inconsistent (`num_perm != bands * rows`, `k = 0`, ...).
    #[error("invalid parameters: {0}")]
    Param(String),
    /// Two signatures that cannot be compared (different length or parameters).
    #[error("incomparable signatures: {0}")]
    Incomparable(String),
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    /// A line is not a JSON object (or not JSON at all).
    #[error("{path}:{line}: {msg}")]
    Parse {
        path: String,
        line: u64,
        msg: String,
    },
    /// A record's field is missing or of the wrong type.
    #[error("{path}:{line}: field `{field}` {msg}")]
    Field {
        path: String,
        line: u64,
        field: String,
        msg: String,
    },
    /// A Parquet row's field is null or of the wrong type. `row` counts from 0 across the file.
    #[error("{path}: row {row} (row group {row_group}): field `{field}` {msg}")]
    Row {
        path: String,
        row_group: usize,
        row: u64,
        field: String,
        msg: String,
    },
    /// A record is unfit for what was asked of it; the message names its place.
    #[error("{0}")]
    Record(String),
    /// The same id twice (in one input or across inputs).
    #[error("repeated id {id:?}: at {first} and again at {second}; ids must be unique across all inputs")]
    DuplicateId {
        id: String,
        first: String,
        second: String,
    },
    /// An LSH index was misused (repeated id, wrong signature length).
    #[error("lsh: {0}")]
    Lsh(String),
    /// A signature file does not match what it is loaded for.
    #[error("{path}: {msg}")]
    SignatureFile { path: String, msg: String },
    /// The engine failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The run would need more memory than allowed.
    #[error("{0}")]
    Memory(String),

    /// A work directory of the sharded stages: missing, made for other inputs or parameters,
    /// or a stage run before the stages it needs.
    #[error("{path}: {msg}")]
    Work { path: String, msg: String },
    /// An index directory (`neardup index`): missing, damaged, or made with other parameters.
    #[error("{path}: {msg}")]
    Index { path: String, msg: String },
    /// An output names an input or another output of the same run (refused before any work).
    #[error("{0}")]
    Output(String),
    /// What was asked for needs a Cargo feature this build was made without.
    #[error(
        "{what} needs neardup's `{feature}` feature, which this build was made without; \
         rebuild with it (`--features {feature}`; the default build has it)"
    )]
    Feature { feature: &'static str, what: String },
}

impl Error {
    /// An I/O error on `path` (or on what the text names, for something without a path).
    pub fn io(path: &str, source: std::io::Error) -> Self {
        Error::Io {
            path: path.to_string(),
            source,
        }
    }

    /// A missing GPU adapter's message, with what to do instead where the user is (`hint`);
    /// any other error unchanged.
    pub fn with_hint(self, hint: &str) -> Self {
        match self {
            Error::Engine(EngineError::NoAdapter(m)) => {
                Error::Engine(EngineError::NoAdapter(format!("{m}; {hint}")))
            }
            e => e,
        }
    }

    /// Is this a broken pipe on an output (a reader that went away, as `| head` does)? That is
    /// not a failure of the run.
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::BrokenPipe)
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors an engine can raise.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// No GPU adapter matched the request; the message says how to get one.
    #[error("no GPU adapter found: {0}")]
    NoAdapter(String),
    /// The GPU device failed (device lost, out of memory, validation error).
    #[error("GPU error: {0}")]
    Gpu(String),
    /// The output slice has the wrong length for the batch.
    #[error("output has {got} entries, the batch needs {expected} ({docs} documents x {num_perm} permutations)")]
    OutputSize {
        got: usize,
        expected: usize,
        docs: usize,
        num_perm: usize,
    },
}

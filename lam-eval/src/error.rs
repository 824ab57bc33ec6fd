//! Errors of `lam-eval`: typed, and each naming the input it concerns.

use std::fmt::Display;
use std::path::PathBuf;

/// Errors of the evaluation harness, the reports and calibration.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file could not be read or written.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A trajectory could not be read.
    #[error(transparent)]
    Read(#[from] lam_trajectory::ReadError),
    /// The operator refused a record or a setting.
    #[error(transparent)]
    Operator(#[from] lam_operator::Error),
    /// An encoder, embedding or store error.
    #[error(transparent)]
    Core(#[from] lam_core::Error),
    /// A model or embeddings file could not be loaded.
    #[error(transparent)]
    Encoder(#[from] lam_encode::Error),
    /// A report could not be serialised, or a JSON input parsed.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// Inputs that cannot be evaluated (nothing to read, malformed reference data).
    #[error("{0}")]
    Input(String),
    /// An error while working on something named in `context`.
    #[error("{context}: {source}")]
    Within {
        /// What was being done (file, session, setting).
        context: String,
        /// The cause.
        #[source]
        source: Box<Error>,
    },
}

/// Results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Name what was being done when an error happened.
pub(crate) trait Context<T> {
    fn context(self, ctx: impl Display) -> Result<T>;
    fn with_context<D: Display>(self, ctx: impl FnOnce() -> D) -> Result<T>;
}

impl<T, E: Into<Error>> Context<T> for std::result::Result<T, E> {
    fn context(self, ctx: impl Display) -> Result<T> {
        self.map_err(|e| Error::Within { context: ctx.to_string(), source: Box::new(e.into()) })
    }
    fn with_context<D: Display>(self, ctx: impl FnOnce() -> D) -> Result<T> {
        self.map_err(|e| Error::Within { context: ctx().to_string(), source: Box::new(e.into()) })
    }
}

impl<T> Context<T> for Option<T> {
    fn context(self, ctx: impl Display) -> Result<T> {
        self.ok_or_else(|| Error::Input(ctx.to_string()))
    }
    fn with_context<D: Display>(self, ctx: impl FnOnce() -> D) -> Result<T> {
        self.ok_or_else(|| Error::Input(ctx().to_string()))
    }
}

impl From<std::io::Error> for Error {
    fn from(source: std::io::Error) -> Self {
        Error::Io { path: PathBuf::new(), source }
    }
}

/// `return Err(Error::Input(format!(...)))`.
macro_rules! bail {
    ($($t:tt)*) => { return Err($crate::Error::Input(format!($($t)*))) };
}
pub(crate) use bail;

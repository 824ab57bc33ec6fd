//! The crate's one error type.

/// Errors of the cost models: bad presets, bad inputs, unreadable profiles.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A device or model field is zero, negative, NaN or infinite where it must be positive.
    #[error("{what} `{name}`: {field} must be a positive finite number, got {value}")]
    BadPreset {
        /// `device` or `model`.
        what: &'static str,
        /// The preset's name.
        name: String,
        /// The offending field.
        field: &'static str,
        /// Its value.
        value: f64,
    },
    /// The model's weights (plus scratch and one token of KV cache) do not fit the device memory.
    #[error("model `{model}` does not fit device `{device}`: needs {need_bytes} bytes (weights + scratch + KV), device has {have_bytes}")]
    DoesNotFit {
        /// Model name.
        model: String,
        /// Device name.
        device: String,
        /// Bytes needed.
        need_bytes: f64,
        /// Bytes available.
        have_bytes: f64,
    },
    /// No preset of that name.
    #[error("no {what} preset named `{name}` (known: {known})")]
    UnknownPreset {
        /// `device` or `model`.
        what: &'static str,
        /// The name asked for.
        name: String,
        /// The names that exist, comma-separated.
        known: String,
    },
    /// An input value is out of its domain (negative rate, removal above the arrival, ...).
    #[error("{0}")]
    BadInput(String),
    /// A device profile could not be read or parsed.
    #[error("device profile {path}: {message}")]
    Profile {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
}

/// Result with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// `Ok(v)` when `v` is finite and > 0, else [`Error::BadPreset`].
pub(crate) fn positive(what: &'static str, name: &str, field: &'static str, v: f64) -> Result<f64> {
    if v.is_finite() && v > 0.0 { Ok(v) } else { Err(Error::BadPreset { what, name: name.to_string(), field, value: v }) }
}

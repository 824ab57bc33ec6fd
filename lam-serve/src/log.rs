//! `--log`: one line per request, on standard error or appended to a file
//! (`ServeConfig::log_file`: `lam run` with a full-screen agent on the
//! terminal, whose display lines on standard error would garble). A line
//! that cannot be written is lost, never the request.

use crate::config::ServeConfig;
use crate::error::Error;
use std::io::Write as _;
use std::sync::Mutex;

/// Where the log lines go, if anywhere.
#[derive(Debug)]
pub(crate) enum Log {
    Off,
    Stderr,
    File(Mutex<std::fs::File>),
}

impl Log {
    /// The log `cfg` asks for; the file is created (0600) or appended to.
    pub(crate) fn open(cfg: &ServeConfig) -> Result<Self, Error> {
        match (&cfg.log, &cfg.log_file) {
            (false, _) => Ok(Log::Off),
            (true, None) => Ok(Log::Stderr),
            (true, Some(path)) => {
                let mut o = std::fs::OpenOptions::new();
                o.create(true).append(true);
                #[cfg(unix)]
                std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
                let file = o.open(path).map_err(|source| Error::Io { what: format!("opening the log file {}", path.display()), source })?;
                Ok(Log::File(Mutex::new(file)))
            }
        }
    }

    /// Whether lines are written at all.
    pub(crate) fn on(&self) -> bool {
        !matches!(self, Log::Off)
    }

    /// Write one line (nothing when the log is off).
    pub(crate) fn line(&self, args: std::fmt::Arguments<'_>) {
        match self {
            Log::Off => {}
            Log::Stderr => say!("{args}"),
            Log::File(f) => {
                let mut f = f.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let _ = writeln!(f, "{args}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With a log file, every line lands there in order, after what the
    /// file held (appended, never truncated); off, nothing is written.
    #[test]
    fn lines_are_appended_to_the_log_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.log");
        std::fs::write(&path, "earlier\n").unwrap();
        let mut cfg = ServeConfig::new("http://127.0.0.1:1");
        cfg.log_file = Some(path.clone());
        assert!(!Log::open(&cfg).unwrap().on(), "--log off: no file opened");
        cfg.log = true;
        let log = Log::open(&cfg).unwrap();
        log.line(format_args!("one {}", 1));
        log.line(format_args!("two"));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "earlier\none 1\ntwo\n");
        cfg.log_file = Some(dir.path().join("missing").join("run.log"));
        let err = Log::open(&cfg).unwrap_err().to_string();
        assert!(err.contains("opening the log file") && err.contains("missing"), "{err}");
    }
}

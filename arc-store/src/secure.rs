//! How a [`crate::FileStore`] touches its files: private modes and no
//! symlinks.
//!
//! Directories a store creates (the store, `quarantine/`) get mode 0700
//! and files (segments, `LOCK`, `REPAIR.log`, quarantine copies) mode 0600,
//! whatever the umask. Every file inside a store is opened with
//! `O_NOFOLLOW`: a symlink planted in the place of a segment, the lock or the
//! repair log makes the open fail (naming the path) and its target is never
//! read or written. `quarantine/` must be a real directory.

use crate::StoreError;
use crate::error::Result;
use std::fs::{File, OpenOptions};
use std::path::Path;

/// Mode of the directories a store creates.
pub const DIR_MODE: u32 = 0o700;
/// Mode of the files a store creates.
pub const FILE_MODE: u32 = 0o600;

/// `OpenOptions` that refuse a symlink and create files 0600.
pub(crate) fn options() -> OpenOptions {
    let mut o = OpenOptions::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(FILE_MODE).custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    }
    o
}

/// Open `path` (inside a store) with `o`, naming a symlink as the reason it fails.
pub(crate) fn open(o: &OpenOptions, op: &'static str, path: &Path) -> Result<File> {
    o.open(path).map_err(|e| refuse_link(op, path, e))
}

/// Open `path` for reading, refusing a symlink.
pub(crate) fn open_read(path: &Path) -> std::io::Result<File> {
    options().read(true).open(path).map_err(|e| if is_link(path) { std::io::Error::other(LINK_REFUSED) } else { e })
}

const LINK_REFUSED: &str = "is a symbolic link; a store never follows links inside itself (replace it with the real file)";

fn is_link(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// The store error for a failed open: a planted symlink says so.
pub(crate) fn refuse_link(op: &'static str, path: &Path, e: std::io::Error) -> StoreError {
    let cause = if is_link(path) { std::io::Error::other(LINK_REFUSED) } else { e };
    StoreError::Io { op, path: path.to_path_buf(), offset: None, cause }
}

/// Create directory `dir` (and missing parents) with mode 0700; an existing
/// `dir` must be a directory (a symlink to one is accepted only for the store
/// itself, `allow_link`).
pub(crate) fn create_dir(dir: &Path, allow_link: bool) -> Result<()> {
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        b.mode(DIR_MODE);
    }
    let io = |cause| StoreError::Io { op: "create directory", path: dir.to_path_buf(), offset: None, cause };
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => return Ok(()),
        Ok(m) if m.file_type().is_symlink() && allow_link && dir.is_dir() => return Ok(()),
        Ok(m) if m.file_type().is_symlink() => return Err(io(std::io::Error::other(LINK_REFUSED))),
        Ok(_) => return Err(io(std::io::Error::other("exists and is not a directory"))),
        Err(_) => {}
    }
    b.create(dir).map_err(io)
}

/// The permission bits of `path` itself (not a link's target); `None` when
/// it cannot be read, or on a platform without modes.
pub(crate) fn mode(path: &Path) -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let m = std::fs::symlink_metadata(path).ok()?;
        (!m.file_type().is_symlink()).then(|| m.permissions().mode() & 0o7777)
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

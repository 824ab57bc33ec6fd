//! The commit `lam --version` names, as `LAM_COMMIT` ("commit 1a2b3c4d5e6f"):
//! `$LAM_BUILD_COMMIT` when set (a release build may embed it), else the
//! commit cargo recorded when it packaged this crate (`.cargo_vcs_info.json`,
//! so `cargo install lam-ctx` names the published commit), else the
//! checkout's `HEAD` (git), else "commit unknown".

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=LAM_BUILD_COMMIT");
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let dir = Path::new(&dir);
    let commit = std::env::var("LAM_BUILD_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .map(|c| c.trim().to_string())
        .or_else(|| packaged(dir))
        .or_else(|| checkout(dir));
    let text = commit.map_or_else(|| "commit unknown".to_string(), |c| format!("commit {c}"));
    println!("cargo:rustc-env=LAM_COMMIT={text}");
}

/// `"sha1": "..."` of the `.cargo_vcs_info.json` cargo writes into a package
/// (with ` dirty` when it was packaged from a modified tree).
fn packaged(dir: &Path) -> Option<String> {
    let info = dir.join(".cargo_vcs_info.json");
    let text = std::fs::read_to_string(&info).ok()?;
    println!("cargo:rerun-if-changed={}", info.display());
    let at = text.find("\"sha1\"")?;
    let rest = &text[at + 6..];
    let start = rest.find('"')? + 1;
    let len = rest[start..].find('"')?;
    let sha = &rest[start..start + len];
    if sha.len() < 12 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let dirty = text.contains("\"dirty\": true") || text.contains("\"dirty\":true");
    Some(format!("{}{}", &sha[..12], if dirty { " dirty" } else { "" }))
}

/// The checkout's HEAD, when this crate's manifest is tracked there (so a
/// package unpacked inside some other repository never takes its commit).
fn checkout(dir: &Path) -> Option<String> {
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git").arg("-C").arg(dir).args(args).output().ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    git(&["ls-files", "--error-unmatch", "Cargo.toml"])?;
    let sha = git(&["rev-parse", "--short=12", "HEAD"])?;
    // Rebuild when HEAD moves: its file, the branch it names, packed refs.
    let mut watch = vec![git(&["rev-parse", "--git-path", "HEAD"])];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch.push(git(&["rev-parse", "--git-path", &branch]));
    }
    watch.push(git(&["rev-parse", "--git-path", "packed-refs"]));
    for p in watch.into_iter().flatten() {
        let p = if Path::new(&p).is_absolute() { Path::new(&p).to_path_buf() } else { dir.join(&p) };
        if p.exists() {
            println!("cargo:rerun-if-changed={}", p.display());
        }
    }
    Some(sha)
}

//! `cargo xtask dist [--dev] [--check] [--out DIR]`: every artifact of lam
//! for this host, in `target/dist/` (`target/dist-dev/` with `--dev`):
//!
//! - `lam_ctx-VERSION-py3-none-PLATFORM.whl`: the `lam` binary in a wheel
//!   (maturin `bindings = "bin"`, `lam/pyproject.toml`), depending on
//! - `lam_ctx_model-0.1.0-py3-none-any.whl`: the default encoder's files
//!   (`scripts/model-wheel.py`);
//! - `lam_ctx_py-VERSION-cp39-abi3-PLATFORM.whl`: the Python package
//!   `import lam` (`lam-py/`);
//! - `lam-ctx-VERSION.tgz` and `lam-ctx-TARGET-VERSION.tgz`: the npm
//!   package (its launcher, `npm/lam-ctx/`) and this platform's binary
//!   package (`npm pack`);
//! - `lam-VERSION-TRIPLE.tar.gz`: the binary with its README and licences;
//! - `SHA256SUMS` of all of them.
//!
//! One binary in all of them: the one maturin builds into the wheel
//! (release profile, or the dev profile with `--dev`, which reuses the test
//! build and is what CI checks; such artifacts are for checking, not for
//! release). The Python
//! tools (maturin, auditwheel, uv, pipx, pinned) live in a venv of their own,
//! `target/dist-tools`, made here from PyPI. `--check` then installs the
//! artifacts into fresh environments with no cargo on the PATH
//! (`scripts/dist-check.py`: pip into a venv, `uv tool install`, `pipx
//! install`, `npm i -g` offline from the tarballs) and runs `lam --version`,
//! `lam replay` on the bundled example, `lam compact` with the default
//! encoder and `lam run -- claude` (a scripted agent), each compared with
//! the build tree's binary (`target/release/lam`, `target/debug/lam`).

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The Python tools, pinned.
const TOOLS: [&str; 4] = ["maturin==1.16.0", "auditwheel==6.8.2", "uv==0.13.10", "pipx==1.18.16"];

/// npm's name for a Rust target: (platform package suffix, `os`, `cpu`, `libc`).
fn npm_platform(triple: &str) -> Option<(&'static str, &'static str, &'static str, Option<&'static str>)> {
    Some(match triple {
        "x86_64-unknown-linux-gnu" => ("linux-x64", "linux", "x64", Some("glibc")),
        "aarch64-unknown-linux-gnu" => ("linux-arm64", "linux", "arm64", Some("glibc")),
        "x86_64-apple-darwin" => ("darwin-x64", "darwin", "x64", None),
        "aarch64-apple-darwin" => ("darwin-arm64", "darwin", "arm64", None),
        "x86_64-pc-windows-msvc" => ("win32-x64", "win32", "x64", None),
        _ => return None,
    })
}

struct Opts {
    dev: bool,
    check: bool,
    out: Option<PathBuf>,
}

fn parse(args: &[String]) -> Result<Opts> {
    let mut o = Opts { dev: false, check: false, out: None };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--dev" => o.dev = true,
            "--check" => o.check = true,
            "--out" => o.out = Some(it.next().context("--out DIR")?.into()),
            other => bail!("dist: unknown argument {other} (usage: cargo xtask dist [--dev] [--check] [--out DIR])"),
        }
    }
    Ok(o)
}

fn run(cmd: &mut Command, what: &str) -> Result<()> {
    let st = cmd.status().with_context(|| format!("{what}: could not start"))?;
    if !st.success() {
        bail!("{what} failed ({st})");
    }
    Ok(())
}

fn output(cmd: &mut Command, what: &str) -> Result<String> {
    let out = cmd.output().with_context(|| format!("{what}: could not start"))?;
    if !out.status.success() {
        bail!("{what} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn host_triple() -> Result<String> {
    let v = output(Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into())).arg("-vV"), "rustc -vV")?;
    v.lines().find_map(|l| l.strip_prefix("host: ")).map(str::to_string).context("rustc -vV names no host")
}

/// `target/dist-tools`: a venv with the pinned tools (made once; remade when the pins change).
fn tools(root: &Path, target: &Path) -> Result<PathBuf> {
    let venv = target.join("dist-tools");
    let bin = venv.join(if cfg!(windows) { "Scripts" } else { "bin" });
    let stamp = venv.join("lam-tools.txt");
    let want = TOOLS.join("\n");
    if std::fs::read_to_string(&stamp).ok().as_deref() == Some(want.as_str()) {
        return Ok(bin);
    }
    eprintln!("dist: installing {} into {}", TOOLS.join(" "), venv.display());
    run(Command::new(python()).args(["-m", "venv", "--clear"]).arg(&venv).current_dir(root), "python3 -m venv")?;
    run(Command::new(bin.join("python")).args(["-m", "pip", "install", "-q", "--disable-pip-version-check"]).args(TOOLS), "pip install the dist tools")?;
    std::fs::write(&stamp, want)?;
    Ok(bin)
}

fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| if cfg!(windows) { "python".into() } else { "python3".into() })
}

fn sha256_hex(path: &Path) -> Result<String> {
    let mut f = std::fs::File::open(path).with_context(|| path.display().to_string())?;
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h)?;
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

fn copy(from: &Path, to: &Path) -> Result<()> {
    std::fs::copy(from, to).with_context(|| format!("copy {} -> {}", from.display(), to.display()))?;
    Ok(())
}

#[cfg(unix)]
fn executable(p: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755))?;
    Ok(())
}

#[cfg(not(unix))]
fn executable(_: &Path) -> Result<()> {
    Ok(())
}

pub fn dist(root: &Path, args: &[String]) -> Result<()> {
    let o = parse(args)?;
    let version = env!("CARGO_PKG_VERSION"); // xtask takes the workspace's version
    let triple = host_triple()?;
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"));
    let target = if target.is_absolute() { target } else { root.join(target) };
    let out = o.out.clone().unwrap_or_else(|| target.join(if o.dev { "dist-dev" } else { "dist" }));
    let out = if out.is_absolute() { out } else { std::env::current_dir()?.join(out) };
    let profile_dir = target.join(if o.dev { "debug" } else { "release" });
    let exe_name = if cfg!(windows) { "lam.exe" } else { "lam" };
    let started = std::time::Instant::now();

    let tools = tools(root, &target)?;
    if out.exists() {
        std::fs::remove_dir_all(&out).with_context(|| format!("clear {}", out.display()))?;
    }
    std::fs::create_dir_all(&out)?;
    let profile: &[&str] = if o.dev { &["--profile", "dev"] } else { &["--release"] };

    // The CLI wheel (maturin also builds the binary every other artifact carries).
    eprintln!("dist: the lam-ctx wheel (maturin, {} profile)", if o.dev { "dev" } else { "release" });
    let maturin = || {
        let mut c = Command::new(tools.join("maturin"));
        c.current_dir(root).env("CARGO_TARGET_DIR", &target);
        c
    };
    run(maturin().args(["build", "--locked", "-q", "-m", "lam/Cargo.toml", "--out"]).arg(&out).args(profile), "maturin build (lam-ctx)")?;
    // The binary every other artifact carries: the wheel's own (the build
    // tree's may be rebuilt meanwhile, by a test build without `strip`).
    let staging = target.join("dist-staging");
    if staging.exists() {
        std::fs::remove_dir_all(&staging)?;
    }
    std::fs::create_dir_all(&staging)?;
    let binary = staging.join(exe_name);
    let wheel = std::fs::read_dir(&out)?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("lam_ctx-") && n.ends_with(".whl")));
    let wheel = wheel.context("maturin wrote no lam_ctx wheel")?;
    let extract = "import sys, zipfile\nz = zipfile.ZipFile(sys.argv[1])\nn = [x for x in z.namelist() if '.data/scripts/' in x]\nassert len(n) == 1, n\nopen(sys.argv[2], 'wb').write(z.read(n[0]))";
    run(Command::new(tools.join("python")).arg("-c").arg(extract).arg(&wheel).arg(&binary), "the binary out of the wheel")?;
    executable(&binary)?;

    eprintln!("dist: the lam-ctx-py wheel (import lam)");
    run(maturin().args(["build", "--locked", "-q", "-m", "lam-py/Cargo.toml", "--out"]).arg(&out).args(profile), "maturin build (lam-py)")?;

    eprintln!("dist: the lam-ctx-model wheel");
    run(Command::new(python()).arg("scripts/model-wheel.py").arg(&out).current_dir(root), "scripts/model-wheel.py")?;

    // The binary alone.
    let name = format!("lam-{version}-{triple}");
    let dir = staging.join(&name);
    std::fs::create_dir_all(&dir)?;
    copy(&binary, &dir.join(exe_name))?;
    executable(&dir.join(exe_name))?;
    for f in ["README.md", "LICENSE-APACHE", "LICENSE-MIT"] {
        copy(&root.join("lam").join(f), &dir.join(f))?;
    }
    let tarball = out.join(format!("{name}.tar.gz"));
    run(Command::new("tar").arg("-czf").arg(&tarball).arg("-C").arg(&staging).arg(&name), "tar")?;

    // npm: the launcher package and this platform's binary package.
    match npm_platform(&triple) {
        None => eprintln!("dist: no npm platform package for {triple} (npm_platform in xtask/src/dist.rs names the ones made)"),
        Some((suffix, os, cpu, libc)) => {
            eprintln!("dist: the npm packages (lam-ctx, lam-ctx-{suffix})");
            let main = staging.join("npm/lam-ctx");
            std::fs::create_dir_all(main.join("bin"))?;
            let manifest = std::fs::read_to_string(root.join("npm/lam-ctx/package.json"))?;
            let meta: serde_json::Value = serde_json::from_str(&manifest).context("npm/lam-ctx/package.json")?;
            if meta["version"] != version || meta["optionalDependencies"].as_object().is_none_or(|d| d.values().any(|v| v != version)) {
                bail!("npm/lam-ctx/package.json: its version and its optionalDependencies' must be the workspace's, {version}");
            }
            if meta["optionalDependencies"].get(format!("lam-ctx-{suffix}")).is_none() {
                bail!("npm/lam-ctx/package.json: no optional dependency lam-ctx-{suffix}");
            }
            copy(&root.join("npm/lam-ctx/package.json"), &main.join("package.json"))?;
            copy(&root.join("npm/lam-ctx/bin/lam.js"), &main.join("bin/lam.js"))?;
            executable(&main.join("bin/lam.js"))?;
            let plat = staging.join(format!("npm/lam-ctx-{suffix}"));
            std::fs::create_dir_all(plat.join("bin"))?;
            copy(&binary, &plat.join("bin").join(exe_name))?;
            executable(&plat.join("bin").join(exe_name))?;
            for d in [&main, &plat] {
                for f in ["LICENSE-APACHE", "LICENSE-MIT"] {
                    copy(&root.join(f), &d.join(f))?;
                }
            }
            copy(&root.join("lam/README.md"), &main.join("README.md"))?;
            std::fs::write(
                plat.join("README.md"),
                format!(
                    "# lam-ctx-{suffix}\n\nThe `lam` binary of the npm package `lam-ctx` for {os} {cpu}. Install `lam-ctx` (`npm i -g lam-ctx`), which depends on this package where it fits.\n"
                ),
            )?;
            let mut pkg = serde_json::json!({
                "name": format!("lam-ctx-{suffix}"),
                "version": version,
                "description": format!("The lam binary of lam-ctx for {os} {cpu}{}.", libc.map(|l| format!(" ({l})")).unwrap_or_default()),
                "license": meta["license"],
                "os": [os],
                "cpu": [cpu],
                "files": [format!("bin/{exe_name}"), "README.md", "LICENSE-APACHE", "LICENSE-MIT"],
                "preferUnplugged": true,
            });
            if let Some(l) = libc {
                pkg["libc"] = serde_json::json!([l]);
            }
            std::fs::write(plat.join("package.json"), serde_json::to_string_pretty(&pkg)? + "\n")?;
            for d in [&main, &plat] {
                run(Command::new("npm").args(["pack", "--silent", "--pack-destination"]).arg(&out).current_dir(d), "npm pack")?;
            }
        }
    }

    // SHA256SUMS, then the list.
    let mut files: Vec<PathBuf> = std::fs::read_dir(&out)?.flatten().map(|e| e.path()).filter(|p| p.is_file()).collect();
    files.sort();
    let mut sums = String::new();
    for f in &files {
        sums += &format!("{}  {}\n", sha256_hex(f)?, f.file_name().and_then(|n| n.to_str()).unwrap_or_default());
    }
    std::fs::write(out.join("SHA256SUMS"), sums)?;
    println!("dist: {} ({} s)", out.display(), started.elapsed().as_secs());
    for f in files.iter().chain(std::iter::once(&out.join("SHA256SUMS"))) {
        println!("{:>12}  {}", std::fs::metadata(f)?.len(), f.file_name().and_then(|n| n.to_str()).unwrap_or_default());
    }

    if o.check {
        let st = Command::new(tools.join("python"))
            .arg(root.join("scripts/dist-check.py"))
            .arg("--dist")
            .arg(&out)
            .arg("--reference")
            .arg(profile_dir.join(exe_name))
            .arg("--tools")
            .arg(&tools)
            .current_dir(root)
            .status()
            .context("scripts/dist-check.py")?;
        if !st.success() {
            bail!("dist --check failed (scripts/dist-check.py)");
        }
    }
    Ok(())
}

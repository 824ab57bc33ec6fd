//! Where `lam run` keeps the files it makes for a run (its proxy's address
//! for `lam top`, the agent's MCP configuration, a store spec holding a
//! password, the agent's home), and how `lam top` and `lam status-line`
//! find a running `lam run`.
//!
//! Every such file lies in a directory only this user can enter, the
//! *private root*: `$XDG_RUNTIME_DIR/lam` where `XDG_RUNTIME_DIR` is this
//! user's (0700), else `lam-UID` in the temporary directory. A root that is
//! there already is used only when it is a directory (not a link) of this
//! user's that no one else may enter; otherwise (another user made it
//! first) `lam run` makes a new one with `mkdtemp`, `lam-UID-XXXXXX`, for
//! this run, and says so. Each run has a directory of its own in the root,
//! `run-PID-XXXXXX`, made with `mkdtemp` too; nothing reuses a path someone
//! else made, and cleanup touches only this user's own entries.
//!
//! `lam top` and `lam status-line` read a run's address only from a file
//! `proxy` in such a run directory, 0600 and this user's, whose PID is a
//! live `lam` process of this user's, and only a loopback `http://`
//! address: `LAM_TOKEN` never goes to an address someone else wrote.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// `lam run`'s directory for this run: `ROOT/run-PID-XXXXXX`.
#[derive(Debug)]
pub struct RunDir {
    path: PathBuf,
    root: Root,
}

/// The private root a run directory lies in.
#[derive(Debug, Clone)]
struct Root {
    path: PathBuf,
    /// Made with `mkdtemp` for this run (the usual root was someone
    /// else's): removed with the run.
    temporary: bool,
}

impl RunDir {
    /// A new run directory in this user's private root; `note` hears why a
    /// usual root could not be used.
    pub fn create(note: &mut dyn FnMut(String)) -> Result<Self> {
        let root = private_root(note)?;
        remove_stale(&root.path);
        let path = mkdtemp(&root.path, &format!("run-{}-", std::process::id()));
        let path = path.with_context(|| format!("lam run: making a run directory in {}", root.path.display()))?;
        Ok(Self { path, root })
    }

    /// The directory's path.
    #[cfg(test)]
    fn path(&self) -> &Path {
        &self.path
    }

    /// `text` in a new file `NAME` of the run directory (0600).
    pub fn file(&self, name: &str, text: &str) -> Result<PathBuf> {
        let path = self.path.join(name);
        write_private(&path, text)?;
        Ok(path)
    }

    /// The agent's home for the run ([`lam_trajectory::agents::Home`]): a
    /// private directory with its files (0600) and links. Its path is the
    /// same run after run, `ROOT/home-VAR`, while this run holds that
    /// path's lock (`flock` on `ROOT/home-VAR.lock`, let go however the run
    /// ends): Gemini CLI tells the model its temporary folder, which lies in
    /// this home, so a path that changed would make a resumed conversation
    /// begin with other bytes (a new proxy session, the prompt cache missed
    /// from the first item). While another run holds it: `RUNDIR/home`.
    /// Returns the path and, for the shared one, its lock.
    pub fn home(&self, home: &lam_trajectory::agents::Home) -> Result<(PathBuf, Option<std::fs::File>)> {
        if let Some((dir, lock)) = stable_home(&self.root.path, home.var) {
            return Ok((make_home(dir, home)?, Some(lock)));
        }
        Ok((make_home(self.path.join("home"), home)?, None))
    }

    /// Remove the run directory and what is in it (links, never what they
    /// point at), and a root made for this run alone.
    pub fn remove(&self) {
        remove(&self.path);
        if self.root.temporary {
            remove(&self.root.path);
        }
    }
}

/// This user's private root: the first usual place that is safe, else a new
/// one made with `mkdtemp` (`note` says why).
fn private_root(note: &mut dyn FnMut(String)) -> Result<Root> {
    let tmp = std::env::temp_dir();
    for dir in usual_roots(&tmp) {
        match claim(&dir) {
            Ok(()) => return Ok(Root { path: dir, temporary: false }),
            Err(why) => note(format!("{} is not safe for run files ({why}); using a new directory", dir.display())),
        }
    }
    let path = mkdtemp(&tmp, &format!("lam-{}-", uid())).with_context(|| format!("lam run: making a private directory in {}", tmp.display()))?;
    Ok(Root { path, temporary: true })
}

/// Where the private root is looked for, in order: `$XDG_RUNTIME_DIR/lam`
/// when that directory is this user's and private, then `TMP/lam-UID`.
fn usual_roots(tmp: &Path) -> Vec<PathBuf> {
    let runtime = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from).filter(|d| d.is_absolute() && private(d).is_ok());
    runtime.map(|d| d.join("lam")).into_iter().chain(std::iter::once(tmp.join(format!("lam-{}", uid())))).collect()
}

/// Make `dir` (0700), or accept it when it is there and [`private`].
fn claim(dir: &Path) -> Result<(), String> {
    let mut b = std::fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
    match b.create(dir) {
        Ok(()) => {
            // A umask may have taken the owner's bits too.
            set_mode(dir, 0o700).map_err(|e| e.to_string())?;
            private(dir)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => private(dir),
        Err(e) => Err(e.to_string()),
    }
}

/// Whether `dir` is a directory (not a link) of this user's that nobody
/// else may enter or write in; why not.
fn private(dir: &Path) -> Result<(), String> {
    let m = std::fs::symlink_metadata(dir).map_err(|e| e.to_string())?;
    if !m.is_dir() {
        return Err("not a directory".into());
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if m.uid() != uid() {
            return Err(format!("owned by uid {}, not {}", m.uid(), uid()));
        }
        if m.mode() & 0o077 != 0 {
            return Err(format!("mode {:o}: others may enter it", m.mode() & 0o777));
        }
    }
    Ok(())
}

/// This user's id (0 where there are none).
fn uid() -> u32 {
    #[cfg(unix)]
    // SAFETY: getuid has no preconditions and cannot fail.
    return unsafe { libc::getuid() };
    #[cfg(not(unix))]
    0
}

/// A new directory `PREFIX` + 6 random characters in `dir`, made private
/// (0700) as it is created (`mkdtemp`: a name that is there means another).
fn mkdtemp(dir: &Path, prefix: &str) -> std::io::Result<PathBuf> {
    let mut b = tempfile::Builder::new();
    b.prefix(prefix).rand_bytes(6);
    #[cfg(unix)]
    b.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700));
    Ok(b.tempdir_in(dir)?.keep())
}

fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    #[cfg(unix)]
    return std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(mode));
    #[cfg(not(unix))]
    {
        let _ = (path, mode);
        Ok(())
    }
}

/// The run directories in `root` of runs that are gone (`lam run` killed
/// before it could clean up), removed: only entries of this user's.
fn remove_stale(root: &Path) {
    for (dir, pid) in runs_in(root) {
        if !alive(pid) {
            remove(&dir);
        }
    }
}

/// The run directories `run-PID-XXXXXX` in `root` that are this user's and
/// private, with their PIDs.
fn runs_in(root: &Path) -> Vec<(PathBuf, u32)> {
    let Ok(entries) = std::fs::read_dir(root) else { return Vec::new() };
    let pid = |name: &str| name.strip_prefix("run-")?.split('-').next()?.parse::<u32>().ok();
    entries.flatten().filter_map(|e| Some((e.path(), pid(e.file_name().to_str()?)?))).filter(|(d, _)| private(d).is_ok()).collect()
}

/// Whether process `pid` is running.
fn alive(pid: u32) -> bool {
    #[cfg(unix)]
    {
        let Ok(p) = libc::pid_t::try_from(pid) else { return false };
        // SAFETY: signal 0 only checks that the process exists.
        let r = unsafe { libc::kill(p, 0) };
        r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    }
    #[cfg(not(unix))]
    {
        let _ = pid;
        true
    }
}

/// Whether `pid` is a running `lam` of this user's (on Linux, from
/// `/proc`: its owner and command name; elsewhere, that it runs and this
/// user may signal it).
fn lam_of_mine(pid: u32) -> bool {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::MetadataExt;
        let proc = Path::new("/proc").join(pid.to_string());
        let mine = std::fs::metadata(&proc).is_ok_and(|m| m.uid() == uid());
        let comm = std::fs::read_to_string(proc.join("comm")).unwrap_or_default();
        mine && comm.trim_end() == "lam"
    }
    #[cfg(all(unix, not(target_os = "linux")))]
    {
        let Ok(p) = libc::pid_t::try_from(pid) else { return false };
        // SAFETY: signal 0 only checks that the process exists and may be signalled.
        unsafe { libc::kill(p, 0) == 0 }
    }
    #[cfg(not(unix))]
    alive(pid)
}

/// The roots `lam top` looks in: the usual ones that are private, and the
/// `lam-UID-XXXXXX` a run made when they were not.
fn roots_to_search() -> Vec<PathBuf> {
    let tmp = std::env::temp_dir();
    let made = format!("lam-{}-", uid());
    let temporary =
        std::fs::read_dir(&tmp).into_iter().flatten().flatten().filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with(&made))).map(|e| e.path());
    usual_roots(&tmp).into_iter().chain(temporary).filter(|d| private(d).is_ok()).collect()
}

/// The address of the newest running `lam run` of this user's: its run
/// directory's `proxy` file (see the module's page for what is checked).
pub fn newest_run() -> Option<String> {
    let mut found: Vec<(std::time::SystemTime, String)> = Vec::new();
    for (dir, pid) in roots_to_search().iter().flat_map(|r| runs_in(r)) {
        if let Some(found_one) = lam_of_mine(pid).then(|| read_proxy(&dir.join("proxy"))).flatten() {
            found.push(found_one);
        }
    }
    found.into_iter().max_by_key(|(t, _)| *t).map(|(_, u)| u)
}

/// A `proxy` file's time and address: a regular file (not a link) of this
/// user's, 0600, holding `http://127.0.0.1:PORT` (or `[::1]`).
fn read_proxy(path: &Path) -> Option<(std::time::SystemTime, String)> {
    use std::io::Read as _;
    let mut o = std::fs::OpenOptions::new();
    o.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut o, libc::O_NOFOLLOW);
    let f = o.open(path).ok()?;
    let m = f.metadata().ok()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if m.uid() != uid() || m.mode() & 0o777 != 0o600 {
            return None;
        }
    }
    let mut text = String::new();
    f.take(256).read_to_string(&mut text).ok()?;
    let url = text.trim().to_string();
    loopback_origin(&url).then(|| (m.modified().unwrap_or(std::time::UNIX_EPOCH), url))
}

/// Whether `url` is `http://` to a loopback address and a port, nothing more.
fn loopback_origin(url: &str) -> bool {
    url.strip_prefix("http://").and_then(|a| a.parse::<std::net::SocketAddr>().ok()).is_some_and(|a| a.ip().is_loopback() && a.port() != 0)
}

/// `lam-home VAR`'s shared path in `root` and its lock, when this run takes it.
#[cfg(unix)]
fn stable_home(root: &Path, var: &str) -> Option<(PathBuf, std::fs::File)> {
    use std::os::unix::io::AsRawFd;
    let dir = root.join(format!("home-{}", var.to_ascii_lowercase()));
    let mut o = std::fs::OpenOptions::new();
    o.create(true).append(true);
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut o, libc::O_NOFOLLOW);
    let lock = o.open(dir.with_extension("lock")).ok()?;
    // SAFETY: the descriptor is open for the call; LOCK_NB never blocks.
    let taken = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
    taken.then_some((dir, lock))
}

#[cfg(not(unix))]
fn stable_home(_: &Path, _: &str) -> Option<(PathBuf, std::fs::File)> {
    None
}

/// The agent's home at `dir` in a private root (one left by an earlier
/// run, this user's, replaced): made 0700, its files written 0600, its
/// links made, the directories they lead to made first where missing (a
/// link whose target is still missing is left out).
fn make_home(dir: PathBuf, home: &lam_trajectory::agents::Home) -> Result<PathBuf> {
    remove(&dir);
    let mut b = std::fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
    b.create(&dir).with_context(|| format!("lam run: making {}", dir.display()))?;
    set_mode(&dir, 0o700).with_context(|| format!("lam run: making {} private", dir.display()))?;
    let within = |rel: &Path| -> Result<PathBuf> {
        let path = dir.join(rel);
        let parent = path.parent().unwrap_or(&dir);
        lam_core::fsdir::create_private(parent).with_context(|| format!("lam run: making {}", parent.display()))?;
        Ok(path)
    };
    for d in &home.make {
        let _ = std::fs::create_dir_all(d);
    }
    for (rel, text) in &home.files {
        write_private(&within(rel)?, text)?;
    }
    #[cfg(unix)]
    for (rel, target) in home.links.iter().filter(|(_, t)| t.exists()) {
        let path = within(rel)?;
        std::os::unix::fs::symlink(target, &path).with_context(|| format!("lam run: linking {} to {}", path.display(), target.display()))?;
    }
    Ok(dir)
}

/// `text` in a new file at `path` that only this user can read (0600); a
/// path that is there already is an error, never written through.
pub fn write_private(path: &Path, text: &str) -> Result<()> {
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    let mut f = o.open(path).with_context(|| format!("lam run: writing {}", path.display()))?;
    std::io::Write::write_all(&mut f, text.as_bytes()).with_context(|| format!("lam run: writing {}", path.display()))
}

/// Remove a file, or a directory with what is in it (its links, never
/// what they point at).
pub fn remove(path: &Path) {
    let _ = match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
        _ => std::fs::remove_file(path),
    };
}

/// An error unless `dir` is private (for tests and checks).
#[cfg(test)]
fn check_private(dir: &Path) -> Result<()> {
    if let Err(why) = private(dir) {
        anyhow::bail!("{}: {why}", dir.display());
    }
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A run directory lies in a private root of this user's, and is
    /// private itself; its files are 0600 and never written through an
    /// existing path.
    #[test]
    fn a_run_directory_is_private_and_its_files_new() {
        let run = RunDir::create(&mut |n| panic!("{n}")).unwrap();
        check_private(run.path()).unwrap();
        check_private(run.path().parent().unwrap()).unwrap();
        let f = run.file("proxy", "http://127.0.0.1:1").unwrap();
        assert_eq!(std::fs::metadata(&f).unwrap().permissions().mode() & 0o777, 0o600);
        assert!(run.file("proxy", "x").is_err(), "an existing name is an error");
        run.remove();
        assert!(!run.path().exists());
    }

    /// A root that is not private (a link, a shared mode) is refused.
    #[test]
    fn a_root_someone_could_enter_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let open = t.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert!(claim(&open).unwrap_err().contains("others may enter it"));
        let link = t.path().join("link");
        std::os::unix::fs::symlink(t.path(), &link).unwrap();
        assert_eq!(claim(&link).unwrap_err(), "not a directory");
        let new = t.path().join("new");
        claim(&new).unwrap();
        assert_eq!(std::fs::metadata(&new).unwrap().permissions().mode() & 0o777, 0o700);
        claim(&new).unwrap();
    }

    /// Only a loopback `http://HOST:PORT` is an address `lam top` uses.
    #[test]
    fn only_a_loopback_origin_is_read() {
        for ok in ["http://127.0.0.1:8787", "http://[::1]:9"] {
            assert!(loopback_origin(ok), "{ok}");
        }
        for bad in ["http://10.0.0.1:80", "https://127.0.0.1:1", "http://127.0.0.1:1/x", "http://evil.example:80", "http://127.0.0.1:0", ""] {
            assert!(!loopback_origin(bad), "{bad}");
        }
    }

    /// A proxy file that is a link, not 0600, or names another host is not read.
    #[test]
    fn a_proxy_file_is_read_only_when_it_is_private_and_loopback() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("proxy");
        write_private(&p, "http://127.0.0.1:5\n").unwrap();
        assert_eq!(read_proxy(&p).map(|x| x.1).as_deref(), Some("http://127.0.0.1:5"));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(read_proxy(&p).is_none(), "mode 0644");
        let q = t.path().join("q");
        write_private(&q, "http://127.0.0.1:6").unwrap();
        let link = t.path().join("link");
        std::os::unix::fs::symlink(&q, &link).unwrap();
        assert!(read_proxy(&link).is_none(), "a link");
        let far = t.path().join("far");
        write_private(&far, "http://192.0.2.1:80").unwrap();
        assert!(read_proxy(&far).is_none(), "not loopback");
    }

    /// The agent's home keeps one path while a run holds its lock; a
    /// second run at the same time gets one in its own run directory.
    #[test]
    fn an_agent_s_home_keeps_its_path_while_its_lock_is_held() {
        let home = lam_trajectory::agents::Home { var: "LAM_TEST_X_HOME", files: vec![(".x/a".into(), "1".into())], ..Default::default() };
        let (one, two) = (RunDir::create(&mut |_| ()).unwrap(), RunDir::create(&mut |_| ()).unwrap());
        let (first, lock) = one.home(&home).unwrap();
        assert!(lock.is_some() && first.ends_with("home-lam_test_x_home"), "{}", first.display());
        check_private(&first).unwrap();
        let (second, none) = two.home(&home).unwrap();
        assert!(none.is_none() && second == two.path().join("home"), "{}", second.display());
        drop(lock);
        let (again, lock) = two.home(&home).unwrap();
        assert_eq!((again.clone(), lock.is_some()), (first, true), "the same path once the lock is let go");
        remove(&again);
        one.remove();
        two.remove();
    }

    /// An agent's home: its files and links (a link whose target is
    /// missing left out), removed with its links, never what they point at.
    #[test]
    fn an_agent_s_home_is_made_private_and_removed_with_its_links_only() {
        let user = tempfile::tempdir().unwrap();
        let user = user.path();
        std::fs::write(user.join("creds.json"), "{}").unwrap();
        let home = lam_trajectory::agents::Home {
            var: "X_HOME",
            files: vec![(".x/settings.json".into(), "{\"a\":1}".into())],
            make: vec![user.join("tmp")],
            links: vec![(".x/creds.json".into(), user.join("creds.json")), (".x/tmp".into(), user.join("tmp")), (".x/gone".into(), user.join("gone"))],
            vars: Vec::new(),
        };
        let t = tempfile::tempdir().unwrap();
        let dir = make_home(t.path().join("home"), &home).unwrap();
        assert_eq!(std::fs::read_to_string(dir.join(".x/settings.json")).unwrap(), "{\"a\":1}");
        assert_eq!(std::fs::metadata(dir.join(".x/settings.json")).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::read_link(dir.join(".x/creds.json")).unwrap(), user.join("creds.json"));
        assert!(dir.join(".x/tmp").is_dir() && !dir.join(".x/gone").exists());
        remove(&dir);
        assert!(!dir.exists());
        assert!(user.join("creds.json").is_file() && user.join("tmp").is_dir(), "what the links point at stays");
    }

    /// A run directory whose process is gone is removed by the next run;
    /// a live one, and anything not named as a run, stay.
    #[test]
    fn stale_run_directories_are_removed() {
        let t = tempfile::tempdir().unwrap();
        let gone = t.path().join("run-4194303-abcdef");
        let live = t.path().join(format!("run-{}-abcdef", std::process::id()));
        let other = t.path().join("notes");
        for d in [&gone, &live, &other] {
            std::fs::create_dir(d).unwrap();
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        remove_stale(t.path());
        assert!(!gone.exists() && live.exists() && other.exists());
    }
}

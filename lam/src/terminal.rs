//! The terminal's mode around `lam run`'s agent: saved before it starts,
//! put back after it ends, however it ended. An agent killed inside its
//! full-screen interface (Codex: raw mode, the alternate screen) leaves the
//! terminal that way; `lam` then also writes the escapes that undo what
//! such interfaces turn on, before it prints its summary.

use std::io::Write as _;

/// What full-screen interfaces turn on, turned off: SGR reset, cursor shown,
/// bracketed paste, focus events and mouse reporting off, keypad and cursor
/// keys normal, the kitty keyboard protocol's flags popped, xterm's
/// modifyOtherKeys reset, and the alternate screen left (last: it moves the
/// cursor to where the interface started).
const RESET: &str = concat!(
    "\x1b[0m",
    "\x1b[?25h",
    "\x1b[?2004l",
    "\x1b[?1004l",
    "\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1005l\x1b[?1006l\x1b[?1015l",
    "\x1b[?1l\x1b>",
    "\x1b[<u",
    "\x1b[>4;0m",
    "\x1b[?1049l",
);

/// Standard input's terminal mode, as it was before the agent started.
pub struct Saved {
    mode: libc::termios,
}

impl Saved {
    /// The mode of standard input when it is a terminal; `None` otherwise.
    pub fn take() -> Option<Self> {
        mode(libc::STDIN_FILENO).map(|mode| Self { mode })
    }

    /// Put the saved mode back (`TCSANOW`, SIGTTOU ignored meanwhile: `lam`
    /// may not be the terminal's foreground group any more). When the agent
    /// left another mode, also write [`RESET`] to the terminal `lam` writes
    /// to. Returns whether the mode differed. Errors (a terminal hung up)
    /// are ignored: there is nothing left to restore.
    pub fn restore(&self) -> bool {
        let left = mode(libc::STDIN_FILENO);
        let differs = left.is_some_and(|m| !same(&m, &self.mode));
        let _ttou = IgnoreTtou::new();
        // SAFETY: fd 0 and a termios read from it by tcgetattr.
        unsafe { libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &self.mode) };
        if differs {
            reset_screen();
        }
        differs
    }
}

/// The mode of terminal `fd`; `None` when it is no terminal.
fn mode(fd: i32) -> Option<libc::termios> {
    // SAFETY: isatty and tcgetattr on a descriptor number, into a zeroed termios (plain integers).
    unsafe {
        if libc::isatty(fd) != 1 {
            return None;
        }
        let mut t: libc::termios = std::mem::zeroed();
        (libc::tcgetattr(fd, &mut t) == 0).then_some(t)
    }
}

fn same(a: &libc::termios, b: &libc::termios) -> bool {
    (a.c_iflag, a.c_oflag, a.c_cflag, a.c_lflag, a.c_cc) == (b.c_iflag, b.c_oflag, b.c_cflag, b.c_lflag, b.c_cc)
}

/// [`RESET`] to standard output when it is a terminal, else to standard error when it is one.
fn reset_screen() {
    // SAFETY: isatty on descriptor numbers.
    let (out, err) = unsafe { (libc::isatty(libc::STDOUT_FILENO) == 1, libc::isatty(libc::STDERR_FILENO) == 1) };
    if out {
        let mut o = std::io::stdout();
        let _ = o.write_all(RESET.as_bytes()).and_then(|()| o.flush());
    } else if err {
        let _ = std::io::stderr().write_all(RESET.as_bytes());
    }
}

/// SIGTTOU ignored while it lives (a background process group's tcsetattr
/// stops it otherwise); the disposition before is put back on drop.
struct IgnoreTtou {
    old: libc::sigaction,
}

impl IgnoreTtou {
    fn new() -> Self {
        // SAFETY: sigaction with a zeroed struct (SIG_IGN, empty mask) and an out pointer.
        unsafe {
            let mut ign: libc::sigaction = std::mem::zeroed();
            ign.sa_sigaction = libc::SIG_IGN;
            let mut old: libc::sigaction = std::mem::zeroed();
            old.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(libc::SIGTTOU, &ign, &mut old);
            Self { old }
        }
    }
}

impl Drop for IgnoreTtou {
    fn drop(&mut self) {
        // SAFETY: the disposition sigaction returned before.
        unsafe { libc::sigaction(libc::SIGTTOU, &self.old, std::ptr::null_mut()) };
    }
}

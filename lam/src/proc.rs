//! The agent `lam run` starts ends with it.

/// Make the child `cmd` starts get SIGTERM when this process dies, even by
/// SIGKILL (Linux `PR_SET_PDEATHSIG`; elsewhere nothing). Its own children
/// (Claude Code's `lam mcp`) end when it does: their stdin closes.
pub fn end_with_parent(cmd: &mut std::process::Command) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: between fork and exec only async-signal-safe calls
        // (prctl, getppid, raise), nothing allocated. The signal is sent when
        // the thread that forked exits: `lam run` forks from its main thread.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The parent died before prctl: no signal would come.
                if libc::getppid() != parent {
                    libc::raise(libc::SIGTERM);
                }
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cmd;
}

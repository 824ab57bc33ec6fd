//! `lam run`'s own signals: which of SIGHUP, SIGTERM and SIGINT make it
//! exit 128 + the signal once the store is flushed.
//!
//! The rule: SIGHUP and SIGTERM count whoever sent them (a closed terminal's
//! SIGHUP comes from the kernel, `kill` from a process). SIGINT counts only
//! when a process sent it (`kill -INT`, `si_code` of user space): the one a
//! Ctrl-C typed in the terminal raises comes from the kernel and reaches the
//! agent too, which decides (Claude Code clears its input and exits only
//! after a second one), so `lam` keeps the agent's exit code then.

use std::sync::Arc;
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};

#[cfg(unix)]
const SIGINT: i32 = libc::SIGINT;
#[cfg(not(unix))]
const SIGINT: i32 = 2;

/// What the handlers saw: the first signal that counts, and the SIGINTs
/// sent by a process not yet passed on to the agent.
#[derive(Debug, Default)]
pub struct Signalled {
    first: AtomicI32,
    sent_int: AtomicU32,
}

impl Signalled {
    /// Record SIGHUP, SIGTERM and SIGINT with their origin (called before
    /// tokio's handlers for them are installed, this one runs first on each).
    #[cfg(unix)]
    pub fn watch(self: &Arc<Self>) -> std::io::Result<()> {
        for sig in [libc::SIGHUP, libc::SIGTERM, libc::SIGINT] {
            let me = self.clone();
            // SAFETY: the action only reads `si_code` and stores to atomics (async-signal-safe).
            unsafe { signal_hook_registry::register_sigaction(sig, move |info: &libc::siginfo_t| me.saw(sig, info.si_code)) }?;
        }
        Ok(())
    }

    /// Signal `sig` with origin `si_code` arrived.
    #[cfg_attr(not(unix), allow(dead_code))]
    fn saw(&self, sig: i32, si_code: i32) {
        if !counts(sig, si_code) {
            return;
        }
        let _ = self.first.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
        if sig == SIGINT {
            self.sent_int.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Whether a SIGINT sent by a process arrived since the last call (it
    /// is to be passed on to the agent).
    pub fn take_sent_int(&self) -> bool {
        self.sent_int.swap(0, Ordering::SeqCst) > 0
    }

    /// `lam run`'s exit code when a signal that counts arrived: 128 + the first.
    pub fn exit_code(&self) -> Option<i32> {
        match self.first.load(Ordering::SeqCst) {
            0 => None,
            sig => Some(128 + sig),
        }
    }
}

/// Whether signal `sig` with origin `si_code` makes `lam run` exit 128 + `sig`.
#[cfg(unix)]
fn counts(sig: i32, si_code: i32) -> bool {
    match sig {
        libc::SIGHUP | libc::SIGTERM => true,
        libc::SIGINT => sent_by_a_process(si_code),
        _ => false,
    }
}

/// No signals are watched outside Unix.
#[cfg(not(unix))]
fn counts(_sig: i32, _si_code: i32) -> bool {
    false
}

/// Linux: codes of user space are at most 0 (`SI_USER` 0, `SI_QUEUE` -1,
/// `SI_TKILL` -6, ...); the terminal's signals are `SI_KERNEL` (0x80).
#[cfg(target_os = "linux")]
fn sent_by_a_process(si_code: i32) -> bool {
    si_code <= 0
}

/// Elsewhere the codes differ: no SIGINT counts (the agent's code stands).
#[cfg(all(unix, not(target_os = "linux")))]
fn sent_by_a_process(_si_code: i32) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    const SI_USER: i32 = 0;
    const SI_QUEUE: i32 = -1;
    const SI_TKILL: i32 = -6;
    const SI_KERNEL: i32 = 0x80;

    /// A Ctrl-C from the terminal (the kernel) never sets the exit code nor
    /// is passed on; `kill -INT` does both; SIGHUP and SIGTERM always count.
    #[cfg(target_os = "linux")]
    #[test]
    fn only_a_sigint_sent_by_a_process_counts() {
        let s = Signalled::default();
        s.saw(libc::SIGINT, SI_KERNEL);
        assert_eq!(s.exit_code(), None);
        assert!(!s.take_sent_int());
        for code in [SI_USER, SI_QUEUE, SI_TKILL] {
            s.saw(libc::SIGINT, code);
            assert!(s.take_sent_int(), "{code}");
        }
        assert_eq!(s.exit_code(), Some(130));
        assert!(!s.take_sent_int(), "taken once");
        let s = Signalled::default();
        s.saw(libc::SIGHUP, SI_KERNEL);
        s.saw(libc::SIGTERM, SI_USER);
        assert_eq!(s.exit_code(), Some(129), "the first that counts");
        assert!(!s.take_sent_int());
        let s = Signalled::default();
        s.saw(libc::SIGTERM, SI_USER);
        assert_eq!(s.exit_code(), Some(143));
    }
}

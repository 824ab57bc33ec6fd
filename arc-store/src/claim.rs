//! Which store session a run's trajectory goes into, so that separate runs
//! never merge: [`claim_session`].

use crate::StoreError;
use lam_core::{ObsStore, Record, SessionId};

/// The store session for a run named `name` whose first observation is
/// `first` (`tokens` long), claimed by appending `first` to it, the same
/// rule for every store:
///
/// - `name` when the store holds no session `name`;
/// - `name` when session `name` begins with the same observation (the
///   same trajectory archived again: its appends find their records already
///   there, so nothing new is written and ids stay the same);
/// - otherwise the first of `name@2`, `name@3`, ... that is free or begins
///   with the same observation: another run's session is never appended to.
///
/// Each try is one [`ObsStore::claim`], which checks and appends at once,
/// so two writers claiming one name at the same time (two hosts on one
/// PostgreSQL store) get two sessions. Appending to an existing session
/// regardless (a run continued) is the caller's explicit choice: it skips
/// this and appends to `name`.
pub fn claim_session(store: &mut dyn ObsStore, name: &SessionId, first: &Record, tokens: u32) -> Result<SessionId, StoreError> {
    for k in 1u64.. {
        let candidate = if k == 1 { name.clone() } else { SessionId(format!("{}@{k}", name.0)) };
        if store.claim(&candidate, first, tokens)?.is_some() {
            return Ok(candidate);
        }
    }
    unreachable!("u64 names run out only after 2^64 runs of one name")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemStore;
    use lam_core::Record;

    fn rec(obs: &str) -> Record {
        Record { index: 0, action: "cat a".into(), observation: obs.as_bytes().to_vec(), returncode: Some(0) }
    }

    #[test]
    fn runs_get_their_own_sessions() {
        let mut st = MemStore::new();
        let name = SessionId::new("run");
        let (a, b) = (rec("first of A"), rec("first of B"));
        assert_eq!(claim_session(&mut st, &name, &a, 1).unwrap(), name);
        assert_eq!(claim_session(&mut st, &name, &a, 1).unwrap(), name, "the same run again");
        assert_eq!(st.ids(&name).unwrap().len(), 1, "claimed once, written once");
        assert_eq!(claim_session(&mut st, &name, &b, 1).unwrap().0, "run@2");
        assert_eq!(claim_session(&mut st, &name, &b, 1).unwrap().0, "run@2");
        assert_eq!(claim_session(&mut st, &name, &rec("C"), 1).unwrap().0, "run@3");
    }
}

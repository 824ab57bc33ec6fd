//! Which store session a run's trajectory goes into, so that separate runs
//! never merge: [`claim_session`].

use crate::StoreError;
use lam_core::{ObsId, ObsStore, SessionId};

/// The store session for a run named `name` whose first observation has
/// content address `first`, the same rule for every store:
///
/// - `name` when the store holds no session `name`;
/// - `name` when session `name` begins with the same observation (the
///   same trajectory archived again: its appends find their records already
///   there, so nothing new is written and ids stay the same);
/// - otherwise the first of `name@2`, `name@3`, ... that is free or begins
///   with the same observation: another run's session is never appended to.
///
/// Appending to an existing session regardless (a run continued) is the
/// caller's explicit choice: it skips this and appends to `name`. A claim
/// holds once the first record is appended; the caller appends it before
/// claiming again on the same store (the one writer of a FileStore does).
pub fn claim_session(store: &dyn ObsStore, name: &SessionId, first: &ObsId) -> Result<SessionId, StoreError> {
    for k in 1u64.. {
        let candidate = if k == 1 { name.clone() } else { SessionId(format!("{}@{k}", name.0)) };
        if session_is_ours(store, &candidate, first)? {
            return Ok(candidate);
        }
    }
    unreachable!("u64 names run out only after 2^64 runs of one name")
}

/// Whether `session` is free or begins with the observation `first`.
fn session_is_ours(store: &dyn ObsStore, session: &SessionId, first: &ObsId) -> Result<bool, StoreError> {
    let ids = store.ids(session)?;
    let Some(shown) = ids.first() else { return Ok(true) };
    Ok(store.meta(session, shown)?.is_some_and(|m| m.id == *first))
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
        let id = |r: &Record| ObsId::of(r.action.as_bytes(), &r.observation);
        assert_eq!(claim_session(&st, &name, &id(&a)).unwrap(), name);
        st.append(&name, &a, 1).unwrap();
        assert_eq!(claim_session(&st, &name, &id(&a)).unwrap(), name, "the same run again");
        let s2 = claim_session(&st, &name, &id(&b)).unwrap();
        assert_eq!(s2.0, "run@2");
        st.append(&s2, &b, 1).unwrap();
        assert_eq!(claim_session(&st, &name, &id(&b)).unwrap().0, "run@2");
        assert_eq!(claim_session(&st, &name, &id(&rec("C"))).unwrap().0, "run@3");
    }
}

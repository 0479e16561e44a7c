//! Convergence: after every fault heals and the writers stop, every live node reaches the root's
//! head (index, chain hash and state), and every acknowledged write survives on every node.
//!
//! The head comparison is `world::end::pending`; this module holds what "an acknowledged write
//! survives" means for one key, given only what its writer saw — [`KeyFate`]:
//!
//! - a write the root acknowledged was committed, so the key may not end older than it;
//! - a write that was never answered (timed out, the root partitioned or killed, the writer
//!   stopped with it in flight) may or may not have committed: the key may end with it, or
//!   with the last acknowledged value before it;
//! - until some write of the key was acknowledged, the key may also end absent: every write so
//!   far may have been lost before its commit;
//! - a delete is a write of "absent": acknowledged, the key may end absent (or with any value
//!   sent after it); in flight, absent is one more possible ending.
//!
//! A writer never has two writes of one key in flight, so acknowledgements arrive in the order
//! the writes were sent, and the newest acknowledgement bounds the key's ending from below.

/// What a writer sent: a value, or a delete.
pub type Written = Option<Vec<u8>>;

/// What one key may end with, from its writer's point of view.
#[derive(Clone, Debug, Default)]
pub struct KeyFate {
    /// Whether any write of the key was acknowledged.
    acknowledged: bool,
    /// The newest acknowledged write (once there is one), then every write sent after it.
    endings: Vec<Written>,
}

/// Why a node's copy of a key breaks [`KeyFate`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lost {
    /// The key is absent though a write of it was acknowledged and no delete may be its ending.
    Missing,
    /// The key holds a value that is not a possible ending: older than its newest
    /// acknowledged write, or one no writer sent.
    Older,
}

impl KeyFate {
    /// A write (`Some(value)`) or delete (`None`) of the key is about to be sent: until it is
    /// answered, it is one more possible ending.
    pub fn sent(&mut self, written: Written) {
        self.endings.push(written);
    }

    /// The root acknowledged `written`: nothing sent before it may be the ending any more.
    pub fn acknowledged(&mut self, written: &Written) {
        self.acknowledged = true;
        match self.endings.iter().rposition(|w| w == written) {
            Some(at) => {
                self.endings.drain(..at);
            }
            None => unreachable!("acknowledged a write that was never sent"),
        }
    }

    /// The root refused `written` (403, 429, 400, 503): it was never applied, so it is not a
    /// possible ending. It is the newest sending (one write of a key in flight at a time).
    pub fn refused(&mut self, written: &Written) {
        match self.endings.iter().rposition(|w| w == written) {
            Some(at) => {
                self.endings.remove(at);
            }
            None => unreachable!("refused a write that was never sent"),
        }
    }

    /// The key's value when its fate is settled — acknowledged, with nothing sent since — so a
    /// rewrite of it is identical for sure.
    pub fn settled(&self) -> Option<&Written> {
        match self.endings.as_slice() {
            [only] if self.acknowledged => Some(only),
            _ => None,
        }
    }

    /// Whether a node holding `held` (None: absent) has kept every acknowledged write.
    pub fn judge(&self, held: Option<&[u8]>) -> Result<(), Lost> {
        let possible = |w: &Written| w.as_deref() == held;
        match held {
            None if !self.acknowledged || self.endings.iter().any(possible) => Ok(()),
            None => Err(Lost::Missing),
            Some(_) if self.endings.iter().any(possible) => Ok(()),
            Some(_) => Err(Lost::Older),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(v: &str) -> Written {
        Some(v.as_bytes().to_vec())
    }

    fn judge(fate: &KeyFate, held: Option<&str>) -> Result<(), Lost> {
        fate.judge(held.map(str::as_bytes))
    }

    #[test]
    fn a_key_whose_writes_were_never_acknowledged_may_end_absent_or_with_any_of_them() {
        // Every write timed out (the root cut off): each may or may not have committed.
        let mut fate = KeyFate::default();
        fate.sent(value("1.a"));
        fate.sent(value("2.b"));
        assert_eq!(judge(&fate, None), Ok(()), "none committed");
        assert_eq!(judge(&fate, Some("1.a")), Ok(()));
        assert_eq!(judge(&fate, Some("2.b")), Ok(()));
        assert_eq!(judge(&fate, Some("3.c")), Err(Lost::Older), "a value nobody sent");
    }

    #[test]
    fn a_key_written_once_and_acknowledged_must_hold_that_value() {
        let mut fate = KeyFate::default();
        fate.sent(value("1.a"));
        fate.acknowledged(&value("1.a"));
        assert_eq!(judge(&fate, Some("1.a")), Ok(()));
        assert_eq!(judge(&fate, None), Err(Lost::Missing));
        assert_eq!(judge(&fate, Some("0.z")), Err(Lost::Older));
    }

    #[test]
    fn a_write_in_flight_at_a_kill_may_or_may_not_have_landed_but_nothing_older_may() {
        // 1 acknowledged, 2 acknowledged, 3 sent when the writer (or the root) was killed.
        let mut fate = KeyFate::default();
        fate.sent(value("1.a"));
        fate.acknowledged(&value("1.a"));
        fate.sent(value("2.b"));
        fate.acknowledged(&value("2.b"));
        fate.sent(value("3.c"));
        assert_eq!(judge(&fate, Some("2.b")), Ok(()), "3 was lost before its commit");
        assert_eq!(judge(&fate, Some("3.c")), Ok(()), "3 committed, its answer lost");
        assert_eq!(judge(&fate, Some("1.a")), Err(Lost::Older), "older than the acknowledged 2");
        assert_eq!(judge(&fate, None), Err(Lost::Missing));
    }

    #[test]
    fn an_acknowledgement_after_unanswered_writes_settles_them() {
        // 1 timed out, 2 timed out, 3 acknowledged: 1 and 2 can no longer be the ending.
        let mut fate = KeyFate::default();
        for v in ["1.a", "2.b", "3.c"] {
            fate.sent(value(v));
        }
        fate.acknowledged(&value("3.c"));
        assert_eq!(judge(&fate, Some("3.c")), Ok(()));
        assert_eq!(judge(&fate, Some("2.b")), Err(Lost::Older));
        assert_eq!(judge(&fate, None), Err(Lost::Missing));
    }

    #[test]
    fn deletes_are_writes_of_absent() {
        // 1 acknowledged, then an acknowledged delete: absent is the ending, 1 is not.
        let mut fate = KeyFate::default();
        fate.sent(value("1.a"));
        fate.acknowledged(&value("1.a"));
        fate.sent(None);
        fate.acknowledged(&None);
        assert_eq!(judge(&fate, None), Ok(()));
        assert_eq!(judge(&fate, Some("1.a")), Err(Lost::Older), "the delete was acknowledged");
        // A write after the delete, unanswered: absent or that value.
        fate.sent(value("2.b"));
        assert_eq!(judge(&fate, None), Ok(()));
        assert_eq!(judge(&fate, Some("2.b")), Ok(()));
        // A delete in flight after an acknowledged value: absent or the value.
        let mut fate = KeyFate::default();
        fate.sent(value("1.a"));
        fate.acknowledged(&value("1.a"));
        fate.sent(None);
        assert_eq!(judge(&fate, None), Ok(()));
        assert_eq!(judge(&fate, Some("1.a")), Ok(()));
    }

    #[test]
    fn a_refused_write_never_happened() {
        // 1 acknowledged, 2 refused (over quota): only 1 may end; the key is settled again.
        let mut fate = KeyFate::default();
        fate.sent(value("1.a"));
        fate.acknowledged(&value("1.a"));
        fate.sent(value("2.b"));
        assert_eq!(fate.settled(), None, "2 is in flight");
        fate.refused(&value("2.b"));
        assert_eq!(judge(&fate, Some("2.b")), Err(Lost::Older));
        assert_eq!(fate.settled(), Some(&value("1.a")));
        // Every write of a key refused (outside the producer's prefixes): it must end absent.
        let mut fate = KeyFate::default();
        fate.sent(value("1.a"));
        fate.refused(&value("1.a"));
        assert_eq!(judge(&fate, None), Ok(()));
        assert_eq!(judge(&fate, Some("1.a")), Err(Lost::Older));
    }

    #[test]
    fn an_identical_rewrite_acknowledged_settles_everything_before_its_last_sending() {
        // 1 sent, 2 sent, 1 sent again (same bytes) and acknowledged: only 1 may end.
        let mut fate = KeyFate::default();
        for v in ["1.a", "2.b", "1.a"] {
            fate.sent(value(v));
        }
        fate.acknowledged(&value("1.a"));
        assert_eq!(judge(&fate, Some("1.a")), Ok(()));
        assert_eq!(judge(&fate, Some("2.b")), Err(Lost::Older));
    }
}

//! Quota: the root refuses a producer's request as over quota (429) only when a token bucket of
//! the producer's configured rate and burst could have been short of it.
//!
//! A correct bucket — `burst` tokens, refilled at `rate` a second, full when the root starts,
//! one token taken per operation of a request that passes — holds at time `t`
//! `min over s <= t of (burst + rate·(t − s) − A(s, t))`, where `A(s, t)` counts the operations
//! it let through in `(s, t]`. A refusal of `c` operations is wrong when that is at least `c`
//! under every timing the writers' view allows. The writers see when each request was sent and
//! answered, not when the root took its tokens, so the judgement is conservative throughout:
//! - a refused request's tokens were asked for as early as it was sent (the least refill);
//! - every request not refused for its quota counts as having taken its tokens at any moment
//!   between its send and its answer — and, unanswered (timed out, in flight), at any moment
//!   after its send; requests refused before the quota check (400, 403) count too, so the
//!   judge never needs to know where the root refused them;
//! - a root restart refills the bucket, which only adds tokens;
//! - a margin of one token and two milliseconds of refill covers rounding and the
//!   millisecond clock.
//!
//! So it never blames a correct bucket, and it names a bucket that stops refilling (every
//! producer throttled for ever after its first burst) or refills slower than configured, in
//! every scenario whose writers send long enough after being refused.
//!
//! And the other way: the root lets through no more than one bucket could. Writes that were
//! acknowledged by `t` took their tokens by `t`, and a bucket full at the run's start holds no
//! more than `burst + rate·t` in all — so acknowledged operations past that (and the same
//! margin) are a second burst handed out: a bucket a restart or a failover started full again
//! when it should have remembered what it held. (A request refused or unanswered may or may not
//! have taken tokens; only acknowledged ones count here, so the judgement errs towards the root.)

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::sync::Locked;
use crate::trace::{Checker, Event};

/// Identifies one request of one writer.
pub type RequestId = (u64, u64);

/// How a request the judge was told of ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answered {
    /// Refused for its producer's quota (429): no tokens taken.
    OverQuota,
    /// Acknowledged: its tokens were taken.
    Acknowledged,
    /// Refused for another reason: its tokens may have been taken.
    Other,
    /// No answer: timed out or the connection broke; its tokens may be taken at any moment.
    Unknown,
}

/// One request that may have taken tokens: `ops` of them, at a moment in `[sent_ms, until_ms]`.
#[derive(Clone, Copy, Debug)]
struct Taken {
    sent_ms: u64,
    until_ms: Option<u64>,
    ops: u64,
}

/// The judge of one producer's bucket.
#[derive(Debug)]
pub struct QuotaJudge {
    rate_per_s: f64,
    burst: f64,
    in_flight: BTreeMap<RequestId, (u64, u64)>,
    taken: Vec<Taken>,
    /// Operations acknowledged so far.
    acknowledged_ops: u64,
    /// Whether a second burst was already reported (once is the finding; every later answer
    /// would repeat it).
    over_reported: bool,
}

impl QuotaJudge {
    pub fn new(rate_per_s: u64, burst: u64) -> QuotaJudge {
        QuotaJudge {
            rate_per_s: rate_per_s as f64,
            burst: burst as f64,
            in_flight: BTreeMap::new(),
            taken: Vec::new(),
            acknowledged_ops: 0,
            over_reported: false,
        }
    }

    /// A request of `ops` operations is being sent now.
    pub fn sent(&mut self, id: RequestId, at_ms: u64, ops: u64) {
        self.in_flight.insert(id, (at_ms, ops));
    }

    /// The request was answered `how` at `at_ms`: a violation if it is a refusal the bucket
    /// could not have made.
    pub fn answered(&mut self, id: RequestId, at_ms: u64, how: Answered) -> Option<Event> {
        let (sent_ms, ops) = self.in_flight.remove(&id)?;
        match how {
            Answered::Acknowledged => {
                self.taken.push(Taken { sent_ms, until_ms: Some(at_ms), ops });
                self.acknowledged_ops += ops;
                let most = self.burst + self.rate_per_s * (at_ms as f64 / 1000.0) + 1.0 + self.rate_per_s * 0.002;
                if self.acknowledged_ops as f64 > most && !self.over_reported {
                    self.over_reported = true;
                    let message = format!(
                        "{} writes were acknowledged by {at_ms} ms, but a bucket of {} writes refilled at {}/s, \
                         full at the start, holds at most {most:.1} in all by then: a second burst was let through",
                        self.acknowledged_ops, self.burst, self.rate_per_s
                    );
                    return Some(Event::Violation {
                        at_ms,
                        checker: Checker::Quota,
                        node: "root".into(),
                        index: 0,
                        message,
                    });
                }
            }
            Answered::Other => self.taken.push(Taken { sent_ms, until_ms: Some(at_ms), ops }),
            Answered::Unknown => self.taken.push(Taken { sent_ms, until_ms: None, ops }),
            Answered::OverQuota => {
                let least = self.least_tokens(sent_ms, at_ms);
                let margin = 1.0 + self.rate_per_s * 0.002;
                if least >= ops as f64 + margin {
                    let message = format!(
                        "a request of {ops} writes sent at {sent_ms} ms was refused as over quota, but a bucket of \
                         {} writes refilled at {}/s held at least {least:.1} then, whatever the timing of the \
                         writes let through before it",
                        self.burst, self.rate_per_s
                    );
                    return Some(Event::Violation {
                        at_ms,
                        checker: Checker::Quota,
                        node: "root".into(),
                        index: 0,
                        message,
                    });
                }
            }
        }
        None
    }

    /// The fewest tokens the bucket can have held when a request sent at `sent_ms` and refused
    /// at `answered_ms` asked for them (see the module doc).
    fn least_tokens(&self, sent_ms: u64, answered_ms: u64) -> f64 {
        // Every request that may have taken its tokens before the refused one asked: sent before
        // its answer, taking them at any moment up to `until` (for ever while unanswered).
        let mut takers: Vec<(u64, u64)> = self
            .taken
            .iter()
            .filter(|t| t.sent_ms < answered_ms)
            .map(|t| (t.until_ms.unwrap_or(u64::MAX), t.ops))
            .chain(self.in_flight.values().filter(|(sent, _)| *sent < answered_ms).map(|&(_, ops)| (u64::MAX, ops)))
            .collect();
        takers.sort_unstable_by_key(|&(until, _)| std::cmp::Reverse(until));
        let t = sent_ms as f64 / 1000.0;
        // s in (sent, answered]: no refill counted, every taker whose window reaches past s.
        let mut taken = 0u64;
        let mut i = 0;
        while i < takers.len() && takers[i].0 > sent_ms {
            taken += takers[i].1;
            i += 1;
        }
        let mut least = self.burst - taken as f64;
        // s just below each earlier taker's window end, then s = 0 (the root's start, full).
        while i < takers.len() {
            let until = takers[i].0;
            while i < takers.len() && takers[i].0 == until {
                taken += takers[i].1;
                i += 1;
            }
            let refill = self.rate_per_s * (t - until as f64 / 1000.0);
            least = least.min(self.burst + refill - taken as f64);
        }
        least.min(self.burst + self.rate_per_s * t - taken as f64)
    }
}

/// The judge, shared by the writers of one run (one producer, one bucket).
#[derive(Clone, Debug)]
pub struct Quota(pub Arc<Mutex<QuotaJudge>>);

impl Quota {
    pub fn new(rate_per_s: u64, burst: u64) -> Quota {
        Quota(Arc::new(Mutex::new(QuotaJudge::new(rate_per_s, burst))))
    }

    pub fn lock(&self) -> std::sync::MutexGuard<'_, QuotaJudge> {
        self.0.locked()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sends `n` one-write requests from `from_ms`, `every_ms` apart, each answered 5 ms later
    /// with `how`; returns the violations.
    fn run(judge: &mut QuotaJudge, next: &mut u64, from_ms: u64, every_ms: u64, n: u64, how: Answered) -> usize {
        let mut found = 0;
        for k in 0..n {
            let at = from_ms + k * every_ms;
            *next += 1;
            judge.sent((0, *next), at, 1);
            found += judge.answered((0, *next), at + 5, how).is_some() as usize;
        }
        found
    }

    #[test]
    fn a_refusal_after_the_burst_is_spent_and_before_it_refills_is_correct() {
        let mut judge = QuotaJudge::new(10, 10);
        let mut next = 0;
        assert_eq!(run(&mut judge, &mut next, 0, 1, 10, Answered::Other), 0, "the burst passes");
        assert_eq!(run(&mut judge, &mut next, 20, 1, 5, Answered::OverQuota), 0, "then it is empty");
        // 2 s later it has refilled 20, capped at 10: passing 10 is fine, and so is refusing then.
        assert_eq!(run(&mut judge, &mut next, 2_000, 1, 10, Answered::Other), 0);
        assert_eq!(run(&mut judge, &mut next, 2_020, 1, 1, Answered::OverQuota), 0);
    }

    #[test]
    fn a_bucket_that_never_refills_is_named() {
        let mut judge = QuotaJudge::new(10, 10);
        let mut next = 0;
        run(&mut judge, &mut next, 0, 1, 10, Answered::Other);
        // Seconds later, one write a second is refused: the bucket held 10.
        let found = run(&mut judge, &mut next, 5_000, 1_000, 5, Answered::OverQuota);
        assert_eq!(found, 5);
        next += 1;
        judge.sent((0, next), 20_000, 1);
        let Some(Event::Violation { checker, message, .. }) = judge.answered((0, next), 20_004, Answered::OverQuota)
        else {
            panic!("a violation");
        };
        assert_eq!(checker, Checker::Quota);
        assert!(message.contains("held at least 10.0"), "{message}");
    }

    #[test]
    fn a_bucket_refilling_at_half_its_rate_is_named_and_unanswered_requests_count_as_taken() {
        // 10/s, burst 10, and a writer at 8/s: a correct bucket never refuses it.
        let mut judge = QuotaJudge::new(10, 10);
        let mut next = 0;
        assert_eq!(run(&mut judge, &mut next, 0, 125, 40, Answered::Other), 0);
        assert!(run(&mut judge, &mut next, 5_000, 125, 8, Answered::OverQuota) > 0, "at 5/s it would have to refuse");
        // The same refusals after requests that were never answered: they may have taken every
        // token, so nothing can be said.
        let mut judge = QuotaJudge::new(10, 10);
        let mut next = 0;
        run(&mut judge, &mut next, 0, 125, 40, Answered::Unknown);
        assert_eq!(run(&mut judge, &mut next, 5_000, 125, 8, Answered::OverQuota), 0);
    }

    #[test]
    fn more_acknowledged_than_one_bucket_holds_is_a_second_burst() {
        // 10/s, burst 100: 100 at once, then 10 a second is what one bucket lets through.
        let mut judge = QuotaJudge::new(10, 100);
        let mut next = 0;
        assert_eq!(run(&mut judge, &mut next, 0, 1, 100, Answered::Acknowledged), 0, "the burst");
        assert_eq!(run(&mut judge, &mut next, 1_000, 100, 50, Answered::Acknowledged), 0, "the rate, 5 s");
        // A failover at 6 s starts a bucket full: 100 more at once.
        let found = run(&mut judge, &mut next, 6_010, 1, 100, Answered::Acknowledged);
        assert_eq!(found, 1, "named once");
        // Refusals and unanswered requests never count towards it.
        let mut judge = QuotaJudge::new(10, 100);
        let mut next = 0;
        assert_eq!(run(&mut judge, &mut next, 0, 1, 300, Answered::Other), 0);
        assert_eq!(run(&mut judge, &mut next, 0, 1, 300, Answered::Unknown), 0);
    }

    #[test]
    fn a_request_answered_late_may_have_taken_its_tokens_just_before_the_refusal() {
        let mut judge = QuotaJudge::new(1, 10);
        judge.sent((0, 1), 0, 10);
        judge.sent((1, 1), 100, 1);
        // The refusal's answer comes first; the big request was in flight: it may hold them.
        assert!(judge.answered((1, 1), 110, Answered::OverQuota).is_none());
        assert!(judge.answered((0, 1), 3_000, Answered::Other).is_none());
    }
}

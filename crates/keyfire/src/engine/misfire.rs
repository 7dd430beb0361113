//! The misfire policy: what to do with a firing found later than its tolerance.

use std::collections::VecDeque;

use crate::job::{Job, MisfirePolicy};
use crate::store::{Dropped, SkipReason};

/// The decision for a firing found later than the job's misfire tolerance.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct MisfirePlan {
    pub run: bool,
    pub next: Option<i64>,
    pub missed: u64,
    /// The `missed` instants, as one range for the ledger (None when none are).
    pub dropped: Option<Dropped>,
}

/// Apply the job's misfire policy to firing `at`, found when firings up to `until` (Redis now
/// minus the tolerance) are late. Bounded work: a long outage of a per-second job is counted,
/// not listed.
pub(crate) fn misfire_plan(job: &Job, at: i64, until: i64) -> MisfirePlan {
    const MAX_SCAN: u64 = 10_000_000;
    let keep = match job.misfire {
        MisfirePolicy::CatchUp => job.catch_up_limit as usize,
        _ => 0,
    };
    // The late firings after `at`: how many, the first and last of them, the newest `keep`
    // of them, and the newest of those dropped from that window.
    let mut count = 0u64;
    let (mut first, mut last) = (None, at);
    let mut newest: VecDeque<i64> = VecDeque::with_capacity(keep + 1);
    let mut dropped_last = at;
    let mut t = at;
    // A jittered firing is late from its release (its instant plus its offset).
    while let Some(n) = job.next_after(t) {
        if job.release_at(n) > until || count >= MAX_SCAN {
            break;
        }
        count += 1;
        first.get_or_insert(n);
        last = n;
        if keep > 0 {
            newest.push_back(n);
            if newest.len() > keep
                && let Some(old) = newest.pop_front()
            {
                dropped_last = old;
            }
        }
        t = n;
    }
    let within = || job.next_released_after(at, until);
    let range = |reason, first_ms, last_ms| {
        Some(Dropped {
            reason,
            first_ms,
            last_ms,
        })
    };
    match job.misfire {
        MisfirePolicy::FireOnce => MisfirePlan {
            run: true,
            next: within(),
            missed: count,
            dropped: first.and_then(|f| range(SkipReason::Merged, f, last)),
        },
        MisfirePolicy::Skip => MisfirePlan {
            run: false,
            next: within(),
            missed: count + 1,
            dropped: range(SkipReason::Misfire, at, last),
        },
        MisfirePolicy::CatchUp => {
            let total = count + 1;
            if total <= keep as u64 {
                MisfirePlan {
                    run: true,
                    next: job.next_after(at),
                    missed: 0,
                    dropped: None,
                }
            } else {
                // Run the newest `keep` late firings: skip `at` and the older ones.
                let dropped_last = if keep == 0 { last } else { dropped_last };
                MisfirePlan {
                    run: false,
                    next: newest.front().copied().or_else(within),
                    missed: total - keep as u64,
                    dropped: range(SkipReason::CatchUpLimit, at, dropped_last),
                }
            }
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::{JobSpec, Validation};

    fn every_second(policy: &str, limit: Option<u32>) -> Job {
        let mut spec = JobSpec::every("j", "1s", "noop");
        spec.misfire = Some(policy.into());
        spec.catch_up_limit = limit;
        spec.validate(&Validation {
            now_ms: 0,
            created_ms: 0,
            known_handler: None,
            max_params_bytes: usize::MAX,
        })
        .unwrap()
    }

    // Firing at 1000 found when firings up to 10_500 are late: 2000..=10000 (9) are late too.
    #[test]
    fn fire_once_runs_one_counting_the_rest_as_missed() {
        let p = misfire_plan(&every_second("fire_once", None), 1_000, 10_500);
        assert_eq!(
            p,
            MisfirePlan {
                run: true,
                next: Some(11_000),
                missed: 9,
                dropped: Some(Dropped {
                    reason: SkipReason::Merged,
                    first_ms: 2_000,
                    last_ms: 10_000
                })
            }
        );
    }

    #[test]
    fn skip_runs_none_of_the_late_ones() {
        let p = misfire_plan(&every_second("skip", None), 1_000, 10_500);
        assert_eq!(
            p,
            MisfirePlan {
                run: false,
                next: Some(11_000),
                missed: 10,
                dropped: Some(Dropped {
                    reason: SkipReason::Misfire,
                    first_ms: 1_000,
                    last_ms: 10_000
                })
            }
        );
    }

    #[test]
    fn catch_up_runs_each_up_to_the_limit() {
        let p = misfire_plan(&every_second("catch_up", None), 1_000, 10_500);
        assert_eq!(
            p,
            MisfirePlan {
                run: true,
                next: Some(2_000),
                missed: 0,
                dropped: None
            }
        );
        // Limit 4: run the newest four of the ten late firings (7000..=10000).
        let p = misfire_plan(&every_second("catch_up", Some(4)), 1_000, 10_500);
        assert_eq!(
            p,
            MisfirePlan {
                run: false,
                next: Some(7_000),
                missed: 6,
                dropped: Some(Dropped {
                    reason: SkipReason::CatchUpLimit,
                    first_ms: 1_000,
                    last_ms: 6_000
                })
            }
        );
        // And that one, found again, runs with the rest.
        let p = misfire_plan(&every_second("catch_up", Some(4)), 7_000, 10_500);
        assert_eq!(
            p,
            MisfirePlan {
                run: true,
                next: Some(8_000),
                missed: 0,
                dropped: None
            }
        );
    }

    #[test]
    fn a_jittered_firing_is_late_from_its_release_not_its_instant() {
        let job = JobSpec::every("j", "10s", "noop")
            .jitter("9s")
            .validate(&Validation {
                now_ms: 0,
                created_ms: 0,
                known_handler: None,
                max_params_bytes: usize::MAX,
            })
            .unwrap();
        // Up to just before the firing at 50 s is released: 20, 30 and 40 s are late with
        // the one at 10 s, and the schedule resumes at 50 s (its instant is past, its
        // release is not).
        let until = job.release_at(50_000) - 1;
        let p = misfire_plan(&job, 10_000, until);
        assert_eq!((p.run, p.next, p.missed), (true, Some(50_000), 3));
        // Just after it, 50 s is late too.
        let p = misfire_plan(&job, 10_000, job.release_at(50_000));
        assert_eq!((p.next, p.missed), (Some(60_000), 4));
    }
}

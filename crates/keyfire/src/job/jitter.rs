//! Jitter: the deterministic offset a recurring job's firing is released at after its
//! nominal instant, the same on every node.

use super::schedule::Schedule;
use super::validation::{ValidationError, duration_ms};

/// The offset in `[0, jitter_ms)` of the firing of `job_id` at `nominal_ms`: a fixed hash
/// (FNV-1a over the job id's bytes and the instant's 8 little-endian bytes, then the
/// splitmix64 finaliser to spread it), never a keyed one, so every node and every version of
/// keyfire computes the same offset. 0 when `jitter_ms` is 0 or less.
pub fn jitter_offset(job_id: &str, nominal_ms: i64, jitter_ms: i64) -> i64 {
    if jitter_ms <= 0 {
        return 0;
    }
    const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = FNV_OFFSET;
    let instant = nominal_ms.to_le_bytes();
    let bytes = job_id.as_bytes().iter().chain(&[0xff]).chain(&instant);
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(FNV_PRIME);
    }
    // splitmix64's finaliser: FNV's low bits alone spread poorly for nearby instants.
    h = h.wrapping_add(0x9e37_79b9_7f4a_7c15);
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    (h % jitter_ms as u64) as i64
}

/// The most jitter a cron job takes.
pub const MAX_JITTER_MS: i64 = 86_400_000;

/// Check a job's `jitter` against its schedule; its value in ms.
pub(super) fn validate_jitter(text: &str, schedule: &Schedule) -> Result<i64, ValidationError> {
    let ms = duration_ms("jitter", text)?;
    if ms <= 0 {
        return Err(ValidationError::new(
            "jitter",
            "must be greater than zero (leave it out for none)",
        ));
    }
    match schedule {
        Schedule::Once { .. } => Err(ValidationError::new(
            "jitter",
            "applies only to cron and every schedules, not to one-shot jobs",
        )),
        Schedule::Every { interval_ms, .. } if ms >= *interval_ms => Err(ValidationError::new(
            "jitter",
            format!(
                "must be less than every ({interval_ms}ms), so that firings keep their order; got {ms}ms"
            ),
        )),
        Schedule::Cron { .. } if ms > MAX_JITTER_MS => Err(ValidationError::new(
            "jitter",
            format!("must be at most 24h, got {ms}ms"),
        )),
        _ => Ok(ms),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_are_fixed_values_not_keyed() {
        // Pinned: a change of the hash would move every jittered job's firings on upgrade
        // and make nodes of two versions disagree.
        assert_eq!(jitter_offset("nightly", 1_767_225_600_000, 30_000), PINNED);
        assert_eq!(jitter_offset("nightly", 0, 0), 0);
        assert_eq!(jitter_offset("nightly", 5, 1), 0);
    }

    const PINNED: i64 = 15_730;

    #[test]
    fn ten_thousand_hourly_offsets_stay_within_and_spread() {
        let jitter = 30_000;
        let start = 1_767_225_600_000i64;
        let offsets: Vec<i64> = (0..10_000)
            .map(|k| jitter_offset("hourly-report", start + k * 3_600_000, jitter))
            .collect();
        assert!(offsets.iter().all(|o| (0..jitter).contains(o)));
        // Ten buckets of 3 s each: a uniform spread puts about 1,000 in each.
        let mut buckets = [0usize; 10];
        for o in &offsets {
            buckets[(*o / 3_000) as usize] += 1;
        }
        assert!(
            buckets.iter().all(|&n| (800..1_200).contains(&n)),
            "{buckets:?}"
        );
        let distinct: std::collections::HashSet<_> = offsets.iter().collect();
        assert!(distinct.len() > 7_000, "{} distinct", distinct.len());
    }

    #[test]
    fn jobs_at_the_same_instant_get_different_offsets() {
        let at = 1_767_225_600_000i64;
        let offsets: std::collections::HashSet<i64> = (0..1_000)
            .map(|i| jitter_offset(&format!("job-{i}"), at, 60_000))
            .collect();
        assert!(offsets.len() > 900, "{}", offsets.len());
    }
}

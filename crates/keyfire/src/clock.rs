//! Clocks. keyfire takes every due decision by Redis's clock (inside scripts); a node's
//! own clock is used only to arm local timers, through an estimate of its offset to Redis.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

/// A wall clock in milliseconds since the Unix epoch.
pub trait Clock: Send + Sync + 'static {
    /// The local wall-clock time in ms.
    fn now_ms(&self) -> i64;
}

/// The host's real clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    /// Read straight from the system time: through `chrono::Utc::now()` each read built a
    /// calendar date only to turn it back into ms, a good part of a short run's clock reads.
    fn now_ms(&self) -> i64 {
        match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
            Ok(d) => d.as_millis() as i64,
            Err(e) => -(e.duration().as_millis() as i64),
        }
    }
}

/// A clock that is off by a fixed amount: how tests make a node's clock wrong by hours.
#[derive(Debug, Clone, Copy)]
pub struct SkewedClock {
    /// Added to the real time, in ms (negative: behind).
    pub skew_ms: i64,
}

impl Clock for SkewedClock {
    fn now_ms(&self) -> i64 {
        SystemClock.now_ms() + self.skew_ms
    }
}

/// A local clock plus the estimated offset to Redis time.
#[derive(Clone)]
pub struct RedisClock {
    local: Arc<dyn Clock>,
    offset_ms: Arc<AtomicI64>,
    best_rtt_ms: Arc<AtomicI64>,
}

impl RedisClock {
    /// A clock over `local` with no offset known yet.
    pub fn new(local: Arc<dyn Clock>) -> Self {
        Self {
            local,
            offset_ms: Arc::new(AtomicI64::new(0)),
            best_rtt_ms: Arc::new(AtomicI64::new(i64::MAX)),
        }
    }

    /// Local wall-clock time in ms.
    pub fn local_ms(&self) -> i64 {
        self.local.now_ms()
    }

    /// The estimate of Redis's time now, in ms.
    pub fn redis_now_ms(&self) -> i64 {
        self.local.now_ms() + self.offset_ms.load(Ordering::Relaxed)
    }

    /// The current offset estimate (Redis minus local), in ms.
    pub fn offset_ms(&self) -> i64 {
        self.offset_ms.load(Ordering::Relaxed)
    }

    /// Record one sample: `redis_ms` read between local times `sent` and `received`.
    /// Samples with a short round trip are the most precise; a sample with a much longer
    /// round trip than the best seen only nudges the estimate, so one slow reply cannot
    /// move local timers by its latency.
    pub fn observe(&self, sent_ms: i64, redis_ms: i64, received_ms: i64) {
        let rtt = (received_ms - sent_ms).max(0);
        let sample = redis_ms - (sent_ms + received_ms) / 2;
        let best = self.best_rtt_ms.load(Ordering::Relaxed);
        let current = self.offset_ms.load(Ordering::Relaxed);
        let new = if best == i64::MAX || rtt <= best.saturating_mul(2) + 2 {
            sample
        } else {
            // A slow sample: move a tenth of the way.
            current + (sample - current) / 10
        };
        if rtt < best {
            self.best_rtt_ms.store(rtt, Ordering::Relaxed);
        }
        self.offset_ms.store(new, Ordering::Relaxed);
    }
}

impl std::fmt::Debug for RedisClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisClock")
            .field("offset_ms", &self.offset_ms())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_follows_a_skewed_clock() {
        let clock = RedisClock::new(Arc::new(SkewedClock { skew_ms: 3_600_000 }));
        let sent = clock.local_ms();
        let redis = SystemClock.now_ms();
        let received = clock.local_ms();
        clock.observe(sent, redis, received);
        assert!((clock.redis_now_ms() - SystemClock.now_ms()).abs() < 50);
        assert!((clock.offset_ms() + 3_600_000).abs() < 50);
    }

    /// The system clock's ms are the calendar's: the same as chrono's reading of it.
    #[test]
    fn the_system_clock_reads_ms_since_the_epoch() {
        let before = chrono::Utc::now().timestamp_millis();
        let now = SystemClock.now_ms();
        let after = chrono::Utc::now().timestamp_millis();
        assert!(before <= now && now <= after, "{before} {now} {after}");
    }
}

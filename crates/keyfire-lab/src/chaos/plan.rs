//! The fault schedule of a round, planned from a seed before anything starts, so a seed names
//! the same faults at the same offsets every time (the processes' timing still varies).
//!
//! Two lanes run side by side, each one fault at a time, so faults of the two lanes overlap:
//! the node lane (kill, stop, short pause, skew, cut off; one node at a time, so the others
//! stay up) and the Redis lane (pub/sub kill, `CLIENT PAUSE`, restarts, Redis restarted empty,
//! Redis full). Each lane first plays every one of its kinds once, in a shuffled order, then
//! random kinds until the round ends.

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::harness::NODE_TTL_MS;
use super::model::FaultKind;

/// One planned fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedFault {
    /// Offset from the start of the round.
    pub at: Duration,
    /// What.
    pub kind: FaultKind,
    /// The node it hits (node-lane kinds).
    pub node: Option<usize>,
    /// How long it lasts: down time, stop, cut-off or pause length.
    pub hold: Duration,
    /// The new clock skew (clock-skew faults), ms.
    pub skew_ms: i64,
    /// A free choice for Redis Cluster faults, taken modulo what is there when the fault
    /// comes (which master, which replica, which shard); for `redis_empty`, how Redis loses
    /// its data (see `harness`).
    pub pick: usize,
}

/// A round's plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The seed.
    pub seed: u64,
    /// Length of the fault phase.
    pub duration: Duration,
    /// Node processes.
    pub nodes: usize,
    /// Each node's clock skew when the round starts, ms.
    pub initial_skews: Vec<i64>,
    /// Node-lane faults, in order.
    pub node_lane: Vec<PlannedFault>,
    /// Redis-lane faults, in order.
    pub redis_lane: Vec<PlannedFault>,
}

const NODE_KINDS: [FaultKind; 6] = [
    FaultKind::NodeKill,
    FaultKind::NodeStop,
    FaultKind::NodePause,
    FaultKind::ClockSkew,
    FaultKind::CutDrop,
    FaultKind::CutStall,
];
const REDIS_KINDS: [FaultKind; 6] = [
    FaultKind::PubsubKill,
    FaultKind::ClientPause,
    FaultKind::RedisTerm,
    FaultKind::RedisKill,
    FaultKind::RedisEmpty,
    FaultKind::RedisFull,
];

/// The delay-queue round's process lane: consumers and the promoting node killed, expired
/// key events lost (in this lane, so no node restarts while events are off: a starting node
/// would turn them on again).
const QUEUE_PROCESS_KINDS: [FaultKind; 3] = [
    FaultKind::ConsumerKill,
    FaultKind::PromoteKill,
    FaultKind::EventsLost,
];
const QUEUE_REDIS_KINDS: [FaultKind; 3] = [
    FaultKind::PubsubKill,
    FaultKind::RedisTerm,
    FaultKind::RedisKill,
];

/// A round on a Redis Cluster: the node lane without the network cut-offs (each Redis node
/// has one proxy, shared by every keyfire node), the cluster's faults in the Redis lane.
const CLUSTER_NODE_KINDS: [FaultKind; 3] = [
    FaultKind::NodeKill,
    FaultKind::NodeStop,
    FaultKind::ClockSkew,
];
const CLUSTER_REDIS_KINDS: [FaultKind; 6] = [
    FaultKind::PubsubKill,
    FaultKind::ClientPause,
    FaultKind::MasterKill,
    FaultKind::ReplicaKill,
    FaultKind::SlotMigration,
    FaultKind::MasterPartition,
];

/// Extra time a fault takes besides its hold (restarts, the quiet time the harness keeps
/// before a Redis SIGKILL), so the lane leaves room for it.
fn overhead(kind: FaultKind) -> Duration {
    match kind {
        FaultKind::NodeKill | FaultKind::ClockSkew => Duration::from_secs(2),
        FaultKind::RedisKill => Duration::from_secs(5),
        FaultKind::RedisTerm => Duration::from_secs(2),
        // The restart, then up to 5 s for every node to notice and heal.
        FaultKind::RedisEmpty => Duration::from_secs(6),
        // Waiting (up to 2 s) for the node to run firings.
        FaultKind::NodePause => Duration::from_millis(2_500),
        // Waiting for the consumer to hold reservations, then its restart.
        FaultKind::ConsumerKill => Duration::from_millis(1_500),
        // The burst's lead time, then the node's restart.
        FaultKind::PromoteKill => Duration::from_secs(4),
        // The quiet second, the failover (node timeout 2 s, then the election), the old
        // master's restart and sync.
        FaultKind::MasterKill => Duration::from_secs(9),
        FaultKind::ReplicaKill => Duration::from_secs(3),
        FaultKind::SlotMigration => Duration::from_secs(3),
        _ => Duration::from_millis(500),
    }
}

fn ms(rng: &mut StdRng, lo: u64, hi: u64) -> Duration {
    Duration::from_millis(rng.random_range(lo..=hi))
}

/// A skew of 1 to 10 minutes either way (whole seconds).
fn skew(rng: &mut StdRng) -> i64 {
    let s = rng.random_range(60..=600) * 1_000;
    if rng.random_bool(0.5) { s } else { -s }
}

fn fault(rng: &mut StdRng, kind: FaultKind, nodes: usize, at: Duration) -> PlannedFault {
    // Node faults outlast a lease (2 s) so runs are taken over while the node still lives.
    let hold = match kind {
        FaultKind::NodeKill => ms(rng, 500, 4_000),
        FaultKind::NodeStop | FaultKind::CutDrop | FaultKind::CutStall => ms(rng, 2_500, 5_000),
        // Shorter than its time in the live set (and its lease): it must keep its runs.
        FaultKind::NodePause => ms(
            rng,
            NODE_TTL_MS as u64 * 3 / 10,
            NODE_TTL_MS as u64 * 7 / 10,
        ),
        FaultKind::ClockSkew | FaultKind::PubsubKill => Duration::ZERO,
        FaultKind::ClientPause => ms(rng, 500, 2_500),
        FaultKind::RedisTerm | FaultKind::RedisKill => ms(rng, 200, 2_000),
        // How long Redis stays down before it starts again empty.
        FaultKind::RedisEmpty => ms(rng, 200, 1_500),
        // How long `maxmemory` stays reached.
        FaultKind::RedisFull => ms(rng, 2_500, 5_000),
        FaultKind::HandlerFail | FaultKind::HandlerHang => Duration::ZERO,
        FaultKind::ConsumerKill => ms(rng, 300, 2_000),
        FaultKind::PromoteKill => ms(rng, 500, 3_000),
        FaultKind::EventsLost => ms(rng, 2_000, 5_000),
        // How long the old master stays down after the failover.
        FaultKind::MasterKill => ms(rng, 500, 3_000),
        FaultKind::ReplicaKill => ms(rng, 1_000, 5_000),
        FaultKind::SlotMigration => Duration::ZERO,
        // Longer than a lease: runs on its shards lose theirs.
        FaultKind::MasterPartition => ms(rng, 2_500, 5_000),
    };
    // Drawn for the kinds that choose (the cluster's; how Redis loses its data) only, so the
    // plans of rounds without them stay as they were.
    let pick = match kind {
        FaultKind::MasterKill
        | FaultKind::ReplicaKill
        | FaultKind::SlotMigration
        | FaultKind::MasterPartition
        | FaultKind::RedisEmpty => rng.random_range(0..10_000),
        _ => 0,
    };
    let node = (!kind.is_redis()).then(|| rng.random_range(0..nodes));
    let skew_ms = match kind {
        // Sometimes back to the right time.
        FaultKind::ClockSkew if rng.random_bool(0.2) => 0,
        FaultKind::ClockSkew => skew(rng),
        _ => 0,
    };
    PlannedFault {
        at,
        kind,
        node,
        hold,
        skew_ms,
        pick,
    }
}

fn lane(
    rng: &mut StdRng,
    kinds: &[FaultKind],
    nodes: usize,
    first: Duration,
    gap: (u64, u64),
    until: Duration,
) -> Vec<PlannedFault> {
    let mut order: Vec<FaultKind> = kinds.to_vec();
    // Fisher–Yates, with our seeded generator.
    for i in (1..order.len()).rev() {
        order.swap(i, rng.random_range(0..=i));
    }
    let mut out = Vec::new();
    let mut t = first;
    let mut i = 0;
    loop {
        let kind = if i < order.len() {
            order[i]
        } else {
            kinds[rng.random_range(0..kinds.len())]
        };
        i += 1;
        let f = fault(rng, kind, nodes, t);
        let end = t + f.hold + overhead(kind);
        if end > until {
            // Try the next kinds of the first pass; past it, the lane is full.
            if i < order.len() {
                continue;
            }
            break;
        }
        out.push(f);
        t = end + ms(rng, gap.0, gap.1);
    }
    out
}

impl Plan {
    /// Plan a round of `duration` with `nodes` node processes from `seed`. The Redis lane's
    /// faults come 1.5 to 4.5 s apart, so its six kinds fit in a minute whatever their draws.
    pub fn new(seed: u64, duration: Duration, nodes: usize) -> Self {
        Self::build(
            seed,
            StdRng::seed_from_u64(seed),
            duration,
            nodes,
            (&NODE_KINDS, &REDIS_KINDS),
            (1_500, 4_500),
        )
    }

    /// Plan a round on a Redis Cluster of `duration` with `nodes` node processes from
    /// `seed`: the node lane kills, stops and skews nodes; the Redis lane kills the
    /// subscribers, pauses clients, and brings the cluster's own faults (a master SIGKILLed
    /// and failed over, a replica SIGKILLed, a slot migrated, a master partitioned away).
    pub fn cluster(seed: u64, duration: Duration, nodes: usize) -> Self {
        Self::build(
            seed,
            StdRng::seed_from_u64(seed ^ 0xc1_0000_0000),
            duration,
            nodes,
            (&CLUSTER_NODE_KINDS, &CLUSTER_REDIS_KINDS),
            (2_000, 5_000),
        )
    }

    /// The skews nodes start with, then the node lane and the Redis lane (`kinds`), drawn
    /// from `rng` in that order; the Redis lane's faults `redis_gap` ms apart.
    fn build(
        seed: u64,
        mut rng: StdRng,
        duration: Duration,
        nodes: usize,
        kinds: (&[FaultKind], &[FaultKind]),
        redis_gap: (u64, u64),
    ) -> Self {
        let initial_skews = (0..nodes)
            .map(|i| {
                // One node always starts minutes off; the others sometimes.
                if i == 1 || rng.random_bool(0.25) {
                    skew(&mut rng)
                } else {
                    0
                }
            })
            .collect();
        // The last seconds stay quiet so the last fault's effects are over by the cutoff.
        let until = duration.saturating_sub(Duration::from_secs(4));
        let node_lane = lane(
            &mut rng,
            kinds.0,
            nodes,
            Duration::from_secs(3),
            (1_000, 4_000),
            until,
        );
        let redis_lane = lane(
            &mut rng,
            kinds.1,
            nodes,
            Duration::from_secs(5),
            redis_gap,
            until,
        );
        Self {
            seed,
            duration,
            nodes,
            initial_skews,
            node_lane,
            redis_lane,
        }
    }

    /// Plan a delay-queue round of `duration` from `seed`: `nodes` node processes and as many
    /// consumer processes. The process lane kills consumers (`node` is then the consumer's
    /// index) and the node promoting a burst, and loses expired key events; the Redis lane
    /// kills the subscribers and restarts Redis (SIGTERM, and SIGKILL with AOF recovery).
    pub fn queue(seed: u64, duration: Duration, nodes: usize) -> Self {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x9e3e_0000);
        let initial_skews = (0..nodes)
            .map(|i| if i == 1 { skew(&mut rng) } else { 0 })
            .collect();
        let until = duration.saturating_sub(Duration::from_secs(4));
        let node_lane = lane(
            &mut rng,
            &QUEUE_PROCESS_KINDS,
            nodes,
            Duration::from_secs(2),
            (1_000, 3_000),
            until,
        );
        let redis_lane = lane(
            &mut rng,
            &QUEUE_REDIS_KINDS,
            nodes,
            Duration::from_secs(4),
            (2_000, 5_000),
            until,
        );
        Self {
            seed,
            duration,
            nodes,
            initial_skews,
            node_lane,
            redis_lane,
        }
    }

    /// Whether every kind of `kinds` appears at least once.
    pub fn covers(&self, kinds: &[FaultKind]) -> bool {
        kinds.iter().all(|k| {
            self.node_lane
                .iter()
                .chain(&self.redis_lane)
                .any(|f| f.kind == *k)
        })
    }

    /// Whether every scheduled kind appears at least once.
    pub fn covers_every_kind(&self) -> bool {
        self.covers(&FaultKind::SCHEDULED)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_seed_gives_one_plan_covering_every_kind_in_a_minute() {
        let a = Plan::new(42, Duration::from_secs(60), 4);
        assert_eq!(a, Plan::new(42, Duration::from_secs(60), 4));
        assert_ne!(a, Plan::new(43, Duration::from_secs(60), 4));
        for seed in 0..200 {
            let p = Plan::new(seed, Duration::from_secs(60), 4);
            assert!(p.covers_every_kind(), "seed {seed}: {p:#?}");
            for lane in [&p.node_lane, &p.redis_lane] {
                for w in lane.windows(2) {
                    assert!(w[1].at >= w[0].at + w[0].hold, "lane overlaps: {w:?}");
                }
                assert!(lane.iter().all(|f| f.at + f.hold <= p.duration));
            }
            for f in p
                .node_lane
                .iter()
                .filter(|f| f.kind == FaultKind::NodePause)
            {
                let ms = f.hold.as_millis() as i64;
                assert!(
                    (NODE_TTL_MS * 3 / 10..=NODE_TTL_MS * 7 / 10).contains(&ms),
                    "a short pause of {ms} ms"
                );
            }
        }
    }

    /// The cluster's plans are those of before the single-Redis round had its short pauses,
    /// Redis restarted empty and Redis full: none of them is drawn there.
    #[test]
    fn cluster_plans_hold_none_of_the_single_redis_kinds() {
        for seed in 0..50 {
            let p = Plan::cluster(seed, Duration::from_secs(90), 4);
            assert!(p.node_lane.iter().chain(&p.redis_lane).all(|f| !matches!(
                f.kind,
                FaultKind::NodePause | FaultKind::RedisEmpty | FaultKind::RedisFull
            )));
        }
    }

    #[test]
    fn a_cluster_round_of_90_seconds_holds_every_cluster_kind() {
        for seed in 0..200 {
            let p = Plan::cluster(seed, Duration::from_secs(90), 4);
            assert!(
                p.covers(&FaultKind::CLUSTER_SCHEDULED),
                "seed {seed}: {p:#?}"
            );
            assert_eq!(p, Plan::cluster(seed, Duration::from_secs(90), 4));
            assert!(
                p.node_lane
                    .iter()
                    .chain(&p.redis_lane)
                    .all(|f| !matches!(f.kind, FaultKind::CutDrop | FaultKind::CutStall))
            );
        }
    }

    #[test]
    fn a_queue_round_of_30_seconds_holds_every_queue_kind() {
        for seed in 0..200 {
            let p = Plan::queue(seed, Duration::from_secs(30), 3);
            assert!(p.covers(&FaultKind::QUEUE_SCHEDULED), "seed {seed}: {p:#?}");
            assert_eq!(p, Plan::queue(seed, Duration::from_secs(30), 3));
        }
    }
}

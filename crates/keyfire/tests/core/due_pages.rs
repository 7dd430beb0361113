//! The sweeper reads a shard's due firings in pages, each going on after the last entry the
//! one before read. Many firings share one instant in a burst (100,000 tasks due at once,
//! 10,000 cron jobs every second), so a page must go on inside a run of ties, and after an
//! entry claimed (gone from the ZSET) since it was read.

use keyfire::store::{DueFrom, Store};
use keyfire_testkit::world::World;
use redis::AsyncCommands;

/// Page through the shard's due entries up to `until`, `limit` at a time; after each page,
/// `between` may change the ZSET (entries claimed meanwhile).
async fn page_through(
    store: &Store,
    until: i64,
    limit: usize,
    mut between: impl AsyncFnMut(&[(String, i64)]),
) -> Vec<(String, i64)> {
    let mut from = DueFrom::Start;
    let mut seen = Vec::new();
    loop {
        let page = store.due_page(0, &from, until, limit).await.unwrap();
        assert!(page.len() <= limit, "a page holds at most its limit");
        let Some((id, at)) = page.last().cloned() else {
            break;
        };
        between(&page).await;
        let full = page.len() == limit;
        seen.extend(page);
        if !full {
            break;
        }
        from = DueFrom::Past(at, id);
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn due_pages_go_on_through_ties_and_past_entries_claimed_since() {
    let w = World::new().await;
    let store = Store::open(&w.settings.redis).await.unwrap();
    let due = store.shards().keys(0).due();
    let mut conn = w.conn().await;
    // 10 entries before the burst's instant, 2,345 at it, 10 after it, and 5 past `until`.
    // Members mix cases, digits and punctuation, which byte order (Redis's) and a locale's
    // collation sort differently.
    let burst = 5_000_i64;
    let mut entries: Vec<(i64, String)> = Vec::new();
    for i in 0..10 {
        entries.push((1_000 + i, format!("early-{i}")));
        entries.push((6_000 + i, format!("late-{i}")));
        if i < 5 {
            entries.push((9_000 + i, format!("beyond-{i}")));
        }
    }
    let marks = ["", "-", "_", "A", "a", "Z", "z", "0", ".", "~"];
    for i in 0..2_345 {
        entries.push((burst, format!("{}job{}{}", marks[i % 10], i % 7, i)));
    }
    for chunk in entries.chunks(500) {
        let items: Vec<(i64, &str)> = chunk.iter().map(|(s, m)| (*s, m.as_str())).collect();
        let _: i64 = conn.zadd_multiple(&due, &items).await.unwrap();
    }
    let until = 7_000;
    let expected: Vec<(String, i64)> = conn
        .zrangebyscore_withscores(&due, "-inf", until)
        .await
        .unwrap();
    assert_eq!(expected.len(), 10 + 2_345 + 10);

    // Read only: every entry once, in the ZSET's order, for page sizes that do and do not
    // divide the ties.
    for limit in [1_000, 97, 7] {
        let seen = page_through(&store, until, limit, async |_| {}).await;
        assert_eq!(seen, expected, "pages of {limit}");
    }

    // Claimed as read: after each page its entries leave the ZSET (the cursor's entry with
    // them), and one entry the next page would read is claimed as well. Every entry still
    // there when its page is read is read, once.
    let mut removed_ahead = Vec::new();
    let seen = page_through(&store, until, 100, async |page| {
        let mut c = w.conn().await;
        let ids: Vec<&str> = page.iter().map(|(id, _)| id.as_str()).collect();
        let _: i64 = c.zrem(&due, &ids).await.unwrap();
        let next: Vec<String> = c
            .zrangebyscore_limit(&due, "-inf", until, 1, 1)
            .await
            .unwrap();
        if let Some(id) = next.first() {
            let _: i64 = c.zrem(&due, id).await.unwrap();
            removed_ahead.push(id.clone());
        }
    })
    .await;
    let mut all: Vec<String> = seen.iter().map(|(id, _)| id.clone()).collect();
    all.extend(removed_ahead);
    all.sort();
    all.dedup();
    assert_eq!(all.len(), expected.len(), "no entry missed");
    let left: Vec<String> = conn.zrangebyscore(&due, "-inf", until).await.unwrap();
    assert!(left.is_empty(), "every entry was read or claimed: {left:?}");
    let mut ids: Vec<&str> = seen.iter().map(|(id, _)| id.as_str()).collect();
    ids.sort();
    let n = ids.len();
    ids.dedup();
    assert_eq!(ids.len(), n, "no entry read twice");
}

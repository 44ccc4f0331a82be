//! Lease batching at scale: thousands of leases acquired, renewed in batched Lua calls,
//! and released, against the real Redis.

use std::time::{Duration, Instant};

use shared::ids::InstanceId;
use worker::lease::Leases;

#[tokio::test]
async fn thousands_of_leases_renew_in_batches() {
    let config = harness::test_config();
    let pool = shared::kv::connect(&config).unwrap();
    let keys = shared::kv::Keys::new(&config);
    let mine = Leases::new(pool.clone(), keys.clone(), "wk_mine".into(), Duration::from_secs(30));
    let other = Leases::new(pool, keys, "wk_other".into(), Duration::from_secs(30));
    let ids: Vec<InstanceId> = (0..5_000).map(|_| InstanceId::new()).collect();
    for id in &ids {
        assert!(mine.acquire(id).await.unwrap().is_some());
    }
    // Someone else cannot take them, and sees none free.
    assert!(other.acquire(&ids[0]).await.unwrap().is_none());
    assert!(other.free(&ids).await.unwrap().is_empty());

    let start = Instant::now();
    let lost = mine.renew(&ids).await.unwrap();
    println!("renewed {} leases in {} ms", ids.len(), start.elapsed().as_millis());
    assert!(lost.is_empty());

    // A lease that moved on is reported lost, and only that one.
    mine.release(&ids[7]).await.unwrap();
    assert!(other.acquire(&ids[7]).await.unwrap().is_some());
    let lost = mine.renew(&ids).await.unwrap();
    assert_eq!(lost, vec![ids[7].clone()]);
    // Releasing someone else's lease does nothing.
    mine.release(&ids[7]).await.unwrap();
    assert!(other.free(&ids[7..8]).await.unwrap().is_empty());
    // Epochs only grow.
    let e1 = other.acquire(&ids[9]).await.unwrap();
    assert!(e1.is_none());
    mine.release(&ids[9]).await.unwrap();
    let e2 = other.acquire(&ids[9]).await.unwrap().unwrap();
    assert!(e2 >= 2);
}

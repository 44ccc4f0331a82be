//! Leases at scale against the real Redis: thousands acquired, renewed in batched Lua
//! calls by the renewal thread, reported lost when another worker took one, taken again
//! when one lapsed while nobody took it, and released.

use std::time::Duration;

use deadpool_redis::redis;
use shared::ids::InstanceId;
use worker::lease::{Leases, Renewal, Renewer};

/// Two workers' views of the leases (`wk_mine`, `wk_other`) on the test Redis, under the
/// key prefix of `config` (each test config has its own).
fn two_workers(config: &shared::Config, ttl: Duration) -> (Leases, Leases) {
    let pool = shared::kv::connect(config).unwrap();
    let keys = shared::kv::Keys::new(config);
    let mine = Leases::new(pool.clone(), keys.clone(), "wk_mine".into(), ttl);
    (mine, Leases::new(pool, keys, "wk_other".into(), ttl))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_leases_renew_in_batches_on_their_own_thread() {
    let config = harness::test_config();
    let keys = shared::kv::Keys::new(&config);
    let ttl = Duration::from_millis(1_500);
    let (mine, other) = two_workers(&config, ttl);
    let (renewer, mut reports) = Renewer::start(&config.redis_url, keys.clone(), "wk_mine".into(), ttl).unwrap();
    let ids: Vec<InstanceId> = (0..2_000).map(|_| InstanceId::new()).collect();
    for id in &ids {
        assert!(mine.acquire(id).await.unwrap().is_some());
        renewer.hold(id);
    }
    // Someone else cannot take them, and sees none free.
    assert!(other.acquire(&ids[0]).await.unwrap().is_none());
    assert!(other.free(&ids).await.unwrap().is_empty());
    // Past several TTLs, every lease is still ours: the thread kept them.
    tokio::time::sleep(ttl * 3).await;
    assert!(other.free(&ids).await.unwrap().is_empty(), "none lapsed");
    assert!(reports.try_recv().is_err(), "nothing to report");

    // A lease another worker holds now (taken over after a lapse) is reported lost, and
    // only that one. (Released and taken with `acquire` instead, the renewal thread may
    // revive it in between, as it should a lease that lapsed while nobody took it.)
    let mut conn = shared::kv::connect(&config).unwrap().get().await.unwrap();
    let _: () = redis::cmd("SET")
        .arg(keys.lease(&ids[7]))
        .arg("wk_other")
        .arg("PX")
        .arg(60_000)
        .query_async(&mut conn)
        .await
        .unwrap();
    let report = tokio::time::timeout(ttl * 2, reports.recv()).await.unwrap();
    assert_eq!(report, Some(Renewal::Lost(vec![ids[7].clone()])));
    renewer.forget(&ids[7]);

    // A lease that lapsed while nobody took it is taken again, and reported so.
    let _: i64 = redis::cmd("DEL").arg(keys.lease(&ids[9])).query_async(&mut conn).await.unwrap();
    let report = tokio::time::timeout(ttl * 2, reports.recv()).await.unwrap();
    assert_eq!(report, Some(Renewal::Revived(vec![ids[9].clone()])));
    let holder: Option<String> = redis::cmd("GET").arg(keys.lease(&ids[9])).query_async(&mut conn).await.unwrap();
    assert_eq!(holder.as_deref(), Some("wk_mine"));

    // Releasing someone else's lease does nothing; a released lease is not taken again.
    mine.release(&ids[7]).await.unwrap();
    assert!(other.free(&ids[7..8]).await.unwrap().is_empty());
    renewer.forget(&ids[11]);
    mine.release(&ids[11]).await.unwrap();
    tokio::time::sleep(ttl).await;
    assert_eq!(other.free(&ids[11..12]).await.unwrap(), [ids[11].clone()], "released for good");
    // Epochs only grow.
    let e2 = other.acquire(&ids[11]).await.unwrap().unwrap();
    assert!(e2 >= 2);
    drop(renewer);
}

/// A worker shutting down gives its leases back in a few calls: every lease still its own
/// is free at once, and one another worker took meanwhile stays that worker's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_gives_back_its_leases_in_batches_and_only_its_own() {
    let (mine, other) = two_workers(&harness::test_config(), Duration::from_secs(60));
    // More than one call's worth (500 keys each).
    let ids: Vec<InstanceId> = (0..1_200).map(|_| InstanceId::new()).collect();
    for id in &ids[1..] {
        assert!(mine.acquire(id).await.unwrap().is_some());
    }
    assert!(other.acquire(&ids[0]).await.unwrap().is_some());
    mine.release_many(&ids).await.unwrap();
    let free = other.free(&ids).await.unwrap();
    assert_eq!(free.len(), ids.len() - 1, "every lease of mine is free");
    assert!(!free.contains(&ids[0]), "the other worker's lease stays");
    assert!(mine.acquire(&ids[0]).await.unwrap().is_none());
}

/// A worker takes a batch of leases in one call: each free one with an epoch above the
/// last, none another worker holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_leases_is_taken_in_one_call_and_never_from_another_holder() {
    let (mine, other) = two_workers(&harness::test_config(), Duration::from_secs(60));
    let ids: Vec<InstanceId> = (0..5).map(|_| InstanceId::new()).collect();
    let first = other.acquire(&ids[2]).await.unwrap().unwrap();
    let before = mine.acquire(&ids[4]).await.unwrap().unwrap();
    mine.release(&ids[4]).await.unwrap();
    let epochs = mine.acquire_many(&ids).await.unwrap();
    assert_eq!(epochs.len(), 5);
    assert_eq!(epochs[2], None, "another worker's lease is not taken");
    assert!(epochs[4].unwrap() > before, "epochs only grow");
    assert!(epochs.iter().enumerate().all(|(i, e)| i == 2 || e.is_some()));
    assert!(mine.free(&ids).await.unwrap().is_empty(), "all five are held");
    // The one held elsewhere is still that worker's; taking the batch again takes nothing.
    assert!(mine.acquire_many(&ids).await.unwrap().iter().all(Option::is_none));
    other.release(&ids[2]).await.unwrap();
    assert_eq!(mine.free(&ids[2..3]).await.unwrap(), [ids[2].clone()], "released by its holder");
    assert!(mine.acquire_many(&ids[2..3]).await.unwrap()[0].unwrap() > first);
}

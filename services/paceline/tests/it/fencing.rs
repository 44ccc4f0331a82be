//! Invariant 2 at the repository level: once a newer epoch claimed an instance, every
//! write under an older epoch is refused and changes nothing.

use harness::TestApi;
use serde_json::json;
use shared::db::instances::InstanceState;
use shared::ids::InstanceId;
use worker::db::sessions;

#[tokio::test]
async fn writes_under_an_old_epoch_are_refused() {
    let api = TestApi::start().await;
    let (inst, _) = api.create_instance("fenced").await;
    let id = InstanceId::parse(inst["id"].as_str().unwrap()).unwrap();
    let db = shared::db::connect(&api.config).await.unwrap();
    // Not wanted to run: nobody may claim it.
    assert!(sessions::claim(&db, &id, 1, "wk_a").await.unwrap().is_none());
    api.admin().post(&format!("/v1/instances/{id}/connect"), &json!({})).await.expect(202);

    let a = sessions::claim(&db, &id, 1, "wk_a").await.unwrap().unwrap();
    assert!(sessions::set_state(&db, &id, a.owner_epoch, InstanceState::Connecting, None).await.unwrap());
    // A lost Redis counter (epoch 1 again) still yields a higher epoch.
    let b = sessions::claim(&db, &id, 1, "wk_b").await.unwrap().unwrap();
    assert!(b.owner_epoch > a.owner_epoch);
    assert!(sessions::set_linked(&db, &id, b.owner_epoch, Some(&json!({"session": "s"})), "5511999990001", false)
        .await
        .unwrap());

    // The ex-owner's writes all bounce.
    assert!(!sessions::set_state(&db, &id, a.owner_epoch, InstanceState::Disconnected, None).await.unwrap());
    assert!(!sessions::set_linked(&db, &id, a.owner_epoch, None, "5511999990009", true).await.unwrap());
    assert!(!sessions::set_ended(&db, &id, a.owner_epoch, InstanceState::LoggedOut).await.unwrap());
    let now = api.admin().get(&format!("/v1/instances/{id}")).await.expect(200);
    assert_eq!(now["state"], "connected");
    assert_eq!(now["phone"], "5511999990001");
    assert_eq!(now["account_type"], "personal");
}

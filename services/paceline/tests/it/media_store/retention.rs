//! Retention by direction: received and sent media each kept for their own days, an
//! instance's override over its account's over the deployment's; set by the admin, read
//! by the owner; media from before directions were recorded keeps the longer of the two.

use harness::{test_config, TestApi};
use serde_json::json;
use shared::db::media::{self, Direction, MediaBody, Store};
use shared::ids::InstanceId;

use crate::accounts::{account, instance};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_direction_keeps_its_days_the_instances_over_the_accounts_over_the_deployments() {
    let mut config = test_config();
    config.media.inbound_retention_days = Some(3);
    let api = TestApi::start_with(config).await;
    let admin = api.admin();
    let (acct, acct_token) = account(&api, "retention", json!({})).await;
    let own_days = instance(&acct_token, "ret-own").await;
    let inherits = instance(&acct_token, "ret-inherits").await;
    let (outside, outside_token) = api.create_instance("ret-outside").await;
    let outside = outside.id.to_string();

    // The rules: the admin sets, owners read, days within their bounds.
    let put = |path: String, body: serde_json::Value| {
        let admin = admin.clone();
        async move { admin.put(&path, &body).await }
    };
    let acct_path = format!("/v1/accounts/{acct}/media/retention");
    let r = put(acct_path.clone(), json!({ "outbound_days": 10 })).await.expect(200);
    assert_eq!(r["effective"], json!({ "inbound_days": 3, "outbound_days": 10 }));
    let own_path = format!("/v1/instances/{own_days}/media/retention");
    let r = put(own_path.clone(), json!({ "inbound_days": 5 })).await.expect(200);
    assert_eq!(
        r,
        json!({ "inbound_days": 5, "outbound_days": null, "effective": { "inbound_days": 5, "outbound_days": 10 } })
    );
    for bad in [json!({ "inbound_days": 0 }), json!({ "outbound_days": 7 }), json!({ "inbound_days": 3651 })] {
        let field = bad.as_object().unwrap().keys().next().unwrap().clone();
        let r = admin.put(&own_path, &bad).await;
        assert_eq!(r.body["error"]["field"], field.as_str(), "{bad}");
        r.expect_error(400, "validation_failed");
    }
    admin.put(&own_path, &json!({ "days": 3 })).await.expect_error(400, "validation_failed");
    acct_token.put(&own_path, &json!({ "inbound_days": 99 })).await.expect_error(403, "forbidden");
    acct_token.put(&acct_path, &json!({ "inbound_days": 99 })).await.expect_error(403, "forbidden");
    let read = acct_token.get(&format!("/v1/instances/{inherits}/media/retention")).await.expect(200);
    assert_eq!(
        read["effective"],
        json!({ "inbound_days": 3, "outbound_days": 10 }),
        "the account's, then the deployment's"
    );
    assert_eq!(acct_token.get(&acct_path).await.expect(200)["outbound_days"], 10);
    let outside_read = api.client(Some(outside_token)).get(&format!("/v1/instances/{outside}/media/retention")).await;
    assert_eq!(outside_read.expect(200)["effective"], json!({ "inbound_days": 3, "outbound_days": 30 }));
    admin
        .get("/v1/instances/inst_00000000000000000000000000000000/media/retention")
        .await
        .expect_error(404, "instance_not_found");

    // The collector: each medium by its direction's days where its instance stands.
    let db = shared::db::connect(&api.config).await.unwrap();
    let store = Store::postgres(db.clone());
    let stored = |inst: String, direction: Option<Direction>, age_days: i32| {
        let (store, db) = (store.clone(), db.clone());
        async move {
            let id = InstanceId::parse(&inst).unwrap();
            let way = direction.unwrap_or(Direction::Outbound);
            let (m, _) =
                media::store(&store, &id, way, "image/png", None, MediaBody::Data(b"x"), u64::MAX).await.unwrap();
            sqlx::query("UPDATE media SET created_at = now() - make_interval(days => $2), inbound = $3 WHERE id = $1")
                .bind(&m)
                .bind(age_days)
                .bind(direction.map(|d| d == Direction::Inbound))
                .execute(&db)
                .await
                .unwrap();
            m.to_string()
        }
    };
    let cases = [
        (own_days.clone(), Some(Direction::Inbound), 4, false, "the instance's 5 days in"),
        (own_days.clone(), Some(Direction::Inbound), 6, true, "past the instance's 5 days in"),
        (own_days.clone(), Some(Direction::Outbound), 9, false, "the account's 10 days out"),
        (inherits.clone(), Some(Direction::Inbound), 4, true, "past the deployment's 3 days in"),
        (inherits.clone(), Some(Direction::Outbound), 11, true, "past the account's 10 days out"),
        (outside.clone(), Some(Direction::Outbound), 11, false, "the deployment's 30 days out"),
        (outside.clone(), Some(Direction::Inbound), 2, false, "within the deployment's 3 days in"),
        (outside.clone(), None, 20, false, "no direction: the longer of 3 and 30"),
        (outside.clone(), None, 31, true, "no direction, past both"),
    ];
    let mut ids = Vec::new();
    for (inst, way, age, _, _) in &cases {
        ids.push(stored(inst.clone(), *way, *age).await);
    }
    let expired = media::retention::expire_due(&db, api.config.media_retention(), 100).await.unwrap();
    assert_eq!(expired as usize, cases.iter().filter(|c| c.3).count());
    for (id, (_, _, _, gone, why)) in ids.iter().zip(&cases) {
        let is: bool =
            sqlx::query_scalar("SELECT expired FROM media WHERE id = $1").bind(id).fetch_one(&db).await.unwrap();
        assert_eq!(is, *gone, "{why}");
    }
}

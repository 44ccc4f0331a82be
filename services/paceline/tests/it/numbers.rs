//! Check numbers over the worker RPC, with the new-lookup quota shared by two API
//! processes.

use crate::bin;

use harness::cluster::{ApiProc, Cluster};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_numbers_and_its_quota_across_two_api_processes() {
    let c = Cluster::start(bin(), 1, |_| {}).await;
    c.phone("5511999990001", false).await;
    c.phone("5511999990002", true).await;
    let (inst, token) = c.paired_instance("nums", "5511999990001").await;
    let id = inst.id.to_string();
    let path = format!("/v1/instances/{id}/check-numbers");
    let one = c.api.client(Some(token.clone()));
    let other_api = ApiProc::start(bin(), &c.config).await;
    let two = other_api.client(Some(token));

    one.post(&path, &json!({ "numbers": [] })).await.expect_error(400, "validation_failed");
    let eleven: Vec<String> = (0..11).map(|i| format!("55119999901{i:02}")).collect();
    one.post(&path, &json!({ "numbers": eleven })).await.expect_error(400, "validation_failed");
    one.post(&path, &json!({ "numbers": ["12"] })).await.expect_error(400, "validation_failed");

    let r = one
        .post(&path, &json!({ "numbers": ["+55 11 99999-0002", "5511999990300", "5511999990301"] }))
        .await
        .expect(200);
    assert_eq!(
        r["results"][0],
        json!({ "number": "+55 11 99999-0002", "exists": true, "jid": shared::jid::Jid::user("5511999990002").as_str() })
    );
    assert_eq!(r["results"][1], json!({ "number": "5511999990300", "exists": false }));
    // Known numbers are not new lookups, on either API.
    for _ in 0..5 {
        one.post(&path, &json!({ "numbers": ["5511999990002", "5511999990300", "5511999990301"] })).await.expect(200);
        two.post(&path, &json!({ "numbers": ["5511999990002"] })).await.expect(200);
    }
    // 3 used: 4 more on one API and 3 on the other fill the minute...
    one.post(&path, &json!({ "numbers": ["5511999990302", "5511999990303", "5511999990304", "5511999990305"] }))
        .await
        .expect(200);
    two.post(&path, &json!({ "numbers": ["5511999990306", "5511999990307", "5511999990308"] })).await.expect(200);
    // ...and the next new one is refused wherever it is asked.
    let r = two.post(&path, &json!({ "numbers": ["5511999990309"] })).await;
    let retry: u64 = r.headers.get("retry-after").unwrap().to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    assert_eq!(r.body["error"]["retryable"], true);
    r.expect_error(429, "rate_limited");
    one.post(&path, &json!({ "numbers": ["5511999990310"] })).await.expect_error(429, "rate_limited");
    // Known ones still answer.
    one.post(&path, &json!({ "numbers": ["5511999990308"] })).await.expect(200);

    // An instance no worker runs: 409, and the failed call used no quota.
    let (idle, idle_token) = c.api.create_instance("nums-idle").await;
    let idle_path = format!("/v1/instances/{}/check-numbers", idle.id.as_str());
    let idle_client = c.api.client(Some(idle_token));
    for _ in 0..12 {
        idle_client
            .post(&idle_path, &json!({ "numbers": ["5511999990002"] }))
            .await
            .expect_error(409, "instance_not_connected");
    }
}

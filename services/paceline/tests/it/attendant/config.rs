//! The attendant's configuration through the API: who may point the provider where.

use serde_json::json;

use super::KEY;

/// The admin's provider key and its `allow_private_targets` hold for the provider's
/// origin: the instance's token moving the provider elsewhere drops the key and the flag
/// (so neither the key nor a readable SSRF follows it), within the origin both stay.
#[tokio::test]
async fn the_key_and_private_targets_stay_with_the_origin_the_admin_gave() {
    let api = harness::TestApi::start().await;
    let (inst, token) = api.create_instance("attendant-origin").await;
    let id = inst.id.as_str();
    let (own, admin) = (api.client(Some(token)), api.admin());
    let path = format!("/v1/instances/{id}/attendant");
    let provider = |base: &str| json!({ "kind": "openai", "base_url": base, "model": "m" });
    let mut given = json!({ "provider": provider("http://127.0.0.1:9/v1"), "allow_private_targets": true });
    given["provider"]["api_key"] = json!(KEY);
    let shown = admin.put(&path, &given).await.expect(200);
    assert_eq!(
        (shown["provider"]["api_key_set"].as_bool(), shown["allow_private_targets"].as_bool()),
        (Some(true), Some(true))
    );

    // Another private address: refused, and nothing changes.
    for elsewhere in ["http://127.0.0.1:10/v1", "http://10.0.0.7/v1", "http://localhost:9/v1"] {
        own.patch(&path, &json!({ "provider": provider(elsewhere) })).await.expect_error(400, "validation_failed");
        own.put(&path, &json!({ "provider": provider(elsewhere), "allow_private_targets": true }))
            .await
            .expect_error(400, "validation_failed");
    }
    let shown = own.get(&path).await.expect(200);
    assert_eq!(shown["provider"]["base_url"], "http://127.0.0.1:9/v1");
    assert_eq!(
        (shown["provider"]["api_key_set"].as_bool(), shown["allow_private_targets"].as_bool()),
        (Some(true), Some(true))
    );

    // Within the origin, the key and the flag stay.
    let shown = own.patch(&path, &json!({ "provider": provider("http://127.0.0.1:9/v2") })).await.expect(200);
    assert_eq!(
        (shown["provider"]["api_key_set"].as_bool(), shown["allow_private_targets"].as_bool()),
        (Some(true), Some(true))
    );

    // A public server of the tenant's: allowed, without the key and the flag.
    let shown = own.patch(&path, &json!({ "provider": provider("https://8.8.8.8/v1") })).await.expect(200);
    assert_eq!(
        (shown["provider"]["api_key_set"].as_bool(), shown["allow_private_targets"].as_bool()),
        (Some(false), Some(false))
    );
    // Coming back needs the admin again.
    own.patch(&path, &json!({ "provider": provider("http://127.0.0.1:9/v1") }))
        .await
        .expect_error(400, "validation_failed");
    own.patch(&path, &json!({ "allow_private_targets": true })).await.expect_error(403, "forbidden");
    let shown = admin
        .patch(&path, &json!({ "provider": provider("http://127.0.0.1:9/v1"), "allow_private_targets": true }))
        .await
        .expect(200);
    assert_eq!(shown["allow_private_targets"], true);
}

//! Both media backends run the same tests: Postgres (chunks) and S3 (a real S3 server,
//! moto, through a gate the tests can close). Uploads (given bytes and `media.url`,
//! multipart past one part), reads whole and by range, quotas, expiry and collection
//! (objects deleted from the bucket by the collector), the presigned redirect, and the
//! bucket unreachable (new media refused with nothing half-made, and back).

use std::time::Duration;

use base64::Engine;
use futures::TryStreamExt;
use harness::s3::{Backend, Bucket};
use harness::{test_config, TestApi};
use serde_json::{json, Value};
use shared::db::media::{self, MediaBody, Store};
use shared::ids::InstanceId;

mod cluster;
mod retention;

const TO: &str = "5511999990001";

fn b64(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

/// An API on `backend` (and its bucket, for S3).
async fn api_on(backend: Backend, tweak: impl FnOnce(&mut shared::Config)) -> (TestApi, Option<Bucket>) {
    let mut config = test_config();
    config.allow_private_targets = true;
    let bucket = match backend {
        Backend::Postgres => None,
        Backend::S3 => Some(Bucket::new().await),
    };
    if let Some(b) = &bucket {
        b.configure(&mut config);
    }
    tweak(&mut config);
    (TestApi::start_with(config).await, bucket)
}

fn signed(api: &TestApi, media_id: &str) -> String {
    let signer = domain::media_urls::MediaUrls::new(&api.config, api.config.admin_token.as_deref());
    signer.sign(media_id, chrono::Utc::now()).unwrap()
}

/// The media id a queued message carries, and its row's object key.
async fn stored(db: &sqlx::PgPool, msg: &Value) -> (String, Option<String>) {
    sqlx::query_as(
        "SELECT m.id, m.object_key FROM messages q JOIN media m ON m.id = q.content->'media'->>'id' WHERE q.id = $1",
    )
    .bind(msg["id"].as_str())
    .fetch_one(db)
    .await
    .unwrap()
}

async fn count(db: &sqlx::PgPool, sql: &str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(db).await.unwrap()
}

async fn get_range(url: &str, range: &str) -> reqwest::Response {
    reqwest::Client::new().get(url).header("range", range).send().await.unwrap()
}

/// Uploads of both kinds land in the backend, are read whole and by range, count in the
/// quota, and go (rows and bytes, objects included) when collected or expired.
async fn media_round_trip(backend: Backend) {
    let (api, bucket) = api_on(backend, |_| {}).await;
    let (inst, token) = api.create_instance(&format!("store-{backend:?}").to_lowercase()).await;
    let inst_id = InstanceId::parse(inst.id.as_str()).unwrap();
    let path = format!("/v1/instances/{inst_id}/messages");
    let own = api.client(Some(token));
    let db = shared::db::connect(&api.config).await.unwrap();

    // Past one S3 part (5 MiB) and several Postgres chunks (1 MiB).
    let doc: Vec<u8> = (0..(6 * 1024 * 1024 + 4321)).map(|i| (i * 7 % 251) as u8).collect();
    let body = json!({ "to": TO, "type": "document",
        "media": { "data": b64(&doc), "mime_type": "application/pdf", "filename": "big.pdf" } });
    let big = own.post(&path, &body).await.expect(202);
    let (big_id, big_key) = stored(&db, &big).await;
    let server = harness::media_server().await;
    let fetched = own
        .post(&path, &json!({ "to": TO, "type": "image", "media": { "url": format!("http://{server}/file/3000"), "mime_type": "image/png" } }))
        .await
        .expect(202);
    let (small_id, small_key) = stored(&db, &fetched).await;
    match (&bucket, &big_key, &small_key) {
        (None, None, None) => {
            let chunks = count(&db, &format!("SELECT count(*) FROM media_chunks WHERE media_id = '{big_id}'")).await;
            assert_eq!(chunks, 7, "1 MiB chunks");
        }
        (Some(b), Some(big_key), Some(small_key)) => {
            assert_eq!(count(&db, "SELECT count(*) FROM media_chunks").await, 0, "no bytes in Postgres");
            let prefix = format!("tenants/media/{inst_id}/{big_id}/");
            assert!(big_key.starts_with(&prefix), "ids only in keys: {big_key}");
            let suffix = &big_key[prefix.len()..];
            assert!(suffix.len() == 16 && suffix.bytes().all(|b| b.is_ascii_hexdigit()), "{big_key}");
            let (etag, len) = b.head(big_key).await.expect("the object is in the bucket");
            assert_eq!(len, doc.len() as u64);
            assert!(etag.ends_with("-2"), "uploaded in two parts: {etag}");
            let (etag, len) = b.head(small_key).await.expect("the downloaded media is in the bucket");
            assert_eq!(len, 3000);
            assert!(!etag.contains('-'), "one PUT: {etag}");
        }
        (_, big, small) => panic!("stored where it should not be: {big:?} {small:?} (bucket: {})", bucket.is_some()),
    }

    // Whole, and by ranges (across a chunk's end, a suffix, an open end), or 416.
    let url = signed(&api, &big_id);
    let res = reqwest::get(&url).await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["accept-ranges"], "bytes");
    assert_eq!(res.headers()["content-disposition"], "inline; filename=\"big.pdf\"");
    assert_eq!(res.bytes().await.unwrap().to_vec(), doc);
    let mib = 1024 * 1024;
    for (range, from, to) in [
        (format!("bytes={}-{}", mib - 10, mib + 9), mib - 10, mib + 10),
        ("bytes=-100".to_string(), doc.len() - 100, doc.len()),
        (format!("bytes={}-", 5 * mib + 3), 5 * mib + 3, doc.len()),
    ] {
        let res = get_range(&url, &range).await;
        assert_eq!(res.status(), 206, "{range}");
        let want = format!("bytes {from}-{}/{}", to - 1, doc.len());
        assert_eq!(res.headers()["content-range"], want.as_str());
        assert_eq!(res.bytes().await.unwrap().to_vec(), doc[from..to], "{range}");
    }
    let res = get_range(&url, &format!("bytes={}-", doc.len())).await;
    assert_eq!(res.status(), 416);
    assert_eq!(res.headers()["content-range"], format!("bytes */{}", doc.len()).as_str());
    let small = reqwest::get(signed(&api, &small_id)).await.unwrap();
    assert_eq!(small.bytes().await.unwrap().len(), 3000);

    // The quota counts what is stored, in either backend.
    let used = media::usage(&db, &inst_id).await.unwrap();
    assert_eq!(used as usize, doc.len() + 3000);

    // An orphan (a crash between storing and queueing) is collected after its grace.
    let store = Store::new(db.clone(), &api.config.media_store).unwrap();
    let (orphan, _) = media::store(
        &store,
        &inst_id,
        media::Direction::Outbound,
        "image/png",
        None,
        MediaBody::Data(b"orphan"),
        u64::MAX,
    )
    .await
    .unwrap();
    sqlx::query("UPDATE media SET created_at = now() - interval '2 hours' WHERE id = $1")
        .bind(&orphan)
        .execute(&db)
        .await
        .unwrap();
    assert_eq!(media::collect_unclaimed(&db, 100).await.unwrap(), 1);
    // Past the retention: the bytes go, the quota frees, the URL answers 410.
    sqlx::query("UPDATE media SET created_at = now() - interval '31 days' WHERE id = $1")
        .bind(&big_id)
        .execute(&db)
        .await
        .unwrap();
    assert_eq!(media::retention::expire_due(&db, api.config.media_retention(), 100).await.unwrap(), 1);
    assert_eq!(media::usage(&db, &inst_id).await.unwrap(), 3000);
    let res = reqwest::get(&url).await.unwrap();
    assert_eq!(res.status(), 410);
    assert_eq!(res.json::<Value>().await.unwrap()["error"]["code"], "media_unavailable");
    // The collector deletes what the bucket held of both; the rest stays.
    let queued = count(&db, "SELECT count(*) FROM media_object_deletions").await;
    let done = media::delete_queued_objects(&store, 100).await.unwrap();
    match &bucket {
        None => assert_eq!((queued, done.deleted), (0, 0), "no objects without a bucket"),
        Some(b) => {
            assert_eq!((queued, done.deleted, done.failed), (2, 2, 0));
            let keys = b.keys().await;
            assert_eq!(keys, [small_key.clone().unwrap()], "only the live object is left");
            assert_eq!(count(&db, "SELECT count(*) FROM media_object_deletions").await, 0);
        }
    }
    let chunks = format!("SELECT count(*) FROM media_chunks WHERE media_id <> '{small_id}'");
    assert_eq!(count(&db, &chunks).await, 0, "nothing left in Postgres either");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn media_round_trip_on_postgres() {
    media_round_trip(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn media_round_trip_on_s3() {
    media_round_trip(Backend::S3).await;
}

/// With presigned redirects on, the bucket serves the bytes: the API answers 307 to a
/// short-lived URL of the object, typed as the API would serve it. Media still in
/// Postgres (stored before the switch) is streamed as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_presigned_redirect_hands_the_bucket_the_read() {
    let (api, _bucket) = api_on(Backend::S3, |c| c.media_store.presigned_ttl = Duration::from_secs(60)).await;
    let (inst, token) = api.create_instance("presigned").await;
    let path = format!("/v1/instances/{}/messages", inst.id.as_str());
    let own = api.client(Some(token));
    let db = shared::db::connect(&api.config).await.unwrap();
    let photo = b"\x89PNG a photo the bucket serves".to_vec();
    let m = own
        .post(&path, &json!({ "to": TO, "type": "image", "media": { "data": b64(&photo), "mime_type": "image/png" } }))
        .await
        .expect(202);
    let (id, _) = stored(&db, &m).await;
    let no_follow = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let res = no_follow.get(signed(&api, &id)).send().await.unwrap();
    assert_eq!(res.status(), 307);
    let location = res.headers()["location"].to_str().unwrap().to_string();
    assert!(location.contains("X-Amz-Expires=60") && location.contains("X-Amz-Signature="), "{location}");
    let res = reqwest::get(&location).await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "image/png");
    assert_eq!(res.bytes().await.unwrap().to_vec(), photo);

    // Media from before the switch, in Postgres: streamed by the API.
    let pg = Store::postgres(db.clone());
    let inst_id = InstanceId::parse(inst.id.as_str()).unwrap();
    let (old, _) =
        media::store(&pg, &inst_id, media::Direction::Outbound, "image/png", None, MediaBody::Data(b"old"), u64::MAX)
            .await
            .unwrap();
    let res = no_follow.get(signed(&api, old.as_str())).send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.bytes().await.unwrap().to_vec(), b"old");
}

/// The bucket unreachable: a send with media is refused as a passing failure (503 with
/// `Retry-After`) with nothing stored or queued, `/readyz` reports the bucket down and
/// stays ready, and once it is back the same send is accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bucket_down_refuses_new_media_whole_and_reports_it() {
    let (api, bucket) = api_on(Backend::S3, |_| {}).await;
    let bucket = bucket.unwrap();
    let (inst, token) = api.create_instance("bucket-down").await;
    let path = format!("/v1/instances/{}/messages", inst.id.as_str());
    let own = api.client(Some(token));
    let db = shared::db::connect(&api.config).await.unwrap();
    let body = json!({ "to": TO, "type": "image", "client_message_id": "down-1",
        "media": { "data": b64(&vec![9u8; 7 * 1024 * 1024]), "mime_type": "image/png" } });
    bucket.gate.close();
    let r = own.post(&path, &body).await;
    assert!(r.headers.get("retry-after").is_some(), "{:?}", r.headers);
    r.expect_error(503, "rate_limited");
    assert_eq!(count(&db, "SELECT count(*) FROM media").await, 0, "no row left half-made");
    assert_eq!(count(&db, "SELECT count(*) FROM messages").await, 0, "nothing queued");
    let ready = api.admin().get("/readyz").await;
    assert_eq!(ready.status, 200, "the bucket does not decide readiness");
    assert_eq!(ready.body["checks"]["media_store"], "down");
    // The object the refused upload may have begun is queued for deletion; the bucket
    // refusing the deletion leaves it queued.
    let store = Store::new(db.clone(), &api.config.media_store).unwrap();
    let waiting = count(&db, "SELECT count(*) FROM media_object_deletions").await;
    assert!(waiting >= 1);
    let d = media::delete_queued_objects(&store, 100).await.unwrap();
    assert_eq!((d.deleted, d.failed as i64), (0, waiting), "nothing counts as deleted while the bucket is down");
    assert_eq!(count(&db, "SELECT count(*) FROM media_object_deletions").await, waiting);

    bucket.gate.open();
    let queued = own.post(&path, &body).await.expect(202);
    let (_, key) = stored(&db, &queued).await;
    assert!(bucket.head(&key.unwrap()).await.is_some());
    assert_eq!(api.admin().get("/readyz").await.body["checks"]["media_store"], "ok");
    // An object of the refused try may be left by a multipart upload cut short; none is
    // referred to, and the next collection deletes what is queued.
    let d = media::delete_queued_objects(&store, 100).await.unwrap();
    assert_eq!((d.deleted as i64, d.failed), (waiting, 0));
    assert_eq!(bucket.keys().await.len(), 1);
}

/// `paceline media migrate --to s3` as an operator runs it: a dry run moves nothing; a
/// run copies what Postgres holds into the bucket, each copy verified, frees Postgres,
/// and the media reads the same from the bucket; it resumes after a run cut short, and a
/// copy that does not match its row stays in Postgres with a non-zero exit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn media_moves_from_postgres_to_the_bucket_verified_and_resumable() {
    use shared::db::media::migrate;
    let (api, _) = api_on(Backend::Postgres, |_| {}).await;
    let (inst, token) = api.create_instance("to-move").await;
    let path = format!("/v1/instances/{}/messages", inst.id.as_str());
    let own = api.client(Some(token));
    let db = shared::db::connect(&api.config).await.unwrap();
    let files: Vec<Vec<u8>> =
        [2_500_000usize, 10, 70_000, 3].iter().map(|n| (0..*n).map(|i| (i % 241) as u8).collect()).collect();
    let mut ids = Vec::new();
    for f in &files {
        let m = own
            .post(
                &path,
                &json!({ "to": TO, "type": "document", "media": { "data": b64(f), "mime_type": "application/pdf" } }),
            )
            .await
            .expect(202);
        ids.push(stored(&db, &m).await.0);
    }
    // The last one's bytes were damaged in Postgres: its copy cannot match its hash.
    sqlx::query("UPDATE media_chunks SET data = '\\x090909' WHERE media_id = $1")
        .bind(&ids[3])
        .execute(&db)
        .await
        .unwrap();
    let bucket = Bucket::new().await;
    let mut s3 = api.config.clone();
    bucket.configure(&mut s3);
    let run = |args: &[&str]| {
        let mut cmd = harness::cluster::command(crate::bin(), "media", &s3);
        cmd.args(args).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
        let out = cmd.output().expect("paceline runs");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (ok, out, err) = run(&["migrate", "--to", "s3", "--dry-run"]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("4 media"), "{out}");
    assert!(bucket.keys().await.is_empty(), "a dry run copies nothing");

    // A run cut short moved one already, the largest, while a send was reading it: the
    // read stops (`Gone`, which a send waits out) rather than giving fewer bytes, and the
    // media opened again reads whole, from the bucket.
    let store = Store::new(db.clone(), &s3.media_store).unwrap();
    let big = shared::ids::MediaId::parse(&ids[0]).unwrap();
    let reading = store.open(&big).await.unwrap().expect("stored");
    let mut pieces = reading.pieces().await.unwrap();
    assert!(!pieces.try_next().await.unwrap().expect("a first piece").is_empty());
    let rows = migrate::next(&store, None, 10).await.unwrap();
    let row = rows.iter().find(|r| r.id == big).expect("to move");
    assert_eq!(migrate::move_one(&store, row).await.unwrap(), migrate::Moved::Done);
    assert!(matches!(pieces.try_next().await, Err(media::MediaError::Gone)), "not a shorter file");
    let again = store.open(&big).await.unwrap().expect("stored");
    assert!(again.row().object_key.is_some());
    let (mut whole, mut pieces) = (Vec::new(), again.pieces().await.unwrap());
    while let Some(p) = pieces.try_next().await.unwrap() {
        whole.extend_from_slice(&p);
    }
    assert_eq!(whole, files[0]);
    let (ok, out, err) = run(&["migrate", "--to", "s3"]);
    assert!(!ok, "a copy that did not match fails the run: {out}{err}");
    assert!(out.contains("2 media moved") && out.contains("1 left in Postgres"), "{out}");
    assert!(err.contains(&format!("media {} stays in Postgres", ids[3])), "{err}");
    let keys = bucket.keys().await;
    assert_eq!(keys.len(), 3, "{keys:?}");
    let left: Vec<String> =
        sqlx::query_scalar("SELECT DISTINCT media_id FROM media_chunks").fetch_all(&db).await.unwrap();
    assert_eq!(left, [ids[3].clone()], "Postgres freed of all but the damaged one");
    let mut beside = s3.clone();
    beside.listen_addr = ([127, 0, 0, 1], 0).into();
    beside.public_url = None;
    let moved = TestApi::start_with(beside).await;
    for (id, f) in ids.iter().zip(&files).take(3) {
        let res = reqwest::get(signed(&moved, id)).await.unwrap();
        assert_eq!(res.status(), 200);
        assert_eq!(&res.bytes().await.unwrap().to_vec(), f, "the same bytes, from the bucket");
    }
    let (_, out, _) = run(&["migrate", "--to", "s3", "--dry-run"]);
    assert!(out.contains("1 media"), "only the damaged one is left: {out}");
}

//! Prunes events and deliveries past `bus::EVENTS_RETENTION` (`retention::db`), media
//! no message took (`db::media::collect_unclaimed`) and the bytes of media past its
//! retention (`db::media::retention`: received and sent media each their own days, an
//! instance's or its account's or the deployment's), then deletes the bucket's objects
//! those left behind (`db::media::delete_queued_objects`), every few minutes, in batches
//! so no statement holds locks for long; and reports the media stored. Every dispatcher
//! pod runs it; the deletes are idempotent, so pods overlapping costs only a little work.

use std::time::Duration;

pub mod db;

use db as retention;

const EVERY: Duration = Duration::from_secs(600);
const FIRST_AFTER: Duration = Duration::from_secs(60);
const BATCH: i64 = 5_000;
/// Objects deleted per request to the bucket (S3 takes at most 1,000 at once).
const OBJECT_BATCH: i64 = 1_000;

pub async fn run(media: shared::db::media::Store, retention: (i32, i32), shutdown: shared::Shutdown) {
    let db = media.db.clone();
    let mut wait = FIRST_AFTER;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
        wait = EVERY;
        let cutoff = chrono::Utc::now() - shared::bus::EVENTS_RETENTION;
        loop {
            if shutdown.is_cancelled() {
                return;
            }
            match retention::prune(&db, cutoff, BATCH).await {
                Ok(p) => {
                    if p.failed + p.deliveries + p.events > 0 {
                        tracing::info!(
                            failed = p.failed,
                            deliveries = p.deliveries,
                            events = p.events,
                            "pruned past retention"
                        );
                    }
                    if p.failed < BATCH as u64 && p.deliveries < BATCH as u64 && p.events < BATCH as u64 {
                        break;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "pruning events past retention failed");
                    break;
                }
            }
        }
        collect_media(&db, retention, &shutdown).await;
        delete_objects(&media, &shutdown).await;
    }
}

/// Deletes the bucket's objects whose rows went or gave their bytes back, in batches;
/// what fails stays queued for the next pass.
pub async fn delete_objects(media: &shared::db::media::Store, shutdown: &shared::Shutdown) {
    use crate::metrics::{MEDIA_OBJECTS_DELETED, MEDIA_OBJECT_DELETIONS_FAILED, MEDIA_OBJECT_DELETIONS_QUEUED};
    while !shutdown.is_cancelled() {
        match shared::db::media::delete_queued_objects(media, OBJECT_BATCH).await {
            Ok(d) => {
                metrics::counter!(MEDIA_OBJECTS_DELETED).increment(d.deleted);
                metrics::counter!(MEDIA_OBJECT_DELETIONS_FAILED).increment(d.failed);
                if d.deleted + d.failed < OBJECT_BATCH as u64 || d.failed > 0 {
                    break;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "deleting media objects failed");
                break;
            }
        }
    }
    match shared::db::media::queued_object_deletions(&media.db).await {
        Ok(n) => metrics::gauge!(MEDIA_OBJECT_DELETIONS_QUEUED).set(n as f64),
        Err(e) => tracing::warn!(error = %e, "counting media objects to delete failed"),
    }
}

/// Removes unclaimed media past its grace, drops the bytes of media past its retention,
/// then sets the stored-media gauge.
async fn collect_media(db: &sqlx::PgPool, retention: (i32, i32), shutdown: &shared::Shutdown) {
    while !shutdown.is_cancelled() {
        match shared::db::media::retention::expire_due(db, retention, BATCH).await {
            Ok(n) if n == BATCH as u64 => continue,
            Ok(n) => {
                if n > 0 {
                    tracing::info!(media = n, "media past its retention expired");
                }
                break;
            }
            Err(e) => {
                tracing::warn!(error = %e, "expiring media past its retention failed");
                break;
            }
        }
    }
    while !shutdown.is_cancelled() {
        match shared::db::media::collect_unclaimed(db, BATCH).await {
            Ok(n) => {
                if n > 0 {
                    tracing::info!(media = n, "collected media no message refers to");
                    metrics::counter!(crate::metrics::MEDIA_COLLECTED).increment(n);
                }
                if n < BATCH as u64 {
                    break;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "collecting unclaimed media failed");
                break;
            }
        }
    }
    match shared::db::media::total_usage(db).await {
        Ok(bytes) => metrics::gauge!(crate::metrics::MEDIA_STORED_BYTES).set(bytes as f64),
        Err(e) => tracing::warn!(error = %e, "reading the media stored failed"),
    }
}

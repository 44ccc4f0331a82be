//! `paceline media migrate --to s3`: media stored in Postgres copied into the bucket, a
//! row at a time (`db::media::migrate`), with a progress bar on a terminal and a line per
//! thousand media otherwise; `--dry-run` says what would move. Ctrl-C (or SIGTERM) stops
//! it after the medium being copied (each moves in its own transaction): run it again to
//! go on.

use anyhow::Context;
use shared::db::media::{migrate, Store};
use shared::Config;

/// Rows read per query.
const PAGE: i64 = 200;

pub async fn run(config: &Config, dry_run: bool, stop: shared::Shutdown) -> anyhow::Result<()> {
    anyhow::ensure!(
        config.media_store.bucket.as_deref().is_some_and(|b| !b.is_empty()),
        "media_store.bucket is not set: configure the bucket to migrate to"
    );
    let pool = shared::db::connect(config).await.context("connecting to postgres")?;
    let current = shared::db::schema_current(&pool).await.context("checking the database schema")?;
    anyhow::ensure!(current, "the database schema is not at this build's: run `paceline migrate` first");
    let store = Store::new(pool, &config.media_store).map_err(anyhow::Error::msg)?;
    let left = migrate::left(&store).await?;
    let gib = |b: u64| b as f64 / (1024.0 * 1024.0 * 1024.0);
    println!("{} media ({:.3} GiB) in Postgres to copy to the bucket", left.media, gib(left.bytes));
    if dry_run || left.media == 0 {
        return Ok(());
    }
    store.objects().expect("checked above").reachable().await.context("the bucket does not answer")?;
    let bar = indicatif::ProgressBar::new(left.bytes).with_style(
        indicatif::ProgressStyle::with_template(
            "{bar:40} {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta} {msg}",
        )
        .expect("a valid template"),
    );
    let (mut moved, mut gone, mut mismatched, mut after) = (0u64, 0u64, 0u64, None);
    'pages: loop {
        let rows = migrate::next(&store, after.as_ref(), PAGE).await?;
        let Some(last) = rows.last() else { break };
        after = Some(last.id.clone());
        for row in &rows {
            if stop.is_cancelled() {
                break 'pages;
            }
            match migrate::move_one(&store, row).await.with_context(|| format!("copying media {}", row.id))? {
                migrate::Moved::Done => moved += 1,
                migrate::Moved::Gone => gone += 1,
                migrate::Moved::Mismatch(why) => {
                    mismatched += 1;
                    bar.suspend(|| eprintln!("media {} stays in Postgres: {why}", row.id));
                }
            }
            bar.inc(row.size.max(0) as u64);
            bar.set_message(format!("{moved} moved"));
            if bar.is_hidden() && (moved + gone + mismatched) % 1000 == 0 {
                eprintln!("{moved} moved, {} of {} bytes", bar.position(), left.bytes);
            }
        }
    }
    bar.finish_and_clear();
    // Interrupted: what moved stays moved; it exits non-zero, since media is left.
    anyhow::ensure!(
        !stop.is_cancelled(),
        "stopped: {moved} media moved to the bucket so far; run the command again to go on"
    );
    println!("{moved} media moved to the bucket, {gone} gone meanwhile, {mismatched} left in Postgres (copies that did not match)");
    anyhow::ensure!(mismatched == 0, "{mismatched} media did not copy cleanly; run again to retry them");
    Ok(())
}

//! Runs delivery attempts with endpoints isolated from each other, and writes outcomes.
//!
//! Every endpoint URL has its own queue and its own task, which runs up to
//! `webhooks.endpoint_concurrency` attempts at once: an endpoint that hangs fills only its
//! own slots, so others' deliveries never wait behind it. Outcomes go to one writer that
//! records them in batches (one transaction per batch).
//!
//! A job is only attempted while its claim has time left for a whole attempt; a job that
//! waited too long in a busy endpoint's queue is put back unattempted, and one whose
//! endpoint's queue is full too. Either way its claim is released so the retry scanner
//! (here or on another pod) picks it up again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures::StreamExt;
use shared::db::deliveries::DeliveryState;
use shared::db::deliveries::{self, Outcome};
use shared::fetch::{FetchError, GuardedClient};
use shared::ids::{DeliveryId, WebhookId};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::attempt::{next_state, Answer, RetryPolicy};
use crate::metrics as m;
use crate::shape::{self, Body, Budget};
use crate::signing;

/// Jobs waiting per endpoint; beyond it new ones are put back for later.
const ENDPOINT_QUEUE: usize = 4096;
/// Outcomes waiting for the writer, and the most it writes in one transaction.
const RESULTS_QUEUE: usize = 20_000;
const WRITE_BATCH: usize = 1000;
/// A rotated-out secret keeps signing (next to the new one) this long.
pub const PREVIOUS_SECRET_GRACE: chrono::Duration = chrono::Duration::hours(24);

/// One attempt to make.
#[derive(Debug, Clone)]
pub struct Job {
    pub id: DeliveryId,
    /// The claim this attempt runs under (its outcome applies only under it).
    pub claim_id: String,
    pub webhook_id: WebhookId,
    pub event_id: String,
    /// Where it goes (the endpoint's queue is this URL's).
    pub url: String,
    /// The current secret, then the previous one while it is in its grace period.
    pub secrets: Vec<String>,
    /// Built when the attempt starts, when it is not ready already.
    pub body: Body,
    /// Attempts made before this one.
    pub attempts: i32,
    pub retry_until: DateTime<Utc>,
    /// When the event was created (for the delivery lag of first attempts).
    pub event_created: Option<DateTime<Utc>>,
    pub claimed_at: Instant,
}

/// The secrets that sign an endpoint's deliveries now.
pub fn secrets_of(secret: String, previous: Option<String>, rotated_at: Option<DateTime<Utc>>) -> Vec<String> {
    let mut v = vec![secret];
    if let (Some(p), Some(at)) = (previous, rotated_at) {
        if Utc::now() - at < PREVIOUS_SECRET_GRACE {
            v.push(p);
        }
    }
    v
}

/// Settings of the executor (from the config).
#[derive(Debug, Clone)]
pub struct Settings {
    pub worker_id: String,
    pub timeout: Duration,
    /// How long a claim lasts: longer than any attempt.
    pub lock: Duration,
    pub concurrency: usize,
    pub policy: RetryPolicy,
    pub allow_private: bool,
    pub disable_failures: u32,
    pub disable_after: Duration,
    pub retry_span: Duration,
    /// Where the API is reached (`public_url`, else the listen address): Evolution-format
    /// payloads say it as `server_url`.
    pub server_url: String,
    /// Bytes of built bodies held by attempts in flight (`webhooks.body_bytes_in_flight`).
    pub body_bytes: u64,
}

impl Settings {
    pub fn from_config(config: &shared::Config, worker_id: String) -> Settings {
        let timeout = config.webhooks.timeout;
        Settings {
            worker_id,
            timeout,
            lock: timeout * 3 + Duration::from_secs(30),
            concurrency: config.webhooks.endpoint_concurrency,
            policy: RetryPolicy { base: config.webhooks.retry_base, max: config.webhooks.retry_max },
            allow_private: config.allow_private_targets,
            disable_failures: config.webhooks.disable_after_failures,
            disable_after: config.webhooks.disable_after,
            retry_span: config.webhooks.retry_span,
            server_url: config.server_url(),
            body_bytes: config.webhooks.body_bytes_in_flight,
        }
    }
}

#[derive(Clone)]
pub struct Executor(Arc<Inner>);

struct Inner {
    settings: Settings,
    /// Media bytes an Evolution payload carries as base64.
    media: shared::db::media::Store,
    budget: Budget,
    client: GuardedClient,
    endpoints: Mutex<HashMap<String, mpsc::Sender<Job>>>,
    results: mpsc::Sender<Outcome>,
    tasks: TaskTracker,
    /// Cancelled when in-flight attempts must stop (end of the shutdown grace).
    stop: CancellationToken,
}

/// The outcome writer's handle: finish it after the executor stopped.
pub struct Writer {
    task: tokio::task::JoinHandle<()>,
    done: CancellationToken,
}

impl Writer {
    /// Writes what is left and stops.
    pub async fn finish(self) {
        self.done.cancel();
        let _ = self.task.await;
    }
}

impl Executor {
    pub fn start(media: shared::db::media::Store, settings: Settings) -> (Executor, Writer) {
        let db = media.db.clone();
        let (tx, rx) = mpsc::channel(RESULTS_QUEUE);
        let done = CancellationToken::new();
        let task = tokio::spawn(write_outcomes(db.clone(), settings.clone(), rx, done.clone()));
        let client = GuardedClient::without_redirects(settings.allow_private, settings.timeout);
        let exec = Executor(Arc::new(Inner {
            budget: Budget::new(settings.body_bytes),
            settings,
            media,
            client,
            endpoints: Mutex::new(HashMap::new()),
            results: tx,
            tasks: TaskTracker::new(),
            stop: CancellationToken::new(),
        }));
        (exec, Writer { task, done })
    }

    pub fn settings(&self) -> &Settings {
        &self.0.settings
    }

    /// Queues a job on its endpoint (starting the endpoint's task on first use); a full
    /// queue puts it back for later.
    pub async fn submit(&self, job: Job) {
        let tx = {
            let mut map = self.0.endpoints.lock().expect("endpoint map");
            map.entry(job.url.clone()).or_insert_with(|| self.spawn_endpoint()).clone()
        };
        if let Err(e) = tx.try_send(job) {
            let job = match e {
                mpsc::error::TrySendError::Full(j) | mpsc::error::TrySendError::Closed(j) => j,
            };
            self.put_back(&job).await;
        }
    }

    fn spawn_endpoint(&self) -> mpsc::Sender<Job> {
        let (tx, mut rx) = mpsc::channel::<Job>(ENDPOINT_QUEUE);
        let me = self.clone();
        let stop = self.0.stop.clone();
        self.0.tasks.spawn(async move {
            let jobs = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
            let run = jobs.for_each_concurrent(me.0.settings.concurrency, |job| {
                let me = me.clone();
                async move { me.attempt(job).await }
            });
            tokio::select! {
                _ = run => {}
                _ = stop.cancelled() => {}
            }
        });
        tx
    }

    /// Releases a job's claim without an attempt; it comes due again after a while.
    async fn put_back(&self, job: &Job) {
        metrics::counter!(m::DEFERRED).increment(1);
        let later = Utc::now()
            + chrono::Duration::from_std(self.0.settings.timeout.max(Duration::from_secs(5))).expect("small");
        let outcome = Outcome {
            id: job.id.clone(),
            claim_id: job.claim_id.clone(),
            webhook_id: job.webhook_id.clone(),
            state: DeliveryState::Pending,
            attempted: false,
            response_status: None,
            latency_ms: None,
            error: None,
            next_attempt_at: Some(later),
            gone: false,
            logged: None,
            request_excerpt: None,
        };
        let _ = self.0.results.send(outcome).await;
    }

    async fn attempt(&self, job: Job) {
        let s = &self.0.settings;
        // An attempt must start while the claim has time left for a whole one: another
        // pod may take it over mid-attempt, so it is handed back instead.
        let Some(latest_start) = (job.claimed_at + s.lock).checked_sub(s.timeout + Duration::from_secs(5)) else {
            return self.put_back(&job).await;
        };
        if Instant::now() > latest_start {
            return self.put_back(&job).await;
        }
        // The body is built now, not while the job waited; one with media waits for room
        // in the pod's body budget, at most until the attempt must start.
        let built = match &job.body {
            Body::Ready(b) => shape::Built { bytes: b.clone(), _held: None },
            Body::Evolution { envelope, origin, hook_url } => {
                let by = tokio::time::Instant::from_std(latest_start);
                match shape::build(&self.0.media, &s.server_url, hook_url, origin, envelope, &self.0.budget, by).await {
                    Ok(b) if Instant::now() <= latest_start => b,
                    _ => return self.put_back(&job).await,
                }
            }
        };
        let now = Utc::now();
        let ts = now.timestamp();
        let secrets: Vec<&str> = job.secrets.iter().map(String::as_str).collect();
        let Some(signature) = signing::signature_header(&secrets, &job.event_id, ts, &built.bytes) else {
            tracing::error!(webhook = %job.webhook_id, "the webhook's secret is malformed; not delivering");
            let answer = Answer::NoAnswer("the webhook secret is malformed".into());
            return self.finish(&job, answer, Sent::nothing(now), None).await;
        };
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(reqwest::header::CONTENT_TYPE, reqwest::header::HeaderValue::from_static("application/json"));
        let mut put = |k: &'static str, v: &str| {
            if let Ok(v) = reqwest::header::HeaderValue::from_str(v) {
                headers.insert(k, v);
            }
        };
        put("webhook-id", &job.event_id);
        put("webhook-timestamp", &ts.to_string());
        put("webhook-signature", &signature);
        let sent = Sent::new(now, &job.url, &built.bytes);
        let started = Instant::now();
        let (answer, head) = match url::Url::parse(&job.url) {
            Err(_) => (Answer::NoAnswer("the URL is invalid".into()), None),
            Ok(url) => match self.0.client.post(&url, headers, built.bytes.clone(), deliveries::RESPONSE_EXCERPT).await
            {
                Ok(p) => (Answer::of(p.status, p.retry_after.as_deref(), Utc::now()), Some(p.head)),
                Err(FetchError::Refused) => {
                    (Answer::NoAnswer("the URL resolves to a private or local address".into()), None)
                }
                Err(FetchError::Failed(kind)) => (Answer::NoAnswer(kind), None),
                Err(FetchError::TooLarge) => (Answer::NoAnswer("request failed".into()), None),
            },
        };
        let latency = started.elapsed();
        drop(built);
        metrics::histogram!(m::ATTEMPT_SECONDS).record(latency.as_secs_f64());
        self.finish(&job, answer, sent, Some((latency, head))).await;
    }

    /// Records an attempt's outcome: `answered` is how long it took and the start of the
    /// endpoint's answer (none when no request was made).
    async fn finish(&self, job: &Job, answer: Answer, sent: Sent, answered: Option<(Duration, Option<Vec<u8>>)>) {
        let (latency, head) = match answered {
            Some((l, h)) => (Some(l), h),
            None => (None, None),
        };
        let s = &self.0.settings;
        let now = Utc::now();
        let attempts = job.attempts + 1;
        let (state, next) = next_state(&answer, attempts, job.retry_until, &s.policy, now, &mut rand::thread_rng());
        metrics::counter!(m::ATTEMPTS, "result" => answer.label()).increment(1);
        if state == DeliveryState::Succeeded && job.attempts == 0 {
            if let Some(created) = job.event_created {
                metrics::histogram!(m::LAG_SECONDS).record((now - created).num_milliseconds().max(0) as f64 / 1000.0);
            }
        }
        let error = match &answer {
            Answer::Accepted(_) => None,
            Answer::Gone => Some("the endpoint answered 410 Gone".to_string()),
            Answer::Refused { status, .. } => Some(format!("the endpoint answered {status}")),
            Answer::NoAnswer(why) => Some(why.clone()),
        };
        let outcome = Outcome {
            id: job.id.clone(),
            claim_id: job.claim_id.clone(),
            webhook_id: job.webhook_id.clone(),
            state,
            attempted: true,
            response_status: answer.status().map(i32::from),
            latency_ms: latency.map(|l| l.as_millis().min(i32::MAX as u128) as i32),
            error: error.clone(),
            next_attempt_at: next,
            gone: answer == Answer::Gone,
            logged: Some(deliveries::Attempt {
                at: sent.at,
                url: domain::instances::hide_credentials(&job.url),
                status: answer.status().map(i32::from),
                latency_ms: latency.map(|l| l.as_millis().min(i32::MAX as u128) as i32),
                error,
                request_bytes: sent.bytes,
                response: head.map(|h| deliveries::excerpt(&h, deliveries::RESPONSE_EXCERPT)).filter(|r| !r.is_empty()),
            }),
            request_excerpt: sent.excerpt,
        };
        let _ = self.0.results.send(outcome).await;
    }

    /// Forgets endpoints with nothing queued: their tasks end once their last attempts
    /// finish (an endpoint comes back with its next job). Keeps the map from growing with
    /// every URL ever seen.
    pub fn prune_idle(&self) {
        self.0.endpoints.lock().expect("endpoint map").retain(|_, tx| tx.capacity() < ENDPOINT_QUEUE);
    }

    /// Stops taking jobs, lets attempts in flight finish within `grace`, then stops them.
    pub async fn close(&self, grace: Duration) {
        self.0.endpoints.lock().expect("endpoint map").clear();
        self.0.tasks.close();
        if tokio::time::timeout(grace, self.0.tasks.wait()).await.is_err() {
            self.0.stop.cancel();
            self.0.tasks.wait().await;
        }
    }
}

/// What an attempt sent, as its delivery's log keeps it.
struct Sent {
    at: DateTime<Utc>,
    bytes: u64,
    /// The body's start, the URL's credentials hidden (an Evolution payload names its
    /// destination); none when nothing was sent.
    excerpt: Option<String>,
}

impl Sent {
    fn new(at: DateTime<Utc>, url: &str, body: &[u8]) -> Sent {
        let excerpt = hide_user_info(deliveries::excerpt(body, deliveries::REQUEST_EXCERPT), url);
        Sent { at, bytes: body.len() as u64, excerpt: Some(excerpt) }
    }

    fn nothing(at: DateTime<Utc>) -> Sent {
        Sent { at, bytes: 0, excerpt: None }
    }
}

/// `text` with the user info of `url` (`user:password@`), wherever it appears, as `***@`;
/// a start of it cut off at the end of `text` goes too.
fn hide_user_info(mut text: String, url: &str) -> String {
    let Ok(u) = url::Url::parse(url) else { return text };
    let info = &u[url::Position::BeforeUsername..url::Position::BeforeHost];
    if info.is_empty() {
        return text;
    }
    text = text.replace(info, "***@");
    for cut in (1..info.len()).rev() {
        if info.is_char_boundary(cut) && text.ends_with(&info[..cut]) {
            text.truncate(text.len() - cut);
            break;
        }
    }
    text
}

/// Writes outcomes in batches until `done`, then what is left.
async fn write_outcomes(db: sqlx::PgPool, s: Settings, mut rx: mpsc::Receiver<Outcome>, done: CancellationToken) {
    let mut buf = Vec::with_capacity(WRITE_BATCH);
    loop {
        tokio::select! {
            biased;
            n = rx.recv_many(&mut buf, WRITE_BATCH) => if n == 0 { return },
            _ = done.cancelled() => {
                while let Ok(o) = rx.try_recv() {
                    buf.push(o);
                }
                write_batch(&db, &s, &buf).await;
                return;
            }
        }
        write_batch(&db, &s, &buf).await;
        buf.clear();
    }
}

async fn write_batch(db: &sqlx::PgPool, s: &Settings, batch: &[Outcome]) {
    if batch.is_empty() {
        return;
    }
    for pause in [Duration::from_millis(100), Duration::from_millis(500), Duration::from_secs(2), Duration::ZERO] {
        match deliveries::record(db, &s.worker_id, batch, s.disable_failures, s.disable_after).await {
            Ok(disabled) => {
                for (hook, _, reason) in &disabled.webhooks {
                    tracing::warn!(webhook = %hook, %reason, "webhook endpoint disabled");
                }
                return;
            }
            Err(e) if pause > Duration::ZERO => {
                tracing::warn!(error = %e, "recording delivery outcomes failed; retrying");
                tokio::time::sleep(pause).await;
            }
            Err(e) => {
                // The claims lapse and the deliveries are attempted again: at least once.
                tracing::error!(error = %e, n = batch.len(), "recording delivery outcomes failed; they will be retried");
            }
        }
    }
}

#[cfg(test)]
mod hide_tests {
    use super::hide_user_info;

    #[test]
    fn a_url_s_credentials_never_reach_the_log() {
        let url = "https://shop:s3cret@hooks.example.com/in";
        let body = r#"{"destination":"https://shop:s3cret@hooks.example.com/in","x":1}"#.to_string();
        assert_eq!(hide_user_info(body, url), r#"{"destination":"https://***@hooks.example.com/in","x":1}"#);
        assert_eq!(hide_user_info("tail https://shop:s3c".into(), url), "tail https://", "cut at the end");
        assert_eq!(hide_user_info("plain".into(), "https://hooks.example.com/in"), "plain");
    }
}

//! The AI attendant (interface.md 4.12): answers each instance's chats through a
//! language model or a bot, hands over to a human, and never answers twice.
//!
//! It runs as its own role, `paceline attendant` (also inside `paceline dev`): provider
//! calls take seconds and reach tenants' servers, so they get their own pods, scaled and
//! restarted apart from the API and from webhook deliveries, while using the API's own
//! send path in-process. Any number of pods share one durable JetStream consumer of
//! `message.received`, so each event goes to one pod; a Redis lock lets one pod at a time
//! answer an instance, and its messages in order. A reply is queued through
//! `domain::send::queue` like `POST {inst}/messages` (paced, logged, evented) with
//! `client_message_id` = `attendant-<received message id>`, so a redelivered event, a
//! retry or a second pod finds it queued already; `attendant_replies` records it once,
//! with its `attendant.replied` event and usage. The JetStream message is acked only
//! once it is handled, so a pod that dies mid-answer leaves it to another.

pub mod decide;
pub mod provider;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use async_nats::jetstream::{self, consumer::pull, AckKind};
use chrono::Utc;
use deadpool_redis::redis::{self, Script};
use futures::StreamExt;
use serde_json::json;
use shared::db::{attendants, instances, log, media, messages as queue_rows, outbox};
use shared::events::{
    AttendantFailedEventData, AttendantHandoffEventData, AttendantRepliedEventData, AttendantTokens, Event,
};
use shared::fetch::GuardedClient;
use shared::ids::InstanceId;
use shared::sealed::Sealer;
use shared::window::SendWindow;
use shared::{ApiError, Config, ErrorCode, Shutdown};

use domain::attendant::{self as config, Stored};
use domain::message_in::MessageIn;
use domain::Core;

use self::decide::{Decision, Inbound};

/// The durable consumer every attendant pod shares.
pub const CONSUMER: &str = "attendant";
pub const REPLIES: &str = "paceline_attendant_replies_total";
pub const FAILURES: &str = "paceline_attendant_failures_total";
pub const SKIPPED: &str = "paceline_attendant_skipped_total";
pub const HANDOFFS: &str = "paceline_attendant_handoffs_total";
pub const PROVIDER_SECONDS: &str = "paceline_attendant_provider_seconds";
pub const TOKENS: &str = "paceline_attendant_tokens_total";

/// Instances answered at once by one pod.
const CONCURRENCY: usize = 64;
/// The longest one NATS call may take.
const NATS_CALL: Duration = Duration::from_secs(10);
/// How long an instance's lock is held at most (longer than the longest reply timeout).
const LOCK_TTL: Duration = Duration::from_secs(330);
/// The longest `reply_timeout_seconds`.
const MAX_REPLY_TIMEOUT: Duration = Duration::from_secs(300);
/// How long a reply may wait in the queue before it expires.
const REPLY_EXPIRES: &str = "1h";

pub fn describe() {
    metrics::describe_counter!(REPLIES, "replies the attendant queued, by provider kind");
    metrics::describe_counter!(FAILURES, "messages the attendant could not answer, by reason");
    metrics::describe_counter!(SKIPPED, "received messages the attendant did not answer, by reason");
    metrics::describe_counter!(HANDOFFS, "chats handed to a human, by reason (human_reply, keyword)");
    metrics::describe_histogram!(
        PROVIDER_SECONDS,
        metrics::Unit::Seconds,
        "time for the provider to answer, retries included, by provider kind"
    );
    metrics::describe_counter!(TOKENS, "tokens the providers reported, by kind (prompt, completion)");
}

/// The client for `message.received` data: the client's message id for the reply.
pub fn reply_client_id(inbound: &str) -> String {
    format!("attendant-{inbound}")
}

/// Runs the attendant role until `shutdown`.
pub async fn run(config: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    describe();
    let sealer = Sealer::from_config(&config).context("the attendant needs secrets_key or admin_token")?;
    let state = Core::connect(config, &shutdown, shared::config::Role::Attendant, "attendant").await?;
    let a = Arc::new(Attendant {
        sealer,
        public: GuardedClient::new(state.config.allow_private_targets, LOCK_TTL),
        private: GuardedClient::new(true, LOCK_TTL),
        lanes: Default::default(),
        slots: Arc::new(tokio::sync::Semaphore::new(CONCURRENCY)),
        state,
    });
    shared::health::register(
        "attendant",
        vec![
            shared::health::postgres(a.state.db.clone()),
            shared::health::redis(a.state.redis.clone()),
            shared::health::nats(a.state.nats.clone()),
        ],
    );
    let mut failures = 0u32;
    let mut tasks = tokio::task::JoinSet::new();
    while !shutdown.is_cancelled() {
        match consume(&a, &shutdown, &mut tasks).await {
            Ok(()) => failures = 0,
            Err(e) => {
                failures += 1;
                tracing::warn!(error = %e, "attendant consumer failed; retrying");
                let wait =
                    shared::backoff::doubling(Duration::from_millis(200), failures, Duration::from_millis(6_400));
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tokio::time::sleep(wait) => {}
                }
            }
        }
    }
    // Answers in flight get a short grace; the rest are redelivered to another pod.
    let _ = tokio::time::timeout(Duration::from_secs(5), async { while tasks.join_next().await.is_some() {} }).await;
    tasks.abort_all();
    tracing::info!("attendant stopped");
    Ok(())
}

/// Opens the consumer and hands its messages to tasks until it fails or shutdown.
async fn consume(a: &Arc<Attendant>, shutdown: &Shutdown, tasks: &mut tokio::task::JoinSet<()>) -> anyhow::Result<()> {
    let subjects = &a.state.subjects;
    let config = pull::Config {
        durable_name: Some(CONSUMER.to_string()),
        filter_subject: subjects.events_filter(None, Some("message.received")),
        // Created by the first pod: from as far back as a reply may still be due
        // (older messages are past their reply timeout and skipped).
        deliver_policy: jetstream::consumer::DeliverPolicy::ByStartTime {
            start_time: time::OffsetDateTime::now_utc() - MAX_REPLY_TIMEOUT,
        },
        ack_policy: jetstream::consumer::AckPolicy::Explicit,
        ack_wait: LOCK_TTL + Duration::from_secs(30),
        max_ack_pending: 1_000,
        ..Default::default()
    };
    let consumer =
        shared::bus::events_consumer(&a.state.nats, subjects, config, NATS_CALL).await.map_err(anyhow::Error::msg)?;
    let mut msgs = consumer.messages().await.context("pulling")?;
    loop {
        let next = tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            // A lost pull shows as missed heartbeats: async-nats yields an error after two
            // idle heartbeats (30 s) without one. (A quiet stream is not a lost pull: a
            // timeout on messages alone reopened the consumer every idle minute.)
            m = msgs.next() => m,
        };
        let msg = match next {
            None => anyhow::bail!("the pull ended"),
            Some(Err(e)) => anyhow::bail!("pulling: {e}"),
            Some(Ok(m)) => m,
        };
        while tasks.try_join_next().is_some() {}
        let a = a.clone();
        tasks.spawn(async move { a.handle(msg).await });
    }
}

struct Attendant {
    state: Core,
    sealer: Sealer,
    /// Clients for providers on public addresses, and for those an admin allowed private.
    public: GuardedClient,
    private: GuardedClient,
    /// One lane per instance on this pod, so its messages are answered in order.
    lanes: Mutex<HashMap<InstanceId, Arc<tokio::sync::Mutex<()>>>>,
    /// Instances answered at once.
    slots: Arc<tokio::sync::Semaphore>,
}

/// How handling a message ended.
enum Outcome {
    /// Done (answered, skipped or failed for good): ack.
    Done,
    /// Another pod is answering this instance: redeliver later.
    Busy,
}

impl Attendant {
    async fn handle(&self, msg: jetstream::Message) {
        let parsed = serde_json::from_slice::<serde_json::Value>(&msg.payload).ok().and_then(|v| {
            let id = InstanceId::parse(v.get("instance_id")?.as_str()?).ok()?;
            let data: Inbound = serde_json::from_value(v.get("data")?.clone()).ok()?;
            let wa = v.pointer("/data/wa_message_id").and_then(|w| w.as_str()).unwrap_or_default().to_string();
            Some((id, data, wa))
        });
        let Some((id, m, wa_id)) = parsed else {
            let _ = msg.ack_with(AckKind::Term).await;
            return;
        };
        let lane = {
            let mut lanes = self.lanes.lock().expect("lanes lock");
            lanes.retain(|_, l| Arc::strong_count(l) > 1);
            lanes.entry(id.clone()).or_default().clone()
        };
        let outcome = {
            let _in_order = lane.lock().await;
            let Ok(_slot) = self.slots.acquire().await else { return };
            match self.locked(&id, &m, &wa_id).await {
                Ok(o) => o,
                Err(e) => {
                    // Postgres, Redis or NATS failed: try again later, on any pod.
                    tracing::warn!(instance = %id, error = %e, "attendant could not handle a message; retrying");
                    Outcome::Busy
                }
            }
        };
        let _ = match outcome {
            Outcome::Done => msg.ack().await,
            Outcome::Busy => msg.ack_with(AckKind::Nak(Some(Duration::from_secs(2)))).await,
        };
    }

    /// Takes the instance's cluster-wide lock, handles the message, releases it.
    async fn locked(&self, id: &InstanceId, m: &Inbound, wa_id: &str) -> Result<Outcome, ApiError> {
        let key = self.state.keys.attendant_lock(id);
        let token = uuid::Uuid::now_v7().to_string();
        let mut conn = self.state.redis.get().await?;
        let got: Option<String> = redis::cmd("SET")
            .arg(&key)
            .arg(&token)
            .arg("NX")
            .arg("PX")
            .arg(LOCK_TTL.as_millis() as u64)
            .query_async(&mut conn)
            .await?;
        drop(conn);
        if got.is_none() {
            return Ok(Outcome::Busy);
        }
        let res = self.answer(id, m, wa_id).await;
        if let Ok(mut conn) = self.state.redis.get().await {
            let release = Script::new(
                "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end",
            );
            let _: Result<i64, _> = release.key(&key).arg(&token).invoke_async(&mut conn).await;
        }
        res
    }

    /// Puts the transcriptions of the conversation's voice and audio messages into their
    /// content: those made before, and the received message's, made now (once).
    async fn transcriptions(
        &self,
        id: &InstanceId,
        call: &provider::Call<'_>,
        model: &str,
        m: &Inbound,
        history: &mut [log::LogRow],
    ) -> Result<(), ApiError> {
        let audio = |k: &str| matches!(k, "audio" | "voice");
        let ids: Vec<String> = history.iter().filter(|r| audio(&r.kind)).map(|r| r.id.to_string()).collect();
        if ids.is_empty() {
            return Ok(());
        }
        let mut known = attendants::transcripts(&self.state.db, id, &ids).await?;
        if audio(&m.kind) && !known.contains_key(&m.message_id) {
            if let Some(text) = self.transcribe(id, call, model, m).await? {
                attendants::save_transcript(&self.state.db, id, &m.message_id, &text).await?;
                known.insert(m.message_id.clone(), text);
            }
        }
        for r in history.iter_mut() {
            if let (Some(t), Some(o)) = (known.get(r.id.as_str()), r.content.as_object_mut()) {
                o.insert("transcription".into(), json!(t));
            }
        }
        Ok(())
    }

    /// The received message's audio in words, if it is stored (at most 25 MiB, what
    /// transcription servers take) and the provider transcribes it.
    async fn transcribe(
        &self,
        id: &InstanceId,
        call: &provider::Call<'_>,
        model: &str,
        m: &Inbound,
    ) -> Result<Option<String>, ApiError> {
        const LIMIT: u64 = 25 * 1024 * 1024;
        let Some(media_id) =
            m.content.pointer("/media/id").and_then(|v| v.as_str()).and_then(|v| shared::ids::MediaId::parse(v).ok())
        else {
            return Ok(None);
        };
        let stored = matches!(media::meta(&self.state.db, &media_id).await?, Some(media::Meta::Stored { size, .. }) if size <= LIMIT);
        let row = if stored { self.state.media.get(&media_id).await.map_err(ApiError::internal)? } else { None };
        let Some(row) = row else {
            return Ok(None);
        };
        if row.instance_id != *id {
            return Ok(None);
        }
        let name = row.filename.clone().unwrap_or_else(|| "audio".into());
        match call.transcribe(model, row.data, &row.mime_type, &name).await {
            Ok(t) => Ok(Some(t)),
            Err(e) => {
                metrics::counter!(FAILURES, "reason" => "transcription").increment(1);
                tracing::info!(instance = %id, message = %m.message_id, reason = e.reason, detail = %e.detail, "a transcription failed");
                Ok(None)
            }
        }
    }

    /// What the instance's budget has no room for now (replies or tokens, in the last
    /// hour or day), if anything.
    async fn over_budget(&self, id: &InstanceId, b: &config::Budget) -> Result<Option<&'static str>, ApiError> {
        let now = Utc::now();
        let (hour_replies, hour_tokens) =
            attendants::spent_since(&self.state.db, id, now - chrono::Duration::hours(1)).await?;
        let (day_replies, day_tokens) =
            attendants::spent_since(&self.state.db, id, now - chrono::Duration::days(1)).await?;
        let over = [
            (hour_replies >= i64::from(b.replies_per_hour), "budget.replies_per_hour reached"),
            (day_replies >= i64::from(b.replies_per_day), "budget.replies_per_day reached"),
            (hour_tokens >= b.tokens_per_hour as i64, "budget.tokens_per_hour reached"),
            (day_tokens >= b.tokens_per_day as i64, "budget.tokens_per_day reached"),
        ];
        Ok(over.into_iter().find_map(|(is, what)| is.then_some(what)))
    }

    /// Shows or clears the typing indicator; best effort, within a few seconds.
    async fn typing(&self, id: &InstanceId, chat: &str, composing: bool) {
        let Ok(jid) = shared::jid::Jid::parse(chat) else { return };
        let ctx = domain::Ctx::new(&self.state, id, domain::Caller::Owner);
        let shown = tokio::time::timeout(Duration::from_secs(3), domain::chats::typing(ctx, jid, composing));
        if !matches!(shown.await, Ok(Ok(()))) {
            tracing::debug!(instance = %id, "the typing indicator could not be changed");
        }
    }

    async fn event(&self, id: &InstanceId, event: Event) -> Result<(), ApiError> {
        outbox::insert(&self.state.db, id, &event).await?;
        Ok(())
    }

    async fn failed(&self, id: &InstanceId, m: &Inbound, reason: &str, detail: &str) -> Result<Outcome, ApiError> {
        metrics::counter!(FAILURES, "reason" => reason.to_string()).increment(1);
        tracing::info!(instance = %id, message = %m.message_id, reason, "the attendant could not answer");
        let data = AttendantFailedEventData {
            chat_jid: m.chat_jid.clone(),
            message_id: message_id(&m.message_id)?,
            reason: reason.into(),
            detail: detail.into(),
        };
        self.event(id, Event::AttendantFailed(data)).await?;
        Ok(Outcome::Done)
    }

    fn skipped(&self, id: &InstanceId, m: &Inbound, reason: &'static str) -> Result<Outcome, ApiError> {
        metrics::counter!(SKIPPED, "reason" => reason).increment(1);
        tracing::debug!(instance = %id, message = %m.message_id, reason, "the attendant does not answer");
        Ok(Outcome::Done)
    }

    async fn handoff(
        &self,
        id: &InstanceId,
        c: &config::AttendantIn,
        m: &Inbound,
        reason: &str,
    ) -> Result<Outcome, ApiError> {
        let until = Utc::now() + chrono::Duration::minutes(i64::from(c.handoff.pause_minutes));
        let new = attendants::pause(&self.state.db, id, &m.chat_jid, until, reason).await?;
        if new {
            metrics::counter!(HANDOFFS, "reason" => reason.to_string()).increment(1);
            let data = AttendantHandoffEventData {
                chat_jid: m.chat_jid.clone(),
                message_id: message_id(&m.message_id)?,
                reason: reason.into(),
                until,
            };
            self.event(id, Event::AttendantHandoff(data)).await?;
        }
        Ok(Outcome::Done)
    }

    async fn answer(&self, id: &InstanceId, m: &Inbound, wa_id: &str) -> Result<Outcome, ApiError> {
        let state = &self.state;
        let Some(row) = attendants::get(&state.db, id).await? else { return self.skipped(id, m, "none") };
        let stored = match Stored::open(row, id, &self.sealer) {
            Ok(s) => s,
            Err(_) => {
                return self.failed(id, m, "bad_config", "the stored configuration or secret cannot be read").await
            }
        };
        let c = &stored.config;
        let Some(inst) = instances::get(&state.db, id).await? else { return self.skipped(id, m, "none") };
        let own = inst.phone.as_deref().map(|p| shared::jid::number_of(p).trim_start_matches('+'));
        // In a group, a reply to one of the account's messages calls for an answer.
        let replied_to_own = match decide::reply_to(m) {
            Some(q) if shared::jid::is_group_jid(&m.chat_jid) => {
                log::own_message_source(&state.db, id, q).await?.is_some()
            }
            _ => false,
        };
        match decide::decide(c, own, replied_to_own, m) {
            Decision::Ignore(why) => return self.skipped(id, m, why),
            Decision::HumanReply => {
                if log::own_message_source(&state.db, id, wa_id).await?.as_deref() == Some("queue") {
                    return self.skipped(id, m, "own_send");
                }
                return self.handoff(id, c, m, "human_reply").await;
            }
            Decision::Handoff => return self.handoff(id, c, m, "keyword").await,
            Decision::Answer => {}
        }
        let timeout = chrono::Duration::seconds(i64::from(c.reply_timeout_seconds));
        let deadline = m.timestamp + timeout;
        let left = (deadline - Utc::now()).to_std().unwrap_or_default();
        if left.is_zero() {
            return self.skipped(id, m, "stale");
        }
        if attendants::paused_until(&state.db, id, &m.chat_jid).await?.is_some() {
            return self.skipped(id, m, "paused");
        }
        if attendants::answered(&state.db, id, &m.message_id).await? {
            return self.skipped(id, m, "answered");
        }
        let client_id = reply_client_id(&m.message_id);
        if let Some(q) = queue_rows::by_client_id(&state.db, id, &client_id).await? {
            // Queued by a pod that stopped before recording it: record it now.
            self.record(id, c, m, q.id.as_str(), &provider::Answer::default()).await?;
            return Ok(Outcome::Done);
        }
        let window = SendWindow::of(inst.send_window_start, inst.send_window_end, &inst.time_zone);
        if window.is_some_and(|w| !w.is_open(Utc::now())) {
            return self.failed(id, m, "outside_send_window", "the instance's send window is closed").await;
        }
        let hour_ago = Utc::now() - chrono::Duration::hours(1);
        if attendants::replies_since(&state.db, id, &m.chat_jid, hour_ago).await?
            >= i64::from(c.max_replies_per_chat_per_hour)
        {
            return self.failed(id, m, "reply_limit", "max_replies_per_chat_per_hour reached in this chat").await;
        }
        if let Some(what) = self.over_budget(id, &c.budget).await? {
            return self.failed(id, m, "budget", what).await;
        }
        let kind = c.provider.kind();
        let allow_private = stored.allow_private() || state.config.allow_private_targets;
        let call = provider::Call {
            provider: &c.provider,
            secret: stored.secret.as_deref(),
            client: if allow_private { &self.private } else { &self.public },
            deadline: tokio::time::Instant::now() + left,
        };
        let loop_n = c.handoff.loop_messages as usize;
        let read = (c.memory_messages as usize + 1).max(if loop_n > 0 { loop_n.max(2) + 1 } else { 0 });
        let mut history = log::messages(&state.db, id, &m.chat_jid, None, read as i64).await?;
        if loop_n > 0 {
            let mine: Vec<&str> = history.iter().filter(|r| r.from_me).map(|r| r.id.as_str()).collect();
            let ours = attendants::replies_among(&state.db, id, &mine).await?;
            if decide::bot_loop(&history, loop_n, &ours) {
                return self.handoff(id, c, m, "bot_loop").await;
            }
        }
        history.truncate(c.memory_messages as usize + 1);
        if let config::ProviderIn::Openai(config::OpenAiIn { transcription_model: Some(model), .. }) = &c.provider {
            self.transcriptions(id, &call, model, m, &mut history).await?;
        }
        let turns = decide::conversation(&c.system_prompt, &history);
        if !decide::keywords_met(c, &turns) {
            return self.skipped(id, m, "no_keyword");
        }
        tracing::debug!(instance = %id, message = %m.message_id, provider = kind, turns = turns.len(), "asking the provider");
        // The contact sees the account typing while the provider thinks and the reply
        // waits in the queue; the reply itself ends it.
        self.typing(id, &m.chat_jid, true).await;
        let started = std::time::Instant::now();
        let asked = call.ask(id.as_str(), m, &turns).await;
        metrics::histogram!(PROVIDER_SECONDS, "kind" => kind).record(started.elapsed().as_secs_f64());
        let answer = match asked {
            Ok(a) => a,
            Err(e) => {
                self.typing(id, &m.chat_jid, false).await;
                return self.failed(id, m, e.reason, &e.detail).await;
            }
        };
        metrics::counter!(TOKENS, "kind" => "prompt").increment(answer.prompt_tokens as u64);
        metrics::counter!(TOKENS, "kind" => "completion").increment(answer.completion_tokens as u64);
        let Some(text) = answer.text.clone() else {
            self.typing(id, &m.chat_jid, false).await;
            return self.skipped(id, m, "no_reply");
        };
        let body = MessageIn {
            text: Some(text),
            client_message_id: Some(client_id.clone()),
            expires_after: Some(REPLY_EXPIRES.into()),
            ..MessageIn::new(m.chat_jid.clone(), shared::message::MessageType::Text)
        };
        let queued =
            domain::send::queue(domain::Ctx::new(state, id, domain::Caller::Attendant), body, None, false).await;
        let queued = match queued.map_err(ApiError::from) {
            Ok((row, _)) => row.id,
            // Another pod queued a different answer to the same message first.
            Err(e) if e.code == ErrorCode::Conflict => match queue_rows::by_client_id(&state.db, id, &client_id).await?
            {
                Some(q) => q.id,
                None => return Err(e),
            },
            Err(e) if e.code == ErrorCode::Internal => return Err(e),
            Err(e) => return self.failed(id, m, "queue_refused", e.code.as_str()).await,
        };
        metrics::counter!(REPLIES, "kind" => kind).increment(1);
        tracing::debug!(instance = %id, message = %m.message_id, reply = %queued, "the attendant's reply is queued");
        self.record(id, c, m, queued.as_str(), &answer).await?;
        Ok(Outcome::Done)
    }

    async fn record(
        &self,
        id: &InstanceId,
        c: &config::AttendantIn,
        m: &Inbound,
        reply: &str,
        a: &provider::Answer,
    ) -> Result<(), ApiError> {
        let kind = c.provider.kind();
        let event = AttendantRepliedEventData {
            chat_jid: m.chat_jid.clone(),
            message_id: message_id(&m.message_id)?,
            reply_message_id: message_id(reply)?,
            provider: kind.into(),
            tokens: AttendantTokens { prompt: a.prompt_tokens, completion: a.completion_tokens },
        };
        attendants::record_reply(
            &self.state.db,
            id,
            attendants::Reply {
                inbound_id: &m.message_id,
                chat_jid: &m.chat_jid,
                message_id: reply,
                tokens: a.prompt_tokens + a.completion_tokens,
                event,
            },
        )
        .await?;
        Ok(())
    }
}

/// A message id of the local log or the queue, as events carry it.
fn message_id(s: &str) -> Result<shared::ids::MessageId, ApiError> {
    shared::ids::MessageId::parse(s).map_err(|_| ApiError::internal("a message id not of its form"))
}

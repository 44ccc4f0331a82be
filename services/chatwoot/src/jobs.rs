//! Doing one job: what it asks of Chatwoot (or of the paced queue), made once. Before a
//! job makes anything it looks for what an earlier try may have made (the chat's mapped
//! conversation; a message with its `source_id` in the conversation), so a try that
//! timed out after Chatwoot acted, or a pod killed mid-job, never makes a second copy.

use std::time::Duration;

use serde_json::{json, Value};
use shared::db::chatwoot::{self as rows, ChatRow, Job, Kind};
use shared::db::messages as queue_rows;
use shared::ids::{InstanceId, MediaId};
use shared::message::MessageType;
use shared::{ApiError, ErrorCode};

use domain::chatwoot::Stored;
use domain::message_in::{MediaIn, MessageIn};

use crate::client::{Attachment, Chatwoot, CwError, NewMessage};
use crate::render;
use crate::Bridge;

/// How long received media still downloading is waited for before the message goes
/// without it.
const MEDIA_WAIT: Duration = Duration::from_secs(600);
/// How long a sent message is waited for in the log before its queued row is read.
const SENT_WAIT: Duration = Duration::from_secs(30);
/// The most chats, and the most messages, one import brings.
const IMPORT_LIMIT: i64 = 10_000;
/// How long a queued send of an agent's message may wait.
const SEND_EXPIRES: &str = "24h";

/// What a try came to.
pub enum Step {
    Done,
    /// Try again after this wait (Chatwoot unavailable, or something not ready yet).
    Later(Duration, String),
    /// Give up (the job can never be done).
    Fail(String),
}

impl From<CwError> for Step {
    fn from(e: CwError) -> Step {
        if e.permanent() {
            Step::Fail(e.to_string())
        } else {
            Step::Later(Duration::ZERO, e.to_string())
        }
    }
}

impl From<ApiError> for Step {
    fn from(e: ApiError) -> Step {
        Step::Later(Duration::ZERO, format!("paceline: {}", e.code.as_str()))
    }
}

impl From<sqlx::Error> for Step {
    fn from(e: sqlx::Error) -> Step {
        Step::from(ApiError::from(e))
    }
}

impl From<domain::Error> for Step {
    fn from(e: domain::Error) -> Step {
        Step::from(ApiError::from(e))
    }
}

/// `?` for steps.
macro_rules! tri {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => return Step::from(e),
        }
    };
}

mod outbound;

fn int(v: &Value, k: &str) -> Option<i64> {
    v.get(k).and_then(Value::as_i64)
}

impl Bridge {
    pub(crate) async fn run(&self, job: &Job) -> Step {
        let s = match domain::chatwoot::stored(&self.core, &job.instance_id).await {
            Ok(s) => s,
            Err(domain::Error::NotFound(_)) => return Step::Done,
            Err(e) => return Step::from(e),
        };
        if int(&job.payload, "generation").is_some_and(|g| g != s.generation) || !s.config.enabled {
            return Step::Done;
        }
        let http = if s.allow_private() { &self.private } else { &self.public };
        let cw = Chatwoot { http, base: &s.config.url, account: s.config.account_id, token: &s.token };
        if job.kind == Kind::Setup {
            return self.setup(&s, &cw).await;
        }
        let Some(inbox) = s.inbox_id else {
            return Step::Later(Duration::from_secs(5), "waiting for the inbox to be made".into());
        };
        let ctx = Ctx { s: &s, cw: &cw, inbox, job };
        match job.kind {
            Kind::Setup => Step::Done,
            Kind::Inbound => self.inbound(&ctx).await,
            Kind::Outbound => self.outbound(&ctx).await,
            Kind::Status => self.status(&ctx).await,
            Kind::Import => self.import(&ctx).await,
            Kind::Contact => self.contact_job(&ctx).await,
            Kind::Resolved => match int(&job.payload, "conversation_id") {
                Some(c) => {
                    tri!(rows::forget_conversation(&self.core.db, &job.instance_id, c).await);
                    Step::Done
                }
                None => Step::Done,
            },
        }
    }

    /// Finds the inbox this instance made (the one whose webhook is its `webhook_url`,
    /// which holds its secret: no other inbox, whatever its name), or makes it, and
    /// records it.
    async fn setup(&self, s: &Stored, cw: &Chatwoot<'_>) -> Step {
        let name = match &s.config.inbox_name {
            Some(n) => n.clone(),
            None => tri!(shared::db::instances::get(&self.core.db, &s.instance_id).await)
                .map(|r| r.name)
                .unwrap_or_else(|| s.instance_id.to_string()),
        };
        let hook = domain::chatwoot::webhook_url(&self.core.config, &s.hook);
        let found = tri!(cw.inboxes().await).into_iter().find(|i| i.webhook_url.as_deref() == Some(hook.as_str()));
        let id = match found {
            Some(i) => i.id,
            None => tri!(cw.create_inbox(&name, &hook).await),
        };
        tri!(rows::set_inbox(&self.core.db, &s.instance_id, s.generation, id).await);
        tracing::info!(instance = %s.instance_id, inbox = id, "chatwoot inbox ready");
        Step::Done
    }
}

/// One job's surroundings.
pub(crate) struct Ctx<'a> {
    s: &'a Stored,
    cw: &'a Chatwoot<'a>,
    inbox: i64,
    job: &'a Job,
}

impl Ctx<'_> {
    fn id(&self) -> &InstanceId {
        &self.s.instance_id
    }
}

impl Bridge {
    /// What a chat's contact is called (its name in the local log, else its number or
    /// id, groups marked as such), and its party's hidden id, when it has one.
    async fn chat_name(&self, c: &Ctx<'_>, chat: &str) -> Result<(String, Option<String>), Step> {
        let row = shared::db::log::chat(&self.core.db, c.id(), chat).await.map_err(Step::from)?;
        let (logged, lid) = row.map_or((None, None), |r| (r.name, r.lid));
        let group = chat.ends_with(&format!("@{}", shared::jid::GROUP_SERVER));
        let fallback = render::phone_of(chat).unwrap_or_else(|| chat.split('@').next().unwrap_or(chat).to_string());
        let name = logged.unwrap_or(fallback);
        Ok((if group { format!("{name} (group)") } else { name }, lid))
    }

    /// A chat first made under its party's hidden id, now keyed by the number learned
    /// since (the local log merged them): its contact takes the number (unless another
    /// contact holds it: then it stays as it was) and its row moves to the number's chat,
    /// so the conversation carries on.
    async fn adopt_lid_chat(&self, c: &Ctx<'_>, chat: &str, lid: Option<&str>) -> Result<Option<ChatRow>, Step> {
        let db = &self.core.db;
        let Some(lid) = lid.filter(|l| *l != chat) else { return Ok(None) };
        let Some(row) = rows::chat(db, c.id(), lid, c.s.generation).await.map_err(Step::from)? else {
            return Ok(None);
        };
        if let Some(phone) = render::phone_of(chat) {
            match c.cw.contact_by_number(row.contact_id, chat, &phone, lid).await {
                Ok(()) => {}
                Err(CwError::Refused { status: 422 | 400 | 404, .. }) => {
                    tracing::warn!(instance = %c.id(), "chatwoot kept a contact under its hidden id: its number is taken")
                }
                Err(e) => return Err(Step::from(e)),
            }
        }
        rows::move_chat(db, c.id(), lid, chat).await.map_err(Step::from)?;
        Ok(Some(row))
    }

    /// The chat's contact, made (or found: made by an earlier try, by hand or by another
    /// integration, its identifier or number being taken) and recorded.
    async fn contact(&self, c: &Ctx<'_>, chat: &str) -> Result<i64, Step> {
        let (name, lid) = self.chat_name(c, chat).await?;
        self.contact_named(c, chat, &name, lid.as_deref()).await
    }

    /// [`Self::contact`], the chat's name and hidden id already read.
    async fn contact_named(&self, c: &Ctx<'_>, chat: &str, name: &str, lid: Option<&str>) -> Result<i64, Step> {
        let phone = render::phone_of(chat);
        let id = match c.cw.create_contact(c.inbox, name, chat, phone.as_deref(), lid).await {
            Ok(id) => id,
            Err(e @ CwError::Refused { status: 422 | 400, .. }) => {
                let by_id = c.cw.find_contact(chat, |c| c.identifier.as_deref() == Some(chat)).await;
                let found = match (by_id.map_err(Step::from)?, &phone) {
                    (Some(id), _) => Some(id),
                    (None, Some(p)) => {
                        c.cw.find_contact(p, |c| c.phone_number.as_deref() == Some(p.as_str()))
                            .await
                            .map_err(Step::from)?
                    }
                    (None, None) => None,
                };
                found.ok_or_else(|| Step::from(e))?
            }
            Err(e) => return Err(Step::from(e)),
        };
        rows::save_chat(
            &self.core.db,
            c.id(),
            chat,
            c.s.generation,
            &ChatRow { contact_id: id, conversation_id: None },
        )
        .await
        .map_err(Step::from)?;
        Ok(id)
    }

    /// Queues the local log's chats (as contacts) and recent messages (into their
    /// conversations), as the inbox's settings ask: each keyed as its live event is, so
    /// nothing already in Chatwoot (or on its way) is made twice.
    async fn import(&self, c: &Ctx<'_>) -> Step {
        let cfg = &c.s.config;
        let db = &self.core.db;
        let mut tx = tri!(db.begin().await);
        let mut queued = 0usize;
        if cfg.import_contacts {
            for chat in tri!(rows::import_chats(&mut *tx, c.id(), IMPORT_LIMIT).await) {
                if c.s.carries(&chat) {
                    let p = json!({ "generation": c.s.generation, "chat_jid": chat });
                    let key = format!("g{}:{chat}", c.s.generation);
                    queued += usize::from(tri!(rows::enqueue(&mut *tx, c.id(), Kind::Contact, &key, &p, None).await));
                }
            }
        }
        if cfg.import_messages {
            let since = chrono::Utc::now() - chrono::Duration::days(i64::from(cfg.import_days));
            for r in tri!(rows::import_messages(&mut *tx, c.id(), since, IMPORT_LIMIT).await) {
                if !c.s.carries(r.chat_jid.as_str()) {
                    continue;
                }
                let data = json!({
                    "message_id": r.id, "wa_message_id": r.wa_message_id, "chat_jid": r.chat_jid,
                    "from_jid": r.from_jid, "from_me": r.from_me, "type": r.kind, "content": r.content,
                    "timestamp": r.ts,
                });
                let p = json!({ "event": "message", "data": data, "generation": c.s.generation });
                // A live job for the same message finds it posted (the map is by its network
                // id): the key only keeps an import of this inbox from queuing it twice.
                let key = format!("g{}:{}", c.s.generation, r.id);
                queued += usize::from(tri!(rows::enqueue(&mut *tx, c.id(), Kind::Inbound, &key, &p, Some(r.ts)).await));
            }
        }
        tri!(tx.commit().await);
        tracing::info!(instance = %c.id(), queued, "chatwoot import queued");
        Step::Done
    }

    /// One imported contact.
    async fn contact_job(&self, c: &Ctx<'_>) -> Step {
        let Some(chat) = c.job.payload.get("chat_jid").and_then(Value::as_str) else {
            return Step::Done;
        };
        if !c.s.carries(chat) || tri!(rows::chat(&self.core.db, c.id(), chat, c.s.generation).await).is_some() {
            return Step::Done;
        }
        match self.contact(c, chat).await {
            Ok(_) => Step::Done,
            Err(s) => s,
        }
    }

    /// The chat's contact and conversation, made (once) if missing.
    async fn conversation(&self, c: &Ctx<'_>, chat: &str) -> Result<i64, Step> {
        let db = &self.core.db;
        let known = match rows::chat(db, c.id(), chat, c.s.generation).await.map_err(Step::from)? {
            Some(k) => k,
            // Not in Chatwoot yet: its name and hidden id, read once for both uses.
            None => {
                let (name, lid) = self.chat_name(c, chat).await?;
                match self.adopt_lid_chat(c, chat, lid.as_deref()).await? {
                    Some(k) => k,
                    None => {
                        let contact_id = self.contact_named(c, chat, &name, lid.as_deref()).await?;
                        ChatRow { contact_id, conversation_id: None }
                    }
                }
            }
        };
        if let Some(conv) = known.conversation_id {
            return Ok(conv);
        }
        let contact = known.contact_id;
        // A conversation an earlier try opened is used again.
        let open = c.cw.conversations_of(contact).await;
        let reuse = match open {
            Ok(list) => list
                .into_iter()
                .find(|(_, inbox, status)| {
                    inbox.is_none_or(|i| i == c.inbox) && (c.s.config.reopen_conversation || status != "resolved")
                })
                .map(|(id, _, _)| id),
            Err(e) if e.not_found() => None,
            Err(e) => return Err(Step::from(e)),
        };
        let conv = match reuse {
            Some(id) => id,
            None => {
                c.cw.create_conversation(c.inbox, contact, chat, c.s.config.conversation_pending)
                    .await
                    .map_err(Step::from)?
            }
        };
        rows::save_chat(
            db,
            c.id(),
            chat,
            c.s.generation,
            &ChatRow { contact_id: contact, conversation_id: Some(conv) },
        )
        .await
        .map_err(Step::from)?;
        Ok(conv)
    }

    /// Posts `m` once: a later try (after one that may have acted: an error, a timeout,
    /// a pod stopped or killed mid-call) first looks for its `source_id` among the
    /// conversation's latest messages. A conversation Chatwoot no longer has is
    /// forgotten, so the next try opens another.
    async fn post_once(&self, c: &Ctx<'_>, conv: i64, m: &NewMessage, media: Option<&Value>) -> Result<i64, Step> {
        let gone = |e: CwError| async move {
            if e.not_found() {
                if let Err(db) = rows::forget_conversation(&self.core.db, c.id(), conv).await {
                    return Step::from(db);
                }
                return Step::Later(Duration::ZERO, "the conversation is gone from Chatwoot; opening another".into());
            }
            Step::from(e)
        };
        if c.job.attempts > 1 {
            let there = match c.cw.messages(conv).await {
                Ok(t) => t,
                Err(e) => return Err(gone(e).await),
            };
            if let Some((id, _)) = there.iter().find(|(_, s)| s.as_deref() == Some(m.source_id.as_str())) {
                return Ok(*id);
            }
        }
        let file = match media {
            Some(meta) => self.attachment(c, meta).await?,
            None => None,
        };
        match c.cw.create_message(conv, m, file).await {
            Ok(id) => Ok(id),
            Err(e) => Err(gone(e).await),
        }
    }

    /// Stored media as an upload, read a piece at a time.
    async fn attachment(&self, c: &Ctx<'_>, meta: &Value) -> Result<Option<Attachment>, Step> {
        let Some(id) = meta.get("id").and_then(Value::as_str).and_then(|i| MediaId::parse(i).ok()) else {
            return Ok(None);
        };
        let Some(m) = shared::db::media::meta_of(&self.core.db, c.id(), &id).await.map_err(Step::from)? else {
            return Ok(None);
        };
        let shared::db::media::Meta::Stored { mime_type, filename, size, .. } = m else {
            return Ok(None);
        };
        let readable = match self.core.media.open(&id).await {
            Ok(Some(r)) => r,
            Ok(None) => return Ok(None),
            Err(e) => return Err(Step::Later(Duration::ZERO, format!("the media store: {e}"))),
        };
        let pieces =
            readable.pieces().await.map_err(|e| Step::Later(Duration::ZERO, format!("the media store: {e}")))?;
        let ext = mime_type.split('/').nth(1).unwrap_or("bin").split(';').next().unwrap_or("bin").to_string();
        Ok(Some(Attachment {
            filename: filename.unwrap_or_else(|| format!("{id}.{ext}")),
            mime_type,
            size,
            body: reqwest::Body::wrap_stream(pieces),
        }))
    }

    /// A received message (or reaction) into the chat's conversation.
    async fn inbound(&self, c: &Ctx<'_>) -> Step {
        let p = &c.job.payload;
        let data = p.get("data").cloned().unwrap_or(Value::Null);
        let chat = data.get("chat_jid").and_then(Value::as_str).unwrap_or_default().to_string();
        let Some(wa) = data.get("wa_message_id").and_then(Value::as_str).map(str::to_string) else {
            return Step::Fail("the event names no message".into());
        };
        if chat.is_empty() || !c.s.carries(&chat) {
            return Step::Done;
        }
        let event = p.get("event").and_then(Value::as_str).unwrap_or("message");
        if event == "deleted" {
            return self.deleted(c, &wa).await;
        }
        // A reaction or an edit is a message of its own, replying to what it names.
        let reaction = event == "reaction" || event == "edited";
        let key = if reaction { format!("{wa}:{event}:{}", c.job.key) } else { wa.clone() };
        if tri!(rows::message(&self.core.db, c.id(), &key, c.s.generation).await).is_some() {
            return Step::Done;
        }
        let group = chat.ends_with(&format!("@{}", shared::jid::GROUP_SERVER));
        let from = data.get("from_jid").and_then(Value::as_str);
        let from_me = data.get("from_me").and_then(Value::as_bool).unwrap_or(false);
        let sender = if group && !from_me { from } else { None };
        let r = if reaction {
            let emoji = match event {
                "edited" => format!("✏️ {}", data.get("text").and_then(Value::as_str).unwrap_or_default()),
                _ => data.get("emoji").and_then(Value::as_str).unwrap_or_default().to_string(),
            };
            if emoji.is_empty() {
                return Step::Done;
            }
            render::Rendered { content: emoji, media: None, media_missing: false, reply_to: Some(wa.clone()) }
        } else {
            let kind = data.get("type").and_then(Value::as_str).unwrap_or("text");
            let waited = (chrono::Utc::now() - c.job.first_try_at).to_std().unwrap_or_default();
            let mut content = match event {
                // A send's content is in the log (its media stored, never pending); a row
                // not logged (yet, or its chat deleted since) is read from the queue.
                "sent" => match self.fresh_content(c, &data).await {
                    Some(v) => v,
                    None if waited < SENT_WAIT => {
                        return Step::Later(Duration::from_secs(2), "the sent message is not logged yet".into())
                    }
                    None => self.queued_content(c, &data).await.unwrap_or(Value::Null),
                },
                _ => data.get("content").cloned().unwrap_or(Value::Null),
            };
            let pending = |v: &Value| v.pointer("/media/pending").and_then(Value::as_bool).unwrap_or(false);
            if pending(&content) {
                // Received media still downloading: read the message again; go without
                // the file once it has been waited for long enough.
                if let Some(v) = self.fresh_content(c, &data).await {
                    content = v;
                }
                if pending(&content) && waited < MEDIA_WAIT {
                    return Step::Later(Duration::from_secs(5), "waiting for received media to download".into());
                }
            }
            render::received(kind, &content, sender)
        };
        let conv = match self.conversation(c, &chat).await {
            Ok(v) => v,
            Err(s) => return s,
        };
        let in_reply_to = match &r.reply_to {
            Some(q) => tri!(rows::message(&self.core.db, c.id(), q, c.s.generation).await).map(|(_, m)| m),
            None => None,
        };
        let m = NewMessage {
            content: r.content.clone(),
            message_type: if from_me { "outgoing" } else { "incoming" },
            private: false,
            source_id: format!("WAID:{key}"),
            in_reply_to,
        };
        match self.post_once(c, conv, &m, r.media.as_ref()).await {
            Ok(cw_id) => {
                tri!(rows::save_message(&self.core.db, c.id(), &key, c.s.generation, conv, cw_id).await);
                Step::Done
            }
            Err(s) => s,
        }
    }

    /// The message's content as logged now (its media downloaded since the event).
    async fn fresh_content(&self, c: &Ctx<'_>, data: &Value) -> Option<Value> {
        let id = data.get("message_id").and_then(Value::as_str)?;
        let row = shared::db::log::content_of(&self.core.db, c.id(), id).await.ok()??;
        Some(row)
    }

    /// A message deleted for everyone on WhatsApp is deleted in Chatwoot too (Chatwoot
    /// keeps it, shown as deleted).
    async fn deleted(&self, c: &Ctx<'_>, wa: &str) -> Step {
        let Some((conv, cw_id)) = tri!(rows::message(&self.core.db, c.id(), wa, c.s.generation).await) else {
            return Step::Done;
        };
        match c.cw.delete_message(conv, cw_id).await {
            Ok(()) => Step::Done,
            Err(e) => Step::from(e),
        }
    }

    /// A sent message's content as queued.
    async fn queued_content(&self, c: &Ctx<'_>, data: &Value) -> Option<Value> {
        let id = data.get("message_id").and_then(Value::as_str).and_then(|i| shared::ids::MessageId::parse(i).ok())?;
        queue_rows::get(&self.core.db, c.id(), &id).await.ok()?.map(|r| r.content)
    }
}

//! What the worker logs: messages from the network (received, sent from the phone, synced
//! history) and those the queue sent, each with the chats it touches and their events.

use super::*;

/// Records messages from the network, fenced. Returns how many were new (`None`: the
/// instance has a new owner and nothing was written). New live messages are
/// `message.received` events (`reaction.received` for reactions); every chat they touch
/// is a `chat.updated` event.
pub async fn record_received(
    pool: &PgPool,
    instance: &InstanceId,
    epoch: i64,
    msgs: &[Received],
    source: Source,
) -> Result<Option<usize>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    if !fence(&mut tx, instance, epoch).await? {
        return Ok(None);
    }
    if msgs.is_empty() {
        return Ok(Some(0));
    }
    // Parties named by hidden ids: by number where known (a chat reached by both is one).
    let settled;
    let msgs = if msgs.iter().any(super::lids::names_a_lid) {
        let mut owned = msgs.to_vec();
        super::lids::settle(&mut tx, instance, &mut owned).await?;
        settled = owned;
        &settled[..]
    } else {
        msgs
    };
    let ids: Vec<MessageId> = msgs.iter().map(|_| MessageId::new()).collect();
    let chats: Vec<&str> = msgs.iter().map(|m| m.chat_jid.as_str()).collect();
    let wa: Vec<&str> = msgs.iter().map(|m| m.wa_message_id.as_str()).collect();
    let ts: Vec<DateTime<Utc>> = msgs.iter().map(|m| m.ts).collect();
    let from: Vec<&str> = msgs.iter().map(|m| m.from_jid.as_str()).collect();
    let from_me: Vec<bool> = msgs.iter().map(|m| m.from_me).collect();
    let kinds: Vec<&str> = msgs.iter().map(|m| m.kind.as_str()).collect();
    let contents: Vec<&Value> = msgs.iter().map(|m| &m.content).collect();
    let inserted: Vec<(MessageId,)> = sqlx::query_as(
        "INSERT INTO log_messages (instance_id, id, chat_jid, wa_message_id, ts, from_jid, from_me, type, content, status, source) \
         SELECT $1, v.id, v.chat, v.wa, v.ts, v.frm, v.me, v.kind, v.content, CASE WHEN v.me THEN 'sent' END, $10 \
         FROM UNNEST($2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::text[], $7::bool[], $8::text[], $9::jsonb[]) \
             AS v(id, chat, wa, ts, frm, me, kind, content) \
         ON CONFLICT (instance_id, chat_jid, wa_message_id) DO NOTHING RETURNING id",
    )
    .bind(instance)
    .bind(&ids)
    .bind(&chats)
    .bind(&wa)
    .bind(&ts)
    .bind(&from)
    .bind(&from_me)
    .bind(&kinds)
    .bind(&contents)
    .bind(source)
    .fetch_all(&mut *tx)
    .await?;
    let new: std::collections::HashSet<&str> = inserted.iter().map(|r| r.0.as_str()).collect();
    let fresh: Vec<(&MessageId, &Received)> =
        ids.iter().zip(msgs).filter(|(id, _)| new.contains(id.as_str())).collect();
    // The media the new rows carry is theirs now: never collected.
    let media: Vec<&str> = fresh.iter().filter_map(|(_, m)| m.content.get("media")?.get("id")?.as_str()).collect();
    crate::db::media::claim(&mut *tx, instance, &media).await?;

    // Reactions and history do not count as unread; the account's own messages read
    // everything before them.
    let touched: Vec<Touch> = fresh
        .iter()
        .map(|(_, m)| Touch {
            instance,
            chat: m.chat_jid.as_str(),
            lid: m.chat_lid.as_deref(),
            ts: m.ts,
            from_me: m.from_me,
            counts: source == Source::Live && m.kind != "reaction",
        })
        .collect();
    let rows: Vec<ChatRow> = touch_chats(&mut tx, &touched).await?.into_iter().map(|(_, c)| c).collect();
    // The batch's events in one statement: each fresh message's, then each chat's.
    let mut events: Vec<(&InstanceId, Event)> = Vec::with_capacity(fresh.len() + rows.len());
    if source == Source::Live {
        for (id, m) in &fresh {
            let event = if m.kind == "reaction" {
                let reaction = m.content.get("reaction");
                let text =
                    |k: &str| reaction.and_then(|r| r.get(k)).and_then(Value::as_str).unwrap_or_default().to_string();
                Event::ReactionReceived(ReactionEventData {
                    wa_message_id: text("message_id"),
                    chat_jid: m.chat_jid.clone(),
                    from_jid: m.from_jid.clone(),
                    chat_lid: m.chat_lid.clone(),
                    from_lid: m.from_lid.clone(),
                    emoji: text("emoji"),
                    timestamp: m.ts,
                })
            } else {
                let data = ReceivedMessageEventData {
                    message_id: (*id).clone(),
                    wa_message_id: m.wa_message_id.clone(),
                    chat_jid: m.chat_jid.clone(),
                    from_jid: m.from_jid.clone(),
                    chat_lid: m.chat_lid.clone(),
                    from_lid: m.from_lid.clone(),
                    from_me: m.from_me,
                    kind: m.kind.clone(),
                    content: m.content.clone(),
                    timestamp: m.ts,
                };
                // A contact's status comes in on the status chat, a channel's post on the channel's.
                if m.chat_jid == crate::jid::STATUS_JID {
                    Event::StatusReceived(data)
                } else if crate::jid::server_of(&m.chat_jid) == crate::jid::NEWSLETTER_SERVER && !m.from_me {
                    Event::ChannelPostReceived(data)
                } else {
                    Event::MessageReceived(data)
                }
            };
            events.push((instance, event));
        }
    }
    events.extend(rows.iter().map(|chat| (instance, chat.event(false))));
    outbox::insert_many(&mut *tx, events).await?;
    tx.commit().await?;
    Ok(Some(fresh.len()))
}

/// A logged message as its chat sees it.
struct Touch<'a> {
    instance: &'a InstanceId,
    chat: &'a str,
    /// The chat's hidden id, when the message named one.
    lid: Option<&'a str>,
    ts: DateTime<Utc>,
    from_me: bool,
    /// Whether it counts for unread (and, from the account, as reading the chat).
    counts: bool,
}

/// Creates or updates the chats of `touched` messages: the last message time, the read
/// point (the account's newest own message), and the unread count (incoming live
/// messages after the read point, whatever order they were logged in). Returns the rows.
async fn touch_chats(tx: &mut PgConnection, touched: &[Touch<'_>]) -> Result<Vec<(InstanceId, ChatRow)>, sqlx::Error> {
    if touched.is_empty() {
        return Ok(Vec::new());
    }
    let instances: Vec<&str> = touched.iter().map(|t| t.instance.as_str()).collect();
    let chats: Vec<&str> = touched.iter().map(|t| t.chat).collect();
    let lids: Vec<Option<&str>> = touched.iter().map(|t| t.lid).collect();
    let ts: Vec<DateTime<Utc>> = touched.iter().map(|t| t.ts).collect();
    let me: Vec<bool> = touched.iter().map(|t| t.from_me).collect();
    let counts: Vec<bool> = touched.iter().map(|t| t.counts).collect();
    // New chats, then every touched chat locked in one order (instance, jid): callers
    // touching several chats, or several instances' chats, never deadlock each other.
    sqlx::query(
        "INSERT INTO chats (instance_id, jid, last_message_at, lid) \
         SELECT i, j, max(t), max(l) FROM UNNEST($1::text[], $2::text[], $3::timestamptz[], $4::text[]) AS v(i, j, t, l) \
         GROUP BY i, j ORDER BY i, j ON CONFLICT (instance_id, jid) DO NOTHING",
    )
    .bind(&instances)
    .bind(&chats)
    .bind(&ts)
    .bind(&lids)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "SELECT 1 FROM chats c JOIN (SELECT DISTINCT i, j FROM UNNEST($1::text[], $2::text[]) AS v(i, j)) v \
         ON c.instance_id = v.i AND c.jid = v.j ORDER BY c.instance_id, c.jid FOR UPDATE OF c",
    )
    .bind(&instances)
    .bind(&chats)
    .execute(&mut *tx)
    .await?;
    let rows: Vec<ChatRowOf> = sqlx::query_as(&format!(
        "WITH m AS (SELECT * FROM UNNEST($1::text[], $2::text[], $3::timestamptz[], $4::bool[], $5::bool[], $6::text[]) \
                    AS m(i, j, t, me, counts, lid)), \
         agg AS (SELECT i, j, max(t) AS l, max(t) FILTER (WHERE me AND counts) AS me_at, max(lid) AS lid \
                 FROM m GROUP BY i, j) \
         UPDATE chats c SET last_message_at = GREATEST(c.last_message_at, agg.l), lid = COALESCE(agg.lid, c.lid), \
             read_at = GREATEST(c.read_at, agg.me_at), \
             unread_count = CASE \
                 WHEN agg.me_at IS NOT NULL AND agg.me_at > COALESCE(c.read_at, '-infinity') THEN \
                     (SELECT count(*) FROM log_messages l WHERE l.instance_id = agg.i AND l.chat_jid = c.jid \
                        AND NOT l.from_me AND l.source = 'live' AND l.type <> 'reaction' AND l.ts > agg.me_at)::int \
                 ELSE c.unread_count + (SELECT count(*) FROM m WHERE m.i = agg.i AND m.j = agg.j AND NOT m.me \
                        AND m.counts AND m.t > COALESCE(c.read_at, '-infinity'))::int END, \
             updated_at = now() \
         FROM agg WHERE c.instance_id = agg.i AND c.jid = agg.j RETURNING c.instance_id, {}",
        CHAT_COLUMNS.split(", ").map(|c| format!("c.{c}")).collect::<Vec<_>>().join(", ")
    ))
    .bind(&instances)
    .bind(&chats)
    .bind(&ts)
    .bind(&me)
    .bind(&counts)
    .bind(&lids)
    .fetch_all(&mut *tx)
    .await?;
    Ok(rows.into_iter().map(|r| (r.instance_id, r.chat)).collect())
}

/// A chat row with its instance (from [`touch_chats`] over several instances).
#[derive(sqlx::FromRow)]
struct ChatRowOf {
    instance_id: InstanceId,
    #[sqlx(flatten)]
    chat: ChatRow,
}

/// Logs messages the queue sent (in `messages::finish_many`'s transaction, already
/// fenced): same ids as the queued messages, `source = queue`; and touches their chats,
/// with a `chat.updated` event each.
pub async fn record_sent_many(
    tx: &mut PgConnection,
    sent: &[(&crate::db::messages::MessageRow, DateTime<Utc>)],
) -> Result<(), sqlx::Error> {
    if sent.is_empty() {
        return Ok(());
    }
    let instances: Vec<&str> = sent.iter().map(|(r, _)| r.instance_id.as_str()).collect();
    let phones: Vec<(InstanceId, Option<String>)> =
        sqlx::query_as("SELECT id, phone FROM instances WHERE id = ANY($1)")
            .bind(&instances)
            .fetch_all(&mut *tx)
            .await?;
    let phones: std::collections::HashMap<InstanceId, String> =
        phones.into_iter().map(|(i, p)| (i, p.map(|p| crate::jid::Jid::user(&p).into()).unwrap_or_default())).collect();
    let contents: Vec<Value> = sent
        .iter()
        .map(|(r, _)| {
            // The log keeps the type in its own column.
            let mut content = r.content.clone();
            if let Some(obj) = content.as_object_mut() {
                obj.remove("type");
            }
            content
        })
        .collect();
    // A send to a hidden id whose number the instance knows is logged in the number's chat.
    let numbers = super::lids::numbers_of(tx, sent.iter().map(|(r, _)| (&r.instance_id, r.to_jid.as_str()))).await?;
    fn chat_in<'a>(
        numbers: &'a std::collections::HashMap<(InstanceId, String), String>,
        r: &'a crate::db::messages::MessageRow,
    ) -> (&'a str, Option<&'a str>) {
        let to = r.to_jid.as_str();
        let known = if numbers.is_empty() { None } else { numbers.get(&(r.instance_id.clone(), to.to_string())) };
        match known {
            Some(pn) => (pn.as_str(), Some(to)),
            None => (to, crate::jid::is_lid_jid(to).then_some(to)),
        }
    }
    let chat_of = |r| chat_in(&numbers, r);
    let inserted: Vec<(MessageId,)> = sqlx::query_as(
        "INSERT INTO log_messages (instance_id, id, chat_jid, wa_message_id, ts, from_jid, from_me, type, content, status, source) \
         SELECT v.i, v.id, v.chat, v.wa, v.ts, v.frm, TRUE, v.kind, v.content, 'sent', 'queue' \
         FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::text[], $7::text[], $8::jsonb[]) \
             AS v(i, id, chat, wa, ts, frm, kind, content) \
         ON CONFLICT DO NOTHING RETURNING id",
    )
    .bind(&instances)
    .bind(sent.iter().map(|(r, _)| r.id.as_str()).collect::<Vec<_>>())
    .bind(sent.iter().map(|(r, _)| chat_of(r).0).collect::<Vec<_>>())
    .bind(sent.iter().map(|(r, _)| r.wa_message_id.as_str()).collect::<Vec<_>>())
    .bind(sent.iter().map(|(_, at)| *at).collect::<Vec<_>>())
    .bind(sent.iter().map(|(r, _)| phones.get(&r.instance_id).map_or("", String::as_str)).collect::<Vec<_>>())
    .bind(sent.iter().map(|(r, _)| r.kind.as_str()).collect::<Vec<_>>())
    .bind(&contents)
    .fetch_all(&mut *tx)
    .await?;
    let new: std::collections::HashSet<&str> = inserted.iter().map(|r| r.0.as_str()).collect();
    let touched: Vec<Touch> = sent
        .iter()
        .filter(|(r, _)| new.contains(r.id.as_str()) && r.kind != MessageType::Reaction)
        .map(|(r, at)| Touch {
            instance: &r.instance_id,
            chat: chat_of(r).0,
            lid: chat_of(r).1,
            ts: *at,
            from_me: true,
            counts: true,
        })
        .collect();
    let chats = touch_chats(tx, &touched).await?;
    outbox::insert_many(&mut *tx, chats.iter().map(|(i, c)| (i, c.event(false))).collect()).await
}

/// A message its sender edited or deleted for everyone, as the network told it.
#[derive(Debug, Clone)]
pub struct Changed {
    pub chat_jid: String,
    pub wa_message_id: String,
    pub from_jid: String,
    /// Hidden ids beside them, as `Received`'s.
    pub chat_lid: Option<String>,
    pub from_lid: Option<String>,
    pub from_me: bool,
    pub at: DateTime<Utc>,
    /// The new text (an edit), or none (a deletion).
    pub text: Option<String>,
}

/// Marks the log's copy of an edited or deleted message (an edit takes the new text, or
/// caption, and `edited_at`; a deletion keeps the content and adds `deleted_at`) and
/// writes its `message.edited` or `message.deleted`, fenced on `epoch`; only for a logged
/// message, and a change from its own sender (anyone can send a change naming anyone's
/// message: the network does not check it); once (a deleted message takes no change, and
/// an edit only a later edit), so a redelivered change writes nothing. False: the fence
/// did not hold.
pub async fn apply_change(pool: &PgPool, instance: &InstanceId, epoch: i64, c: &Changed) -> Result<bool, sqlx::Error> {
    let mut tx = pool.begin().await?;
    if !super::fence(&mut tx, instance, epoch).await? {
        return Ok(false);
    }
    let mut changed = [c.clone()];
    super::lids::settle(&mut tx, instance, &mut changed).await?;
    let [c] = &mut changed;
    // A sender named by number only still matches its messages logged under its LID.
    if c.from_lid.is_none() && crate::jid::server_of(&c.from_jid) == crate::jid::USER_SERVER {
        c.from_lid = super::lids::lid_of(&mut tx, instance, &c.from_jid).await?;
    }
    let c = &*c;
    let patch = match &c.text {
        Some(t) => serde_json::json!({ "edited_at": c.at, "__text": t }),
        None => serde_json::json!({ "deleted_at": c.at }),
    };
    let id: Option<MessageId> = sqlx::query_scalar(
        "UPDATE log_messages SET content = content || (($5::jsonb - '__text') \
             || CASE WHEN $5::jsonb ? '__text' THEN \
                    jsonb_build_object(CASE WHEN content ? 'caption' THEN 'caption' ELSE 'text' END, $5::jsonb -> '__text') \
                ELSE '{}'::jsonb END) \
         WHERE instance_id = $1 AND chat_jid = $2 AND wa_message_id = $3 AND from_me = $4 \
           AND (from_me OR from_jid = $6 OR from_jid = $8) AND NOT content ? 'deleted_at' \
           AND ($5::jsonb ? 'deleted_at' OR content->>'edited_at' IS NULL \
                OR (content->>'edited_at')::timestamptz < $7) \
         RETURNING id",
    )
    .bind(instance)
    .bind(&c.chat_jid)
    .bind(&c.wa_message_id)
    .bind(c.from_me)
    .bind(&patch)
    .bind(&c.from_jid)
    .bind(c.at)
    .bind(&c.from_lid)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(id) = id else {
        // Nothing to change; what settling learned (and merged) stays.
        tx.commit().await?;
        return Ok(true);
    };
    let event = match &c.text {
        Some(text) => Event::MessageEdited(crate::events::MessageEditedEventData {
            message_id: id,
            wa_message_id: c.wa_message_id.clone(),
            chat_jid: c.chat_jid.clone(),
            from_jid: c.from_jid.clone(),
            chat_lid: c.chat_lid.clone(),
            from_lid: c.from_lid.clone(),
            from_me: c.from_me,
            text: text.clone(),
            timestamp: c.at,
        }),
        None => Event::MessageDeleted(crate::events::MessageDeletedEventData {
            message_id: id,
            wa_message_id: c.wa_message_id.clone(),
            chat_jid: c.chat_jid.clone(),
            from_jid: c.from_jid.clone(),
            chat_lid: c.chat_lid.clone(),
            from_lid: c.from_lid.clone(),
            from_me: c.from_me,
            timestamp: c.at,
        }),
    };
    outbox::insert(&mut *tx, instance, &event).await?;
    tx.commit().await?;
    Ok(true)
}

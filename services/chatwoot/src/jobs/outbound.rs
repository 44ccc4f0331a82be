//! Agents' messages out to WhatsApp, and what goes back to Chatwoot about them: a send's
//! failure or refusal as a private note.

use super::*;

impl Bridge {
    /// An agent's message out through the paced queue, once: its client id is Chatwoot's
    /// message id, so a repeated job finds the send queued already.
    pub(super) async fn outbound(&self, c: &Ctx<'_>) -> Step {
        let p = &c.job.payload;
        let (Some(cw_id), Some(conv)) = (int(p, "message_id"), int(p, "conversation_id")) else {
            return Step::Fail("the webhook named no message".into());
        };
        let chat = match tri!(rows::chat_of_conversation(&self.core.db, c.id(), conv, c.s.generation).await) {
            Some(chat) => chat,
            None => match self.started_in_chatwoot(c, conv).await {
                Ok(chat) => chat,
                Err(s) => return s,
            },
        };
        let sender = p.get("sender").and_then(Value::as_str);
        let content = p.get("content").and_then(Value::as_str).unwrap_or_default();
        let cfg = &c.s.config;
        let text = render::signed(content, sender, cfg.sign_messages, &cfg.sign_delimiter);
        let reply_to = match int(p, "in_reply_to") {
            Some(r) => tri!(rows::key_of(&self.core.db, c.id(), r).await),
            None => None,
        };
        let attachments: Vec<Value> = p.get("attachments").and_then(Value::as_array).cloned().unwrap_or_default();
        // One send per file (the text as the first one's caption), or the text alone;
        // each queued before the next file is fetched, so a job holds one file at most.
        let pieces = attachments.len().max(1);
        for i in 0..pieces {
            // The inbox's generation in the key: another Chatwoot's message ids never
            // collide with this one's.
            let base = format!("chatwoot-g{}-{}-{cw_id}", c.s.generation, cfg.account_id);
            let client_id = if pieces == 1 { base } else { format!("{base}-{i}") };
            if let Some(q) = tri!(queue_rows::by_client_id(&self.core.db, c.id(), &client_id).await) {
                // Queued by an earlier try.
                tri!(rows::save_message(&self.core.db, c.id(), q.id.as_str(), c.s.generation, conv, cw_id).await);
                continue;
            }
            let _slot = self.file_slots.acquire().await;
            let mut b = match attachments.get(i) {
                None => MessageIn { text: Some(text.clone()), ..MessageIn::new(chat.clone(), MessageType::Text) },
                Some(a) => {
                    let kind = match a.get("file_type").and_then(Value::as_str) {
                        Some("image") => MessageType::Image,
                        Some("video") => MessageType::Video,
                        Some("audio") => MessageType::Audio,
                        _ => MessageType::Document,
                    };
                    let url = a.get("data_url").and_then(Value::as_str).unwrap_or_default().to_string();
                    let media = match self.media_in(c, &url).await {
                        Ok(m) => m,
                        Err(s) => return s,
                    };
                    let caption = (i == 0 && !text.is_empty() && kind != MessageType::Audio).then(|| text.clone());
                    MessageIn { media: Some(media), caption, ..MessageIn::new(chat.clone(), kind) }
                }
            };
            b.client_message_id = Some(client_id.clone());
            b.expires_after = Some(SEND_EXPIRES.into());
            b.reply_to = if i == 0 { reply_to.clone() } else { None };
            let ctx = domain::Ctx::new(&self.core, c.id(), domain::Caller::Owner);
            let queued = domain::send::queue(ctx, b, None, false).await.map_err(ApiError::from);
            let msg = match queued {
                Ok((row, _)) => row.id,
                Err(e) if e.code == ErrorCode::Conflict => {
                    match tri!(queue_rows::by_client_id(&self.core.db, c.id(), &client_id).await) {
                        Some(q) => q.id,
                        None => return Step::from(e),
                    }
                }
                Err(e) if e.retryable || e.code == ErrorCode::Internal => return Step::from(e),
                Err(e) => {
                    // Refused for good (a bad file, a quota): the agent is told in a note.
                    let note = format!("Not sent to WhatsApp: {}", e.message);
                    return self.note(c, conv, &format!("PLREFUSED:{client_id}"), &note).await;
                }
            };
            tri!(rows::save_message(&self.core.db, c.id(), msg.as_str(), c.s.generation, conv, cw_id).await);
        }
        Step::Done
    }

    /// The chat of a conversation an agent started in Chatwoot (with a contact made
    /// there): asked of Chatwoot's API, never taken from the webhook, and only for a
    /// conversation of this inbox whose contact is a WhatsApp number or JID.
    async fn started_in_chatwoot(&self, c: &Ctx<'_>, conv: i64) -> Result<String, Step> {
        let refused = || Step::Fail("the conversation is not one of this inbox's WhatsApp chats".into());
        let (inbox, contact, identifier, phone) = match c.cw.conversation(conv).await {
            Ok(v) => v,
            Err(e) if e.not_found() => return Err(refused()),
            Err(e) => return Err(Step::from(e)),
        };
        let (Some(contact), true) = (contact, inbox == Some(c.inbox)) else {
            return Err(refused());
        };
        let jid = identifier
            .iter()
            .chain(phone.iter())
            .find_map(|v| shared::jid::Jid::parse(v.trim_start_matches('+')).ok())
            .filter(|j| j.is_user() || j.is_group())
            .ok_or_else(refused)?
            .to_string();
        if !c.s.carries(&jid) {
            return Err(refused());
        }
        rows::save_chat(
            &self.core.db,
            c.id(),
            &jid,
            c.s.generation,
            &ChatRow { contact_id: contact, conversation_id: Some(conv) },
        )
        .await
        .map_err(Step::from)?;
        Ok(jid)
    }

    /// An attachment of an agent's message as the send's media: by URL for the core to
    /// fetch (public addresses only). Only a file at the Chatwoot origin the admin allowed
    /// private addresses for is fetched here, following redirects within that origin; a
    /// redirect elsewhere (a storage bucket) goes to the core's public-only fetcher. So a
    /// webhook naming an internal address never has it fetched.
    async fn media_in(&self, c: &Ctx<'_>, url: &str) -> Result<MediaIn, Step> {
        let mut at = url::Url::parse(url).map_err(|_| Step::Fail("an attachment's URL does not parse".into()))?;
        let by_url = |u: &url::Url| MediaIn { url: Some(u.to_string()), data: None, mime_type: None, filename: None };
        let approved = c.s.private_origin.as_deref().filter(|_| c.s.allow_private());
        let here = |u: &url::Url| approved.is_some() && domain::attendant::origin_of(u.as_str()).as_deref() == approved;
        if !here(&at) {
            return Ok(by_url(&at));
        }
        let later = |e: String| Step::Later(Duration::ZERO, format!("an attachment: {e}"));
        for _ in 0..5 {
            let res = self.files.get(at.clone()).send().await.map_err(|e| later(e.without_url().to_string()))?;
            if res.status().is_redirection() {
                let next = res
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|l| l.to_str().ok())
                    .and_then(|l| at.join(l).ok())
                    .ok_or_else(|| Step::Fail("an attachment's redirect names no place".into()))?;
                if !here(&next) {
                    return Ok(by_url(&next));
                }
                at = next;
                continue;
            }
            if !res.status().is_success() {
                return Err(later(format!("status {}", res.status().as_u16())));
            }
            let mime = res
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(|v| v.split(';').next().unwrap_or(v).trim().to_string());
            let bytes = shared::fetch::read_capped(res, shared::message::DOCUMENT_LIMIT as u64)
                .await
                .map_err(|e| later(e.to_string()))?;
            use base64::Engine;
            let filename = at.path_segments().and_then(|mut s| s.next_back()).map(str::to_string);
            return Ok(MediaIn {
                url: None,
                data: Some(base64::engine::general_purpose::STANDARD.encode(bytes)),
                mime_type: mime,
                filename,
            });
        }
        Err(Step::Fail("an attachment's URL redirects too often".into()))
    }

    /// A private note in the conversation, once.
    async fn note(&self, c: &Ctx<'_>, conv: i64, source: &str, text: &str) -> Step {
        let m = NewMessage {
            content: text.to_string(),
            message_type: "outgoing",
            private: true,
            source_id: source.to_string(),
            in_reply_to: None,
        };
        match self.post_once(c, conv, &m, None).await {
            Ok(_) => Step::Done,
            Err(s) => s,
        }
    }

    /// A send of an agent's message failed: a private note says why.
    pub(super) async fn status(&self, c: &Ctx<'_>) -> Step {
        let data = c.job.payload.get("data").cloned().unwrap_or(Value::Null);
        let Some(msg) = data.get("id").and_then(Value::as_str) else {
            return Step::Done;
        };
        let Some((conv, cw_id)) = tri!(rows::message(&self.core.db, c.id(), msg, c.s.generation).await) else {
            return Step::Done;
        };
        let why = data.get("error").and_then(Value::as_str).unwrap_or("unknown");
        let note = format!("Not delivered to WhatsApp (message {cw_id}): {why}");
        self.note(c, conv, &format!("PLFAILED:{msg}"), &note).await
    }
}

//! Chats, contacts, profiles, the block list and media: what a linked device asks of the
//! network beyond sending (`ClientOp::Net`), and the control API's side of them.

use std::collections::BTreeSet;

use base64::Engine;
use serde_json::{json, Value};
use shared::contract::{
    self as wire, AccountOp, Answer, BusinessProfile, ChatOp, ContactDetails, ContactInfo, ContactOp, NetOp, Operation,
};
use shared::jid::Jid;

use super::*;

/// A phone's profile.
#[derive(Debug, Default, Clone)]
pub(super) struct Profile {
    pub name: Option<String>,
    pub about: String,
    pub business_profile: Option<BusinessProfile>,
    pub picture: Option<(String, Vec<u8>)>,
}

/// An account's settings for one chat (keyed by the other party's number).
#[derive(Debug, Default, Clone, Serialize)]
pub(super) struct ChatState {
    pub archived: bool,
    pub pinned: bool,
    pub muted_until: Option<DateTime<Utc>>,
    pub marked_unread: bool,
    pub deleted: bool,
}

/// Media bytes carried by a message.
pub(super) struct Blob {
    mime_type: String,
    data: Vec<u8>,
    expired: bool,
    /// Served as its bytes followed by zeros without end (a hostile media server).
    endless: bool,
}

/// Media as `/media/{id}` serves it.
pub struct Served {
    pub mime_type: String,
    pub data: Vec<u8>,
    /// Zeros follow the bytes forever.
    pub endless: bool,
}

/// Media in a control request: base64 bytes.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MediaIn {
    pub data: String,
    pub mime_type: String,
    #[serde(default)]
    pub filename: Option<String>,
    /// Tests: serve the bytes, then zeros without end, while the descriptor declares the
    /// bytes' length (what a hostile media server does to a client that trusts it).
    #[serde(default)]
    pub endless: bool,
}

impl MediaIn {
    fn bytes(&self) -> Result<Vec<u8>, NetError> {
        base64::engine::general_purpose::STANDARD
            .decode(&self.data)
            .map_err(|_| NetError::Invalid("media.data must be base64"))
    }
}

/// A profile change (absent fields stay).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileIn {
    pub name: Option<String>,
    pub about: Option<String>,
    pub business_profile: Option<BusinessProfile>,
    pub picture: Option<MediaIn>,
}

pub(super) fn jid(number: &str) -> String {
    shared::jid::Jid::user(number).into()
}

/// The number of a user JID (or a bare number).
pub(super) fn number_of(jid: &str) -> &str {
    jid.split('@').next().unwrap_or_default()
}

impl Net {
    /// Keeps media for a message; its descriptor carries where to fetch it (relative to
    /// netsim's address).
    pub fn store_media(&self, m: &MediaIn) -> Result<Value, NetError> {
        let data = m.bytes()?;
        let id = Alphanumeric.sample_string(&mut rand::thread_rng(), 24);
        let desc = json!({ "url": format!("/media/{id}"), "mime_type": m.mime_type, "filename": m.filename, "size": data.len() });
        self.lock().media.insert(id, Blob { mime_type: m.mime_type.clone(), data, expired: false, endless: m.endless });
        Ok(desc)
    }

    /// Media by id: `None` unknown, `Some(None)` expired.
    pub fn media(&self, id: &str) -> Option<Option<Served>> {
        let s = self.lock();
        let b = s.media.get(id)?;
        Some((!b.expired).then(|| Served { mime_type: b.mime_type.clone(), data: b.data.clone(), endless: b.endless }))
    }

    /// The network forgets the media's bytes (as WhatsApp's servers do after a while).
    pub fn expire_media(&self, id: &str) -> Result<(), NetError> {
        let mut s = self.lock();
        let b = s.media.get_mut(id).ok_or(NetError::NotFound)?;
        b.expired = true;
        b.data.clear();
        Ok(())
    }

    pub fn set_profile(&self, number: &str, p: ProfileIn) -> Result<(), NetError> {
        let picture = p.picture.as_ref().map(|m| m.bytes().map(|b| (m.mime_type.clone(), b))).transpose()?;
        let mut s = self.lock();
        let phone = s.phones.get_mut(number).ok_or(NetError::NoAccount)?;
        if let Some(n) = p.name {
            phone.profile.name = Some(n);
        }
        if let Some(a) = p.about {
            phone.profile.about = a;
        }
        if let Some(b) = p.business_profile {
            phone.profile.business_profile = Some(b);
        }
        if picture.is_some() {
            phone.profile.picture = picture;
        }
        Ok(())
    }

    pub fn picture(&self, number: &str) -> Option<(String, Vec<u8>)> {
        self.lock().phones.get(number)?.profile.picture.clone()
    }

    /// `number` saves `other` as a contact under `name`.
    pub fn add_contact(&self, number: &str, other: &str, name: Option<String>) -> Result<(), NetError> {
        let mut s = self.lock();
        if !s.phones.contains_key(other) {
            return Err(NetError::NoAccount);
        }
        s.phones.get_mut(number).ok_or(NetError::NoAccount)?.contacts.insert(other.to_string(), name);
        Ok(())
    }

    /// What the account's devices set: chat settings, block list, read messages.
    pub fn phone_state(&self, number: &str) -> Option<Value> {
        let s = self.lock();
        let p = s.phones.get(number)?;
        let blocked: BTreeSet<&String> = p.blocked.iter().collect();
        let read: BTreeSet<&String> = p.read.iter().collect();
        Some(json!({ "chats": p.chats, "blocked": blocked, "read": read }))
    }

    /// Sends the account's history to its online devices again (WhatsApp may repeat a
    /// history sync); returns how many devices got it.
    pub fn resync(&self, number: &str) -> Result<usize, NetError> {
        let mut s = self.lock();
        if !s.phones.contains_key(number) {
            return Err(NetError::NoAccount);
        }
        let online: Vec<String> = s
            .devices
            .iter()
            .filter(|(sess, n)| n.as_str() == number && s.online.contains_key(*sess))
            .map(|(sess, _)| sess.clone())
            .collect();
        for sess in &online {
            s.start_history(sess, number);
        }
        Ok(online.len())
    }

    /// A phone's own operations (the control API), as its devices would ask them.
    pub fn phone_op(&self, number: &str, op: NetOp) -> Result<Value, (&'static str, &'static str)> {
        let mut s = self.lock();
        if !s.phones.contains_key(number) {
            return Err(("not_found", "no account has this number"));
        }
        s.apply(number, op).map(Answer::into_value)
    }

    /// A linked device's chat, contact and block-list operations.
    pub fn net_op(&self, conn: ConnId, req: u64, op: NetOp) {
        let mut s = self.lock();
        let Some(ConnState::Online { number, .. }) = s.conns.get(&conn).map(|c| &c.state) else {
            return s.send_to(conn, ServerEv::err(req, "not_connected", "this session is not online"));
        };
        let number = number.clone();
        let reply = match s.apply(&number, op) {
            Ok(v) => ServerEv::ok(req, v.into_value()),
            Err((code, detail)) => ServerEv::err(req, code, detail),
        };
        s.send_to(conn, reply);
    }
}

impl State {
    /// The account's privacy settings: the defaults with its changes.
    fn privacy(&self, me: &str) -> std::collections::BTreeMap<String, String> {
        let mut all = shared::privacy::defaults();
        all.extend(self.phones[me].privacy.clone());
        all
    }

    fn contact(&self, owner: &Phone, other: &str) -> Option<ContactInfo> {
        let p = self.phones.get(other)?;
        Some(ContactInfo {
            jid: Jid::user(other),
            name: owner.contacts.get(other).cloned().flatten(),
            push_name: p.profile.name.clone(),
            business: Some(p.business),
        })
    }

    fn apply(&mut self, me: &str, op: NetOp) -> Result<Answer, Refusal> {
        match op {
            NetOp::Chat(op) => self.chat_op(me, op),
            NetOp::Contact(op) => self.contact_op(me, op),
            NetOp::Account(op) => self.account_op(me, op),
            NetOp::Group(op) => self.group_op(me, op),
            NetOp::Community(op) => self.community_op(me, op),
            NetOp::Channel(op) => self.channel_op(me, op),
            NetOp::Label(op) => self.label_op(me, op),
        }
    }

    fn chat_op(&mut self, me: &str, op: ChatOp) -> Result<Answer, Refusal> {
        match op {
            ChatOp::ReadChat(o) => {
                let other = other_of(o.jid.as_str())?;
                let phone = self.phones.get_mut(me).expect("online account exists");
                phone.chats.entry(other.clone()).or_default().marked_unread = !o.read;
                if o.read {
                    let ids: Vec<String> = phone
                        .inbox
                        .iter()
                        .filter(|m| m.from == other && !phone.read.contains(&m.id))
                        .map(|m| m.id.clone())
                        .collect();
                    phone.read.extend(ids.iter().cloned());
                    for id in ids {
                        let ev = ServerEv::Receipt {
                            id,
                            status: "read".into(),
                            from: me.to_string(),
                            timestamp: Utc::now(),
                        };
                        self.notify_account(&other, ev);
                    }
                }
                Ok(o.answer(()))
            }
            ChatOp::ModifyChat(o) => {
                let other = other_of(o.jid.as_str())?;
                let c = self.phones.get_mut(me).expect("online account exists").chats.entry(other).or_default();
                if let Some(a) = o.archived {
                    c.archived = a;
                }
                if let Some(p) = o.pinned {
                    c.pinned = p;
                }
                if let Some(m) = o.muted_until {
                    c.muted_until = m;
                }
                Ok(o.answer(()))
            }
            ChatOp::ChatPresence(o) => {
                // Shown in direct chats only (a group's members are not modelled typing).
                if o.jid.is_group() {
                    return Ok(o.answer(()));
                }
                let other = other_of(o.jid.as_str())?;
                self.known(&other)?;
                let typing = &mut self.phones.get_mut(&other).expect("known").typing;
                if o.composing {
                    typing.insert(me.to_string());
                } else {
                    typing.remove(me);
                }
                Ok(o.answer(()))
            }
            ChatOp::RevokeMessage(o) => {
                self.own_message(me, &o.wa_message_id, |m| {
                    m.text = None;
                    m.body = serde_json::json!({ "revoked": true });
                })?;
                Ok(o.answer(()))
            }
            ChatOp::EditMessage(o) => {
                let text = &o.text;
                if text.trim().is_empty() || text.len() > 65_536 {
                    return Err(("validation_failed", "the new text must be 1-65536 bytes"));
                }
                self.own_message(me, &o.wa_message_id, |m| {
                    if m.kind == "text" {
                        m.text = Some(text.clone());
                        m.body["text"] = Value::String(text.clone());
                        m.body["edited"] = Value::Bool(true);
                    }
                })?;
                Ok(o.answer(()))
            }
            ChatOp::DeleteChat(o) => {
                let other = other_of(o.jid.as_str())?;
                self.phones.get_mut(me).expect("online account exists").chats.entry(other).or_default().deleted = true;
                Ok(o.answer(()))
            }
        }
    }

    fn contact_op(&mut self, me: &str, op: ContactOp) -> Result<Answer, Refusal> {
        match op {
            ContactOp::Contacts(o) => {
                let owner = &self.phones[me];
                let mut numbers: BTreeSet<&str> = owner.contacts.keys().map(String::as_str).collect();
                numbers.extend(owner.inbox.iter().map(|m| m.from.as_str()));
                numbers.extend(owner.sent.iter().map(|m| m.to.as_str()));
                numbers.remove(me);
                Ok(o.answer(numbers.into_iter().filter_map(|n| self.contact(owner, n)).collect()))
            }
            ContactOp::Contact(o) => {
                let other = other_of(o.jid.as_str())?;
                let c = self.contact(&self.phones[me], &other).ok_or(("not_found", "no account has this number"))?;
                Ok(o.answer(c))
            }
            ContactOp::ContactPicture(o) => {
                let other = other_of(o.jid.as_str())?;
                self.known(&other)?;
                let has = self.phones[&other].profile.picture.is_some();
                Ok(o.answer(wire::PictureUrl { url: has.then(|| format!("/pictures/{other}")) }))
            }
            ContactOp::ContactProfile(o) => {
                let other = other_of(o.jid.as_str())?;
                self.known(&other)?;
                let p = &self.phones[&other];
                let business = p.business.then(|| p.profile.business_profile.clone().unwrap_or_default());
                Ok(o.answer(ContactDetails {
                    jid: Jid::user(&other),
                    about: Some(p.profile.about.clone()),
                    business_profile: business,
                }))
            }
            ContactOp::Block(o) => {
                let other = other_of(o.jid.as_str())?;
                self.known(&other)?;
                let phone = self.phones.get_mut(me).expect("online account exists");
                if o.blocked {
                    phone.blocked.insert(other);
                } else {
                    phone.blocked.remove(&other);
                }
                Ok(o.answer(()))
            }
            ContactOp::Blocklist(o) => {
                let list: BTreeSet<Jid> = self.phones[me].blocked.iter().map(|n| Jid::user(n)).collect();
                Ok(o.answer(list.into_iter().collect()))
            }
        }
    }

    fn account_op(&mut self, me: &str, op: AccountOp) -> Result<Answer, Refusal> {
        match op {
            AccountOp::Profile(o) => {
                let p = &self.phones[me];
                let picture = p.profile.picture.is_some().then(|| format!("/pictures/{me}"));
                Ok(o.answer(wire::OwnProfile {
                    push_name: p.profile.name.clone(),
                    about: Some(p.profile.about.clone()),
                    picture_url: picture,
                }))
            }
            AccountOp::SetProfile(o) => {
                let p = &mut self.phones.get_mut(me).expect("online account exists").profile;
                if let Some(a) = &o.about {
                    p.about = a.clone();
                }
                if let Some(n) = &o.push_name {
                    p.name = Some(n.clone());
                }
                Ok(o.answer(()))
            }
            AccountOp::SetPicture(o) => {
                let picture = match &o.picture {
                    Some(p) => Some((
                        p.mime_type.clone(),
                        p.bytes().ok_or(("validation_failed", "the picture is not base64"))?,
                    )),
                    None => None,
                };
                self.phones.get_mut(me).expect("online account exists").profile.picture = picture;
                Ok(o.answer(()))
            }
            AccountOp::SetPresence(o) => {
                self.phones.get_mut(me).expect("online account exists").presence =
                    Some(if o.available { "available" } else { "unavailable" });
                Ok(o.answer(()))
            }
            AccountOp::Privacy(o) => Ok(o.answer(self.privacy(me))),
            AccountOp::SetPrivacy(o) => {
                shared::privacy::check(&o.category, &o.value).map_err(|e| match e {
                    shared::privacy::PrivacyError::UnknownCategory => ("validation_failed", "unknown privacy category"),
                    shared::privacy::PrivacyError::BadValue => {
                        ("validation_failed", "this value does not fit the category")
                    }
                })?;
                let privacy = &mut self.phones.get_mut(me).expect("online account exists").privacy;
                privacy.insert(o.category.clone(), o.value.clone());
                Ok(o.answer(self.privacy(me)))
            }
            // Status is carried by the WhatsApp driver; netsim does not model it yet.
            AccountOp::PostStatus(_) => Err(("not_implemented", "netsim does not model this operation yet")),
        }
    }

    fn known(&self, n: &str) -> Result<(), Refusal> {
        if self.phones.contains_key(n) {
            Ok(())
        } else {
            Err(("not_found", "no account has this number"))
        }
    }
}

type Refusal = (&'static str, &'static str);

/// The number a user JID names, refused for anything else.
fn other_of(j: &str) -> Result<String, Refusal> {
    let n = number_of(j);
    if valid_number(n) {
        Ok(n.to_string())
    } else {
        Err(("validation_failed", "not a user JID or number"))
    }
}

impl State {
    /// Changes every received copy of `me`'s message `id` (a revoke, an edit); answers null,
    /// or `not_found` when no phone holds it.
    fn own_message(&mut self, me: &str, id: &str, change: impl Fn(&mut SimMessage)) -> Result<(), Refusal> {
        let mut found = false;
        for p in self.phones.values_mut() {
            for m in p.inbox.iter_mut().filter(|m| m.id == id && m.from == me) {
                change(m);
                found = true;
            }
        }
        if found {
            Ok(())
        } else {
            Err(("not_found", "no such message of this account"))
        }
    }
}

//! Labels of business accounts: the phone keeps them (created, edited, deleted and
//! applied to chats or messages), its linked devices ask for changes (`contract::LabelOp`), and
//! every change is told to the account's devices (`ServerEv::Label`,
//! `ServerEv::LabelTarget`), as WhatsApp syncs labels across devices. A personal
//! account has none: `business_account_required`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use shared::contract::{self as wire, Answer, LabelOp, Operation};

use super::*;

type Refusal = (&'static str, &'static str);

/// WhatsApp's label colours are an index into a palette of 20.
pub(super) const COLORS: i32 = 20;

/// A phone's labels.
#[derive(Debug, Default)]
pub(super) struct Labels {
    /// id -> (name, colour).
    labels: BTreeMap<String, (String, i32)>,
    /// (label, chat number, message id or "").
    targets: BTreeSet<(String, String, String)>,
}

impl State {
    /// A label operation (`SetLabel`, `DeleteLabel`, `LabelChat`, `LabelMessage`) of
    /// account `me`; its devices are told of the change.
    pub(super) fn label_op(&mut self, me: &str, op: LabelOp) -> Result<Answer, Refusal> {
        let (label_id, ev, edit, done) = match op {
            LabelOp::SetLabel(o) => {
                let wire::SetLabel { label_id, name, color } = o.clone();
                if name.trim().is_empty() || name.chars().count() > 100 || !(0..COLORS).contains(&color) {
                    return Err(("validation_failed", "a label needs a name (1-100 characters) and a colour 0-19"));
                }
                let ev = ServerEv::Label { label_id: label_id.clone(), name: name.clone(), color, deleted: false };
                (label_id.clone(), ev, Edit::Set(label_id, name, color), o.answer(()))
            }
            LabelOp::DeleteLabel(o) => {
                let label_id = o.label_id.clone();
                let ev = ServerEv::Label { label_id: label_id.clone(), name: String::new(), color: 0, deleted: true };
                (label_id.clone(), ev, Edit::Delete(label_id), o.answer(()))
            }
            LabelOp::LabelChat(o) => {
                let (label_id, jid, labeled) = (o.label_id.clone(), String::from(o.jid.clone()), o.labeled);
                let ev =
                    ServerEv::LabelTarget { label_id: label_id.clone(), jid: jid.clone(), message_id: None, labeled };
                (label_id.clone(), ev, Edit::Target(label_id, jid, String::new(), labeled), o.answer(()))
            }
            LabelOp::LabelMessage(o) => {
                let wire::LabelMessage { label_id, jid, wa_message_id, labeled } = o.clone();
                let jid = String::from(jid);
                let ev = ServerEv::LabelTarget {
                    label_id: label_id.clone(),
                    jid: jid.clone(),
                    message_id: Some(wa_message_id.clone()),
                    labeled,
                };
                (label_id.clone(), ev, Edit::Target(label_id, jid, wa_message_id, labeled), o.answer(()))
            }
        };
        self.edit_labels(me, &label_id, edit)?;
        self.notify_account(me, ev);
        Ok(done)
    }

    fn edit_labels(&mut self, me: &str, label_id: &str, edit: Edit) -> Result<(), Refusal> {
        let phone = self.phones.get_mut(me).ok_or(("not_found", "no account has this number"))?;
        if !phone.business {
            return Err(("business_account_required", "labels are for business accounts"));
        }
        let l = &mut phone.labels;
        if !matches!(edit, Edit::Set(..)) && !l.labels.contains_key(label_id) {
            return Err(("not_found", "no such label"));
        }
        match edit {
            Edit::Set(id, name, color) => {
                l.labels.insert(id, (name, color));
            }
            Edit::Delete(id) => {
                l.labels.remove(&id);
                l.targets.retain(|(t, _, _)| *t != id);
            }
            Edit::Target(id, jid, message, labeled) => {
                let chat = super::ops::number_of(&jid);
                if !valid_number(chat) {
                    return Err(("validation_failed", "not a user JID or number"));
                }
                if !message.is_empty()
                    && !phone
                        .inbox
                        .iter()
                        .chain(phone.sent.iter())
                        .any(|m| m.id == message && (m.from == chat || m.to == chat))
                {
                    return Err(("not_found", "no such message in this chat"));
                }
                let key = (id, chat.to_string(), message);
                if labeled {
                    l.targets.insert(key);
                } else {
                    l.targets.remove(&key);
                }
            }
        }
        Ok(())
    }
}

enum Edit {
    Set(String, String, i32),
    Delete(String),
    /// (label, chat jid, message id or "", labeled)
    Target(String, String, String, bool),
}

impl Net {
    /// The phone's labels and what they apply to (the control API).
    pub fn labels(&self, number: &str) -> Result<Value, NetError> {
        let s = self.lock();
        let phone = s.phones.get(number).ok_or(NetError::NoAccount)?;
        let labels: Vec<Value> = phone
            .labels
            .labels
            .iter()
            .map(|(id, (name, color))| {
                let on = |msg: bool| -> Vec<Value> {
                    phone
                        .labels
                        .targets
                        .iter()
                        .filter(|(t, _, m)| t == id && m.is_empty() != msg)
                        .map(|(_, c, m)| if msg { serde_json::json!({ "chat": c, "message_id": m }) } else { c.clone().into() })
                        .collect()
                };
                serde_json::json!({ "label_id": id, "name": name, "color": color, "chats": on(false), "messages": on(true) })
            })
            .collect();
        Ok(serde_json::json!({ "labels": labels }))
    }
}

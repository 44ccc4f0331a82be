//! The double's contact routes: create (identifiers and numbers unique), update, search,
//! and a contact's conversations.

use super::*;

pub(super) async fn create_contact(
    State(st): State<S>,
    Path(a): Path<i64>,
    h: HeaderMap,
    Json(b): Json<Value>,
) -> Response {
    let path = format!("/api/v1/accounts/{a}/contacts");
    answer(
        &st,
        Call { method: "post", path, query: String::new(), headers: &h, body: b.clone(), multipart: false },
        |s| {
            let identifier = b["identifier"].as_str().unwrap_or_default().to_string();
            let phone = b["phone_number"].as_str().map(str::to_string);
            // Chatwoot keeps identifiers and phone numbers unique in an account.
            if s.contacts.iter().any(|c| c.2 == identifier || (phone.is_some() && c.3 == phone)) {
                return (
                    StatusCode::UNPROCESSABLE_ENTITY,
                    json!({"description": "Identifier has already been taken", "errors": []}),
                );
            }
            let id = s.id();
            let name = b["name"].as_str().unwrap_or_default().to_string();
            s.contacts.push((id, name.clone(), identifier.clone(), phone.clone()));
            if let Some(a) = b.get("additional_attributes") {
                s.contact_attributes.insert(id, a.clone());
            }
            let mut c = json!({"id": id, "name": name, "identifier": identifier});
            if let Some(p) = phone {
                c["phone_number"] = json!(p);
            }
            (StatusCode::OK, json!({"id": id, "payload": [c]}))
        },
    )
    .await
}

/// Chatwoot's `PUT contacts/{id}`: the fields given replace the contact's (identifier
/// and phone number still unique in the account); `additional_attributes` are merged.
pub(super) async fn update_contact(
    State(st): State<S>,
    Path((a, c)): Path<(i64, i64)>,
    h: HeaderMap,
    Json(b): Json<Value>,
) -> Response {
    let path = format!("/api/v1/accounts/{a}/contacts/{c}");
    answer(
        &st,
        Call { method: "put", path, query: String::new(), headers: &h, body: b.clone(), multipart: false },
        |s| {
            let Some(i) = s.contacts.iter().position(|x| x.0 == c) else {
                return (StatusCode::NOT_FOUND, json!({"description": "Contact not found", "errors": []}));
            };
            let identifier = b["identifier"].as_str().map(str::to_string);
            let phone = b["phone_number"].as_str().map(str::to_string);
            let taken = s
                .contacts
                .iter()
                .any(|x| x.0 != c && (identifier.as_ref() == Some(&x.2) || (phone.is_some() && x.3 == phone)));
            if taken {
                return (
                    StatusCode::UNPROCESSABLE_ENTITY,
                    json!({"description": "Identifier has already been taken", "errors": []}),
                );
            }
            let cn = &mut s.contacts[i];
            if let Some(n) = b["name"].as_str() {
                cn.1 = n.to_string();
            }
            if let Some(id) = identifier {
                cn.2 = id;
            }
            if phone.is_some() {
                cn.3 = phone;
            }
            let (id, name, identifier, phone) = cn.clone();
            if let Some(Value::Object(add)) = b.get("additional_attributes") {
                let attrs = s.contact_attributes.entry(id).or_insert_with(|| json!({}));
                for (k, v) in add {
                    attrs[k] = v.clone();
                }
            }
            let mut out = json!({"id": id, "name": name, "identifier": identifier});
            if let Some(p) = phone {
                out["phone_number"] = json!(p);
            }
            // As Chatwoot's description documents it: 204, with the contact.
            (StatusCode::NO_CONTENT, out)
        },
    )
    .await
}

pub(super) async fn search_contacts(
    State(st): State<S>,
    Path(a): Path<i64>,
    Query(q): Query<BTreeMap<String, String>>,
    h: HeaderMap,
) -> Response {
    let path = format!("/api/v1/accounts/{a}/contacts/search");
    answer(
        &st,
        Call { method: "get", path, query: raw_query(&q), headers: &h, body: Value::Null, multipart: false },
        |s| {
            let term = q.get("q").cloned().unwrap_or_default();
            let found: Vec<Value> = s
                .contacts
                .iter()
                .filter(|c| {
                    c.2.contains(&term) || c.1.contains(&term) || c.3.as_deref().is_some_and(|p| p.contains(&term))
                })
                .map(|c| {
                    let mut v = json!({"id": c.0, "name": c.1, "identifier": c.2});
                    if let Some(p) = &c.3 {
                        v["phone_number"] = json!(p);
                    }
                    v
                })
                .collect();
            (StatusCode::OK, json!({"meta": {"count": found.len(), "current_page": "1"}, "payload": found}))
        },
    )
    .await
}

pub(super) async fn contact_conversations(
    State(st): State<S>,
    Path((a, c)): Path<(i64, i64)>,
    h: HeaderMap,
) -> Response {
    let path = format!("/api/v1/accounts/{a}/contacts/{c}/conversations");
    answer(
        &st,
        Call { method: "get", path, query: String::new(), headers: &h, body: Value::Null, multipart: false },
        |s| {
            let list: Vec<Value> = s
                .conversations
                .iter()
                .filter(|v| v.2 == c)
                .map(|v| json!({"id": v.0, "inbox_id": v.1, "status": v.3, "account_id": a}))
                .collect();
            (StatusCode::OK, json!({ "payload": list }))
        },
    )
    .await
}

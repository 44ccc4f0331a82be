//! `GET /v1/me`: who the token is.

use axum::Json;
use serde::{Deserialize, Serialize};
use shared::db::accounts::AccountState;
use shared::db::api_keys::KeyScope;
use shared::error::ErrorBody;
use shared::ids::{AccountId, InstanceId, KeyId};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use door::extract::Principal;
use door::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(me))
}

/// The identity behind a token.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MeOut {
    /// `admin`, `instance`, `api_key` or `account`.
    pub kind: String,
    /// An account token's account.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account_id: Option<AccountId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account_name: Option<String>,
    /// An account token's account's state (`suspended`: the token may only read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account_state: Option<AccountState>,
    /// The instance an instance token belongs to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance_id: Option<InstanceId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance_name: Option<String>,
    /// An API key's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_id: Option<KeyId>,
    /// An API key's scope.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<KeyScope>,
}

/// Identity of the token.
#[utoipa::path(get, path = "/v1/me", tag = "operation",
    responses(
        (status = 200, description = "the token's identity", body = MeOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: an instance token used from an address outside its allow-list", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = []), ("api_key_bearer" = [])))]
async fn me(principal: Principal) -> Json<MeOut> {
    let none = MeOut {
        kind: String::new(),
        account_id: None,
        account_name: None,
        account_state: None,
        instance_id: None,
        instance_name: None,
        key_id: None,
        scope: None,
    };
    Json(match principal {
        Principal::Admin => MeOut { kind: "admin".into(), ..none },
        Principal::Instance { id, name } => {
            MeOut { kind: "instance".into(), instance_id: Some(id), instance_name: Some(name), ..none }
        }
        Principal::Key { id, name, key_id, scope } => MeOut {
            kind: "api_key".into(),
            instance_id: Some(id),
            instance_name: Some(name),
            key_id: Some(key_id),
            scope: Some(scope),
            ..none
        },
        Principal::Account { id, name, suspended } => MeOut {
            kind: "account".into(),
            account_id: Some(id),
            account_name: Some(name),
            account_state: Some(if suspended { AccountState::Suspended } else { AccountState::Active }),
            ..none
        },
    })
}

//! `GET /v1/me`: who the token is.

use axum::Json;
use serde::{Deserialize, Serialize};
use shared::db::api_keys::KeyScope;
use shared::error::ErrorBody;
use shared::ids::{InstanceId, KeyId};
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
    /// `admin`, `instance` or `api_key`.
    pub kind: String,
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
    Json(match principal {
        Principal::Admin => {
            MeOut { kind: "admin".into(), instance_id: None, instance_name: None, key_id: None, scope: None }
        }
        Principal::Instance { id, name } => MeOut {
            kind: "instance".into(),
            instance_id: Some(id),
            instance_name: Some(name),
            key_id: None,
            scope: None,
        },
        Principal::Key { id, name, key_id, scope } => MeOut {
            kind: "api_key".into(),
            instance_id: Some(id),
            instance_name: Some(name),
            key_id: Some(key_id),
            scope: Some(scope),
        },
    })
}

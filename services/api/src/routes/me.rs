//! `GET /v1/me`: who the token is.

use axum::Json;
use serde::{Deserialize, Serialize};
use shared::error::ErrorBody;
use shared::ids::InstanceId;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::Principal;
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(me))
}

/// The identity behind a token.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MeOut {
    /// `admin` or `instance`.
    pub kind: String,
    /// The instance an instance token belongs to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance_id: Option<InstanceId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance_name: Option<String>,
}

/// Identity of the token.
#[utoipa::path(get, path = "/v1/me", tag = "operation",
    responses(
        (status = 200, description = "the token's identity", body = MeOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: an instance token used from an address outside its allow-list", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn me(principal: Principal) -> Json<MeOut> {
    Json(match principal {
        Principal::Admin => MeOut { kind: "admin".into(), instance_id: None, instance_name: None },
        Principal::Instance { id, name } => {
            MeOut { kind: "instance".into(), instance_id: Some(id), instance_name: Some(name) }
        }
    })
}

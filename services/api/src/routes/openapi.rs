//! `GET /v1/openapi.json`: the OpenAPI 3.1 description, generated from the code.

use axum::response::IntoResponse;
use shared::error::ErrorBody;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::Principal;
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(openapi_json))
}

/// The OpenAPI 3.1 description of this API.
#[utoipa::path(get, path = "/v1/openapi.json", tag = "operation",
    responses(
        (status = 200, description = "OpenAPI 3.1 JSON", content_type = "application/json", body = serde_json::Value),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn openapi_json(_principal: Principal) -> impl IntoResponse {
    ([(axum::http::header::CONTENT_TYPE, "application/json")], crate::openapi::json().as_str())
}

//! `GET /v1/openapi.json`: the OpenAPI 3.1 description, generated from the code; and
//! `/docs`, interactive documentation for tenants: Swagger UI (utoipa-swagger-ui, its
//! assets built into the binary, no CDN) with the description served beside it at
//! `/docs/openapi.json`, so reading needs no token. "Try it out" takes the bearer token
//! typed into the page's Authorize dialog.

use axum::response::IntoResponse;
use shared::error::ErrorBody;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use door::extract::Principal;
use door::AppState;

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

/// Where the interactive documentation is served.
pub const DOCS_PATH: &str = "/docs";

/// The Swagger UI routes (`/docs`, its assets, `/docs/openapi.json`). Not API
/// operations, so not in the description.
pub fn docs() -> axum::Router<AppState> {
    let doc: serde_json::Value = serde_json::from_str(crate::openapi::json()).expect("the description is JSON");
    let ui = utoipa_swagger_ui::SwaggerUi::new(DOCS_PATH)
        .external_url_unchecked(format!("{DOCS_PATH}/openapi.json"), doc)
        .config(utoipa_swagger_ui::Config::default().try_it_out_enabled(true).persist_authorization(false));
    ui.into()
}

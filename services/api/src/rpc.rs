//! Reaching the worker that runs an instance: NATS request-reply on the instance's
//! subject. No owner -> 409 `instance_not_connected` (or what the instance's state says);
//! no answer in time -> 504 `worker_timeout`.

use shared::bus::{self, RpcError, RpcRequest};
use shared::db::instances::{self, InstanceState};
use shared::ids::InstanceId;
use shared::{ApiError, ErrorCode};

use crate::state::AppState;

/// Carries a session operation (`NetOp`) to the instance's worker; its answer as `T`
/// (`serde_json::Value` when the caller only needs it done).
pub async fn net<T: serde::de::DeserializeOwned>(
    state: &AppState,
    id: &InstanceId,
    op: bus::NetOp,
) -> Result<T, ApiError> {
    let v = call(state, id, RpcRequest::Net { op }).await?;
    serde_json::from_value(v).map_err(|e| ApiError::internal(format_args!("unexpected answer from the worker: {e}")))
}

/// Sends `req` to the instance's worker and returns its answer's value.
pub async fn call(state: &AppState, id: &InstanceId, req: RpcRequest) -> Result<serde_json::Value, ApiError> {
    let timeout = state.config.rpc_timeout;
    match bus::request(&state.nats, &state.subjects, id, &req, timeout).await {
        Ok(reply) => reply.into(),
        Err(RpcError::NoResponders) => Err(not_running(state, id).await?),
        Err(RpcError::Timeout) => {
            Err(ApiError::new(ErrorCode::WorkerTimeout, "the instance's worker did not answer in time"))
        }
        Err(RpcError::Other(e)) => Err(ApiError::internal(format_args!("rpc: {e}"))),
    }
}

/// The error for an instance no worker runs, from its recorded state.
pub async fn not_running(state: &AppState, id: &InstanceId) -> Result<ApiError, ApiError> {
    let row = instances::get(&state.db, id).await?.ok_or_else(ApiError::instance_not_found)?;
    Ok(match row.state {
        InstanceState::Banned => ApiError::new(ErrorCode::InstanceBanned, "the number is banned; delete the instance"),
        InstanceState::LoggedOut => {
            ApiError::new(ErrorCode::InstanceNotConnected, "the number logged out; connect to pair again")
                .with_retryable(false)
        }
        // The spec's rule: retryable unless logged out (a connect makes a retry succeed).
        _ if !row.desired => {
            ApiError::new(ErrorCode::InstanceNotConnected, "the instance is not running; connect it first")
        }
        _ => ApiError::new(ErrorCode::InstanceNotConnected, "no worker runs the instance right now"),
    })
}

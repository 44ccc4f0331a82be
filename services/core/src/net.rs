//! Reaching the worker that runs an instance: NATS request-reply on the instance's
//! subject. No owner -> `instance_not_connected` (or what the instance's state says); no
//! answer in time -> `worker_timeout`.

use shared::bus::{self, RpcError, RpcRequest};
use shared::contract::Operation;
use shared::db::instances::{self, InstanceState};
use shared::ids::InstanceId;
use shared::ErrorCode;

use crate::{Core, Error, Result};

/// Carries a session operation to the instance's worker; its typed reply.
pub async fn net<O: Operation>(core: &Core, id: &InstanceId, op: O) -> Result<O::Reply> {
    let v = call(core, id, RpcRequest::Net { op: op.into() }).await?;
    serde_json::from_value(v).map_err(|e| Error::internal(format_args!("unexpected answer from the worker: {e}")))
}

/// Sends `req` to the instance's worker and returns its answer's value.
pub async fn call(core: &Core, id: &InstanceId, req: RpcRequest) -> Result<serde_json::Value> {
    match bus::request(&core.nats, &core.subjects, id, &req, core.config.api.rpc_timeout).await {
        Ok(reply) => Ok(Result::<_, shared::ApiError>::from(reply)?),
        Err(RpcError::NoResponders) => Err(not_running(core, id).await?),
        Err(RpcError::Timeout) => {
            Err(Error::refused(ErrorCode::WorkerTimeout, "the instance's worker did not answer in time"))
        }
        Err(RpcError::Other(e)) => Err(Error::internal(format_args!("rpc: {e}"))),
    }
}

/// The error for an instance no worker runs, from its recorded state.
pub async fn not_running(core: &Core, id: &InstanceId) -> Result<Error> {
    let row = instances::get(&core.db, id).await?.ok_or(Error::InstanceNotFound)?;
    Ok(match row.state {
        InstanceState::Banned => Error::refused(ErrorCode::InstanceBanned, "the number is banned; delete the instance"),
        InstanceState::LoggedOut => Error::Refused {
            code: ErrorCode::InstanceNotConnected,
            message: "the number logged out; connect to pair again".into(),
            retryable: false,
        },
        // The spec's rule: retryable unless logged out (a connect makes a retry succeed).
        _ if !row.desired => {
            Error::refused(ErrorCode::InstanceNotConnected, "the instance is not running; connect it first")
        }
        _ => Error::refused(ErrorCode::InstanceNotConnected, "no worker runs the instance right now"),
    })
}

//! Requests to the instance over NATS: answered by the open session within their
//! deadline, a bounded number at once, or while none is open, as connecting.

use super::*;

impl Actor {
    /// The answer to a request while no session is open: the instance is connecting.
    pub(super) async fn rpc_without_session(&mut self, msg: async_nats::Message) {
        let Some(reply_to) = msg.reply.clone() else { return };
        let state = self.state.as_str();
        let (reply, kind) = match serde_json::from_slice::<RpcRequest>(&msg.payload) {
            Err(_) => (RpcReply::err(ErrorCode::ValidationFailed, "unknown request"), "unknown"),
            Ok(RpcRequest::PairingCode { .. }) => (
                RpcReply::Err {
                    code: ErrorCode::InstanceNotPairing,
                    message: format!("the instance is {state}, not qr_pending"),
                    retryable: true,
                },
                "pairing_code",
            ),
            // Already (re)connecting: nothing more to do.
            Ok(RpcRequest::Restart) => (RpcReply::Ok { value: serde_json::Value::Null }, "restart"),
            Ok(other) => {
                let kind = other.kind();
                let message = format!("the instance is {state}: its session is not open yet");
                (RpcReply::Err { code: ErrorCode::InstanceNotConnected, message, retryable: true }, kind)
            }
        };
        answer(&self.ctx, reply_to, reply, kind).await;
    }

    /// A request for the session. Logout and restart change the actor's course and run
    /// here; every other operation runs beside the loop with its own deadline, so a slow
    /// one never holds up sends, receipts or events.
    pub(super) async fn rpc(&mut self, session: &Arc<dyn Session>, msg: async_nats::Message) -> Step {
        let Some(reply_to) = msg.reply.clone() else { return Step::Continue };
        let request = match serde_json::from_slice::<RpcRequest>(&msg.payload) {
            Ok(r) => r,
            Err(_) => {
                answer(&self.ctx, reply_to, RpcReply::err(ErrorCode::ValidationFailed, "unknown request"), "unknown")
                    .await;
                return Step::Continue;
            }
        };
        let kind = request.kind();
        let refusal = match &request {
            RpcRequest::Logout => {
                let (reply, step) = match session.logout().await {
                    Ok(()) => {
                        (RpcReply::Ok { value: serde_json::Value::Null }, self.end(InstanceState::LoggedOut).await)
                    }
                    Err(e) => (RpcReply::err(e.code, e.detail), Step::Continue),
                };
                answer(&self.ctx, reply_to, reply, kind).await;
                return step;
            }
            RpcRequest::Restart => {
                answer(&self.ctx, reply_to, RpcReply::Ok { value: serde_json::Value::Null }, kind).await;
                return Step::Reconnect;
            }
            RpcRequest::PairingCode { .. } if self.state != InstanceState::QrPending => Some(RpcReply::Err {
                code: ErrorCode::InstanceNotPairing,
                message: format!("the instance is {}, not qr_pending", self.state.as_str()),
                retryable: self.state == InstanceState::Connecting,
            }),
            RpcRequest::Net { .. } | RpcRequest::CheckNumbers { .. } | RpcRequest::SetPicture { .. }
                if self.state != InstanceState::Connected =>
            {
                Some(RpcReply::err(ErrorCode::InstanceNotConnected, "the instance is not connected"))
            }
            _ => None,
        };
        if let Some(reply) = refusal {
            answer(&self.ctx, reply_to, reply, kind).await;
            return Step::Continue;
        }
        let Ok(slot) = self.rpc_slots.clone().try_acquire_owned() else {
            let busy = RpcReply::Err {
                code: ErrorCode::WorkerError,
                message: format!("{RPCS_IN_FLIGHT} requests are already in flight for this instance; retry"),
                retryable: true,
            };
            answer(&self.ctx, reply_to, busy, kind).await;
            return Step::Continue;
        };
        let (session, ctx, id) = (session.clone(), self.ctx.clone(), self.id.clone());
        tokio::spawn(
            async move {
                let call = async {
                    match request {
                        RpcRequest::PairingCode { phone } => {
                            session.pairing_code(&phone).await.map(|code| serde_json::json!({ "pairing_code": code }))
                        }
                        RpcRequest::Net { op } => session.net(&op).await.map(Answer::into_value),
                        RpcRequest::SetPicture { media_id, group } => {
                            let op: NetOp = match (stored_picture(&ctx.store, &id, media_id).await, group) {
                                (Ok(picture), Some(jid)) => SetGroupPicture { jid, picture }.into(),
                                (Ok(picture), None) => SetPicture { picture }.into(),
                                (Err(e), _) => return Err(e),
                            };
                            session.net(&op).await.map(Answer::into_value)
                        }
                        RpcRequest::CheckNumbers { numbers } => {
                            session.check_numbers(&numbers).await.map(|r| serde_json::json!({ "results": r }))
                        }
                        RpcRequest::Logout | RpcRequest::Restart => unreachable!("handled in the loop"),
                    }
                };
                let reply = match tokio::time::timeout(RPC_DEADLINE, call).await {
                    Ok(Ok(value)) => RpcReply::Ok { value },
                    Ok(Err(e)) => RpcReply::err(e.code, e.detail),
                    Err(_) => RpcReply::err(ErrorCode::WorkerTimeout, "the network did not answer in time"),
                };
                answer(&ctx, reply_to, reply, kind).await;
                drop(slot);
            }
            .in_current_span(),
        );
        Step::Continue
    }
}

/// Sends an RPC answer, counted by request type and result.
pub(super) async fn answer(ctx: &Ctx, reply_to: async_nats::Subject, reply: RpcReply, kind: &'static str) {
    let result = if matches!(reply, RpcReply::Ok { .. }) { "ok" } else { "error" };
    metrics::counter!(RPC, "type" => kind, "result" => result).increment(1);
    let payload = serde_json::to_vec(&reply).expect("replies serialize");
    if let Err(e) = ctx.nats.publish(reply_to, payload.into()).await {
        tracing::warn!(error = %e, "rpc reply failed");
    }
}

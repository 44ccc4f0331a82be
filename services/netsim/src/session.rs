//! `GET /session`: one WebSocket per device session (see `shared::simproto`).

use std::time::Duration;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::response::Response;
use futures::{SinkExt, StreamExt};
use shared::simproto::{ClientOp, ServerEv};
use tokio::sync::mpsc::unbounded_channel;

use crate::App;

pub async fn upgrade(ws: WebSocketUpgrade, State(app): State<App>) -> Response {
    ws.on_upgrade(move |socket| handle(socket, app))
}

async fn handle(socket: WebSocket, app: App) {
    let (mut sink, mut stream) = socket.split();
    let (tx, mut rx) = unbounded_channel::<ServerEv>();
    let conn = app.net.connect(tx);
    let net = app.net.clone();
    let writer = async {
        while let Some(ev) = rx.recv().await {
            let text = serde_json::to_string(&ev).expect("events serialize");
            if sink.send(Message::Text(text.into())).await.is_err() {
                break;
            }
            // The network closed this connection (logout, ban, replaced): its last
            // event is out, so hang up.
            if net.is_closed(conn) && rx.is_empty() {
                break;
            }
        }
        let _ = sink.close().await;
    };
    let reader = async {
        while let Some(Ok(msg)) = stream.next().await {
            let text = match msg {
                Message::Text(t) => t,
                Message::Close(_) => break,
                _ => continue,
            };
            let Ok(op) = serde_json::from_str::<ClientOp>(&text) else {
                tracing::debug!(conn, "unparseable frame");
                continue;
            };
            let latency = app.net.faults().latency_ms;
            if latency > 0 {
                tokio::time::sleep(Duration::from_millis(latency)).await;
            }
            handle_op(&app, conn, op);
        }
    };
    tokio::select! {
        _ = writer => {}
        _ = reader => {}
    }
    app.net.disconnect(conn);
}

fn handle_op(app: &App, conn: u64, op: ClientOp) {
    let ttl = chrono::Duration::from_std(app.qr_rotate).unwrap_or(chrono::Duration::seconds(20));
    match op {
        ClientOp::Hello { session } => {
            let pairing = session.is_none();
            app.net.hello(conn, session, ttl);
            if pairing {
                let net = app.net.clone();
                let every = app.qr_rotate;
                tokio::spawn(async move {
                    loop {
                        tokio::time::sleep(every).await;
                        if !net.rotate_qr(conn, ttl) {
                            break;
                        }
                    }
                });
            }
        }
        ClientOp::PairCode { req, phone } => app.net.pair_code(conn, req, &phone),
        ClientOp::Send { req, message } => app.net.device_send(conn, req, message),
        ClientOp::Logout { req } => app.net.device_logout(conn, req),
        ClientOp::RejectCall { req, call_id, message } => app.net.reject_call(conn, req, &call_id, message),
        ClientOp::CheckNumbers { req, numbers } => app.net.check_numbers(conn, req, &numbers),
        ClientOp::Net { req, call } => app.net.net_op(conn, req, call),
        ClientOp::Ack { ids } => app.net.ack(conn, &ids),
        ClientOp::HistoryAck { chunk } => app.net.history_ack(conn, chunk),
    }
}

//! The real WhatsApp network on the `whatsapp-rust` crate (0.7.0, pinned), with its
//! session store in Postgres (`store::PgStore`, fenced on the lease epoch).
//!
//! A session is a whatsapp-rust `Bot` on the instance's `PgStore`: pairing (QR codes,
//! phone pairing codes), resume from the stored device, sends under the pre-assigned
//! network id (so a re-send after a takeover reuses it), and the client's events mapped
//! to ours (`map.rs`). Credentials in the instance row only say the state lives in
//! `wa_store`; the keys themselves never leave that table.

pub mod contacts;
mod download;
mod events;
pub mod http;
pub mod map;
pub mod ops;
pub mod proxy;
pub mod store;
mod upload;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use shared::contract::{Answer, NetOp, NumberAnswer};
use shared::ErrorCode;
use tokio::sync::mpsc;
use whatsapp_rust::proto_helpers::MessageExt;
use whatsapp_rust::transport::TransportFactory;
use whatsapp_rust::types::events::Event;
use whatsapp_rust::waproto::whatsapp as wa;
use whatsapp_rust::{Client, Jid};

use super::{Driver, DriverError, DriverEvent, Incoming, Outgoing, RemoteMedia, Session};
use events::{incoming, to_driver_events};
use map::Failure;
use store::PgStore;

/// Opens WhatsApp sessions.
pub struct WhatsappDriver {
    db: sqlx::PgPool,
    transport: Arc<dyn TransportFactory>,
    /// Where proxied sessions tunnel to.
    ws_url: String,
    /// How long opening a session waits for the socket before it fails (and the actor
    /// retries with backoff).
    connect_timeout: std::time::Duration,
    /// How received media is kept (retries, the instance's quota).
    media: crate::receive::MediaPolicy,
    /// Where received media's bytes go.
    store: shared::db::media::Store,
}

impl WhatsappDriver {
    /// WebSocket to `ws_url` (WhatsApp's servers unless configured otherwise).
    pub fn new(db: sqlx::PgPool, ws_url: Option<&str>, connect_timeout: std::time::Duration) -> WhatsappDriver {
        let url = ws_url.unwrap_or(whatsapp_rust::wacore::net::WHATSAPP_WEB_WS_URL);
        let factory = whatsapp_rust::transport::TokioWebSocketTransportFactory::new().with_url(url);
        WhatsappDriver {
            store: shared::db::media::Store::postgres(db.clone()),
            db,
            transport: Arc::new(factory),
            ws_url: url.to_string(),
            connect_timeout,
            media: Default::default(),
        }
    }

    /// How received media is kept (the first wait before a failed download is tried
    /// again, default 30 s; the quota) and where its bytes go (default Postgres).
    pub fn with_media(
        mut self,
        policy: crate::receive::MediaPolicy,
        store: shared::db::media::Store,
    ) -> WhatsappDriver {
        self.media = policy;
        self.store = store;
        self
    }

    /// Another transport (tests use one that refuses to dial).
    pub fn with_transport(
        db: sqlx::PgPool,
        transport: Arc<dyn TransportFactory>,
        connect_timeout: std::time::Duration,
    ) -> WhatsappDriver {
        let ws_url = whatsapp_rust::wacore::net::WHATSAPP_WEB_WS_URL.to_string();
        let store = shared::db::media::Store::postgres(db.clone());
        WhatsappDriver { db, transport, ws_url, connect_timeout, media: Default::default(), store }
    }

    /// The instance's transport: through its proxy when it has one.
    fn transport_for(&self, target: &super::OpenTarget) -> Result<Arc<dyn TransportFactory>, DriverError> {
        match &target.proxy_url {
            None => Ok(self.transport.clone()),
            Some(p) => {
                let origin = whatsapp_rust::wacore::net::WHATSAPP_WEB_ORIGIN;
                proxy::ProxyTransportFactory::new(p, &self.ws_url, Some(origin))
                    .map(|f| Arc::new(f) as Arc<dyn TransportFactory>)
                    .map_err(|e| DriverError::new(ErrorCode::ValidationFailed, e.to_string()))
            }
        }
    }
}

/// Hands the shared transport factory to a bot (which wants to own one).
struct SharedTransport(Arc<dyn TransportFactory>);

#[whatsapp_rust::async_trait]
impl TransportFactory for SharedTransport {
    async fn create_transport(
        &self,
    ) -> Result<
        (
            Arc<dyn whatsapp_rust::transport::Transport>,
            whatsapp_rust::async_channel::Receiver<whatsapp_rust::transport::TransportEvent>,
        ),
        whatsapp_rust::anyhow::Error,
    > {
        self.0.create_transport().await
    }
}

/// Calls offered to the session: call id -> (caller, call creator), for rejecting.
type Calls = Arc<Mutex<HashMap<String, (Jid, Jid)>>>;

struct WaSession {
    client: Arc<Client>,
    handle: tokio::sync::Mutex<Option<whatsapp_rust::bot::BotHandle>>,
    calls: Calls,
    /// Where the contact book lives.
    db: sqlx::PgPool,
    instance: shared::ids::InstanceId,
    /// Numbers the network said have an account, this session.
    registered: Mutex<std::collections::HashSet<String>>,
}

/// The most numbers a session remembers as registered.
const REGISTERED_CACHE: usize = 10_000;

fn failed(what: &str) -> DriverError {
    // The crate's errors may name numbers and JIDs: keep them out of our messages.
    DriverError::new(ErrorCode::WorkerError, format!("the network refused to {what}"))
}

/// What a refused send tells the queue.
fn send_error(e: whatsapp_rust::send::SendError) -> DriverError {
    match e {
        whatsapp_rust::send::SendError::NotLoggedIn => {
            DriverError::new(ErrorCode::InstanceNotConnected, "the session is not logged in")
        }
        whatsapp_rust::send::SendError::InvalidRequest(_) => {
            DriverError::new(ErrorCode::ValidationFailed, "the network refused the message")
        }
        _ => failed("take the message"),
    }
}

impl WaSession {
    /// Which of `numbers` have an account (usync's contact query).
    async fn lookup(&self, numbers: &[String]) -> Result<Vec<map::Registration>, DriverError> {
        let jids = numbers.iter().map(|n| jid(n)).collect::<Result<Vec<_>, _>>()?;
        let found = self.client.contacts().is_on_whatsapp(&jids).await.map_err(|_| failed("check the numbers"))?;
        Ok(found
            .iter()
            .map(|r| {
                // The answer may come under the account's LID, with the number in pn_jid.
                let phone = r.pn_jid.clone().unwrap_or_else(|| r.jid.clone());
                map::Registration {
                    number: phone.user.to_string(),
                    jid: phone.to_string(),
                    registered: r.is_registered,
                    business: r.is_business,
                }
            })
            .collect())
    }

    /// A send to a person by number fails as `invalid_number` when the number has no
    /// account. Numbers found registered are remembered for the session (at most
    /// [`REGISTERED_CACHE`]), so a chat's later sends ask nothing.
    async fn check_recipient(&self, to: &Jid) -> Result<(), DriverError> {
        if to.server.as_str() != shared::jid::USER_SERVER {
            return Ok(());
        }
        let number = to.user.to_string();
        if self.registered.lock().expect("registered").contains(&number) {
            return Ok(());
        }
        let found = self.lookup(std::slice::from_ref(&number)).await?;
        map::must_be_registered(&number, &found)?;
        let mut known = self.registered.lock().expect("registered");
        if known.len() >= REGISTERED_CACHE {
            known.clear();
        }
        known.insert(number);
        Ok(())
    }

    /// Who a status goes to: the account's address-book contacts; none is a permanent
    /// refusal.
    async fn status_audience(&self) -> Result<Vec<Jid>, DriverError> {
        let audience = contacts::status_audience(&self.db, &self.instance, contacts::STATUS_AUDIENCE_LIMIT)
            .await
            .map_err(|_| DriverError::new(ErrorCode::WorkerError, "the contacts could not be read"))?;
        if audience.is_empty() {
            return Err(DriverError::new(
                ErrorCode::ValidationFailed,
                "the account has no contacts to show a status to",
            ));
        }
        audience.iter().map(|j| jid(j)).collect()
    }

    /// A status goes to `status@broadcast`, encrypted to the devices of the account's
    /// address-book contacts (the audience WhatsApp's "my contacts" status privacy
    /// gives), under the message's pre-assigned network id.
    async fn post_status(
        &self,
        o: &Outgoing,
        upload: Option<map::Uploaded>,
        recipients: Vec<Jid>,
    ) -> Result<(), DriverError> {
        let message = map::status_message(o, upload)?;
        let options = whatsapp_rust::StatusSendOptions { message_id: Some(o.network_id.clone()), ..Default::default() };
        self.client.status().send_raw(message, &recipients, options).await.map(drop).map_err(send_error)
    }
}

fn jid(s: &str) -> Result<Jid, DriverError> {
    let full =
        shared::jid::Jid::parse(s).map_err(|_| DriverError::new(ErrorCode::ValidationFailed, "not a valid JID"))?;
    full.as_str().parse().map_err(|_| DriverError::new(ErrorCode::ValidationFailed, "not a valid JID"))
}

#[async_trait::async_trait]
impl Driver for WhatsappDriver {
    fn name(&self) -> &'static str {
        "whatsapp"
    }

    async fn open(
        &self,
        target: &super::OpenTarget,
        credentials: Option<Value>,
    ) -> Result<(Box<dyn Session>, mpsc::Receiver<DriverEvent>), DriverError> {
        let business = credentials.as_ref().and_then(|c| c.get("business")).and_then(Value::as_bool).unwrap_or(false);
        let store = PgStore::new(self.db.clone(), target.instance.clone(), target.epoch);
        let (tx, rx) = mpsc::channel::<DriverEvent>(1024);
        let calls: Calls = Arc::default();
        let (events_tx, calls_in) = (tx.clone(), calls.clone());
        let (book_db, book_instance, epoch) = (self.db.clone(), target.instance.clone(), target.epoch);
        let bot =
            whatsapp_rust::bot::Bot::builder()
                .with_backend(store)
                .with_transport_factory(SharedTransport(self.transport_for(target)?))
                .with_http_client(http::WaHttp::new(target.proxy_url.as_deref()).map_err(|_| {
                    DriverError::new(ErrorCode::ValidationFailed, "the instance's proxy_url is not usable")
                })?)
                // Messages are in the log before WhatsApp is told they arrived.
                .with_inbound_durability_hook(LogHook {
                    db: self.db.clone(),
                    store: self.store.clone(),
                    instance: target.instance.clone(),
                    epoch: target.epoch,
                    media: self.media,
                })
                // One event at a time, in order: a receipt never overtakes its message.
                .with_event_delivery(whatsapp_rust::bot::EventDelivery::Ordered { capacity: 4096 })
                .on_event(move |event: Arc<Event>, client: Arc<Client>| {
                    let tx = events_tx.clone();
                    let calls = calls_in.clone();
                    let (db, instance) = (book_db.clone(), book_instance.clone());
                    async move {
                        // The address book and push names: kept for listing contacts.
                        let change = match &*event {
                            Event::ContactUpdate(u) => Some(contacts::from_action(&u.jid, &u.action)),
                            Event::PushNameUpdate(u) => Some((
                                // Keyed like the address book: by phone number when the
                                // network addressed the sender by LID and told the number.
                                map::phone_form(&u.jid, u.message.source.sender_alt.as_ref()),
                                contacts::Change { name: None, push_name: Some(u.new_push_name.clone()) },
                            )),
                            _ => None,
                        };
                        if let Some(change) = change {
                            if let Err(e) = contacts::record(&db, &instance, epoch, &[change]).await {
                                tracing::warn!(error = %e, "recording a contact failed");
                            }
                        }
                        for ev in to_driver_events(&event, &client, business, &calls) {
                            if tx.send(ev).await.is_err() {
                                break;
                            }
                        }
                    }
                })
                .build()
                .await
                .map_err(|e| {
                    tracing::warn!(error = %e, "building the whatsapp client failed");
                    DriverError::new(ErrorCode::WorkerError, "the whatsapp client could not start")
                })?;
        let handle = bot.spawn();
        let client = handle.client();
        // No socket in time (the network unreachable, the dial refused): give up this
        // attempt; the actor shows `connecting` and tries again with backoff.
        if client.wait_for_socket(self.connect_timeout).await.is_err() {
            handle.abort();
            return Err(DriverError::new(ErrorCode::WorkerTimeout, "could not reach the WhatsApp servers"));
        }
        // The run loop ends for good (logout, replaced, closed): tell the actor.
        let closed = tx.clone();
        let watcher = client.clone();
        tokio::spawn(async move {
            closed.closed().await;
            watcher.disconnect().await;
        });
        let session = WaSession {
            client,
            handle: tokio::sync::Mutex::new(Some(handle)),
            calls,
            db: self.db.clone(),
            instance: target.instance.clone(),
            registered: Mutex::default(),
        };
        Ok((Box::new(session), rx))
    }
}

#[async_trait::async_trait]
impl Session for WaSession {
    async fn send(&self, o: &Outgoing) -> Result<(), DriverError> {
        // Before anything is uploaded: a status needs its audience (`Err`), a person by
        // number an account (`Ok`).
        let to = if o.to_jid.is_status() {
            Err(self.status_audience().await?)
        } else {
            let to = jid(o.to_jid.as_str())?;
            self.check_recipient(&to).await?;
            Ok(to)
        };
        let content = &o.message.content;
        let upload = match (content.media(), map::media_type(content.kind())) {
            (Some(m), Some(t)) => Some(map::Uploaded::from(upload::upload(&self.client, m, t).await?)),
            _ => None,
        };
        let to = match to {
            Ok(to) => to,
            Err(audience) => return self.post_status(o, upload, audience).await,
        };
        let message = map::outgoing_message(o, upload)?;
        let options = whatsapp_rust::send::SendOptions::default().with_message_id(o.network_id.clone());
        self.client.send_message_with_options(to, message, options).await.map(drop).map_err(send_error)
    }

    async fn pairing_code(&self, phone: &str) -> Result<String, DriverError> {
        let options =
            whatsapp_rust::pair_code::PairCodeOptions { phone_number: phone.to_string(), ..Default::default() };
        self.client.pair_with_code(options).await.map_err(|_| failed("give a pairing code"))
    }

    async fn logout(&self) -> Result<(), DriverError> {
        self.client.logout().await;
        Ok(())
    }

    async fn check_numbers(&self, numbers: &[String]) -> Result<Vec<NumberAnswer>, DriverError> {
        let found = self.lookup(numbers).await?;
        Ok(numbers
            .iter()
            .map(|n| {
                let r = map::registered(n, &found);
                NumberAnswer {
                    number: n.clone(),
                    exists: r.is_some(),
                    jid: r.as_ref().and_then(|r| shared::jid::Jid::parse(&r.jid).ok()),
                    business: r.map(|r| r.business),
                }
            })
            .collect())
    }

    async fn net(&self, op: &NetOp) -> Result<Answer, DriverError> {
        ops::run(&self.client, ops::Book { db: &self.db, instance: &self.instance }, op).await
    }

    async fn download(&self, media: &RemoteMedia) -> Result<Vec<u8>, DriverError> {
        download::download(&self.client, media).await
    }

    async fn reject_call(&self, call_id: &str, message: Option<String>) -> Result<(), DriverError> {
        let peers = self.calls.lock().unwrap_or_else(|p| p.into_inner()).remove(call_id);
        let (peer, creator) = peers.ok_or_else(|| DriverError::new(ErrorCode::NotFound, "no such call"))?;
        self.client.voip().reject_call(call_id, &peer, &creator).await.map_err(|_| failed("reject the call"))?;
        if let Some(text) = message {
            self.client.send_text(peer, text).await.map_err(|_| failed("take the message to the caller"))?;
        }
        Ok(())
    }

    async fn close(&self) {
        // Graceful: flushes the Signal cache and the device row to PgStore first.
        if let Err(e) = self.client.flush_pending_signal_state().await {
            tracing::warn!(error = %e, "flushing the session state failed");
        }
        if let Some(handle) = self.handle.lock().await.take() {
            handle.shutdown().await;
        }
    }
}

/// Logs each inbound batch (fenced on the lease epoch) before the client acknowledges
/// it to WhatsApp: a crash, a takeover or a database outage before the commit means the
/// network delivers it again, never that it is lost.
struct LogHook {
    db: sqlx::PgPool,
    store: shared::db::media::Store,
    instance: shared::ids::InstanceId,
    epoch: i64,
    media: crate::receive::MediaPolicy,
}

#[whatsapp_rust::async_trait]
impl whatsapp_rust::InboundDurabilityHook for LogHook {
    async fn on_messages(
        &self,
        client: Arc<Client>,
        batch: &[whatsapp_rust::types::events::InboundMessage],
    ) -> whatsapp_rust::anyhow::Result<()> {
        let incoming: Vec<Incoming> = batch
            .iter()
            .filter(|m| !map::is_protocol(m.message.get_base_message()))
            .map(|m| incoming(&m.message, &m.info))
            .collect();
        if !incoming.is_empty() {
            let fetch = download::ClientFetch(client);
            let msgs = crate::receive::prepare(&self.store, &self.instance, incoming, &fetch, self.media).await;
            match crate::receive::write(&self.db, &self.instance, self.epoch, &msgs, shared::db::log::Source::Live)
                .await
            {
                Ok(Some(_)) => {}
                Ok(None) => return Err(whatsapp_rust::anyhow::anyhow!("the instance has a new owner")),
                Err(_) => return Err(whatsapp_rust::anyhow::anyhow!("the local log is unavailable")),
            }
        }
        // Edits and deletions after the messages they may name, before the ack too: a
        // change applied twice (a redelivery) changes nothing the second time.
        for change in events::changes(batch) {
            match shared::db::log::apply_change(&self.db, &self.instance, self.epoch, &change).await {
                Ok(true) => {}
                Ok(false) => return Err(whatsapp_rust::anyhow::anyhow!("the instance has a new owner")),
                Err(_) => return Err(whatsapp_rust::anyhow::anyhow!("the local log is unavailable")),
            }
        }
        Ok(())
    }
}

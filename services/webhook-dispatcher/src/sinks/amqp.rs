//! One sink's connection to its RabbitMQ broker (lapin): connected only to an address
//! the guard checked (plain AMQP to that address itself; AMQPS by name, whose
//! certificate must then match it), a confirming channel, the sink's exchange and queues
//! declared, and publishing with publisher confirms.

use std::collections::HashSet;
use std::time::Duration;

use lapin::options::{
    BasicPublishOptions, ConfirmSelectOptions, ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};
use lapin::{Confirmation, PublisherConfirm};

/// Every call to the broker has a deadline.
pub const CALL: Duration = Duration::from_secs(10);
/// The AMQP heartbeat asked for.
const HEARTBEAT_SECS: u16 = 30;
/// The most messages a queue the sink declares holds; then the broker refuses (nacks)
/// more, and the sink waits and retries: nothing is dropped, and no tenant fills the
/// broker's disk.
pub const QUEUE_MAX_LENGTH: i64 = 100_000;

/// Why a broker call failed, in words without credentials.
#[derive(Debug, thiserror::Error)]
pub enum AmqpError {
    #[error("the broker's address is refused: it must be public (or allowed by the admin)")]
    Refused,
    #[error("the broker's host does not resolve")]
    Unresolved,
    #[error("the broker did not answer in time ({0})")]
    Timeout(&'static str),
    #[error("the broker refused or failed: {0}")]
    Broker(String),
    #[error("the broker did not confirm a message (nack)")]
    Nacked,
    #[error("the broker routed a message to no queue (bind one to the exchange)")]
    Unroutable,
}

/// lapin's errors name the broker's answers (access refused, not found, ...), never the
/// URI; still, any text that looks like an address with credentials is cut.
fn broker(e: lapin::Error) -> AmqpError {
    AmqpError::Broker(scrub(&e.to_string()))
}

fn scrub(text: &str) -> String {
    let text = match text.find("://") {
        Some(i) => format!("{} (address hidden)", &text[..i]),
        None => text.to_string(),
    };
    text.chars().take(300).collect()
}

async fn within<T>(what: &'static str, f: impl std::future::Future<Output = lapin::Result<T>>) -> Result<T, AmqpError> {
    tokio::time::timeout(CALL, f).await.map_err(|_| AmqpError::Timeout(what))?.map_err(broker)
}

/// How a sink's messages are routed.
#[derive(Debug, Clone)]
pub enum Layout {
    /// Ours: `<instance>.<event type>` (`<account>.<instance>.<event type>`) on the
    /// exchange, with one durable queue (if any) bound to `<instance>.#` (`<account>.#`).
    Ours { queue: Option<String> },
    /// Evolution's: the event's name (`messages.upsert`) on the exchange (named after
    /// the instance), each into a durable quorum queue `<exchange>.<event>`.
    Evolution,
}

/// A connected, confirming channel for one sink.
pub struct Publisher {
    conn: Connection,
    channel: Channel,
    exchange: String,
    layout: Layout,
    declared: HashSet<String>,
}

/// The URI connected to: plain AMQP goes to the checked address itself.
fn pinned(url: &url::Url, addr: std::net::SocketAddr) -> Result<lapin::uri::AMQPUri, AmqpError> {
    let mut uri: lapin::uri::AMQPUri = url.as_str().parse().map_err(|_| AmqpError::Broker("not an AMQP URI".into()))?;
    if url.scheme() == "amqp" {
        uri.authority.host = addr.ip().to_string();
        uri.authority.port = addr.port();
    }
    // A TCP connect that hangs ends; heartbeats find a broker gone silent (whatever the
    // broker proposes).
    uri.query.connection_timeout = Some(CALL.as_millis() as u64);
    uri.query.heartbeat = Some(HEARTBEAT_SECS);
    Ok(uri)
}

impl Publisher {
    /// Connects (to an address the guard allows), opens a confirming channel and declares
    /// the exchange (durable, topic) and, for ours, the queue and its binding.
    pub async fn connect(
        url: &url::Url,
        allow_private: bool,
        exchange: &str,
        layout: Layout,
        owner: &str,
    ) -> Result<Publisher, AmqpError> {
        let host = url.host_str().ok_or(AmqpError::Unresolved)?;
        let port = domain::sinks::port_of(url);
        let resolved = tokio::time::timeout(CALL, shared::fetch::resolve_checked(host, port, allow_private))
            .await
            .map_err(|_| AmqpError::Timeout("resolving the broker"))?;
        let addrs = resolved.map_err(|e| match e {
            shared::fetch::FetchError::Refused => AmqpError::Refused,
            _ => AmqpError::Unresolved,
        })?;
        let uri = pinned(url, addrs[0])?;
        let props =
            ConnectionProperties::default().with_connection_name(LongString::from(format!("paceline sink {owner}")));
        let conn = within("connecting", Connection::connect_uri(uri, props)).await?;
        let channel = within("opening a channel", conn.create_channel()).await?;
        within("confirm.select", channel.confirm_select(ConfirmSelectOptions::default())).await?;
        let durable = ExchangeDeclareOptions { durable: true, ..Default::default() };
        within(
            "declaring the exchange",
            channel.exchange_declare(exchange.into(), ExchangeKind::Topic, durable, FieldTable::default()),
        )
        .await?;
        let mut p = Publisher { conn, channel, exchange: exchange.to_string(), layout, declared: HashSet::new() };
        if let Layout::Ours { queue: Some(q) } = p.layout.clone() {
            p.declare(&q, &format!("{owner}.#"), false).await?;
        }
        Ok(p)
    }

    async fn declare(&mut self, queue: &str, key: &str, quorum: bool) -> Result<(), AmqpError> {
        if self.declared.contains(queue) {
            return Ok(());
        }
        let mut args = FieldTable::default();
        if quorum {
            args.insert("x-queue-type".into(), AMQPValue::LongString("quorum".into()));
        }
        args.insert("x-max-length".into(), AMQPValue::LongLongInt(QUEUE_MAX_LENGTH));
        args.insert("x-overflow".into(), AMQPValue::LongString("reject-publish".into()));
        let opts = QueueDeclareOptions { durable: true, ..Default::default() };
        within("declaring a queue", self.channel.queue_declare(queue.into(), opts, args)).await?;
        within(
            "binding a queue",
            self.channel.queue_bind(
                queue.into(),
                self.exchange.as_str().into(),
                key.into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            ),
        )
        .await?;
        self.declared.insert(queue.to_string());
        Ok(())
    }

    /// Publishes one message, persistent; answers its confirmation to wait for.
    pub async fn publish(&mut self, m: &Outgoing<'_>) -> Result<PublisherConfirm, AmqpError> {
        let key = match &self.layout {
            Layout::Ours { .. } => format!("{}.{}", m.route, m.kind),
            Layout::Evolution => {
                let key = m.evolution_event.unwrap_or(m.kind).to_string();
                let queue = format!("{}.{}", self.exchange, key);
                self.declare(&queue, &key, true).await?;
                key
            }
        };
        let mut headers = FieldTable::default();
        headers.insert("instance_id".into(), AMQPValue::LongString(m.instance.into()));
        let props = BasicProperties::default()
            .with_delivery_mode(2)
            .with_content_type(ShortString::from("application/json"))
            .with_message_id(ShortString::from(m.id))
            .with_type(ShortString::from(m.kind))
            .with_timestamp(m.at.max(0) as u64)
            .with_headers(headers);
        within(
            "publishing",
            self.channel.basic_publish(
                self.exchange.as_str().into(),
                key.as_str().into(),
                // A message no queue takes comes back (and counts as not delivered).
                BasicPublishOptions { mandatory: true, ..Default::default() },
                m.body,
                props,
            ),
        )
        .await
    }

    /// Closes the connection (best effort).
    pub async fn close(self) {
        let _ = tokio::time::timeout(Duration::from_secs(2), self.conn.close(200, "bye".into())).await;
    }
}

/// Waits for a publish's confirmation: only an ack counts.
pub async fn confirmed(c: PublisherConfirm) -> Result<(), AmqpError> {
    match tokio::time::timeout(CALL, c).await.map_err(|_| AmqpError::Timeout("waiting for a confirm"))? {
        Ok(Confirmation::Ack(None)) => Ok(()),
        Ok(Confirmation::Ack(Some(_returned))) => Err(AmqpError::Unroutable),
        Ok(Confirmation::Nack(_)) | Ok(Confirmation::NotRequested) => Err(AmqpError::Nacked),
        Err(e) => Err(broker(e)),
    }
}

/// One event to publish.
pub struct Outgoing<'a> {
    pub id: &'a str,
    /// The routing key's start: the instance's id (an account's sink: `<account
    /// id>.<instance id>`), the sink's queue being bound to `<owner>.#`.
    pub route: &'a str,
    pub instance: &'a str,
    /// Our event type.
    pub kind: &'a str,
    /// Evolution's name for it, for an Evolution-format sink.
    pub evolution_event: Option<&'a str>,
    /// Seconds since the epoch.
    pub at: i64,
    pub body: &'a [u8],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_amqp_goes_to_the_checked_address_and_errors_hide_addresses() {
        let url = url::Url::parse("amqp://u:p@broker.example.com:5673/vh").unwrap();
        let uri = pinned(&url, "203.0.113.7:5673".parse().unwrap()).unwrap();
        assert_eq!((uri.authority.host.as_str(), uri.authority.port), ("203.0.113.7", 5673));
        assert_eq!(uri.vhost, "vh");
        let tls = url::Url::parse("amqps://u:p@broker.example.com/vh").unwrap();
        let uri = pinned(&tls, "203.0.113.7:5671".parse().unwrap()).unwrap();
        assert_eq!(uri.authority.host, "broker.example.com", "TLS checks the name's certificate");
        let text = scrub("failed to connect to amqp://u:secret@10.0.0.1:5672/vh: refused");
        assert!(!text.contains("secret") && !text.contains("://"), "{text}");
    }
}

//! The WebSocket to WhatsApp through the instance's `proxy_url`: an HTTP proxy (CONNECT)
//! or SOCKS5 (`socks5://` resolves the name here, `socks5h://` at the proxy), with
//! optional credentials in the URL. The tunnel carries TLS end to end, so the proxy sees
//! only the target's name and port. whatsapp-rust has no proxy support of its own; this
//! is its `TransportFactory` for a proxied connection.

use std::sync::Arc;

use base64::Engine;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use whatsapp_rust::anyhow::{anyhow, bail, Result};
use whatsapp_rust::transport::{Connector, Transport, TransportEvent, TransportFactory};

/// How long the proxy may take to answer its handshake.
const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

pub struct ProxyTransportFactory {
    proxy: url::Url,
    target: String,
    origin: Option<String>,
}

impl ProxyTransportFactory {
    /// Connects to `target` (a `ws://` or `wss://` URL) through `proxy`.
    pub fn new(proxy: &str, target: &str, origin: Option<&str>) -> Result<ProxyTransportFactory> {
        let proxy = url::Url::parse(proxy).map_err(|_| anyhow!("the proxy URL is invalid"))?;
        if !matches!(proxy.scheme(), "http" | "socks5" | "socks5h") || proxy.host_str().is_none() {
            bail!("the whatsapp driver supports http, socks5 and socks5h proxies");
        }
        Ok(ProxyTransportFactory { proxy, target: target.to_string(), origin: origin.map(str::to_string) })
    }

    fn credentials(&self) -> Option<(String, String)> {
        if self.proxy.username().is_empty() {
            return None;
        }
        // userinfo is percent-encoded (and '+' or '&' are literal there).
        let decode = |s: &str| percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned();
        Some((decode(self.proxy.username()), decode(self.proxy.password().unwrap_or(""))))
    }

    /// A TCP stream to `host:port` through the proxy.
    async fn tunnel(&self, host: &str, port: u16) -> Result<TcpStream> {
        let proxy_host = self.proxy.host_str().unwrap_or_default();
        let proxy_port =
            self.proxy.port_or_known_default().unwrap_or(if self.proxy.scheme() == "http" { 80 } else { 1080 });
        let tcp =
            TcpStream::connect((proxy_host, proxy_port)).await.map_err(|_| anyhow!("could not reach the proxy"))?;
        match self.proxy.scheme() {
            "http" => http_connect(tcp, host, port, self.credentials()).await,
            scheme => {
                let target: (String, u16) = (host.to_string(), port);
                let stream = if scheme == "socks5" {
                    // Resolve here, hand the proxy an address.
                    let addr = tokio::net::lookup_host((host, port))
                        .await?
                        .next()
                        .ok_or_else(|| anyhow!("the target does not resolve"))?;
                    socks(tcp, addr, self.credentials()).await?
                } else {
                    socks(tcp, target, self.credentials()).await?
                };
                Ok(stream)
            }
        }
    }
}

async fn socks<'t, T: tokio_socks::IntoTargetAddr<'t>>(
    tcp: TcpStream,
    target: T,
    creds: Option<(String, String)>,
) -> Result<TcpStream> {
    let s = match creds {
        Some((u, p)) => tokio_socks::tcp::Socks5Stream::connect_with_password_and_socket(tcp, target, &u, &p).await,
        None => tokio_socks::tcp::Socks5Stream::connect_with_socket(tcp, target).await,
    };
    Ok(s.map_err(|e| anyhow!("the SOCKS5 proxy refused: {e}"))?.into_inner())
}

/// `CONNECT host:port` on an HTTP proxy; the stream is the tunnel once it answers 2xx.
pub async fn http_connect(
    mut tcp: TcpStream,
    host: &str,
    port: u16,
    creds: Option<(String, String)>,
) -> Result<TcpStream> {
    let mut req = format!("CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n");
    if let Some((u, p)) = creds {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"));
        req.push_str(&format!("Proxy-Authorization: Basic {token}\r\n"));
    }
    req.push_str("\r\n");
    tcp.write_all(req.as_bytes()).await?;
    let mut head = Vec::with_capacity(256);
    let mut byte = [0u8; 1];
    let read = async {
        while !head.ends_with(b"\r\n\r\n") {
            if tcp.read(&mut byte).await? == 0 || head.len() > 8192 {
                bail!("the proxy closed the connection");
            }
            head.push(byte[0]);
        }
        Ok(())
    };
    tokio::time::timeout(HANDSHAKE_TIMEOUT, read).await.map_err(|_| anyhow!("the proxy did not answer"))??;
    let status = String::from_utf8_lossy(&head);
    let code = status.split_whitespace().nth(1).unwrap_or("");
    if !code.starts_with('2') {
        bail!("the proxy refused the tunnel (status {code})");
    }
    Ok(tcp)
}

#[whatsapp_rust::async_trait]
impl TransportFactory for ProxyTransportFactory {
    async fn create_transport(
        &self,
    ) -> Result<(Arc<dyn Transport>, whatsapp_rust::async_channel::Receiver<TransportEvent>)> {
        let uri: http::Uri = self.target.parse().map_err(|_| anyhow!("the WebSocket URL is invalid"))?;
        let host = uri.host().ok_or_else(|| anyhow!("the WebSocket URL has no host"))?.to_string();
        let tls = uri.scheme_str() == Some("wss");
        let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
        let tcp = tokio::time::timeout(HANDSHAKE_TIMEOUT, self.tunnel(&host, port))
            .await
            .map_err(|_| anyhow!("the proxy timed out"))??;
        let connector = if tls { whatsapp_rust::transport::default_tls_connector() } else { Connector::Plain };
        let stream = connector.wrap(&host, tcp).await.map_err(|e| anyhow!("TLS through the proxy failed: {e}"))?;
        let mut builder = tokio_websockets::ClientBuilder::from_uri(uri);
        if let Some(origin) = &self.origin {
            let value = http::HeaderValue::from_str(origin)?;
            builder = builder.add_header(http::header::ORIGIN, value)?;
        }
        let (ws, _) = builder.connect_on(stream).await.map_err(|e| anyhow!("the WebSocket upgrade failed: {e}"))?;
        Ok(whatsapp_rust::transport::from_websocket(ws))
    }
}

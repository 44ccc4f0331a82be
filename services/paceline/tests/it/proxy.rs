//! The WhatsApp driver's proxy transport against local proxies (HTTP CONNECT with Basic
//! credentials, SOCKS5 with and without a password) in front of a local WebSocket
//! server: frames go through the tunnel both ways, and a refusing proxy fails the dial.

use std::time::Duration;

use axum::extract::ws::{Message, WebSocketUpgrade};
use base64::Engine;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use whatsapp_rust::transport::{TransportEvent, TransportFactory};
use worker::driver::whatsapp::proxy::ProxyTransportFactory;

/// A WebSocket server that answers each binary frame with the frame reversed.
async fn ws_server() -> std::net::SocketAddr {
    let app = axum::Router::new().route(
        "/ws/chat",
        axum::routing::get(|ws: WebSocketUpgrade| async move {
            ws.on_upgrade(|mut socket| async move {
                while let Some(Ok(Message::Binary(b))) = socket.recv().await {
                    let mut v = b.to_vec();
                    v.reverse();
                    if socket.send(Message::Binary(v.into())).await.is_err() {
                        break;
                    }
                }
            })
        }),
    );
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await });
    addr
}

async fn pipe(mut a: TcpStream, mut b: TcpStream) {
    let _ = tokio::io::copy_bidirectional(&mut a, &mut b).await;
}

/// An HTTP proxy: CONNECT only, wanting `user:pass` when given.
async fn http_proxy(creds: Option<&'static str>) -> std::net::SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut c, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if c.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let text = String::from_utf8_lossy(&head).to_string();
                let target = text.split_whitespace().nth(1).unwrap().to_string();
                if let Some(cr) = creds {
                    let want =
                        format!("Proxy-Authorization: Basic {}", base64::engine::general_purpose::STANDARD.encode(cr));
                    if !text.contains(&want) {
                        let _ = c.write_all(b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n").await;
                        return;
                    }
                }
                let Ok(up) = TcpStream::connect(&target).await else { return };
                c.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").await.unwrap();
                pipe(c, up).await;
            });
        }
    });
    addr
}

/// A SOCKS5 proxy (RFC 1928/1929): no auth, or user/password when given.
async fn socks_proxy(creds: Option<(&'static str, &'static str)>) -> std::net::SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut c, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut hdr = [0u8; 2];
                c.read_exact(&mut hdr).await.unwrap();
                let mut methods = vec![0u8; hdr[1] as usize];
                c.read_exact(&mut methods).await.unwrap();
                match creds {
                    None => c.write_all(&[5, 0]).await.unwrap(),
                    Some((u, p)) => {
                        c.write_all(&[5, 2]).await.unwrap();
                        let mut v = [0u8; 2];
                        c.read_exact(&mut v).await.unwrap();
                        let mut user = vec![0u8; v[1] as usize];
                        c.read_exact(&mut user).await.unwrap();
                        let mut pl = [0u8; 1];
                        c.read_exact(&mut pl).await.unwrap();
                        let mut pass = vec![0u8; pl[0] as usize];
                        c.read_exact(&mut pass).await.unwrap();
                        let ok = user == u.as_bytes() && pass == p.as_bytes();
                        c.write_all(&[1, if ok { 0 } else { 1 }]).await.unwrap();
                        if !ok {
                            return;
                        }
                    }
                }
                let mut req = [0u8; 4];
                c.read_exact(&mut req).await.unwrap();
                let host = match req[3] {
                    1 => {
                        let mut a = [0u8; 4];
                        c.read_exact(&mut a).await.unwrap();
                        std::net::Ipv4Addr::from(a).to_string()
                    }
                    3 => {
                        let mut n = [0u8; 1];
                        c.read_exact(&mut n).await.unwrap();
                        let mut name = vec![0u8; n[0] as usize];
                        c.read_exact(&mut name).await.unwrap();
                        String::from_utf8(name).unwrap()
                    }
                    _ => return,
                };
                let mut port = [0u8; 2];
                c.read_exact(&mut port).await.unwrap();
                let Ok(up) = TcpStream::connect((host.as_str(), u16::from_be_bytes(port))).await else { return };
                c.write_all(&[5, 0, 0, 1, 0, 0, 0, 0, 0, 0]).await.unwrap();
                pipe(c, up).await;
            });
        }
    });
    addr
}

/// Dials through `proxy` and checks a frame's round trip.
async fn round_trip(proxy: &str, target: &str) -> Result<(), String> {
    let f = ProxyTransportFactory::new(proxy, target, Some("https://web.whatsapp.com")).map_err(|e| e.to_string())?;
    let (transport, events) = f.create_transport().await.map_err(|e| e.to_string())?;
    assert!(matches!(events.recv().await.unwrap(), TransportEvent::Connected));
    transport.send(bytes::Bytes::from_static(b"hello")).await.map_err(|e| e.to_string())?;
    match tokio::time::timeout(Duration::from_secs(5), events.recv()).await {
        Ok(Ok(TransportEvent::DataReceived(d))) => assert_eq!(&d[..], b"olleh"),
        other => return Err(format!("no echo: {other:?}")),
    }
    transport.disconnect().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_transport_tunnels_through_http_connect_and_socks5() {
    let ws = ws_server().await;
    let target = format!("ws://127.0.0.1:{}/ws/chat", ws.port());
    let named = format!("ws://localhost:{}/ws/chat", ws.port());

    let http = http_proxy(Some("ana:s3%c+q&r")).await;
    round_trip(&format!("http://ana:s3%25c+q&r@{http}"), &target).await.expect("HTTP CONNECT with credentials");
    let err = round_trip(&format!("http://ana:wrong@{http}"), &target).await.unwrap_err();
    assert!(err.contains("407"), "{err}");
    assert!(!err.contains("wrong"), "credentials never appear in errors: {err}");

    let open_socks = socks_proxy(None).await;
    round_trip(&format!("socks5://{open_socks}"), &named).await.expect("SOCKS5, resolved here");
    round_trip(&format!("socks5h://{open_socks}"), &named).await.expect("SOCKS5, resolved at the proxy");
    let auth_socks = socks_proxy(Some(("bo", "pw"))).await;
    round_trip(&format!("socks5h://bo:pw@{auth_socks}"), &named).await.expect("SOCKS5 with a password");
    assert!(round_trip(&format!("socks5h://bo:nope@{auth_socks}"), &named).await.is_err());

    // Nothing listening: the dial fails, quickly.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    assert!(round_trip(&format!("http://{closed}"), &target).await.is_err());
    assert!(ProxyTransportFactory::new("ftp://x:1", &target, None).is_err());
}

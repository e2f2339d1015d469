//! WebSocket client helpers the agentwire scenarios share: connect (Nagle off), send text,
//! wait for the next text message, and a stop signal for receiver tasks.

use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::error::LoadError;

/// A client WebSocket.
pub type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Connects to `url` with Nagle's algorithm off.
pub async fn connect(url: &str) -> Result<Ws, LoadError> {
    let (ws, _) = tokio_tungstenite::connect_async_with_config(url, None, true)
        .await
        .map_err(|e| LoadError::ws(format!("connecting to {url}"), e))?;
    Ok(ws)
}

/// Sends one text message.
pub async fn send(ws: &mut Ws, text: String) -> Result<(), LoadError> {
    ws.send(Message::text(text))
        .await
        .map_err(|e| LoadError::ws("sending", e))
}

/// The next text message (other messages are skipped); an error when the connection ends.
pub async fn next_text(ws: &mut Ws) -> Result<String, LoadError> {
    loop {
        match ws.next().await {
            Some(Ok(Message::Text(t))) => return Ok(t.to_string()),
            Some(Ok(Message::Close(c))) => {
                return Err(LoadError::Protocol(format!("the server closed: {c:?}")))
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(LoadError::ws("receiving", e)),
            None => return Err(LoadError::Protocol("the connection ended".into())),
        }
    }
}

/// Sends `text` and returns the next text message.
pub async fn round_trip(ws: &mut Ws, text: String) -> Result<String, LoadError> {
    send(ws, text).await?;
    next_text(ws).await
}

/// A stop signal for receiver tasks: `stop()` once, every [`StopRx::stopped`] completes.
pub fn stop_signal() -> (StopTx, StopRx) {
    let (tx, rx) = tokio::sync::watch::channel(false);
    (StopTx(tx), StopRx(rx))
}

/// The sending half of [`stop_signal`].
#[derive(Debug)]
pub struct StopTx(tokio::sync::watch::Sender<bool>);

impl StopTx {
    /// Tells every receiver to stop.
    pub fn stop(&self) {
        let _ = self.0.send(true);
    }
}

/// The receiving half of [`stop_signal`].
#[derive(Clone, Debug)]
pub struct StopRx(tokio::sync::watch::Receiver<bool>);

impl StopRx {
    /// Completes once [`StopTx::stop`] was called (or the sender is gone).
    pub async fn stopped(&mut self) {
        let _ = self.0.wait_for(|s| *s).await;
    }
}

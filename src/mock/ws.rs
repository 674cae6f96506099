//! `GET /v1/chat/ws`: the chat API over a WebSocket, as chat products that
//! stream over one do. Each text message the client sends is a chat request
//! (the body `POST /v1/chat/completions` takes; an optional `request_id` stands
//! for the `x-request-id` header); the answer comes back as one text message per
//! SSE event the HTTP API would have sent (its `data`, ending with `[DONE]`), from
//! the same engine, logged the same way. One answer at a time per socket; a
//! client that closes the socket mid-answer disconnects it (the log says so). A
//! heartbeat, `{"type":"ping"}`, is answered `{"type":"pong"}`.

use std::future::Future;

use axum::body::Bytes;
use axum::extract::ws::{Message, WebSocket};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::Response;
use futures_util::StreamExt as _;

use super::state::MockState;

/// Serves one socket: each request message answered by `answer(t_received,
/// headers, body)` (the HTTP API's handler), its SSE events sent as messages.
pub(super) async fn serve<F, Fut>(s: MockState, mut socket: WebSocket, answer: F)
where
    F: Fn(f64, HeaderMap, Bytes) -> Fut,
    Fut: Future<Output = Response>,
{
    while let Some(Ok(msg)) = socket.recv().await {
        let text = match msg {
            Message::Text(t) => t,
            Message::Close(_) => return,
            _ => continue,
        };
        if text.as_str().replace(' ', "") == r#"{"type":"ping"}"# {
            if socket
                .send(Message::Text(r#"{"type":"pong"}"#.into()))
                .await
                .is_err()
            {
                return;
            }
            continue;
        }
        let t_received = s.clock.now_ms();
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        let id = serde_json::from_str::<serde_json::Value>(text.as_str())
            .ok()
            .and_then(|v| v.get("request_id")?.as_str().map(str::to_owned));
        if let Some(v) = id.and_then(|id| HeaderValue::from_str(&id).ok()) {
            headers.insert("x-request-id", v);
        }
        let body = Bytes::copy_from_slice(text.as_bytes());
        let resp = answer(t_received, headers, body).await;
        if !resp.status().is_success() {
            let status = resp.status().as_u16();
            let msg =
                format!(r#"{{"error":{{"status":{status},"message":"the request was refused"}}}}"#);
            if socket.send(Message::Text(msg.into())).await.is_err() {
                return;
            }
            continue;
        }
        let mut body = resp.into_body().into_data_stream();
        let mut buf = String::new();
        while let Some(chunk) = body.next().await {
            let Ok(bytes) = chunk else {
                // The engine's fault cut the stream: so does the socket.
                let _ = socket.send(Message::Close(None)).await;
                return;
            };
            buf.push_str(&String::from_utf8_lossy(&bytes));
            while let Some(end) = buf.find("\n\n").filter(|_| buf.starts_with("data: ")) {
                let event: String = buf.drain(..end + 2).collect();
                for data in event.lines().filter_map(|l| l.strip_prefix("data: ")) {
                    if socket
                        .send(Message::Text(data.to_owned().into()))
                        .await
                        .is_err()
                    {
                        // Dropping the body disconnects the answer in the log.
                        return;
                    }
                }
            }
        }
        // A whole answer (`"stream": false`): one message.
        if !buf.trim().is_empty() && socket.send(Message::Text(buf.into())).await.is_err() {
            return;
        }
    }
}

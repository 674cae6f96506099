//! What one request is on both sides of a transport: the request ready to send
//! ([`Prepared`]), the response head and body reads ([`Head`], [`Read`], [`Body`])
//! and the browser's Resource Timing of it ([`ResourceTiming`]). Requests are built
//! ([`super::requests`]) and each transport (`fetch`, the network worker, the
//! simulator) answers them with these types alone; [`super::transport`] picks the
//! transport and follows the request.

use std::future::Future;
use std::pin::Pin;

use tokenscope_measure::openai::Api;
use tokenscope_measure::record::ErrorKind;

/// A boxed, single-threaded future.
pub type LocalFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// A request ready to send: its body is built before the round starts, so building
/// it never delays a send.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// `x-request-id` (also the key of the record the page keeps).
    pub request_id: String,
    /// The JSON body.
    pub body: String,
    /// Endpoint kind.
    pub api: Api,
    /// Prompt tokens (estimated), for the simulator.
    pub prompt_tokens: u64,
    /// `max_tokens` asked.
    pub max_tokens: u32,
    /// The stream view leaves the reasoning out: the first paint is of the
    /// first answer token.
    pub hide_reasoning: bool,
    /// Open loop: when it was due (latencies count from it).
    pub t_scheduled_ms: Option<f64>,
    /// Keep the answer's text (a conversation sends it back next turn).
    pub keep_answer: bool,
    /// Its prompt's tokens by the server's tokenizer, when counted (the record's
    /// `prompt_tokens_sent`).
    pub prompt_tokens_sent: Option<u64>,
    /// A conversation's turn: (session, turn).
    pub turn: Option<(u64, u32)>,
}

/// The response head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// HTTP status.
    pub status: u16,
    /// `Content-Type`, when sent.
    pub content_type: Option<String>,
}

/// One read of a response body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    /// Bytes arrived.
    Bytes(Vec<u8>),
    /// The body ended cleanly.
    End,
    /// The body broke.
    Error(ErrorKind, String),
}

/// A response body being read.
pub trait Body {
    /// The next read, and when it arrived (`performance.now()` taken the moment
    /// the read resolved, before anything else ran).
    fn read(&mut self) -> LocalFuture<'_, (f64, Read)>;
    /// Stop reading (free the connection or the simulator's slot).
    fn cancel(&mut self) {}
}

/// A request's Resource Timing, on the page's clock (each `None` where the
/// browser hides it: a cross-origin endpoint without `Timing-Allow-Origin`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ResourceTiming {
    /// `requestStart`: the network stack began sending the request.
    pub request_start_ms: Option<f64>,
    /// `responseStart`: the network stack had the response's first bytes.
    pub response_start_ms: Option<f64>,
    /// `nextHopProtocol` (`http/1.1`, `h2`, `h3`).
    pub protocol: Option<String>,
    /// The connection it went over (core's [`ConnectTiming::connection`]).
    ///
    /// [`ConnectTiming::connection`]: tokenscope_render::page::transport::ConnectTiming::connection
    pub connection: Option<tokenscope_measure::record::ConnectionUse>,
}

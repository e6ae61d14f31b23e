//! A local HTTP server that speaks the OpenAI chat-completions and Anthropic messages
//! protocols, scripted per request, for testing clients at the wire.
//!
//! It listens on `127.0.0.1` on a free port, in a thread of its own (usable from sync and async
//! tests alike), answers each request with the next scripted [`Reply`] (or the responder's, or
//! a default success), and records every request: path, headers, body. The protocol of a reply
//! follows the request's path: `.../v1/messages` is Anthropic, anything else OpenAI. Every
//! response closes its connection.
//!
//! ```
//! use testkit::server::{MockServer, Reply};
//!
//! let server = MockServer::start();
//! server.push(Reply::text("hello", 10, 2));
//! let url = format!("{}/v1/chat/completions", server.url());
//! assert!(url.starts_with("http://127.0.0.1:"));
//! assert_eq!(server.count(), 0);
//! ```

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

/// The wire protocol of a request, from its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    Openai,
    Anthropic,
}

/// One scripted answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// 200 with `text` and usage (prompt tokens including `cached`, cached, completion).
    Text { text: String, prompt: u64, cached: u64, completion: u64 },
    /// 429 with a `Retry-After` header of this value.
    RateLimited { retry_after: String },
    /// 500 with a provider-shaped error body.
    ServerError,
    /// Read the request, then say nothing for this long and close (past the client's time-out).
    Hang(Duration),
    /// 200 with a body that is not JSON.
    Malformed,
    /// 200 whose `Content-Length` promises more than is sent before the connection closes.
    Truncated,
    /// 400 with the provider's own context-length error body.
    ContextLength,
    /// Any status and body.
    Raw { status: u16, headers: Vec<(String, String)>, body: String },
    /// Wait, then answer.
    Delayed(Duration, Box<Reply>),
}

impl Reply {
    /// A success with `text`, `prompt` input tokens and `completion` output tokens.
    pub fn text(text: impl Into<String>, prompt: u64, completion: u64) -> Reply {
        Reply::Text { text: text.into(), prompt, cached: 0, completion }
    }
    pub fn rate_limited(retry_after_s: u64) -> Reply {
        Reply::RateLimited { retry_after: retry_after_s.to_string() }
    }
    pub fn delayed(self, d: Duration) -> Reply {
        Reply::Delayed(d, Box::new(self))
    }
}

/// A request as received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    /// Header names lower-cased, in order.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Recorded {
    pub fn wire(&self) -> Wire {
        if self.path.ends_with("/messages") {
            Wire::Anthropic
        } else {
            Wire::Openai
        }
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
    /// The body as JSON (`Null` when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
    /// The `model` field of the body.
    pub fn model(&self) -> String {
        self.json().get("model").and_then(Value::as_str).unwrap_or_default().to_string()
    }
}

type Responder = Arc<dyn Fn(&Recorded) -> Reply + Send + Sync>;

#[derive(Default)]
struct State {
    script: VecDeque<Reply>,
    responder: Option<Responder>,
    requests: Vec<Recorded>,
    in_flight: usize,
    max_in_flight: usize,
}

/// The running server. Stops when dropped.
pub struct MockServer {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    stop: Arc<Notify>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    match state.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

impl MockServer {
    /// Start on `127.0.0.1`, port chosen by the system.
    pub fn start() -> MockServer {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        std_listener.set_nonblocking(true).expect("non-blocking listener");
        let addr = std_listener.local_addr().expect("bound address");
        let state = Arc::new(Mutex::new(State::default()));
        let stop = Arc::new(Notify::new());
        let (st, sp) = (state.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("server runtime");
            rt.block_on(async move {
                let listener = TcpListener::from_std(std_listener).expect("tokio listener");
                loop {
                    tokio::select! {
                        _ = sp.notified() => break,
                        accepted = listener.accept() => {
                            if let Ok((stream, _)) = accepted {
                                tokio::spawn(serve(stream, st.clone()));
                            }
                        }
                    }
                }
            });
            rt.shutdown_background();
        });
        MockServer { addr, state, stop, thread: Some(thread) }
    }
    /// `http://127.0.0.1:PORT`, no trailing slash.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
    /// Queue a reply for the next request without one.
    pub fn push(&self, reply: Reply) {
        lock(&self.state).script.push_back(reply);
    }
    /// Queue several replies.
    pub fn push_all(&self, replies: impl IntoIterator<Item = Reply>) {
        lock(&self.state).script.extend(replies);
    }
    /// Answer requests the script does not cover with `f` (default: a short success).
    pub fn respond_with(&self, f: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) {
        lock(&self.state).responder = Some(Arc::new(f));
    }
    /// Requests received so far (complete ones, whatever the reply).
    pub fn count(&self) -> usize {
        lock(&self.state).requests.len()
    }
    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.state).requests.clone()
    }
    /// The most requests ever being answered at once.
    pub fn max_in_flight(&self) -> usize {
        lock(&self.state).max_in_flight
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.stop.notify_one();
        if let Some(t) = self.thread.take() {
            t.join().ok();
        }
    }
}

async fn read_request(stream: &mut TcpStream) -> Option<Recorded> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p;
        }
        if buf.len() > 1 << 20 {
            return None;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, path) = (first.next()?.to_string(), first.next()?.to_string());
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize =
        headers.iter().find(|(n, _)| n == "content-length").and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Recorded { method, path, headers, body: String::from_utf8_lossy(&body).to_string() })
}

async fn serve(mut stream: TcpStream, state: Arc<Mutex<State>>) {
    let Some(request) = read_request(&mut stream).await else { return };
    let reply = {
        let mut s = lock(&state);
        s.requests.push(request.clone());
        s.in_flight += 1;
        s.max_in_flight = s.max_in_flight.max(s.in_flight);
        let scripted = s.script.pop_front();
        let responder = s.responder.clone();
        drop(s);
        scripted.or_else(|| responder.map(|f| f(&request))).unwrap_or_else(|| Reply::text("ok", 1, 1))
    };
    answer(&mut stream, &request, reply).await;
    lock(&state).in_flight -= 1;
}

async fn answer(stream: &mut TcpStream, request: &Recorded, mut reply: Reply) {
    while let Reply::Delayed(d, inner) = reply {
        tokio::time::sleep(d).await;
        reply = *inner;
    }
    let wire = request.wire();
    let (status, headers, body, declared) = match reply {
        Reply::Hang(d) => {
            tokio::time::sleep(d).await;
            return;
        }
        Reply::Text { text, prompt, cached, completion } => {
            (200, vec![], success_body(wire, &request.model(), &text, prompt, cached, completion), None)
        }
        Reply::RateLimited { retry_after } => {
            (429, vec![("Retry-After".to_string(), retry_after)], error_body(wire, "rate_limit"), None)
        }
        Reply::ServerError => (500, vec![], error_body(wire, "server"), None),
        Reply::Malformed => (200, vec![], "{\"choices\": [ {\"message\": oops".to_string(), None),
        Reply::Truncated => {
            let full = success_body(wire, &request.model(), "this answer is cut short", 5, 0, 5);
            let cut = full[..full.len() / 2].to_string();
            (200, vec![], cut, Some(full.len()))
        }
        Reply::ContextLength => (400, vec![], error_body(wire, "context_length"), None),
        Reply::Raw { status, headers, body } => (status, headers, body, None),
        Reply::Delayed(..) => unreachable!("unwrapped above"),
    };
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n",
        reason(status),
        declared.unwrap_or(body.len())
    );
    for (n, v) in headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(body.as_bytes()).await;
    let _ = stream.flush().await;
    let _ = stream.shutdown().await;
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        _ => "Status",
    }
}

/// A success body in the protocol's shape.
pub fn success_body(wire: Wire, model: &str, text: &str, prompt: u64, cached: u64, completion: u64) -> String {
    match wire {
        Wire::Openai => json!({
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": cached},
            },
        }),
        Wire::Anthropic => json!({
            "id": "msg_test",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "usage": {
                "input_tokens": prompt.saturating_sub(cached),
                "cache_read_input_tokens": cached,
                "output_tokens": completion,
            },
        }),
    }
    .to_string()
}

/// An error body in the protocol's own shape: `rate_limit`, `server` or `context_length`.
pub fn error_body(wire: Wire, what: &str) -> String {
    match (wire, what) {
        (Wire::Openai, "context_length") => json!({"error": {
            "message": "This model's maximum context length is 8192 tokens. However, your messages resulted in 9120 tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}),
        (Wire::Anthropic, "context_length") => json!({"type": "error", "error": {
            "type": "invalid_request_error", "message": "prompt is too long: 208310 tokens > 200000 maximum"}}),
        (Wire::Openai, "rate_limit") => json!({"error": {
            "message": "Rate limit reached for requests", "type": "requests", "code": "rate_limit_exceeded"}}),
        (Wire::Anthropic, "rate_limit") => json!({"type": "error", "error": {
            "type": "rate_limit_error", "message": "Number of requests has exceeded your rate limit"}}),
        (Wire::Openai, _) => json!({"error": {"message": "The server had an error", "type": "server_error"}}),
        (Wire::Anthropic, _) => json!({"type": "error", "error": {"type": "api_error", "message": "Internal server error"}}),
    }
    .to_string()
}

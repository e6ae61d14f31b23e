//! The two wire formats: request bodies, response bodies, and each provider's error shapes.
//!
//! Pure functions over JSON values, so every shape is tested without a network.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Map, Value};

use crate::config::Protocol;
use crate::error::{excerpt, LlmError};
use crate::types::{ChatMessage, ChatResponse, ChatRole, Usage};

/// The endpoint path appended to the base URL.
pub fn endpoint(protocol: Protocol, base_url: &str) -> String {
    match protocol {
        Protocol::Openai => format!("{base_url}/chat/completions"),
        Protocol::Anthropic => format!("{base_url}/v1/messages"),
    }
}

/// The Anthropic API version header value.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The JSON body of a request.
pub fn request_body(
    protocol: Protocol,
    model: &str,
    messages: &[ChatMessage],
    max_tokens: u32,
    temperature: f32,
) -> Value {
    match protocol {
        Protocol::Openai => json!({
            "model": model,
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "stream": false,
        }),
        Protocol::Anthropic => {
            let (system, turns) = anthropic_turns(messages);
            let mut body = Map::new();
            body.insert("model".into(), model.into());
            body.insert("max_tokens".into(), max_tokens.into());
            body.insert("temperature".into(), json!(temperature));
            if let Some(system) = system {
                body.insert("system".into(), system.into());
            }
            body.insert("messages".into(), Value::Array(turns));
            Value::Object(body)
        }
    }
}

/// What Anthropic accepts: system text apart, then alternating turns starting with the user.
/// System messages are joined by a blank line; consecutive messages of one role are merged the
/// same way; a conversation that starts with the assistant gets a one-line user turn first.
fn anthropic_turns(messages: &[ChatMessage]) -> (Option<String>, Vec<Value>) {
    let system: Vec<&str> =
        messages.iter().filter(|m| m.role == ChatRole::System).map(|m| m.content.as_str()).collect();
    let mut turns: Vec<(ChatRole, String)> = Vec::new();
    for m in messages.iter().filter(|m| m.role != ChatRole::System) {
        match turns.last_mut() {
            Some((role, text)) if *role == m.role => {
                text.push_str("\n\n");
                text.push_str(&m.content);
            }
            _ => turns.push((m.role, m.content.clone())),
        }
    }
    if turns.first().is_some_and(|(r, _)| *r == ChatRole::Assistant) {
        turns.insert(0, (ChatRole::User, "(conversation continues)".to_string()));
    }
    let turns = turns
        .into_iter()
        .map(|(role, content)| {
            let role = if role == ChatRole::Assistant { "assistant" } else { "user" };
            json!({"role": role, "content": content})
        })
        .collect();
    ((!system.is_empty()).then(|| system.join("\n\n")), turns)
}

/// How a response should be handled.
#[derive(Debug)]
pub enum Outcome {
    Done(ChatResponse),
    /// Worth another attempt (429, 5xx, an error a gateway wrapped in a 200).
    Retry(LlmError),
    /// Final.
    Fail(LlmError),
}

/// Interpret a complete response.
pub fn interpret(protocol: Protocol, status: u16, body: &str) -> Outcome {
    if !(200..300).contains(&status) {
        return classify_error(status, body);
    }
    let value: Value = match serde_json::from_str(body) {
        Ok(v) => v,
        Err(e) => return Outcome::Fail(malformed(status, format!("invalid JSON: {e}"), body)),
    };
    // Some gateways answer an upstream error with 200 and an error object.
    if value.get("error").is_some_and(|e| !e.is_null()) || value.get("type").and_then(Value::as_str) == Some("error") {
        let code = value.pointer("/error/code").and_then(Value::as_u64).and_then(|c| u16::try_from(c).ok());
        return classify_error(code.filter(|c| *c >= 400).unwrap_or(502), body);
    }
    let parsed = match protocol {
        Protocol::Openai => parse_openai(&value),
        Protocol::Anthropic => parse_anthropic(&value),
    };
    match parsed {
        Ok(r) => Outcome::Done(r),
        Err(problem) => Outcome::Fail(malformed(status, problem, body)),
    }
}

fn malformed(status: u16, problem: String, body: &str) -> LlmError {
    LlmError::Malformed { status, problem, excerpt: excerpt(body, 200) }
}

fn count(v: &Value, pointer: &str) -> u64 {
    v.pointer(pointer).and_then(Value::as_u64).unwrap_or(0)
}

fn text_of(content: &Value) -> Result<String, String> {
    match content {
        Value::Null => Ok(String::new()),
        Value::String(s) => Ok(s.clone()),
        Value::Array(parts) => Ok(parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str).is_none_or(|t| t == "text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("")),
        other => Err(format!("content is neither text nor parts: {}", excerpt(&other.to_string(), 60))),
    }
}

fn parse_openai(v: &Value) -> Result<ChatResponse, String> {
    let choice = v
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or_else(|| "no choices[0]".to_string())?;
    let message = choice.get("message").ok_or_else(|| "no choices[0].message".to_string())?;
    let text = text_of(message.get("content").unwrap_or(&Value::Null))?;
    let usage = Usage {
        prompt_tokens: count(v, "/usage/prompt_tokens"),
        cached_tokens: count(v, "/usage/prompt_tokens_details/cached_tokens"),
        completion_tokens: count(v, "/usage/completion_tokens"),
    };
    // A refusal comes as `message.refusal` (the content null) with finish reason `stop`: it is
    // reported as the finish reason `refusal`.
    let refused = message.get("refusal").and_then(Value::as_str).is_some_and(|r| !r.trim().is_empty());
    let finish_reason = if refused {
        Some("refusal".to_string())
    } else {
        choice.get("finish_reason").and_then(Value::as_str).map(str::to_string)
    };
    Ok(ChatResponse {
        text,
        usage,
        finish_reason,
        model: v.get("model").and_then(Value::as_str).map(str::to_string),
        from_cache: false,
    })
}

fn parse_anthropic(v: &Value) -> Result<ChatResponse, String> {
    let content = v.get("content").ok_or_else(|| "no content".to_string())?;
    if !content.is_array() {
        return Err("content is not a list of blocks".to_string());
    }
    let text = text_of(content)?;
    let cached = count(v, "/usage/cache_read_input_tokens");
    let usage = Usage {
        // Anthropic's input_tokens excludes cache reads and writes.
        prompt_tokens: count(v, "/usage/input_tokens") + cached + count(v, "/usage/cache_creation_input_tokens"),
        cached_tokens: cached,
        completion_tokens: count(v, "/usage/output_tokens"),
    };
    Ok(ChatResponse {
        text,
        usage,
        finish_reason: v.get("stop_reason").and_then(Value::as_str).map(str::to_string),
        model: v.get("model").and_then(Value::as_str).map(str::to_string),
        from_cache: false,
    })
}

/// The message, type and code of an error body, whatever its shape.
struct ErrorShape {
    message: String,
    kind: String,
    code: String,
}

fn error_shape(body: &str) -> ErrorShape {
    let Ok(v) = serde_json::from_str::<Value>(body) else {
        return ErrorShape { message: excerpt(body.trim(), 300), kind: String::new(), code: String::new() };
    };
    let str_at = |p: &str| v.pointer(p).and_then(Value::as_str).map(str::to_string);
    let message = str_at("/error/message")
        .or_else(|| str_at("/error"))
        .or_else(|| str_at("/message"))
        .or_else(|| str_at("/detail"))
        .unwrap_or_else(|| excerpt(body.trim(), 300));
    let kind = str_at("/error/type").or_else(|| str_at("/type")).unwrap_or_default();
    let code = v.pointer("/error/code").or_else(|| v.get("code")).map(|c| match c {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    });
    ErrorShape { message, kind, code: code.unwrap_or_default() }
}

/// Wordings of "the prompt does not fit" across providers and compatible servers.
const CONTEXT_PHRASES: &[&str] = &[
    "prompt is too long",                 // Anthropic
    "maximum context length",             // OpenAI, vLLM
    "context_length_exceeded",            // OpenAI code, some gateways in the message
    "context length exceeded",            // gateways
    "exceeds the available context size", // llama.cpp server
    "exceed context window",              // llama-cpp-python server
    "exceeds the context window",         // gateways
];

fn is_context_length(shape: &ErrorShape) -> bool {
    let msg = shape.message.to_lowercase();
    shape.code == "context_length_exceeded"
        || shape.kind == "exceed_context_size_error"
        || CONTEXT_PHRASES.iter().any(|p| msg.contains(p))
}

/// Classify an error status and body.
pub fn classify_error(status: u16, body: &str) -> Outcome {
    let shape = error_shape(body);
    if (400..500).contains(&status) && status != 429 && is_context_length(&shape) {
        return Outcome::Fail(LlmError::ContextLengthExceeded { status, message: shape.message });
    }
    match status {
        429 => Outcome::Retry(LlmError::RateLimited { attempts: 1, message: shape.message }),
        408 | 500..=599 => Outcome::Retry(LlmError::Server { status, attempts: 1, message: shape.message }),
        _ => Outcome::Fail(LlmError::Rejected { status, message: shape.message }),
    }
}

/// The wait a server asks for: `retry-after-ms` (OpenAI), else `retry-after` in seconds or as
/// an HTTP date.
pub fn retry_after(retry_after_ms: Option<&str>, retry_after: Option<&str>, now: SystemTime) -> Option<Duration> {
    if let Some(ms) = retry_after_ms.and_then(|v| v.trim().parse::<f64>().ok()).filter(|v| v.is_finite() && *v >= 0.0) {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let v = retry_after?.trim();
    if let Ok(s) = v.parse::<f64>() {
        return (s.is_finite() && s >= 0.0).then(|| Duration::from_secs_f64(s));
    }
    let at = http_date(v)?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Parse an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
fn http_date(v: &str) -> Option<SystemTime> {
    let rest = v.split_once(", ")?.1;
    let parts: Vec<&str> = rest.split(' ').collect();
    let [day, month, year, time, "GMT"] = parts.as_slice() else { return None };
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let month = MONTHS.iter().position(|m| m == month)? as i64 + 1;
    let (day, year): (i64, i64) = (day.parse().ok()?, year.parse().ok()?);
    let hms: Vec<i64> = time.split(':').map(|x| x.parse().ok()).collect::<Option<_>>()?;
    let [h, m, s] = hms.as_slice() else { return None };
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3_600 + m * 60 + s;
    Some(UNIX_EPOCH + Duration::from_secs(u64::try_from(secs).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(o: Outcome) -> ChatResponse {
        match o {
            Outcome::Done(r) => r,
            other => panic!("expected a response, got {other:?}"),
        }
    }

    #[test]
    fn openai_body_and_usage() {
        let body = request_body(Protocol::Openai, "gpt-x", &[ChatMessage::user("hi")], 50, 0.3);
        assert_eq!(body["messages"][0], json!({"role": "user", "content": "hi"}));
        assert_eq!((body["max_tokens"].as_u64(), body["stream"].as_bool()), (Some(50), Some(false)));
        let r = done(interpret(
            Protocol::Openai,
            200,
            r#"{"model":"gpt-x","choices":[{"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],
               "usage":{"prompt_tokens":12,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":8}}}"#,
        ));
        assert_eq!(r.text, "hello");
        assert_eq!(r.usage, Usage { prompt_tokens: 12, cached_tokens: 8, completion_tokens: 3 });
        assert_eq!(r.finish_reason.as_deref(), Some("stop"));
    }

    #[test]
    fn openai_null_content_is_empty_text_and_missing_usage_is_zero() {
        let r = done(interpret(Protocol::Openai, 200, r#"{"choices":[{"message":{"content":null}}]}"#));
        assert_eq!((r.text.as_str(), r.usage), ("", Usage::default()));
    }

    #[test]
    fn anthropic_body_merges_roles_and_lifts_system() {
        let msgs = [
            ChatMessage::system("s1"),
            ChatMessage::assistant("a0"),
            ChatMessage::user("u1"),
            ChatMessage::user("u2"),
            ChatMessage::system("s2"),
        ];
        let body = request_body(Protocol::Anthropic, "claude", &msgs, 10, 0.0);
        assert_eq!(body["system"], "s1\n\ns2");
        let turns = body["messages"].as_array().expect("list");
        let roles: Vec<&str> = turns.iter().filter_map(|t| t["role"].as_str()).collect();
        assert_eq!(roles, ["user", "assistant", "user"]);
        assert_eq!(turns[2]["content"], "u1\n\nu2");
    }

    #[test]
    fn anthropic_usage_counts_cache_reads_as_prompt() {
        let r = done(interpret(
            Protocol::Anthropic,
            200,
            r#"{"type":"message","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"stop_reason":"end_turn",
               "usage":{"input_tokens":5,"cache_read_input_tokens":100,"cache_creation_input_tokens":20,"output_tokens":7}}"#,
        ));
        assert_eq!(r.text, "ab");
        assert_eq!(r.usage, Usage { prompt_tokens: 125, cached_tokens: 100, completion_tokens: 7 });
    }

    #[test]
    fn context_length_in_each_providers_shape() {
        let openai = r#"{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
        let anthropic = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}"#;
        let llama = r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}}"#;
        let llama_py = r#"{"error":{"message":"Requested tokens (3000) exceed context window of 2048","type":"invalid_request_error"}}"#;
        for body in [openai, anthropic, llama, llama_py] {
            match classify_error(400, body) {
                Outcome::Fail(LlmError::ContextLengthExceeded { status: 400, .. }) => {}
                other => panic!("{body}: {other:?}"),
            }
        }
        match classify_error(400, r#"{"error":{"message":"bad temperature","code":"invalid_value"}}"#) {
            Outcome::Fail(LlmError::Rejected { status: 400, message }) => assert_eq!(message, "bad temperature"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn retryable_statuses() {
        assert!(matches!(classify_error(429, "{}"), Outcome::Retry(LlmError::RateLimited { .. })));
        assert!(matches!(classify_error(529, "overloaded"), Outcome::Retry(LlmError::Server { status: 529, .. })));
        assert!(matches!(classify_error(401, ""), Outcome::Fail(LlmError::Rejected { status: 401, .. })));
        // An error wrapped in a 200 by a gateway.
        let wrapped = r#"{"error":{"message":"upstream overloaded","code":503}}"#;
        assert!(matches!(
            interpret(Protocol::Openai, 200, wrapped),
            Outcome::Retry(LlmError::Server { status: 503, .. })
        ));
    }

    #[test]
    fn malformed_and_truncated_bodies_are_values() {
        for body in ["", "{", r#"{"choices": [ {"message": "#, "<html>502</html>", r#"{"choices": []}"#, "[1,2]"] {
            match interpret(Protocol::Openai, 200, body) {
                Outcome::Fail(LlmError::Malformed { status: 200, .. }) => {}
                other => panic!("{body:?}: {other:?}"),
            }
        }
        for body in ["{\"content\": ", r#"{"content": "text"}"#, r#"{"id": 1}"#] {
            assert!(matches!(interpret(Protocol::Anthropic, 200, body), Outcome::Fail(LlmError::Malformed { .. })));
        }
    }

    #[test]
    fn retry_after_forms() {
        let now = UNIX_EPOCH + Duration::from_secs(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
        assert_eq!(retry_after(None, Some("3"), now), Some(Duration::from_secs(3)));
        assert_eq!(retry_after(Some("250"), Some("3"), now), Some(Duration::from_millis(250)));
        assert_eq!(retry_after(None, Some("Sun, 06 Nov 1994 08:49:47 GMT"), now), Some(Duration::from_secs(10)));
        assert_eq!(retry_after(None, Some("Sun, 06 Nov 1994 08:49:00 GMT"), now), Some(Duration::ZERO));
        assert_eq!(retry_after(None, Some("soon"), now), None);
        assert_eq!(retry_after(None, None, now), None);
    }
}

//! SGLang's native `POST /generate`, as far as `tokenscope quality` asks it:
//! a prompt's own tokens scored (`return_logprob`, `logprob_start_len: 0`,
//! `top_logprobs_num`, and the ids of `token_ids_logprob`) by the toy model
//! ([`toy_serve::generate`]), one greedy
//! token after it. Answered at once, outside the engine's schedule (the
//! scoring is a correctness check, not a timed request).

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use tokenscope_quality::toy_serve;

use super::state::MockState;

pub(super) async fn generate(State(s): State<MockState>, body: Bytes) -> Response {
    let bad = |why: &str| {
        (
            StatusCode::BAD_REQUEST,
            axum::Json(
                serde_json::json!({"error": {"message": why, "type": "invalid_request_error"}}),
            ),
        )
            .into_response()
    };
    if !s.lm.native_generate {
        return (
            StatusCode::NOT_FOUND,
            axum::Json(
                serde_json::json!({"error": {"message": "no /generate here", "type": "not_found"}}),
            ),
        )
            .into_response();
    }
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(&body) else {
        return bad("the body is not JSON");
    };
    let Some(text) = v.get("text").and_then(|t| t.as_str()) else {
        return bad("\"text\" (a string) is required");
    };
    let k = v
        .get("top_logprobs_num")
        .and_then(|k| k.as_u64())
        .map_or(0, |k| k.min(1000) as usize);
    let ids: Vec<u64> = v
        .get("token_ids_logprob")
        .and_then(|l| l.as_array())
        .map(|l| l.iter().filter_map(|i| i.as_u64()).collect())
        .unwrap_or_default();
    axum::Json(toy_serve::generate(&s.lm, text.trim_end(), k, &ids)).into_response()
}

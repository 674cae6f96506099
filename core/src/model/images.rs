//! What a level's requests with images saw, per image size (`--images`): the
//! time to the first token against the size of what was sent.

use serde::{Deserialize, Serialize};

/// A level's requests that carried one image spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImageGroup {
    /// What each request carried: `512x512`, `2x1024x768` (count x width x
    /// height, pixels).
    pub images: String,
    /// Its requests sent in the measured rounds.
    pub sent: u64,
    /// Of those, the successful ones.
    pub ok: u64,
    /// The server's `usage.prompt_tokens` (text, template and images), mean
    /// over the successful requests that reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_mean: Option<f64>,
    /// The images' tokens per request: `usage.prompt_tokens` less the text's
    /// counted tokens and the template's overhead, mean; absent where the text
    /// was not counted (no tokenizer) or the server reported no usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_tokens_mean: Option<f64>,
    /// Time to first token, median over its successful requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms_p50: Option<f64>,
    /// Time to first token, 90th percentile; absent under 10 requests (no
    /// sample above it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms_p90: Option<f64>,
}

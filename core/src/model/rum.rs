//! A level of real users' turns (`tokenscope collect --report`): what only real
//! users' pages say beside the lab's figures. Where the painted TTFT went, and
//! how the turns ended. Types only; [`crate::rum::report`] fills them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What a level built from real users' turns adds to the usual figures. Every
/// mean and share is weighted: a turn stands for as many turns as its weight (the
/// inverse of its sampling rate).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct RumLevel {
    /// Turns stored for the level.
    pub turns_stored: u64,
    /// Turns they stand for (the sum of their weights).
    pub turns_weighted: f64,
    /// Some turns stood for more than one (the probe sampled): the level's
    /// figures are weighted estimates, and its report has no raw file (an
    /// interval over weighted turns is not a bootstrap over requests).
    pub sampled: bool,
    /// Where the painted TTFT went, over the turns that have every mark.
    pub split: Option<TtftSplit>,
    /// Weighted shares of the turns that ended complete, stopped by the user,
    /// failed.
    pub complete_fraction: f64,
    /// Stopped by the user (or the app).
    pub aborted_fraction: f64,
    /// Failed (HTTP status, network, an error in the stream).
    pub error_fraction: f64,
    /// Turns with a gap between text chunks over 1 s (weighted share).
    pub stalled_1s_fraction: f64,
    /// Turns with a gap over 250 ms (weighted share).
    pub stalled_250ms_fraction: f64,
    /// Chunks that arrived before the frame that showed the one before them
    /// (painted together), as a share of the chunks.
    pub merged_chunk_fraction: f64,
    /// Turns during which the page was hidden: network times kept, paint dropped.
    pub hidden_turns: u64,
    /// Turns on a page restored from the back/forward cache.
    pub restored_turns: u64,
    /// Times the probe dropped as impossible, over the level's turns.
    pub clamped_times: u64,
    /// Turns by how their paint was measured (`raf+task`).
    pub paint_methods: BTreeMap<String, u64>,
    /// The user's click or key to the `fetch` call, weighted mean over the turns
    /// a click or key sent (ms): before the TTFT starts counting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_to_fetch_ms: Option<f64>,
    /// Turns during which a long animation frame (or long task) ran (weighted share).
    #[serde(default)]
    pub long_frame_fraction: f64,
    /// The input-blocking time of those frames per turn, weighted mean (ms).
    #[serde(default)]
    pub blocking_ms: f64,
}

/// The painted TTFT taken apart, as weighted means over the turns that have each
/// mark (the means add up; percentiles would not). Each part is ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct TtftSplit {
    /// Turns behind the means (weighted).
    pub turns: f64,
    /// TTFT as painted: the app's `fetch` to the frame that showed the first text.
    pub painted_ms: f64,
    /// The app's `fetch` to the first text chunk in the page: the server's TTFT
    /// plus the network and proxies both ways.
    pub received_ms: f64,
    /// The server's own time to the first token, from its stream's timings
    /// (llama.cpp `timings.prompt_ms`), over the turns that carried it.
    pub server_ms: Option<f64>,
    /// Received less the server's part over those same turns: network, proxies,
    /// queueing in front of the server.
    pub network_ms: Option<f64>,
    /// The turns (weighted) behind `server_ms` and `network_ms`.
    #[serde(default)]
    pub server_turns: f64,
    /// First chunk to the first change of the answer's DOM: the app's own code
    /// on the main thread (parsing, state, scheduling its render).
    pub main_thread_ms: f64,
    /// That DOM change to the frame that showed it: style, layout, paint.
    pub render_ms: f64,
}

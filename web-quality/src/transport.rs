//! What carries the quality checks' requests in the browser: [`Fetch`] (the
//! browser's `fetch`, the Benchmark view's headers) and [`Sim`] (the page's
//! simulator: core's toy model answering as `tokenscope mock` does, nothing
//! leaving the page). Progress goes to a callback (the view's status line).

use std::rc::Rc;

use serde_json::{Value, json};
use tokenscope_quality::session::Transport;
use tokenscope_quality::toy_serve::{self, LmServe};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

/// Where progress is said.
pub type Say = Rc<dyn Fn(&str)>;

/// The browser's `fetch`, with these headers (the key's first), named `shown`
/// in errors (never the URL's query or a header).
pub struct Fetch {
    /// Every header to send.
    pub headers: Vec<(String, String)>,
    /// The endpoint as shown.
    pub shown: String,
    /// Progress.
    pub say: Say,
}

impl Fetch {
    async fn send(&self, method: &str, url: &str, body: Option<&Value>) -> Result<Value, String> {
        let fail = |what: &str| format!("{}: {what}", self.shown);
        let init = web_sys::RequestInit::new();
        init.set_method(method);
        let headers = web_sys::Headers::new().map_err(|_| fail("no Headers"))?;
        if let Some(b) = body {
            let _ = headers.set("content-type", "application/json");
            init.set_body(&JsValue::from_str(&b.to_string()));
        }
        for (k, v) in &self.headers {
            headers
                .set(k, v)
                .map_err(|_| fail("a header the browser refuses (check its name)"))?;
        }
        init.set_headers(&headers);
        let req = web_sys::Request::new_with_str_and_init(url, &init)
            .map_err(|_| fail("not a URL the browser can fetch"))?;
        let window = web_sys::window().ok_or_else(|| fail("no window"))?;
        let resp: web_sys::Response = JsFuture::from(window.fetch_with_request(&req))
            .await
            .map_err(|_| {
                fail("no answer (the network, or the server does not allow this page: CORS)")
            })?
            .unchecked_into();
        let status = resp.status();
        if status == 401 || status == 403 {
            return Err(fail(&format!(
                "answered {status}: it wants a key (the Benchmark view's API key)"
            )));
        }
        if !resp.ok() {
            return Err(fail(&format!("answered {status}")));
        }
        let text = JsFuture::from(resp.text().map_err(|_| fail("an unreadable answer"))?)
            .await
            .map_err(|_| fail("the answer broke off"))?;
        serde_json::from_str(&text.as_string().unwrap_or_default())
            .map_err(|_| fail("the answer is not JSON"))
    }
}

impl Transport for Fetch {
    async fn post(&self, url: &str, body: &Value) -> Result<Value, String> {
        self.send("POST", url, Some(body)).await
    }

    async fn get(&self, url: &str) -> Result<Value, String> {
        self.send("GET", url, None).await
    }

    fn say(&self, line: &str) {
        (self.say)(line);
    }
}

/// The page's simulator: `serve`'s toy model answers chat completions (greedy,
/// with top-k log-probabilities), completions with `echo` (teacher forcing),
/// `/tokenize` and `/models`, as `tokenscope mock` answers them over HTTP.
pub struct Sim {
    /// How it answers.
    pub serve: LmServe,
    /// The model it names.
    pub model: String,
    /// Progress.
    pub say: Say,
}

impl Sim {
    /// `path`'s answer to `body`, the JSON a server would send.
    pub fn answer(&self, path: &str, body: &Value) -> Result<Value, String> {
        let n = body["max_tokens"].as_u64().unwrap_or(16).clamp(1, 4096) as usize;
        if path.ends_with("/tokenize") {
            let text = body["content"]
                .as_str()
                .or(body["prompt"].as_str())
                .unwrap_or_default();
            return Ok(json!({"tokens": toy_serve::token_ids(text, self.serve.tokenizer_seed)}));
        }
        if path.ends_with("/chat/completions") {
            // As the mock reads a prompt: without trailing space.
            let prompt = body["messages"][0]["content"]
                .as_str()
                .unwrap_or_default()
                .trim_end();
            let top = if body["logprobs"] == json!(true) {
                body["top_logprobs"].as_u64().unwrap_or(0) as usize
            } else {
                0
            };
            let by_id = body["return_tokens_as_token_ids"] == json!(true);
            let (text, logprobs) = toy_serve::answer(&self.serve, prompt, n, top, by_id);
            return Ok(json!({
                "object": "chat.completion", "model": self.model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": logprobs, "finish_reason": "length"}],
                "usage": {"completion_tokens": n},
            }));
        }
        if path.ends_with("/completions") && body["echo"] == json!(true) {
            let prompt = body["prompt"].as_str().unwrap_or_default().trim_end();
            let k = body["logprobs"].as_u64().unwrap_or(0) as usize;
            let (text, logprobs) = toy_serve::echo(&self.serve, prompt, n, k);
            return Ok(json!({
                "object": "text_completion", "model": self.model,
                "choices": [{"index": 0, "text": text, "logprobs": logprobs, "finish_reason": "length"}],
                "usage": {"completion_tokens": n},
            }));
        }
        Err(format!("the simulator has no {path}"))
    }
}

/// Let the browser paint (a task boundary) between simulated answers.
async fn yield_to_page() {
    let Some(window) = web_sys::window() else {
        return;
    };
    let p = js_sys::Promise::new(&mut |resolve, _| {
        let _ = window.set_timeout_with_callback(&resolve);
    });
    let _ = JsFuture::from(p).await;
}

impl Transport for Sim {
    async fn post(&self, url: &str, body: &Value) -> Result<Value, String> {
        yield_to_page().await;
        self.answer(url, body)
    }

    async fn get(&self, url: &str) -> Result<Value, String> {
        if url.ends_with("/models") {
            Ok(json!({"data": [{"id": self.model}]}))
        } else {
            Err(format!("the simulator has no {url}"))
        }
    }

    fn say(&self, line: &str) {
        (self.say)(line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokenscope_quality::sample::parse_chat_completion;
    use tokenscope_quality::session::{Ask, echo_body};
    use tokenscope_quality::teacher;
    use tokenscope_quality::toy_lm::ToyLm;

    fn sim(sigma: f64) -> Sim {
        Sim {
            serve: LmServe {
                lm: ToyLm::new(7, 16).perturbed(sigma, 3),
                logprobs: true,
                tasks_right: 1.0,
                seed: 7,
                tokenizer_seed: 0,
                batch_noise: 0.0,
                token_ids: true,
                echo_logprobs: true,
                native_generate: true,
            },
            model: "toy".into(),
            say: Rc::new(|_| {}),
        }
    }

    #[test]
    fn the_simulator_answers_as_the_checks_read_servers() {
        let s = sim(0.0);
        let ask = Ask {
            model: "toy".into(),
            max_tokens: 5,
            top: Some(20),
            token_ids: false,
        };
        let v = s
            .answer(
                "http://sim/v1/chat/completions",
                &ask.body("Name a colour."),
            )
            .unwrap();
        let sample = parse_chat_completion(&v).unwrap();
        // The toy model's own greedy decode, every position with the whole
        // vocabulary (16 < 20) as its top list.
        let greedy = s.serve.lm.greedy("Name a colour.", 5);
        assert_eq!(sample.positions.len(), 5);
        for (p, t) in sample.positions.iter().zip(&greedy) {
            assert_eq!(p.token.trim(), ToyLm::token_text(*t, 0));
            assert_eq!(p.top.len(), 16);
        }
        let text = "The harbour wakes before the town, and the gulls are loud.";
        let e = s
            .answer("http://sim/v1/completions", &echo_body("toy", text, 20))
            .unwrap();
        let scored = teacher::parse_echo(&e, text).unwrap();
        assert!(scored.positions.len() >= 10, "{}", scored.positions.len());
        let ids = s
            .answer("http://sim/tokenize", &json!({"content": "a b, c"}))
            .unwrap();
        assert_eq!(ids["tokens"].as_array().unwrap().len(), 4);
        assert!(s.answer("http://sim/v1/embeddings", &json!({})).is_err());
    }
}

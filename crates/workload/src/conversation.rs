//! Conversations (`--conversation turns=N,think=2s`): sessions whose every turn
//! sends the whole history so far (the user's messages and the answers the server
//! really gave, word for word) after the user's think time, as a chat product
//! does. A server that keeps the history's tokens (llama.cpp's slot cache, vLLM's
//! prefix cache) computes only the new turn; the report shows TTFT per turn and
//! how many prompt tokens the server said it served from its cache.
//!
//! Sessions are the unit of concurrency: at concurrency `c`, `c` sessions run at
//! once, each sending its next turn when the last one's answer has ended and
//! the think time has passed.

use serde::{Deserialize, Serialize};

use tokenscope_measure::openai::ChatMessage;

/// The shape of every session.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Conversation {
    /// Turns per session (user message, answer), at least 1.
    pub turns: u32,
    /// The user's think time between an answer's end and the next turn's send,
    /// ms (not counted in any latency).
    pub think_ms: f64,
}

impl Conversation {
    /// Parse `turns=N[,think=DURATION]` (think defaults to 0: the next turn goes
    /// as soon as the answer ends).
    pub fn parse(s: &str) -> Result<Self, String> {
        let (mut turns, mut think_ms) = (None, 0.0);
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| format!("{part:?}: expected key=value (turns=N, think=2s)"))?;
            match key.trim() {
                "turns" => match value.trim().parse::<u32>() {
                    Ok(n) if n >= 1 => turns = Some(n),
                    _ => return Err(format!("turns={value}: must be a whole number, at least 1")),
                },
                "think" => {
                    let v = value.trim();
                    think_ms = if matches!(v, "0" | "0s" | "0ms") {
                        0.0
                    } else {
                        tokenscope_measure::parse::parse_duration(v)
                            .map_err(|e| format!("think={v}: {e}"))?
                            .as_secs_f64()
                            * 1000.0
                    };
                }
                other => {
                    return Err(format!(
                        "{other:?}: unknown key (expected turns=N and think=DURATION)"
                    ));
                }
            }
        }
        let turns = turns.ok_or("turns=N is missing (e.g. turns=4,think=2s)")?;
        Ok(Self { turns, think_ms })
    }

    /// The whole sessions a round of `requests` requests runs: enough to send
    /// that many, every session to its last turn (so every turn has as many
    /// samples as the first).
    pub fn sessions_for(&self, requests: u64) -> u64 {
        requests.div_ceil(u64::from(self.turns.max(1)))
    }
}

/// One session's messages so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    messages: Vec<ChatMessage>,
}

impl History {
    /// The messages of the next turn: the history and the user's new message
    /// (which the history keeps).
    pub fn ask(&mut self, user: String) -> Vec<ChatMessage> {
        self.messages.push(ChatMessage {
            role: "user".into(),
            content: user,
        });
        self.messages.clone()
    }

    /// The server's answer to the last message, kept for the next turn.
    pub fn answered(&mut self, answer: String) {
        self.messages.push(ChatMessage {
            role: "assistant".into(),
            content: answer,
        });
    }

    /// The turn the next [`History::ask`] makes (1 the first).
    pub fn next_turn(&self) -> u32 {
        (self.messages.len() / 2) as u32 + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_turns_and_think() {
        assert_eq!(
            Conversation::parse("turns=4,think=2s"),
            Ok(Conversation {
                turns: 4,
                think_ms: 2000.0
            })
        );
        assert_eq!(
            Conversation::parse(" turns=2 , think=250ms "),
            Ok(Conversation {
                turns: 2,
                think_ms: 250.0
            })
        );
        assert_eq!(
            Conversation::parse("turns=3,think=0"),
            Ok(Conversation {
                turns: 3,
                think_ms: 0.0
            })
        );
        assert_eq!(Conversation::parse("turns=3").unwrap().think_ms, 0.0);
        let c = Conversation::parse("turns=3").unwrap();
        assert_eq!([1, 3, 4, 6, 7].map(|n| c.sessions_for(n)), [1, 1, 2, 2, 3]);
    }

    #[test]
    fn bad_specs_name_what_is_wrong() {
        for (spec, says) in [
            ("think=2s", "turns=N is missing"),
            ("turns=0", "turns=0"),
            ("turns=x", "turns=x"),
            ("turns=2,think=soon", "think=soon"),
            ("turns=2,pause=1s", "\"pause\": unknown key"),
            ("turns", "expected key=value"),
        ] {
            let e = Conversation::parse(spec).unwrap_err();
            assert!(e.contains(says), "{spec}: {e}");
        }
    }

    #[test]
    fn history_grows_turn_by_turn() {
        let mut h = History::default();
        assert_eq!(h.next_turn(), 1);
        assert_eq!(h.ask("a".into()).len(), 1);
        h.answered("b".into());
        assert_eq!(h.next_turn(), 2);
        let m = h.ask("c".into());
        let roles: Vec<_> = m.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["user", "assistant", "user"]);
        assert_eq!(m[1].content, "b");
    }
}

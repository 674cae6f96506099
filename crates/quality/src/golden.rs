//! The golden file (`tokenscope.golden/1`): a reference's answers kept for
//! later checks without the reference server (`quality --save-golden`, then
//! `--ref FILE`), with the noise floor measured when it was made.

use serde::{Deserialize, Serialize};

use super::measure::PairFigures;
use super::sample::Sample;

/// The golden file's schema tag.
pub const GOLDEN_SCHEMA: &str = "tokenscope.golden/1";

/// A reference's answers kept for later checks (`quality --save-golden`): the
/// prompts and, per prompt, the answer with the top-k of each token. Kilobytes,
/// not the gigabytes of a full-vocabulary logits file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Golden {
    /// [`GOLDEN_SCHEMA`].
    pub schema: String,
    /// The model the reference named.
    pub model: String,
    /// The reference's URL as given, reduced to scheme, host and path.
    pub source: String,
    /// `max_tokens` asked.
    pub max_tokens: u32,
    /// `top_logprobs` asked.
    pub top_logprobs: u32,
    /// The prompts, in order.
    pub prompts: Vec<String>,
    /// The answers, one per prompt.
    pub samples: Vec<Sample>,
    /// The tasks asked (none: no task checks).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<super::tasks::Task>,
    /// The reference's output for each task.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub task_outputs: Vec<String>,
    /// `max_tokens` asked of the tasks.
    #[serde(default)]
    pub task_max_tokens: u32,
    /// The reference against itself when the file was made (the noise floor
    /// a candidate is judged against).
    #[serde(default)]
    pub self_check: Option<PairFigures>,
    /// The fixed text's chunks, teacher-forced (empty: the reference could not
    /// score a prompt).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tf_chunks: Vec<String>,
    /// The reference's scores of each chunk.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tf_samples: Vec<Sample>,
    /// Its scores against a second reading (the noise floor).
    #[serde(default)]
    pub tf_self_check: Option<super::measure::Distribution>,
    /// Its `/tokenize` ids of the probe text (empty: it had no `/tokenize`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tokenizer_ids: Vec<u64>,
}

/// Why a golden file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum GoldenError {
    /// Not JSON of the golden shape.
    #[error("not a golden file ({0})")]
    Shape(String),
    /// Another schema.
    #[error("schema {0:?}, expected {GOLDEN_SCHEMA:?}")]
    Schema(String),
    /// Prompts and answers do not pair.
    #[error("{prompts} prompts but {samples} answers")]
    Count {
        /// Prompts.
        prompts: usize,
        /// Answers.
        samples: usize,
    },
}

impl Golden {
    /// Read and check a golden file's text.
    pub fn parse(text: &str) -> Result<Golden, GoldenError> {
        let g: Golden =
            serde_json::from_str(text).map_err(|e| GoldenError::Shape(e.to_string()))?;
        if g.schema != GOLDEN_SCHEMA {
            return Err(GoldenError::Schema(g.schema));
        }
        if g.prompts.len() != g.samples.len() || g.prompts.is_empty() {
            return Err(GoldenError::Count {
                prompts: g.prompts.len(),
                samples: g.samples.len(),
            });
        }
        if g.tasks.len() != g.task_outputs.len() {
            return Err(GoldenError::Count {
                prompts: g.tasks.len(),
                samples: g.task_outputs.len(),
            });
        }
        if g.tf_chunks.len() != g.tf_samples.len() {
            return Err(GoldenError::Count {
                prompts: g.tf_chunks.len(),
                samples: g.tf_samples.len(),
            });
        }
        Ok(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_golden_file_is_checked() {
        assert!(matches!(Golden::parse("{}"), Err(GoldenError::Shape(_))));
        let g = Golden {
            schema: "other/1".into(),
            model: "m".into(),
            source: "s".into(),
            max_tokens: 1,
            top_logprobs: 1,
            prompts: vec!["p".into()],
            samples: vec![],
            tasks: vec![],
            task_outputs: vec![],
            task_max_tokens: 0,
            self_check: None,
            tf_chunks: vec![],
            tf_samples: vec![],
            tf_self_check: None,
            tokenizer_ids: vec![],
        };
        let text = serde_json::to_string(&g).unwrap();
        assert!(matches!(Golden::parse(&text), Err(GoldenError::Schema(_))));
        let g = Golden {
            schema: GOLDEN_SCHEMA.into(),
            ..g
        };
        let text = serde_json::to_string(&g).unwrap();
        assert!(matches!(
            Golden::parse(&text),
            Err(GoldenError::Count { .. })
        ));
    }
}

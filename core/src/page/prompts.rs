//! A prompts file in the page: the page fetches its text, the report module
//! reads it with the CLI's parser ([`crate::workload::dataset`], the same errors
//! naming the line and field) and hands back the prompts to send.

use serde::{Deserialize, Serialize};

use crate::workload::dataset::Dataset;

/// What the page asks the report module to read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptsRequest {
    /// The file's text.
    pub text: String,
    /// Use this many of them, picked with a shuffle seeded by `seed`.
    pub sample: Option<u64>,
    /// The run's seed.
    pub seed: u64,
}

impl PromptsRequest {
    /// The prompts to send, in order (sampled when asked), or why the text is
    /// not a dataset.
    pub fn read(&self) -> Result<Dataset, String> {
        let mut d = Dataset::parse(&self.text).map_err(|e| e.to_string())?;
        if d.prompts.is_empty() {
            return Err("holds no prompt".into());
        }
        if let Some(n) = self.sample {
            d.prompts = d.sample(n as usize, self.seed);
        }
        Ok(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_samples_and_names_the_bad_line() {
        let text = "{\"prompt\": \"a b c\", \"max_tokens\": 3}\n{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n{\"prompt\": \"d\"}\n";
        let r = PromptsRequest {
            text: text.into(),
            sample: None,
            seed: 1,
        };
        let d = r.read().unwrap();
        assert_eq!(d.prompts.len(), 3);
        assert_eq!(d.prompts[0].max_tokens, Some(3));
        assert!(d.prompts[1].messages.is_some());
        let two = PromptsRequest {
            sample: Some(2),
            ..r.clone()
        };
        assert_eq!(two.read().unwrap().prompts.len(), 2);
        let bad = PromptsRequest {
            text: "{\"prompt\": \"ok\"}\n{\"nothing\": 1}\n".into(),
            ..r.clone()
        };
        let e = bad.read().unwrap_err();
        assert!(e.contains("line 2"), "{e}");
        let empty = PromptsRequest {
            text: "\n".into(),
            ..r
        };
        assert!(empty.read().unwrap_err().contains("no prompt"));
    }
}

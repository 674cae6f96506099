//! Tasks with one right answer: a built-in probe set made from a seed (no
//! dataset, licence, contamination or network) and importers for GSM8K- and
//! MMLU-style JSONL files, each graded exactly. A task's answer is read two ways,
//! as lm-eval does: **strict** (the text after the last `ANSWER:`, or GSM8K's
//! `#### `) and **flexible** (the last number, or for a choice the last lone
//! letter A-J).

use serde::{Deserialize, Serialize};

use tokenscope_measure::parse::{civil_from_days, days_from_civil};
use tokenscope_stats::compare::wilson;
use tokenscope_stats::rng::Rng;

/// What a task asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskKind {
    /// A multi-step arithmetic word problem (a number).
    Arithmetic,
    /// How many times a word occurs (a number).
    Counting,
    /// Numbers sorted (a comma-separated list).
    Sorting,
    /// Words reversed (a space-separated list).
    Reversal,
    /// A date some days after another (`YYYY-MM-DD`).
    Dates,
    /// A JSON object with given keys and values.
    Json,
    /// Imported: the answer is a number (GSM8K style).
    Number,
    /// Imported: the answer is a choice letter (MMLU style).
    Choice,
}

/// One task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// What it asks.
    pub kind: TaskKind,
    /// The prompt sent.
    pub prompt: String,
    /// The right answer, normalised.
    pub answer: String,
    /// A choice task's number of options (the letters A.. that are answers).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub choices: u8,
}

fn is_zero(n: &u8) -> bool {
    *n == 0
}

/// How an answer was graded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Grade {
    /// The right answer.
    Right,
    /// An answer, not the right one.
    Wrong,
    /// No answer could be read.
    Invalid,
}

const INSTRUCTION: &str = "Give the result alone on the last line, as `ANSWER: <result>`.";
const WORDS: [&str; 10] = [
    "red", "blue", "green", "stone", "river", "lamp", "cloud", "seed", "bell", "road",
];

/// The `n` built-in tasks of `seed`, the kinds in turn.
pub fn builtin(seed: u64, n: usize) -> Vec<Task> {
    (0..n).map(|i| task(seed, i)).collect()
}

/// Built-in task `index` of `seed`. Its prompt ends with its tag, `(task
/// SEED-INDEX)`, as a question number would.
pub fn task(seed: u64, index: usize) -> Task {
    let mut r = Rng::for_stream(seed ^ 0x7a5c, index as u64);
    let mut n = |lo: u64, hi: u64| lo + r.below(hi - lo + 1);
    let (kind, question, answer) = match index % 6 {
        0 => {
            let (a, b, c, d) = (n(20, 90), n(2, 19), n(2, 9), n(2, 12));
            (
                TaskKind::Arithmetic,
                format!(
                    "A baker has {a} loaves, sells {b} of them, then bakes {c} trays of {d} loaves each. How many loaves does the baker have now?"
                ),
                (a - b + c * d).to_string(),
            )
        }
        1 => {
            let target = WORDS[n(0, 9) as usize];
            let list: Vec<&str> = (0..n(8, 16)).map(|_| WORDS[n(0, 9) as usize]).collect();
            let count = list.iter().filter(|w| **w == target).count();
            (
                TaskKind::Counting,
                format!(
                    "How many times does the word \"{target}\" occur in this list: {}?",
                    list.join(" ")
                ),
                count.to_string(),
            )
        }
        2 => {
            let mut v: Vec<u64> = (0..n(5, 8)).map(|_| n(1, 99)).collect();
            let q = v.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
            v.sort_unstable();
            (
                TaskKind::Sorting,
                format!("Sort these numbers from smallest to largest: {q}."),
                v.iter().map(u64::to_string).collect::<Vec<_>>().join(", "),
            )
        }
        3 => {
            let list: Vec<&str> = (0..n(4, 7)).map(|_| WORDS[n(0, 9) as usize]).collect();
            let rev: Vec<&str> = list.iter().rev().copied().collect();
            (
                TaskKind::Reversal,
                format!("Write these words in reverse order: {}.", list.join(" ")),
                rev.join(" "),
            )
        }
        4 => {
            let start = days_from_civil(n(2000, 2030) as i64, n(1, 12) as i64, n(1, 28) as i64);
            let k = n(3, 400) as i64;
            (
                TaskKind::Dates,
                format!(
                    "What date is {k} days after {}? Write it as YYYY-MM-DD.",
                    civil(start)
                ),
                civil(start + k),
            )
        }
        _ => {
            let name = WORDS[n(0, 9) as usize];
            let count = n(1, 999);
            (
                TaskKind::Json,
                format!(
                    "Return a JSON object with exactly two keys: \"name\", the string \"{name}\", and \"count\", the number {count}."
                ),
                format!("{{\"count\":{count},\"name\":\"{name}\"}}"),
            )
        }
    };
    Task {
        kind,
        prompt: format!("{question} {INSTRUCTION} (task {seed}-{index})"),
        answer,
        choices: 0,
    }
}

/// A built-in task's tag `(seed, index)`, read from its prompt.
pub fn tag_of(prompt: &str) -> Option<(u64, usize)> {
    let rest = &prompt[prompt.rfind("(task ")? + 6..];
    let (tag, _) = rest.split_once(')')?;
    let (seed, index) = tag.split_once('-')?;
    Some((seed.parse().ok()?, index.parse().ok()?))
}

/// Tasks from a JSONL file's text: GSM8K style (`question`, `answer` ending
/// `#### N`) or MMLU style (`question`, `choices`, `answer` an index or letter).
pub fn import_jsonl(text: &str) -> Result<Vec<Task>, String> {
    let mut out = Vec::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let at = |why: &str| format!("line {}: {why}", i + 1);
        let v: serde_json::Value =
            serde_json::from_str(line).map_err(|e| at(&format!("not JSON ({e})")))?;
        let q = v["question"]
            .as_str()
            .ok_or_else(|| at("no \"question\""))?;
        let task = match v["choices"].as_array() {
            Some(choices) => {
                let letters = "ABCDEFGHIJ";
                if choices.is_empty() || choices.len() > letters.len() {
                    return Err(at("\"choices\" must hold 1 to 10 options"));
                }
                let answer = match &v["answer"] {
                    serde_json::Value::Number(n) => n
                        .as_u64()
                        .and_then(|k| letters.chars().nth(k as usize))
                        .filter(|_| n.as_u64().is_some_and(|k| (k as usize) < choices.len())),
                    serde_json::Value::String(s) => s
                        .trim()
                        .chars()
                        .next()
                        .filter(|c| letters[..choices.len()].contains(c.to_ascii_uppercase())),
                    _ => None,
                }
                .ok_or_else(|| at("\"answer\" is not one of the choices"))?;
                let opts: Vec<String> = choices
                    .iter()
                    .zip(letters.chars())
                    .map(|(c, l)| format!("{l}. {}", c.as_str().unwrap_or_default()))
                    .collect();
                Task {
                    kind: TaskKind::Choice,
                    prompt: format!("{q}\n{}\n{INSTRUCTION}", opts.join("\n")),
                    answer: answer.to_ascii_uppercase().to_string(),
                    choices: choices.len() as u8,
                }
            }
            None => {
                let a = v["answer"].as_str().ok_or_else(|| at("no \"answer\""))?;
                let n = a
                    .rsplit("####")
                    .next()
                    .and_then(number)
                    .ok_or_else(|| at("the answer has no final number (`#### N`)"))?;
                Task {
                    kind: TaskKind::Number,
                    prompt: format!("{q} {INSTRUCTION}"),
                    answer: n,
                    choices: 0,
                }
            }
        };
        out.push(task);
    }
    if out.is_empty() {
        return Err("no tasks in the file".into());
    }
    Ok(out)
}

/// Grade an output strictly and flexibly.
pub fn grade(task: &Task, output: &str) -> (Grade, Grade) {
    let strict = strict_answer(output).map(|a| normalise(task, a));
    let flexible = strict
        .clone()
        .flatten()
        .or_else(|| flexible_answer(task, output));
    let judge = |a: Option<Option<String>>| match a.flatten() {
        None => Grade::Invalid,
        Some(a) if a == task.answer => Grade::Right,
        Some(_) => Grade::Wrong,
    };
    (judge(strict), judge(Some(flexible)))
}

/// The text after the last `ANSWER:` or `####` (a JSON answer may span
/// lines; [`normalise`] takes the others' first line).
fn strict_answer(output: &str) -> Option<&str> {
    let (at, len) = [("ANSWER:", 7), ("####", 4)]
        .iter()
        .filter_map(|(m, l)| output.rfind(m).map(|i| (i, *l)))
        .max()?;
    Some(&output[at + len..])
}

/// The answer in its normal form (`None`: not of the task's kind).
fn normalise(task: &Task, a: &str) -> Option<String> {
    let kind = task.kind;
    // Anything but JSON ends with its line (a code fence is not the answer).
    let a = if kind == TaskKind::Json {
        a
    } else {
        a.lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with("```"))?
    };
    // Emphasis and quotes around the answer, and a closing full stop, in any
    // order (a leading "." is a decimal point).
    let a = a
        .trim()
        .trim_start_matches(['`', '*', '"', '_'])
        .trim_end_matches(['`', '*', '"', '_', '.'])
        .trim();
    match kind {
        TaskKind::Arithmetic | TaskKind::Counting | TaskKind::Number => number(a),
        TaskKind::Sorting => {
            let v: Option<Vec<String>> = a
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|s| !s.is_empty())
                .map(number)
                .collect();
            v.map(|v| v.join(", ")).filter(|s| !s.is_empty())
        }
        TaskKind::Reversal => {
            let w: Vec<String> = a
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|s| !s.is_empty())
                .map(str::to_lowercase)
                .collect();
            (!w.is_empty()).then(|| w.join(" "))
        }
        TaskKind::Dates => {
            let d = a.get(..10)?;
            let ok = d.len() == 10
                && d.chars().enumerate().all(|(i, c)| {
                    if i == 4 || i == 7 {
                        c == '-'
                    } else {
                        c.is_ascii_digit()
                    }
                });
            ok.then(|| d.to_owned())
        }
        TaskKind::Json => {
            // Any JSON object is an answer; right only with exactly the two
            // keys and their values (the schema).
            let (start, end) = (a.find('{')?, a.rfind('}')?);
            let v: serde_json::Value = serde_json::from_str(a.get(start..=end)?).ok()?;
            let o = v.as_object()?;
            let fits = o.len() == 2
                && o.get("count").is_some_and(serde_json::Value::is_u64)
                && o.get("name").is_some_and(serde_json::Value::is_string);
            Some(if fits {
                format!("{{\"count\":{},\"name\":{}}}", o["count"], o["name"])
            } else {
                v.to_string()
            })
        }
        TaskKind::Choice => choice_letter(task, a),
    }
}

/// The last lone letter of `text` that names one of the task's choices.
fn choice_letter(task: &Task, text: &str) -> Option<String> {
    let n = usize::from(task.choices.max(1));
    text.split(|c: char| !c.is_ascii_alphabetic())
        .filter(|w| w.len() == 1)
        .map(|w| w.to_ascii_uppercase())
        .rfind(|w| "ABCDEFGHIJ"[..n.min(10)].contains(w.as_str()))
}

/// Flexible: the last number (or for a choice, the last lone letter naming a
/// choice; for JSON, any object in the output).
fn flexible_answer(task: &Task, output: &str) -> Option<String> {
    let kind = task.kind;
    match kind {
        TaskKind::Arithmetic | TaskKind::Counting | TaskKind::Number => output
            .split(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == ','))
            .filter_map(number)
            .next_back(),
        TaskKind::Choice => choice_letter(task, output),
        TaskKind::Json => normalise(task, output),
        // The others need their whole form, on the last line.
        _ => normalise(task, output.lines().rev().find(|l| !l.trim().is_empty())?),
    }
}

/// A number in normal form: no thousands separators, no trailing `.0`.
fn number(s: &str) -> Option<String> {
    let t: String = s
        .trim()
        .trim_end_matches('.')
        .chars()
        .filter(|c| *c != ',')
        .collect();
    let t = t.trim_start_matches('$');
    if t.is_empty() || t == "-" {
        return None;
    }
    let v: f64 = t.parse().ok()?;
    Some(if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    })
}

/// `YYYY-MM-DD` of days since 1970-01-01.
fn civil(days: i64) -> String {
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Whether a simulated server of `seed` that gets `rate` of the tasks right
/// answers built-in task `(task_seed, index)` right. Servers of one seed and
/// different rates are right on nested sets (the one with the lower rate is
/// right only where the other is), so the flips between them are known.
pub fn simulated_right(seed: u64, task_seed: u64, index: usize, rate: f64) -> bool {
    Rng::for_stream(seed ^ task_seed.rotate_left(17) ^ 0x7a5c_0001, index as u64).next_f64() < rate
}

/// A wrong answer of a task's kind, readable as an answer (the simulated
/// server's mistakes are wrong, not invalid).
pub fn wrong_answer(task: &Task) -> String {
    let a = &task.answer;
    match task.kind {
        TaskKind::Arithmetic | TaskKind::Counting | TaskKind::Number => {
            (a.parse::<i64>().unwrap_or(0) + 1).to_string()
        }
        TaskKind::Choice => if a == "A" { "B" } else { "A" }.to_owned(),
        // The list one item short (a sorted list reversed may read the same).
        TaskKind::Sorting => a.rsplit_once(", ").map_or("0", |(head, _)| head).to_owned(),
        TaskKind::Reversal => a
            .rsplit_once(' ')
            .map_or("none", |(head, _)| head)
            .to_owned(),
        TaskKind::Dates => {
            let (y, m, d) = (&a[..4], &a[5..7], &a[8..10]);
            let (y, m, d) = (
                y.parse().unwrap_or(2000),
                m.parse().unwrap_or(1),
                d.parse().unwrap_or(1),
            );
            civil(days_from_civil(y, m, d) + 1)
        }
        TaskKind::Json => a.replace("\"count\":", "\"count\":1"),
    }
}

/// Accuracy over graded answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Accuracy {
    /// Right answers.
    pub right: usize,
    /// Wrong answers.
    pub wrong: usize,
    /// Answers that could not be read.
    pub invalid: usize,
    /// right / all.
    pub accuracy: f64,
    /// 95% Wilson interval of the accuracy (`analyze::compare::wilson`).
    pub ci95: [f64; 2],
}

impl Accuracy {
    /// Of grades.
    pub fn of(grades: &[Grade]) -> Accuracy {
        let count = |g| grades.iter().filter(|x| **x == g).count();
        let (right, n) = (count(Grade::Right), grades.len());
        Accuracy {
            right,
            wrong: count(Grade::Wrong),
            invalid: count(Grade::Invalid),
            accuracy: if n == 0 { 0.0 } else { right as f64 / n as f64 },
            // No answer: nothing known ([0, 1]).
            ci95: if n == 0 {
                [0.0, 1.0]
            } else {
                let (lo, hi) = wilson(right as u64, n as u64);
                [lo, hi]
            },
        }
    }
}

/// McNemar's exact test of `lost` (right to not right) against `gained`
/// flips: the two-sided binomial p-value under "no change" (each flip as
/// likely either way).
pub fn mcnemar_p(lost: usize, gained: usize) -> f64 {
    let n = lost + gained;
    if n == 0 {
        return 1.0;
    }
    let k = lost.min(gained);
    // P(X <= k) for X ~ Binomial(n, 1/2), summed in logs.
    let mut ln_c = 0.0f64; // ln C(n, 0)
    let mut cdf = 0.0;
    for i in 0..=k {
        if i > 0 {
            ln_c += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        cdf += (ln_c - n as f64 * std::f64::consts::LN_2).exp();
    }
    (2.0 * cdf).min(1.0)
}

/// A reference's and a candidate's task results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskFigures {
    /// Tasks graded on both sides.
    pub tasks: usize,
    /// The reference, strict.
    pub reference: Accuracy,
    /// The candidate, strict.
    pub candidate: Accuracy,
    /// The reference, flexible.
    pub reference_flexible: Accuracy,
    /// The candidate, flexible.
    pub candidate_flexible: Accuracy,
    /// Right for the reference, not for the candidate (flexible).
    pub flips_lost: usize,
    /// Right for the candidate, not for the reference (flexible).
    pub flips_gained: usize,
    /// McNemar's exact test of the flips (two-sided p).
    pub mcnemar_p: f64,
}

/// Grade both sides' outputs (`None`: the request failed; the pair is left out).
pub fn compare_tasks(
    tasks: &[Task],
    reference: &[Option<String>],
    candidate: &[Option<String>],
) -> TaskFigures {
    let (mut rs, mut cs, mut rf, mut cf) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut lost, mut gained) = (0, 0);
    for ((t, r), c) in tasks.iter().zip(reference).zip(candidate) {
        let (Some(r), Some(c)) = (r, c) else { continue };
        let (r, c) = (grade(t, r), grade(t, c));
        rs.push(r.0);
        cs.push(c.0);
        rf.push(r.1);
        cf.push(c.1);
        match (r.1 == Grade::Right, c.1 == Grade::Right) {
            (true, false) => lost += 1,
            (false, true) => gained += 1,
            _ => {}
        }
    }
    TaskFigures {
        tasks: rs.len(),
        reference: Accuracy::of(&rs),
        candidate: Accuracy::of(&cs),
        reference_flexible: Accuracy::of(&rf),
        candidate_flexible: Accuracy::of(&cf),
        flips_lost: lost,
        flips_gained: gained,
        mcnemar_p: mcnemar_p(lost, gained),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_task_grades_its_own_answer_right() {
        for t in builtin(3, 60) {
            let out = format!("Let me think.\nANSWER: {}", t.answer);
            assert_eq!(grade(&t, &out), (Grade::Right, Grade::Right), "{t:?}");
            let wrong = format!("ANSWER: {}", wrong_answer(&t));
            assert_eq!(grade(&t, &wrong).0, Grade::Wrong, "{t:?} {wrong}");
            assert_eq!(grade(&t, "no idea").0, Grade::Invalid);
            assert_eq!(tag_of(&t.prompt).map(|(s, _)| s), Some(3));
        }
        assert_eq!(builtin(3, 6), builtin(3, 6));
        assert_eq!(task(3, 17), builtin(3, 18)[17]);
    }

    #[test]
    fn answers_are_read_as_lm_eval_reads_them() {
        let t = Task {
            kind: TaskKind::Number,
            prompt: String::new(),
            answer: "1200".into(),
            choices: 0,
        };
        assert_eq!(grade(&t, "ANSWER: 1,200."), (Grade::Right, Grade::Right));
        assert_eq!(
            grade(&t, "so it is 1,200 loaves"),
            (Grade::Invalid, Grade::Right)
        );
        assert_eq!(grade(&t, "#### 1200"), (Grade::Right, Grade::Right));
        assert_eq!(grade(&t, "ANSWER: **1200**."), (Grade::Right, Grade::Right));
        let half = Task {
            answer: "0.5".into(),
            ..t.clone()
        };
        assert_eq!(grade(&half, "ANSWER: .5").0, Grade::Right);
        let j = task(0, 5);
        let (name, count) = {
            let v: serde_json::Value = serde_json::from_str(&j.answer).unwrap();
            (
                v["name"].as_str().unwrap().to_owned(),
                v["count"].as_u64().unwrap(),
            )
        };
        let out = format!("ANSWER: ```json\n{{\"name\": \"{name}\", \"count\": {count}}}\n```");
        assert_eq!(grade(&j, &out).0, Grade::Right);
        let extra = format!("ANSWER: {{\"name\": \"{name}\", \"count\": {count}, \"x\": 1}}");
        assert_eq!(grade(&j, &extra).0, Grade::Wrong, "exactly two keys");
    }

    #[test]
    fn dates_and_imports() {
        assert_eq!(civil(days_from_civil(2024, 2, 28) + 1), "2024-02-29");
        assert_eq!(civil(days_from_civil(2023, 12, 31) + 1), "2024-01-01");
        assert_eq!(civil(0), "1970-01-01");
        let text = "{\"question\": \"2+2?\", \"answer\": \"It is 4.\\n#### 4\"}\n{\"question\": \"Sky?\", \"choices\": [\"red\", \"blue\"], \"answer\": 1}\n";
        let t = import_jsonl(text).unwrap();
        assert_eq!((t[0].kind, t[0].answer.as_str()), (TaskKind::Number, "4"));
        assert_eq!((t[1].kind, t[1].answer.as_str()), (TaskKind::Choice, "B"));
        assert_eq!(
            grade(&t[1], "The answer is B."),
            (Grade::Invalid, Grade::Right)
        );
        assert!(
            import_jsonl("{\"question\": 1}")
                .unwrap_err()
                .contains("line 1")
        );
        assert!(
            import_jsonl("{\"question\": \"q\", \"choices\": [\"a\"], \"answer\": 3}").is_err()
        );
    }

    #[test]
    fn mcnemar_and_wilson_match_known_values() {
        // 10 flips one way, 0 the other: p = 2 / 1024.
        assert!((mcnemar_p(10, 0) - 2.0 / 1024.0).abs() < 1e-12);
        assert_eq!(mcnemar_p(3, 3), 1.0);
        assert_eq!(mcnemar_p(0, 0), 1.0);
        // Wilson 95% of 8/10: 0.4902..0.9433.
        let (lo, hi) = wilson(8, 10);
        assert!(
            (lo - 0.4902).abs() < 1e-4 && (hi - 0.9433).abs() < 1e-4,
            "{lo} {hi}"
        );
    }
}

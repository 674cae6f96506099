//! Every example command line in the help (`tokenscope <command> --help`) and
//! in docs/cli.md's code blocks can be pasted into a shell and parses.
//!
//! The rules:
//!
//! - **A command line** begins (after its indentation, and an optional `$ `)
//!   with `tokenscope `. It goes on over the lines after it while a line ends
//!   in ` \` (as in a shell), and, in a usage synopsis, over the lines indented
//!   deeper that begin with `[` or `|` (docs/cli.md's synopses wrap that way).
//!   Prose lines are not commands.
//! - **Where**: each subcommand's long help as clap renders it at 100 columns
//!   (clap's widest: a line longer than that is wrapped, and a wrapped line
//!   pastes as two commands, so the examples must come out as written), and
//!   docs/cli.md's code blocks (fenced, or indented 4 spaces).
//! - **Split as a POSIX shell splits**: `'...'` and `"..."` quote, `\` escapes,
//!   a `#` starting a word comments to the end. An unquoted `<`, `>`, `;`, `|`,
//!   `&`, `(` or `)` fails: the shell would take it for a redirect, a list, a
//!   pipe or a subshell (`--slo ttft_ms:p95<=500` unquoted writes a file named
//!   `=500`).
//! - **A synopsis** (a usage line: a word beginning with `[` or `(-`, or
//!   ending in `...`) shows choices with `|`, options in `[...]` and groups in
//!   `(...)`: those are its notation and it is not parsed; `<`, `>`, `;` and
//!   `&` in it still fail (quote them: `[--slo 'ttft_ms:p95<=500']`).
//! - **Any other command line is an example**: its words go through the real
//!   parser (`Cli::try_parse_from`). A word with an unquoted `*` is a glob the
//!   shell expands; it stands for two files (`r.in*.json` -> `r.in1.json
//!   r.in2.json`), so a flag that takes one value fails.

use clap::{CommandFactory as _, Parser as _};

use crate::cli::Cli;

/// A word as the shell splits it.
#[derive(Debug, PartialEq)]
struct Word {
    text: String,
    /// It holds an unquoted `*` (a glob).
    glob: bool,
}

/// Split `line` as a POSIX shell would; `notation` lets a synopsis's `|`,
/// `(` and `)` through.
fn split(line: &str, notation: bool) -> Result<Vec<Word>, String> {
    let mut words = Vec::new();
    let mut cur: Option<Word> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => words.extend(cur.take()),
            '#' if cur.is_none() => break,
            '\'' => {
                let w = cur.get_or_insert_with(empty);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => w.text.push(c),
                        None => return Err("a ' is not closed".into()),
                    }
                }
            }
            '"' => {
                let w = cur.get_or_insert_with(empty);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => w.text.push(c),
                            Some(c) => {
                                w.text.push('\\');
                                w.text.push(c);
                            }
                            None => return Err("a \" is not closed".into()),
                        },
                        Some(c) => w.text.push(c),
                        None => return Err("a \" is not closed".into()),
                    }
                }
            }
            '\\' => {
                let next = chars.next().ok_or("a \\ ends the line")?;
                cur.get_or_insert_with(empty).text.push(next);
            }
            '|' | '(' | ')' if notation => cur.get_or_insert_with(empty).text.push(c),
            '<' | '>' | ';' | '|' | '&' | '(' | ')' => {
                return Err(format!(
                    "an unquoted {c:?}: the shell takes it (quote the value: '...')"
                ));
            }
            '*' => {
                let w = cur.get_or_insert_with(empty);
                w.text.push('*');
                w.glob = true;
            }
            c => cur.get_or_insert_with(empty).text.push(c),
        }
    }
    words.extend(cur);
    Ok(words)
}

fn empty() -> Word {
    Word {
        text: String::new(),
        glob: false,
    }
}

/// A usage synopsis rather than an example (the rules above).
fn is_synopsis(line: &str) -> bool {
    line.split_whitespace()
        .any(|w| w.starts_with('[') || w.starts_with("(-") || w.ends_with("..."))
}

/// The command lines of `text`, joined over their continuation lines.
fn commands(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let body = line.trim_start();
        let body = body.strip_prefix("$ ").unwrap_or(body);
        i += 1;
        if !body.starts_with("tokenscope ") {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let mut cmd = body.trim_end().to_owned();
        while i < lines.len() {
            let next = lines[i];
            let next_indent = next.len() - next.trim_start().len();
            let t = next.trim();
            if let Some(head) = cmd.strip_suffix('\\') {
                cmd = format!("{} {t}", head.trim_end());
            } else if is_synopsis(&cmd)
                && next_indent > indent
                && (t.starts_with('[') || t.starts_with('|'))
            {
                cmd = format!("{cmd} {t}");
            } else {
                break;
            }
            i += 1;
        }
        out.push(cmd);
    }
    out
}

/// The code blocks of a Markdown text: fenced, or indented 4 spaces after a
/// blank line.
fn code_blocks(md: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut fenced: Option<String> = None;
    let mut indented: Option<String> = None;
    let mut blank_before = true;
    for line in md.lines() {
        if line.trim_start().starts_with("```") {
            match fenced.take() {
                Some(b) => blocks.push(b),
                None => fenced = Some(String::new()),
            }
            continue;
        }
        if let Some(b) = fenced.as_mut() {
            b.push_str(line);
            b.push('\n');
            continue;
        }
        let is_code = line.starts_with("    ") && !line.trim().is_empty();
        match (&mut indented, is_code) {
            (Some(b), true) => {
                b.push_str(line);
                b.push('\n');
            }
            (None, true) if blank_before => indented = Some(format!("{line}\n")),
            (Some(_), false) => blocks.extend(indented.take()),
            _ => {}
        }
        blank_before = line.trim().is_empty();
    }
    blocks.extend(indented);
    blocks
}

/// The words the shell would pass: each glob as two files.
fn argv(words: &[Word]) -> Vec<String> {
    words
        .iter()
        .flat_map(|w| {
            if w.glob {
                vec![w.text.replacen('*', "1", 1), w.text.replacen('*', "2", 1)]
            } else {
                vec![w.text.clone()]
            }
        })
        .collect()
}

/// Check one command line; the error says what is wrong.
fn check(cmd: &str) -> Result<(), String> {
    let synopsis = is_synopsis(cmd);
    let words = split(cmd, synopsis)?;
    if synopsis {
        return Ok(());
    }
    Cli::try_parse_from(argv(&words))
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Every subcommand's long help, as rendered at `width` columns.
fn helps(width: usize) -> Vec<(String, String)> {
    let mut root = Cli::command().term_width(width);
    root.build();
    root.get_subcommands()
        .map(|s| {
            let name = s.get_name().to_owned();
            let help = s.clone().term_width(width).render_long_help().to_string();
            (name, help)
        })
        .collect()
}

#[test]
fn every_example_in_the_help_pastes_into_a_shell_and_parses() {
    let mut failures = Vec::new();
    let mut examples = 0;
    let wide = helps(10_000);
    for ((name, help), (_, wide_help)) in helps(100).iter().zip(&wide) {
        let (cmds, unwrapped) = (commands(help), commands(wide_help));
        if cmds != unwrapped {
            failures.push(format!(
                "tokenscope {name} --help: an example is wrapped at 100 columns (split it with ' \\'):\n  {}",
                unwrapped
                    .iter()
                    .filter(|c| !cmds.contains(c))
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("\n  ")
            ));
        }
        for c in cmds {
            examples += 1;
            if let Err(e) = check(&c) {
                failures.push(format!("tokenscope {name} --help: {c}\n  {e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(examples >= 20, "only {examples} examples found in the help");
}

/// Every `tokenscope` command in one Markdown file's code blocks: (examples,
/// synopses, failures).
fn check_markdown(path: &str) -> (usize, usize, Vec<String>) {
    let md = std::fs::read_to_string(format!("{}/{path}", env!("CARGO_MANIFEST_DIR")))
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    let (mut failures, mut examples, mut synopses) = (Vec::new(), 0, 0);
    for block in code_blocks(&md) {
        for c in commands(&block) {
            if is_synopsis(&c) {
                synopses += 1;
            } else {
                examples += 1;
            }
            if let Err(e) = check(&c) {
                failures.push(format!("{path}: {c}\n  {e}"));
            }
        }
    }
    (examples, synopses, failures)
}

#[test]
fn every_command_in_the_cli_docs_pastes_into_a_shell_and_parses() {
    let (examples, synopses, failures) = check_markdown("docs/cli.md");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // Most subcommands' sections open with examples of their use.
    assert!(
        examples >= 15 && synopses >= 5,
        "docs/cli.md: {examples} examples and {synopses} synopses found"
    );
}

/// The README's commands (a newcomer pastes them first).
#[test]
fn every_command_in_the_readme_pastes_into_a_shell_and_parses() {
    let (examples, _, failures) = check_markdown("README.md");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(examples >= 6, "README.md: only {examples} examples found");
}

#[test]
fn the_checks_fail_on_what_a_shell_would_take() {
    // The regression of issue 35: `<=` unquoted is a redirect.
    let e = check("tokenscope bench --url http://h/v1 --slo ttft_ms:p95<=500").unwrap_err();
    assert!(e.contains("'<'"), "{e}");
    check("tokenscope bench --url http://h/v1 --slo 'ttft_ms:p95<=500'").unwrap();
    for bad in [
        "tokenscope compare a.json b.json --fail-on flips:>2%",
        "tokenscope mock --port 8000 & tokenscope serve",
        "tokenscope report --raw r.jsonl --markdown -   (a comment)",
        "tokenscope bench --url 'http://h/v1",
    ] {
        assert!(check(bad).is_err(), "{bad}");
    }
    // A synopsis's notation passes, its `<` does not.
    check("tokenscope bench --url URL [--api chat|completions] [--slo 'a<=1']").unwrap();
    assert!(check("tokenscope bench --url URL [--slo a<=1]").is_err());
    // An example goes through the parser: an unknown flag, a value that is
    // not a number, a glob where one file goes.
    assert!(check("tokenscope bench --url http://h/v1 --no-such-flag").is_err());
    assert!(check("tokenscope bench --url http://h/v1 --requests many").is_err());
    assert!(check("tokenscope bench --url http://h/v1 --json r*.json").is_err());
    check("tokenscope report --client r.in*.json --html t.html   # tiers").unwrap();
    // Continuations: ` \` always, deeper `[` lines in a synopsis.
    assert_eq!(
        commands("  tokenscope bench --url http://h/v1 \\\n      --requests 4\nprose\n"),
        ["tokenscope bench --url http://h/v1 --requests 4"]
    );
    assert_eq!(
        commands("    tokenscope merge A... [--raw F]\n        [--json M]\n    (not this)\n"),
        ["tokenscope merge A... [--raw F] [--json M]"]
    );
}

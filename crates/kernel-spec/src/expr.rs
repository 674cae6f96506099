//! Integer expressions of a user's kernel spec: dispatch sizes, binding lengths,
//! bytes and FLOPs per dispatch, uniform words. `+ - * / %` on non-negative
//! integers, parentheses, names of the spec's values and parameters, and
//! `cdiv(a, b)` (division rounding up, the usual workgroup count). `/` rounds
//! down; a negative result, a division by zero or an overflow is an error.

use std::collections::BTreeMap;

/// The names an expression may use and their values.
pub type Vars = BTreeMap<String, u64>;

/// Evaluates `text` with `vars`; the error says what is wrong and where.
pub fn eval(text: &str, vars: &Vars) -> Result<u64, String> {
    let tokens = tokens(text)?;
    let mut p = Parser {
        tokens: &tokens,
        at: 0,
        vars,
    };
    let v = p.sum()?;
    if p.at != tokens.len() {
        return Err(format!("`{text}`: unexpected `{}`", tokens[p.at]));
    }
    u64::try_from(v).map_err(|_| format!("`{text}` is negative ({v})"))
}

/// The names an expression uses (to report one no value is given for).
pub fn names(text: &str) -> Vec<String> {
    tokens(text)
        .unwrap_or_default()
        .into_iter()
        .filter(|t| t.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') && t != "cdiv")
        .collect()
}

fn tokens(text: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c.is_ascii_alphanumeric() || c == '_' {
            let mut word = String::new();
            while let Some(&c) = chars.peek() {
                if c.is_ascii_alphanumeric() || c == '_' {
                    word.push(c);
                    chars.next();
                } else {
                    break;
                }
            }
            out.push(word);
        } else if "+-*/%(),".contains(c) {
            out.push(c.to_string());
            chars.next();
        } else {
            return Err(format!("`{text}`: unexpected character `{c}`"));
        }
    }
    if out.is_empty() {
        return Err("an empty expression".into());
    }
    Ok(out)
}

struct Parser<'a> {
    tokens: &'a [String],
    at: usize,
    vars: &'a Vars,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&str> {
        self.tokens.get(self.at).map(String::as_str)
    }

    fn expect(&mut self, t: &str) -> Result<(), String> {
        if self.peek() == Some(t) {
            self.at += 1;
            Ok(())
        } else {
            Err(format!(
                "expected `{t}`, found {}",
                self.peek().map_or("the end".into(), |s| format!("`{s}`"))
            ))
        }
    }

    fn sum(&mut self) -> Result<i128, String> {
        let mut v = self.product()?;
        while let Some(op) = self.peek().filter(|t| *t == "+" || *t == "-") {
            let op = op.to_string();
            self.at += 1;
            let r = self.product()?;
            v = if op == "+" { v + r } else { v - r };
            check(v)?;
        }
        Ok(v)
    }

    fn product(&mut self) -> Result<i128, String> {
        let mut v = self.atom()?;
        while let Some(op) = self.peek().filter(|t| ["*", "/", "%"].contains(t)) {
            let op = op.to_string();
            self.at += 1;
            let r = self.atom()?;
            v = match op.as_str() {
                "*" => v * r,
                _ if r == 0 => return Err("a division by zero".into()),
                "/" => v.div_euclid(r),
                _ => v.rem_euclid(r),
            };
            check(v)?;
        }
        Ok(v)
    }

    fn atom(&mut self) -> Result<i128, String> {
        let t = self
            .peek()
            .ok_or("an expression ends too early")?
            .to_string();
        self.at += 1;
        match t.as_str() {
            "(" => {
                let v = self.sum()?;
                self.expect(")")?;
                Ok(v)
            }
            "-" => Ok(-self.atom()?),
            "cdiv" => {
                self.expect("(")?;
                let a = self.sum()?;
                self.expect(",")?;
                let b = self.sum()?;
                self.expect(")")?;
                if b <= 0 {
                    return Err("cdiv by zero or a negative number".into());
                }
                Ok((a + b - 1).div_euclid(b))
            }
            _ if t.starts_with(|c: char| c.is_ascii_digit()) => t
                .parse::<i128>()
                .map_err(|_| format!("`{t}` is not a whole number")),
            _ if t.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') => self
                .vars
                .get(&t)
                .map(|&v| i128::from(v))
                .ok_or_else(|| format!("no value named `{t}`")),
            _ => Err(format!("unexpected `{t}`")),
        }
    }
}

fn check(v: i128) -> Result<(), String> {
    if v.unsigned_abs() > u128::from(u64::MAX) {
        Err("a value beyond 64 bits".into())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> Vars {
        Vars::from([("M".into(), 1000), ("WG".into(), 64), ("K".into(), 3)])
    }

    #[test]
    fn arithmetic_with_names() {
        assert_eq!(eval("cdiv(M, WG)", &vars()), Ok(16));
        assert_eq!(eval("M / WG", &vars()), Ok(15));
        assert_eq!(eval("2 * M * K + 4", &vars()), Ok(6004));
        assert_eq!(eval("(M + 24) % WG", &vars()), Ok(0));
        assert_eq!(eval("M - 2 * (K + 1)", &vars()), Ok(992));
        assert_eq!(eval("16777216", &vars()), Ok(16_777_216));
        assert_eq!(names("cdiv(M, WG) * TILE"), ["M", "WG", "TILE"]);
    }

    #[test]
    fn errors_say_what_is_wrong() {
        assert!(
            eval("M / 0", &vars())
                .unwrap_err()
                .contains("division by zero")
        );
        assert!(
            eval("N * 2", &vars())
                .unwrap_err()
                .contains("no value named `N`")
        );
        assert!(eval("K - M", &vars()).unwrap_err().contains("negative"));
        assert!(eval("M +", &vars()).unwrap_err().contains("too early"));
        assert!(eval("M 2", &vars()).unwrap_err().contains("unexpected `2`"));
        assert!(eval("M ^ 2", &vars()).unwrap_err().contains("`^`"));
        assert!(
            eval("cdiv(M WG)", &vars())
                .unwrap_err()
                .contains("expected `,`")
        );
        assert!(eval("", &vars()).unwrap_err().contains("empty"));
        assert!(
            eval("4294967296 * 4294967296", &vars())
                .unwrap_err()
                .contains("64 bits")
        );
    }
}

//! The one table builder: headers and rows of cells (already formatted) rendered
//! as aligned text for the terminal, as Markdown, or as an HTML table. Every table
//! tokenscope prints (levels, kernels, roofline, decode floor, goals) goes through
//! here.

use std::fmt::Write as _;

use super::fmt::escape_html;

/// How a text column is aligned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Padded on the right (names, labels).
    Left,
    /// Padded on the left (numbers).
    Right,
}

/// Render rows as an aligned text table: the first column left-aligned, the
/// others right-aligned (a label, then numbers).
pub fn text_table(headers: &[String], rows: &[Vec<String>]) -> String {
    text_table_with(headers, rows, |i| {
        if i == 0 { Align::Left } else { Align::Right }
    })
}

/// Render rows as an aligned text table with each column aligned as `align`
/// says: columns two spaces apart, a dashed rule under the headers, no trailing
/// spaces.
pub fn text_table_with(
    headers: &[String],
    rows: &[Vec<String>],
    align: impl Fn(usize) -> Align,
) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        if row.len() > widths.len() {
            widths.resize(row.len(), 0);
        }
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let text = cells
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, w))| match align(i) {
                Align::Left => format!("{c:<w$}"),
                Align::Right => format!("{c:>w$}"),
            })
            .collect::<Vec<_>>()
            .join("  ");
        text.trim_end().to_owned()
    };
    let mut out = String::new();
    let _ = writeln!(out, "{}", line(headers));
    let _ = writeln!(
        out,
        "{}",
        widths
            .iter()
            .map(|w| "-".repeat(*w))
            .collect::<Vec<_>>()
            .join("  ")
    );
    for row in rows {
        let _ = writeln!(out, "{}", line(row));
    }
    out
}

/// Render rows as a Markdown table.
pub fn markdown_table(headers: &[String], rows: &[Vec<String>]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "| {} |", headers.join(" | "));
    let _ = writeln!(
        out,
        "|{}|",
        headers.iter().map(|_| "---:").collect::<Vec<_>>().join("|")
    );
    for row in rows {
        let _ = writeln!(out, "| {} |", row.join(" | "));
    }
    out
}

/// Render rows as an HTML table (every cell escaped), in a wrapper that scrolls
/// sideways when the table is wider than its container.
pub fn html_table(headers: &[String], rows: &[Vec<String>]) -> String {
    let mut out = String::from("<div class=\"table-wrap\"><table><thead><tr>");
    for x in headers {
        let _ = write!(out, "<th>{}</th>", escape_html(x));
    }
    out.push_str("</tr></thead><tbody>");
    for r in rows {
        out.push_str("<tr>");
        for x in r {
            let _ = write!(out, "<td>{}</td>", escape_html(x));
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table></div>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| (*x).to_owned()).collect()
    }

    #[test]
    fn text_table_aligns() {
        let t = text_table(&s(&["load", "x"]), &[s(&["c=1", "1234"])]);
        assert_eq!(t, "load     x\n----  ----\nc=1   1234\n");
    }

    #[test]
    fn columns_align_as_asked_and_lines_end_without_spaces() {
        let t = text_table_with(
            &s(&["name", "n", "from"]),
            &[s(&["a", "12", "x"]), s(&["bb", "3", "longer"])],
            |i| if i == 1 { Align::Right } else { Align::Left },
        );
        assert_eq!(
            t,
            "name   n  from\n----  --  ------\na     12  x\nbb     3  longer\n"
        );
    }

    #[test]
    fn html_cells_are_escaped() {
        let t = html_table(&s(&["a<b"]), &[s(&["\"x\" & y"])]);
        assert!(t.contains("<th>a&lt;b</th>"), "{t}");
        assert!(t.contains("<td>&quot;x&quot; &amp; y</td>"), "{t}");
        assert!(t.starts_with("<div class=\"table-wrap\">"));
    }
}

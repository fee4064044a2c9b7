//! Error reports for hosts input: `file:line:column: what`, the line with a caret under the
//! column, and a `help:` line saying what to do. This module only renders; deciding what is wrong
//! is the parser's business. Columns count characters (not bytes) from 1, after a UTF-8 BOM.

use super::HostsError;
use super::grammar::Rule;

/// Where a report points: a label (file path, `-H/--host`, a variable name) and the full text.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Source<'a> {
    pub label: &'a str,
    pub text: &'a str,
}

impl Source<'_> {
    /// A report pointing at byte offset `at` with a caret `width` characters wide.
    pub fn error(&self, at: usize, width: usize, what: &str, help: &str) -> HostsError {
        let at = floor_char_boundary(self.text, at.min(self.text.len()));
        let line_start = self.text[..at].rfind('\n').map_or(0, |i| i + 1);
        let line_end = self.text[at..]
            .find('\n')
            .map_or(self.text.len(), |i| at + i);
        let line_no = self.text[..at].matches('\n').count() + 1;
        let line_text = shown(self.text[line_start..line_end].trim_end_matches('\r'));
        let before = &self.text[line_start..at];
        let column = before.chars().count() + 1;
        // Mirror tabs so the caret lines up in a terminal, and the width of what a control
        // character is shown as.
        let pad: String = before
            .chars()
            .map(|c| match c {
                '\t' => "\t".to_string(),
                c => " ".repeat(shown(c.encode_utf8(&mut [0; 4])).chars().count()),
            })
            .collect();
        let carets = "^".repeat(width.max(1));
        let num = line_no.to_string();
        let gutter = " ".repeat(num.len());
        let report = format!(
            "{label}:{line_no}:{column}: {what}\n{gutter} |\n{num} | {line_text}\n{gutter} | {pad}{carets}\n{gutter} = help: {help}",
            label = self.label,
        );
        HostsError {
            report,
            line: Some(line_no),
            column: Some(column),
        }
    }

    /// A pest syntax error rendered in the same style, with the syntax of the input parsed as
    /// `start` (a hostfile line, a `-H` list or a Slurm node list) as its help.
    pub fn syntax(&self, start: Rule, err: &pest::error::Error<Rule>) -> HostsError {
        let at = match err.location {
            pest::error::InputLocation::Pos(p) => p,
            pest::error::InputLocation::Span((a, _)) => a,
        };
        let at = floor_char_boundary(self.text, at.min(self.text.len()));
        // Read after "unexpected": "unexpected end of line", "unexpected `!`".
        let found = match self.text[at..].chars().next() {
            None => "end of input".to_string(),
            Some('\n') | Some('\r') => "end of line".to_string(),
            Some(c) => format!("`{}`", c.escape_debug()),
        };
        let expected = match &err.variant {
            pest::error::ErrorVariant::ParsingError { positives, .. } => {
                let mut names: Vec<&str> = positives.iter().filter_map(|r| describe(*r)).collect();
                names.sort_unstable();
                names.dedup();
                names
            }
            pest::error::ErrorVariant::CustomError { .. } => Vec::new(),
        };
        let what = if expected.is_empty() {
            format!("unexpected {found}")
        } else {
            format!("unexpected {found}; expected {}", expected.join(" or "))
        };
        let form = match start {
            Rule::host_option => "the list is `[user@]host[:N],...`",
            Rule::nodelist => "a node list is `name,...`",
            _ => "a line is `[user@]host[:N] [slots=N] [max_slots=M]`",
        };
        let help = format!(
            "{form}; host names use letters, digits, `-`, `_`, `.` and Slurm ranges such as \
             `n[01-04,07]`"
        );
        self.error(at, 1, &what, &help)
    }
}

/// A report without a position (a missing variable, an unreadable file).
pub(crate) fn plain(what: &str, help: &str) -> HostsError {
    HostsError {
        report: format!("{what}\n  = help: {help}"),
        line: None,
        column: None,
    }
}

/// `text` as the report shows it: control characters other than tab escaped (`\0`, `\r`,
/// `\u{1b}`), so that a NUL, a bare carriage return or an escape sequence in a hostfile is seen
/// for what it is instead of being sent to the terminal, where it is invisible or rewrites the
/// line.
fn shown(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() && c != '\t' {
                c.escape_debug().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn describe(rule: Rule) -> Option<&'static str> {
    Some(match rule {
        Rule::item
        | Rule::pattern
        | Rule::name_chars
        | Rule::user
        | Rule::ipv6
        | Rule::excluded => "a host name",
        Rule::group | Rule::unclosed_group => "a `[` range",
        Rule::range | Rule::number => "a number",
        Rule::range_comma => "`,`",
        Rule::range_close => "`]`",
        Rule::range_dash => "`-`",
        Rule::count => "a slot count after `:`",
        Rule::attr | Rule::key => "`key=value`",
        Rule::value => "a value after `=`",
        Rule::EOI => "the end of the input",
        Rule::entry => "a host",
        _ => return None,
    })
}

/// Levenshtein distance, for "did you mean".
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = Vec::with_capacity(b.len() + 1);
        cur.push(i + 1);
        for (j, &cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caret_under_column_with_tabs() {
        let src = Source {
            label: "f",
            text: "a\n\tbb slot=2\n",
        };
        let e = src.error(6, 4, "bad", "fix it");
        assert_eq!((e.line, e.column), (Some(2), Some(5)));
        assert_eq!(
            e.report,
            "f:2:5: bad\n  |\n2 | \tbb slot=2\n  | \t   ^^^^\n  = help: fix it"
        );
    }

    #[test]
    fn control_characters_are_shown_escaped_and_the_caret_follows() {
        let src = Source {
            label: "f",
            text: "a\0b\rc\u{1b}[2Jd x=1\r\n",
        };
        let e = src.error(11, 1, "bad", "fix it");
        assert_eq!((e.line, e.column), (Some(1), Some(12)));
        assert_eq!(
            e.report,
            "f:1:12: bad\n  |\n1 | a\\0b\\rc\\u{1b}[2Jd x=1\n  |                   ^\n  = help: fix it"
        );
    }

    #[test]
    fn distances() {
        assert_eq!(edit_distance("slot", "slots"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("max_slot", "max_slots"), 1);
    }
}

//! Small text helpers of the C back end: literals, casts, comments.

use perfskel_grammar::ast::{Duration, TimeUnit};
use perfskel_grammar::printer;

/// An `int` argument from a C expression of type long long: a literal as it is,
/// anything else with a cast.
pub(super) fn as_int(expr: &str) -> String {
    if expr.parse::<i32>().is_ok() {
        expr.to_string()
    } else {
        format!("(int)({})", strip_parens(expr))
    }
}

/// A C literal of a duration in seconds that keeps the skeleton's digits: `21.86e-6`
/// for 21.86 us.
pub(super) fn seconds_literal(d: Duration) -> String {
    let value = printer::number(d.value);
    match d.unit {
        TimeUnit::S => value,
        TimeUnit::Ms => format!("{value}e-3"),
        TimeUnit::Us => format!("{value}e-6"),
        TimeUnit::Ns => format!("{value}e-9"),
    }
}

/// Removes one pair of parentheses around a whole expression.
pub(super) fn strip_parens(s: &str) -> &str {
    if let Some(inner) = s.strip_prefix('(').and_then(|r| r.strip_suffix(')')) {
        // Only when the outer pair matches: "(a) + (b)" keeps its parentheses.
        let mut depth = 0i32;
        for c in inner.chars() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth < 0 {
                        return s;
                    }
                }
                _ => {}
            }
        }
        if depth == 0 {
            return inner;
        }
    }
    s
}

/// Text that cannot end a C comment.
pub(super) fn comment_safe(text: &str) -> String {
    text.replace("*/", "* /").replace("/*", "/ *")
}

pub(super) fn c_string(text: &str) -> String {
    text.chars()
        .flat_map(|c| match c {
            '"' | '\\' => vec!['\\', c],
            c if c.is_ascii_graphic() || c == ' ' => vec![c],
            _ => vec!['_'],
        })
        .collect()
}

/// A C floating literal that reads back as exactly `value`.
pub(super) fn number(value: f64) -> String {
    let text = format!("{value:?}");
    if text.contains('.') || text.contains('e') || text.contains("inf") || text.contains("NaN") {
        text
    } else {
        format!("{text}.0")
    }
}

/// Seconds for a comment: six decimals without trailing zeros (`0.03377`, not the
/// shortest round-trip form `0.033769999999999994`).
pub(super) fn seconds_text(value: f64) -> String {
    let text = format!("{value:.6}");
    let text = text.trim_end_matches('0');
    text.strip_suffix('.').unwrap_or(text).to_string()
}

//! Splitting shell input into statements: SQL ended by `;` (outside quotes and comments), and
//! dot-commands, which take the rest of their line. The same splitter serves the prompt (is
//! the buffer complete?) and scripts (`-c`, `-f`, standard input, `.read`).

/// One unit of shell input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// A SQL statement, without its `;`.
    Sql(String),
    /// A dot-command line, without its newline.
    Dot(String),
}

/// Where the scanner is inside SQL text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Code,
    /// Inside '...' (a doubled quote stays inside).
    Single,
    /// Inside "..." (a quoted identifier).
    Double,
    /// After `--`, to the end of the line.
    Line,
    /// Inside /* ... */ (nesting counted, as PostgreSQL and DataFusion's parser do).
    Block(u32),
}

/// The pieces of `text`, and the text after the last complete one: SQL not yet ended by `;`
/// (empty when nothing but blanks and comments follows).
pub fn split(text: &str) -> (Vec<Piece>, String) {
    let mut pieces = Vec::new();
    let mut rest = text;
    loop {
        let start = rest.trim_start();
        if start.starts_with('.') {
            let (line, after) = start.split_once('\n').unwrap_or((start, ""));
            pieces.push(Piece::Dot(line.trim_end().to_string()));
            rest = after;
            continue;
        }
        match statement_end(rest) {
            Some(end) => {
                let sql = rest.get(..end).unwrap_or_default();
                if has_code(sql) {
                    pieces.push(Piece::Sql(sql.trim().to_string()));
                }
                rest = rest.get(end + 1..).unwrap_or_default();
            }
            None => {
                let pending = if has_code(rest) {
                    rest.trim().to_string()
                } else {
                    String::new()
                };
                return (pieces, pending);
            }
        }
    }
}

/// Whether the prompt's buffer is ready to run: empty, a dot-command, or SQL whose last
/// statement is ended by `;`.
pub fn complete(text: &str) -> bool {
    split(text).1.is_empty()
}

/// The byte offset of the first `;` in `sql` outside quotes and comments.
fn statement_end(sql: &str) -> Option<usize> {
    scan(sql, |i, mode| {
        (mode == Mode::Code)
            .then_some(i)
            .filter(|&i| sql.as_bytes().get(i) == Some(&b';'))
    })
}

/// Whether `sql` holds anything but blanks and comments.
fn has_code(sql: &str) -> bool {
    scan(sql, |i, mode| {
        let c = sql.as_bytes().get(i).copied().unwrap_or(b' ');
        (mode == Mode::Code && !c.is_ascii_whitespace()).then_some(i)
    })
    .is_some()
}

/// Walks `sql` byte by byte, tracking quotes and comments, and returns the first position at
/// which `stop(position, Mode::Code)` answers: it is asked at every byte of code (an opening
/// quote included), never inside quotes or comments.
fn scan(sql: &str, mut stop: impl FnMut(usize, Mode) -> Option<usize>) -> Option<usize> {
    let b = sql.as_bytes();
    let mut mode = Mode::Code;
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        let next = b.get(i + 1).copied();
        match mode {
            Mode::Code => match (c, next) {
                (b'-', Some(b'-')) => {
                    mode = Mode::Line;
                    i += 1;
                }
                (b'/', Some(b'*')) => {
                    mode = Mode::Block(1);
                    i += 1;
                }
                _ => {
                    if let Some(at) = stop(i, mode) {
                        return Some(at);
                    }
                    match c {
                        b'\'' => mode = Mode::Single,
                        b'"' => mode = Mode::Double,
                        _ => {}
                    }
                }
            },
            Mode::Single if c == b'\'' => {
                if next == Some(b'\'') {
                    i += 1;
                } else {
                    mode = Mode::Code;
                }
            }
            Mode::Double if c == b'"' => mode = Mode::Code,
            Mode::Line if c == b'\n' => mode = Mode::Code,
            Mode::Block(depth) => match (c, next) {
                (b'*', Some(b'/')) => {
                    mode = if depth == 1 {
                        Mode::Code
                    } else {
                        Mode::Block(depth - 1)
                    };
                    i += 1;
                }
                (b'/', Some(b'*')) => {
                    mode = Mode::Block(depth + 1);
                    i += 1;
                }
                _ => {}
            },
            _ => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sql(s: &str) -> Piece {
        Piece::Sql(s.into())
    }

    #[test]
    fn statements_end_at_semicolons_outside_quotes_and_comments() {
        let (p, rest) =
            split("SELECT ';' AS a; SELECT \"x;y\" FROM t -- c;\n; SELECT /* ; /* ; */ */ 1;");
        assert_eq!(
            p,
            vec![
                sql("SELECT ';' AS a"),
                sql("SELECT \"x;y\" FROM t -- c;"),
                sql("SELECT /* ; /* ; */ */ 1"),
            ]
        );
        assert_eq!(rest, "");
    }

    #[test]
    fn doubled_quotes_stay_inside_a_string() {
        let (p, rest) = split("SELECT 'it''s; fine'; SELECT 2");
        assert_eq!(p, vec![sql("SELECT 'it''s; fine'")]);
        assert_eq!(rest, "SELECT 2");
    }

    #[test]
    fn dot_commands_take_their_line_at_a_statement_start() {
        let (p, rest) = split(".mode csv\nSELECT 1;\n  .timer on\nSELECT\n.5;");
        assert_eq!(
            p,
            vec![
                Piece::Dot(".mode csv".into()),
                sql("SELECT 1"),
                Piece::Dot(".timer on".into()),
                sql("SELECT\n.5"),
            ]
        );
        assert_eq!(rest, "");
    }

    #[test]
    fn unfinished_input_is_pending() {
        assert!(!complete("SELECT 1"));
        assert!(!complete("SELECT ';"));
        assert!(!complete("SELECT 1 /* ; */"));
        assert!(complete("SELECT 1;"));
        assert!(complete("SELECT 1; -- done"));
        assert!(complete("  "));
        assert!(complete(".tables"));
        assert!(complete("-- only a comment"));
        // A statement of a string alone is still a statement.
        assert_eq!(split("'a';").0, vec![sql("'a'")]);
        // Empty statements (;;) are skipped.
        assert_eq!(split(";;").0, vec![]);
    }

    #[test]
    fn multibyte_text_splits_on_character_boundaries() {
        let (p, rest) = split("SELECT 'é;ü' AS «x»; SELECT 'ß'");
        assert_eq!(p, vec![sql("SELECT 'é;ü' AS «x»")]);
        assert_eq!(rest, "SELECT 'ß'");
    }
}

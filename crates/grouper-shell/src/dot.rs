//! The shell's dot-commands, as DuckDB's and SQLite's shells name them.

use std::path::PathBuf;

use grouper::Backend;

use crate::output::Format;

/// A parsed dot-command.
#[derive(Debug, Clone, PartialEq)]
pub enum Dot {
    /// `.tables`: the tables of the session.
    Tables,
    /// `.schema [TABLE]`: the columns of one table, or of all.
    Schema(Option<String>),
    /// `.timer on|off`: print each statement's time.
    Timer(bool),
    /// `.mode table|csv|json`: how results print.
    Mode(Format),
    /// `.explain on|off`: print each query's plan with its metrics and grouper's choice.
    Explain(bool),
    /// `.backend auto|cpu|gpu|hybrid|datafusion`: which engine aggregates from now on.
    Backend(Backend),
    /// `.coprocess on|off`: run the queries that follow one another as one batch, the CPU and
    /// the GPU taking different queries at the same time.
    Coprocess(bool),
    /// `.read FILE`: run the statements of a file.
    Read(PathBuf),
    /// `.help`.
    Help,
    /// `.quit` or `.exit`.
    Quit,
}

/// The help text of `.help`.
pub const HELP: &str = "\
.tables                  list the tables
.schema [TABLE]          the columns of a table (or of every table)
.timer on|off            print each statement's time
.mode table|csv|json     how results print
.explain on|off          print each query's plan, with grouper's choice and its metrics
.backend NAME            auto, cpu, gpu, hybrid or datafusion (DataFusion's own aggregation)
.coprocess on|off        run consecutive queries as a batch, CPU and GPU taking different ones
.read FILE               run the statements in FILE
.help                    this text
.quit                    leave (or Ctrl-D)
SQL statements end with ';' and may span lines. Tables: CREATE TABLE t AS SELECT ...,
CREATE EXTERNAL TABLE ..., or a path in FROM ('data/*.parquet'). Ctrl-C cancels a statement.";

/// Parses a dot-command line (with its leading `.`).
pub fn parse(line: &str) -> Result<Dot, String> {
    let mut words = line.split_whitespace();
    let name = words.next().unwrap_or(".");
    let args: Vec<&str> = words.collect();
    let one = |what: &str| -> Result<&str, String> {
        match args.as_slice() {
            [a] => Ok(*a),
            _ => Err(format!("{name} takes one argument: {what}")),
        }
    };
    let switch = || -> Result<bool, String> {
        match one("on or off")? {
            "on" => Ok(true),
            "off" => Ok(false),
            other => Err(format!("{name} takes on or off, not '{other}'")),
        }
    };
    match name {
        ".tables" if args.is_empty() => Ok(Dot::Tables),
        ".schema" if args.len() <= 1 => Ok(Dot::Schema(args.first().map(|s| s.to_string()))),
        ".timer" => switch().map(Dot::Timer),
        ".explain" => switch().map(Dot::Explain),
        ".coprocess" => switch().map(Dot::Coprocess),
        ".mode" => match one("table, csv or json")? {
            "table" => Ok(Dot::Mode(Format::Table)),
            "csv" => Ok(Dot::Mode(Format::Csv)),
            "json" => Ok(Dot::Mode(Format::Json)),
            other => Err(format!(".mode takes table, csv or json, not '{other}'")),
        },
        ".backend" => one("auto, cpu, gpu, hybrid or datafusion")?
            .parse::<Backend>()
            .map(Dot::Backend)
            .map_err(|e| e.to_string()),
        ".read" => {
            let rest = line
                .trim_start()
                .get(name.len()..)
                .unwrap_or_default()
                .trim();
            if rest.is_empty() {
                return Err(".read takes a file".into());
            }
            Ok(Dot::Read(PathBuf::from(rest.trim_matches(['\'', '"']))))
        }
        ".help" => Ok(Dot::Help),
        ".quit" | ".exit" | ".q" => Ok(Dot::Quit),
        ".tables" | ".schema" => Err(format!("{name}: too many arguments")),
        _ => Err(format!("unknown command {name} (.help lists them)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_with_their_arguments() {
        assert_eq!(parse(".tables"), Ok(Dot::Tables));
        assert_eq!(parse(".schema"), Ok(Dot::Schema(None)));
        assert_eq!(parse(".schema t"), Ok(Dot::Schema(Some("t".into()))));
        assert_eq!(parse(".timer on"), Ok(Dot::Timer(true)));
        assert_eq!(parse(".explain off"), Ok(Dot::Explain(false)));
        assert_eq!(parse(".mode csv"), Ok(Dot::Mode(Format::Csv)));
        assert_eq!(parse(".backend cpu"), Ok(Dot::Backend(Backend::Cpu)));
        assert_eq!(
            parse(".backend datafusion"),
            Ok(Dot::Backend(Backend::DataFusion))
        );
        assert_eq!(
            parse(".read 'my file.sql'"),
            Ok(Dot::Read("my file.sql".into()))
        );
        assert_eq!(parse(".quit"), Ok(Dot::Quit));
        assert_eq!(parse(".exit"), Ok(Dot::Quit));
    }

    #[test]
    fn mistakes_are_named() {
        assert_eq!(
            parse(".timer maybe").unwrap_err(),
            ".timer takes on or off, not 'maybe'"
        );
        assert_eq!(
            parse(".mode").unwrap_err(),
            ".mode takes one argument: table, csv or json"
        );
        assert!(parse(".backend tpu").unwrap_err().contains("tpu"));
        assert_eq!(
            parse(".frobnicate").unwrap_err(),
            "unknown command .frobnicate (.help lists them)"
        );
        assert_eq!(parse(".read").unwrap_err(), ".read takes a file");
        assert_eq!(
            parse(".tables x").unwrap_err(),
            ".tables: too many arguments"
        );
    }
}

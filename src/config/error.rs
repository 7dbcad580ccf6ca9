//! Config errors: each names the file, the field and, when known, the line and column.

use std::fmt;

use serde_path_to_error::{Path, Segment};

use crate::queue::SettingsError;

/// Why a config file could not be used. The `Display` form is one line meant
/// for a person: `file: field: problem (line L, column C)`.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read at all.
    #[error("{file}: cannot read the config file: {source}")]
    Read {
        file: String,
        #[source]
        source: std::io::Error,
    },
    /// The text is not well-formed YAML (bad indentation, an unclosed
    /// bracket, an unknown anchor, several documents).
    #[error("{file}: invalid YAML: {problem}{}", at(.position))]
    Syntax { file: String, problem: String, position: Option<Position> },
    /// Well-formed YAML whose content does not fit: a wrong type, an unknown
    /// or repeated field, a bad duration, a bad or repeated queue name.
    #[error("{file}: {}{problem}{}", field_prefix(.field), at(.position))]
    Field {
        file: String,
        /// Dotted path to the value, as `queues.orders.rate_limiter.max_of[1].bucket.qps`;
        /// empty when the problem is the whole document.
        field: String,
        problem: String,
        position: Option<Position>,
    },
    /// The file defines no queue.
    #[error("{file}: queues: define at least one queue or run without --config for the standalone `default` queue")]
    NoQueues { file: String },
    /// Every value decoded, but the queue cannot work with one of them
    /// (for example an exponential `max` below its `base`).
    #[error("{file}: {path}.{source}")]
    Setting {
        file: String,
        /// Where in the file the settings are (`queues.orders`); the
        /// source names the field within them.
        path: String,
        #[source]
        source: SettingsError,
    },
}

impl ConfigError {
    /// The file the error is about, as it was named to `Config::load` or `Config::parse`.
    pub fn file(&self) -> &str {
        match self {
            ConfigError::Read { file, .. }
            | ConfigError::Syntax { file, .. }
            | ConfigError::Field { file, .. }
            | ConfigError::NoQueues { file }
            | ConfigError::Setting { file, .. } => file,
        }
    }

    /// Where in the file the problem is, when the YAML parser could tell.
    pub fn position(&self) -> Option<Position> {
        match self {
            ConfigError::Syntax { position, .. } | ConfigError::Field { position, .. } => *position,
            _ => None,
        }
    }

    /// An error of the YAML parser itself, before any field was looked at.
    pub(super) fn syntax(file: &str, error: &serde_yaml_ng::Error) -> Self {
        let position = error.location().map(Position::from);
        ConfigError::Syntax { file: file.to_owned(), problem: without_location(error), position }
    }

    /// An error met while decoding the YAML into the config's shape.
    pub(super) fn field(file: &str, error: &serde_path_to_error::Error<serde_yaml_ng::Error>) -> Self {
        let segments = known_segments(error.path());
        let problem = without_location(error.inner());
        ConfigError::Field {
            file: file.to_owned(),
            field: render(&segments),
            problem: without_path_prefix(&problem, &segments).to_owned(),
            position: error.inner().location().map(Position::from),
        }
    }
}

/// A place in the config file, both counted from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub line: usize,
    pub column: usize,
}

impl From<serde_yaml_ng::Location> for Position {
    fn from(location: serde_yaml_ng::Location) -> Self {
        Position { line: location.line(), column: location.column() }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)
    }
}

fn at(position: &Option<Position>) -> String {
    position.map(|p| format!(" ({p})")).unwrap_or_default()
}

fn field_prefix(field: &str) -> String {
    if field.is_empty() { String::new() } else { format!("{field}: ") }
}

/// The YAML error's message without the ` at line L column C` it writes into
/// it, since `ConfigError` shows the position its own way.
fn without_location(error: &serde_yaml_ng::Error) -> String {
    let message = error.to_string();
    match error.location() {
        Some(location) => message
            .replacen(&format!(" at line {} column {}", location.line(), location.column()), "", 1)
            .replacen(&format!(" at position {}", location.index()), "", 1),
        None => message,
    }
}

/// The path's segments up to the first one the decoder could not name (a
/// key that failed to decode shows as `?`).
fn known_segments(path: &Path) -> Vec<&Segment> {
    path.iter().take_while(|segment| !matches!(segment, Segment::Unknown)).collect()
}

/// Segments as a dotted path, sequences as `[i]`: `queues.a.max_of[1].bucket`.
fn render(segments: &[&Segment]) -> String {
    let mut out = String::new();
    for segment in segments {
        match segment {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } => push_name(&mut out, key),
            Segment::Enum { variant } => push_name(&mut out, variant),
            Segment::Unknown => push_name(&mut out, "?"),
        }
    }
    out
}

fn push_name(out: &mut String, name: &str) {
    if !out.is_empty() {
        out.push('.');
    }
    out.push_str(if name.is_empty() { "\"\"" } else { name });
}

/// serde_yaml_ng starts a message with the path of the value it was reading
/// (`queues.a: unknown field ...`). That path is the error's path or one of
/// its parents (the map holding an unknown field), so the longest of those
/// that prefixes the message is cut off; the field is shown once, in full.
fn without_path_prefix<'m>(message: &'m str, segments: &[&Segment]) -> &'m str {
    (1..=segments.len())
        .rev()
        .find_map(|len| {
            message.strip_prefix(render(&segments[..len]).as_str()).and_then(|rest| rest.strip_prefix(": "))
        })
        .unwrap_or(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_error_should_read_file_field_problem_position() {
        let error = ConfigError::Field {
            file: "deploy/examples/bad.yaml".into(),
            field: "queues.orders.lease_ttl".into(),
            problem: r#"invalid duration "30 parsecs": unknown time unit "parsecs""#.into(),
            position: Some(Position { line: 3, column: 16 }),
        };
        assert_eq!(
            error.to_string(),
            r#"deploy/examples/bad.yaml: queues.orders.lease_ttl: invalid duration "30 parsecs": unknown time unit "parsecs" (line 3, column 16)"#
        );
    }

    #[test]
    fn field_error_about_the_whole_document_should_not_show_an_empty_field() {
        let error = ConfigError::Field {
            file: "c.yaml".into(),
            field: String::new(),
            problem: "invalid type".into(),
            position: None,
        };
        assert_eq!(error.to_string(), "c.yaml: invalid type");
    }

    #[test]
    fn setting_error_should_name_the_file_and_the_setting() {
        let error = ConfigError::Setting {
            file: "c.yaml".into(),
            path: "queues.a".into(),
            source: SettingsError::new("max_wait", "must be greater than zero"),
        };
        assert_eq!(error.to_string(), "c.yaml: queues.a.max_wait: must be greater than zero");
        assert_eq!(error.file(), "c.yaml");
        assert_eq!(error.position(), None);
    }

    #[test]
    fn path_prefix_should_be_cut_at_the_longest_matching_parent() {
        let segments = [
            Segment::Map { key: "queues".into() },
            Segment::Map { key: "a".into() },
            Segment::Map { key: "lease_tt".into() },
        ];
        let segments: Vec<&Segment> = segments.iter().collect();
        assert_eq!(without_path_prefix("queues.a: unknown field `lease_tt`", &segments), "unknown field `lease_tt`");
        assert_eq!(without_path_prefix("queues.b: other", &segments), "queues.b: other");
    }

    #[test]
    fn render_should_put_indexes_in_brackets() {
        let segments =
            [Segment::Map { key: "max_of".into() }, Segment::Seq { index: 1 }, Segment::Map { key: "bucket".into() }];
        let segments: Vec<&Segment> = segments.iter().collect();
        assert_eq!(render(&segments), "max_of[1].bucket");
    }
}

//! A problem found in a config: where (a field path, and the same place in words), what (a
//! plain message), how bad.

use serde::{Deserialize, Serialize};

/// Errors block an apply; warnings are shown but allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Error,
    Warning,
}

/// One problem, e.g. `resource_queues[0].resource_groups[1].flavors[0].name`: "no flavor named `spot`".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    pub severity: Severity,
    /// Field path in the config; empty for the document as a whole.
    pub path: String,
    pub message: String,
    /// The place of `path` in words, one step each: `["queue vision", "flavor team-cpu",
    /// "cpu quota"]` (see [`super::place`]); empty for the document or a parse problem.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub place: Vec<String>,
    /// 1-based position in the source text, when the problem comes from parsing it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column: Option<usize>,
}

impl Problem {
    /// An error at `path`.
    pub fn error(path: impl Into<String>, message: impl Into<String>) -> Self {
        Problem { severity: Severity::Error, path: path.into(), message: message.into(), place: Vec::new(), line: None, column: None }
    }

    /// A warning at `path`.
    pub fn warning(path: impl Into<String>, message: impl Into<String>) -> Self {
        Problem { severity: Severity::Warning, path: path.into(), message: message.into(), place: Vec::new(), line: None, column: None }
    }

    /// Whether this problem blocks an apply.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// Where, for a person: `queue vision › flavor team-cpu › cpu quota`; the path when the
    /// place is not known, empty for the whole document.
    pub fn location(&self) -> String {
        match self.place.is_empty() {
            true => self.path.clone(),
            false => self.place.join(" › "),
        }
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let level = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        // The path first, as API clients and scripts have always read it; the place in
        // words after the message.
        write!(f, "{level}: ")?;
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        write!(f, "{}", self.message)?;
        if !self.place.is_empty() {
            write!(f, " ({})", self.location())?;
        }
        if let (Some(line), Some(col)) = (self.line, self.column) {
            write!(f, " (line {line}, column {col})")?;
        }
        Ok(())
    }
}

/// Every problem found, in document order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    pub problems: Vec<Problem>,
}

impl Report {
    /// The problems that block an apply.
    pub fn errors(&self) -> impl Iterator<Item = &Problem> {
        self.problems.iter().filter(|p| p.is_error())
    }

    /// The problems that are only shown.
    pub fn warnings(&self) -> impl Iterator<Item = &Problem> {
        self.problems.iter().filter(|p| !p.is_error())
    }

    /// Whether any problem blocks an apply.
    pub fn has_errors(&self) -> bool {
        self.problems.iter().any(Problem::is_error)
    }
}

//! Spec errors: every problem of a spec at once, each at its JSON pointer.

use std::fmt;

use serde::Serialize;

/// One problem in a spec: where (a JSON pointer, RFC 6901, "" for the whole document) and
/// what is wrong, with how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SpecError {
    pub path: String,
    pub message: String,
}

impl SpecError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        SpecError {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.path.is_empty() {
            "(document)"
        } else {
            &self.path
        };
        write!(f, "{path}: {}", self.message)
    }
}

/// Every error found in a spec, in document order. Never empty when returned as an error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(transparent)]
pub struct SpecErrors(pub Vec<SpecError>);

impl SpecErrors {
    pub fn iter(&self) -> impl Iterator<Item = &SpecError> {
        self.0.iter()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether some error sits at `path` and mentions `fragment`.
    pub fn contains(&self, path: &str, fragment: &str) -> bool {
        self.0
            .iter()
            .any(|e| e.path == path && e.message.contains(fragment))
    }

    pub(crate) fn into_result(self) -> Result<(), SpecErrors> {
        if self.0.is_empty() { Ok(()) } else { Err(self) }
    }
}

impl fmt::Display for SpecErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.len();
        write!(f, "{n} error{} in job spec", if n == 1 { "" } else { "s" })?;
        for e in &self.0 {
            write!(f, "\n  {e}")?;
        }
        Ok(())
    }
}

/// Escapes one JSON pointer reference token (RFC 6901): '~' as "~0", '/' as "~1".
pub fn pointer_token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}
